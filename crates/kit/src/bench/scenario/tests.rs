use super::*;

#[test]
fn builtins_load_and_scale() {
    for (n, _) in BUILTIN {
        let s = Scenario::load(n, &Overrides::default()).unwrap_or_else(|e| panic!("{n}: {e}"));
        assert!(!s.phases.is_empty());
        let small = Scenario::load(
            n,
            &Overrides {
                capacity: Some(512 << 20),
                ..Overrides::default()
            },
        )
        .unwrap();
        assert_eq!(small.capacity, 512 << 20);
    }
}

fn bad(text: &str) -> String {
    Scenario::parse(text, "s.toml", None, &Overrides::default())
        .unwrap_err()
        .to_string()
}

const HEAD: &str = "name = \"t\"\n[drive]\nprofile = \"instant\"\ncapacity = \"256M\"\n";

#[test]
fn errors_name_file_line_and_problem() {
    let e = bad(&format!("{HEAD}[[phase]]\nkind = \"dance\"\n"));
    assert!(e.starts_with("s.toml:6") && e.contains("dance"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"fio\"\njob = \"missing.fio\"\n"
    ));
    assert!(e.starts_with("s.toml:5") && e.contains("not found"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"surface\"\nop = \"write\"\n[[phase]]\nkind = \"surface\"\nop = \"write\"\nblock = \"3k\"\n"
    ));
    assert!(e.starts_with("s.toml:8") && e.contains("block"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nname = \"a\"\nkind = \"surface\"\nop = \"write\"\n[[phase]]\nkind = \"expect\"\nchecks = [\"b.mean_bw > 1\"]\n"
    ));
    assert!(
        e.starts_with("s.toml:9") && e.contains("no earlier phase named \"b\""),
        "{e}"
    );
    let e = bad(&format!(
        "{HEAD}[[phase]]\nname = \"a\"\nkind = \"surface\"\nop = \"write\"\n[[phase]]\nkind = \"expect\"\nchecks = [\"a.write_bw > 1\"]\n"
    ));
    assert!(e.contains("no metric \"write_bw\""), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"expect\"\nchecks = [\"a.b >\"]\n"
    ));
    assert!(e.contains("right side"), "{e}");
    let e = bad(&format!("{HEAD}[[phase]]\nkind = \"idle\"\nseconds = -1\n"));
    assert!(e.contains("idle seconds"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"trim\"\nmethod = \"blkdiscard\"\nlength = \"1T\"\n"
    ));
    assert!(e.contains("inside the"), "{e}");
    let e = bad(
        "name = \"t\"\n[drive]\nprofile = \"instant\"\ncapacity = \"lots\"\n[[phase]]\nkind = \"secure-erase\"\n",
    );
    assert!(e.contains("capacity"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"secure-erase\"\ncolour = 1\n"
    ));
    assert!(e.contains("colour"), "{e}");
}

#[test]
fn job_files_must_name_the_drive_and_parse() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ok.fio"),
        "[w]\nfilename=${VSSD_DEV}\nrw=write\nbs=128k\nsize=10%\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("nodev.fio"),
        "[w]\nrw=write\nbs=128k\nsize=10%\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("bad.fio"),
        "[w]\nfilename=${VSSD_DEV}\nrw=sideways\n",
    )
    .unwrap();
    let parse = |job: &str| {
        Scenario::parse(
            &format!("{HEAD}[[phase]]\nkind = \"fio\"\njob = \"{job}\"\n"),
            "s.toml",
            Some(dir.path()),
            &Overrides::default(),
        )
    };
    assert!(parse("ok.fio").is_ok());
    assert!(
        parse("nodev.fio")
            .unwrap_err()
            .to_string()
            .contains("filename=${VSSD_DEV}")
    );
    let e = parse("bad.fio").unwrap_err().to_string();
    assert!(e.contains("bad.fio:3") && e.contains("rw"), "{e}");
    // Built-in jobs resolve from anywhere.
    assert!(parse("seq-write-128k.fio").is_ok());
}

#[test]
fn segments_split_at_host_phases() {
    let s = Scenario::load("trim-recovery", &Overrides::default()).unwrap();
    let segs = s.segments();
    assert!(segs.iter().all(|r| !r.is_empty()));
    assert_eq!(segs.iter().map(|r| r.len()).sum::<usize>(), s.phases.len());
    for r in &segs {
        let host: Vec<bool> = s.phases[r.clone()]
            .iter()
            .map(|p| p.kind.host_side())
            .collect();
        assert!(host.iter().all(|&h| h) || host.iter().all(|&h| !h));
    }
}
