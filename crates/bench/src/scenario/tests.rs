//! Tests of scenario files: the built-ins, every kind of mistake with its
//! file and line, the fault, power, files and fsck phases.

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

#[test]
fn strict_is_a_scenario_default() {
    let ok = |text: &str| Scenario::parse(text, "s.toml", None, &Overrides::default()).unwrap();
    let phase = "[[phase]]\nkind = \"secure-erase\"\n";
    assert!(!ok(&format!("{HEAD}{phase}")).strict);
    let strict = format!("name = \"t\"\nstrict = true\n[drive]\nprofile = \"instant\"\n{phase}");
    assert!(ok(&strict).strict);
    let e = bad(&format!(
        "name = \"t\"\nstrict = \"yes\"\n[drive]\nprofile = \"instant\"\n{phase}"
    ));
    assert!(e.starts_with("s.toml:2"), "{e}");
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

#[test]
fn fault_and_power_phases_are_checked() {
    let ok = Scenario::parse(
        &format!(
            "{HEAD}[[phase]]\nname = \"re\"\nkind = \"fault\"\nfault = \"read-error\"\noffset = \"1M\"\nlength = \"4k\"\n\
             [[phase]]\nkind = \"fault\"\nfault = \"stall\"\nms = 5\nevery_ms = 1000\n\
             [[phase]]\nname = \"cut\"\nkind = \"power-cut\"\nafter_writes = 8\n\
             [[phase]]\nname = \"on\"\nkind = \"power-on\"\n\
             [[phase]]\nkind = \"fault\"\nclear = true\n\
             [[phase]]\nkind = \"expect\"\nchecks = [\"on.lost_writes == 0\", \"re.errors_injected >= 0\"]\n"
        ),
        "s.toml",
        None,
        &Overrides::default(),
    )
    .unwrap();
    assert!(matches!(
        ok.phases[0].kind,
        PhaseKind::Fault {
            action: FaultAction::Add(FaultSpec::ReadError {
                offset: 1048576,
                length: 4096
            })
        }
    ));
    assert!(matches!(
        ok.phases[2].kind,
        PhaseKind::PowerCut {
            trigger: CutTrigger::AfterWrites { writes: 8 }
        }
    ));
    assert!(matches!(
        ok.phases[4].kind,
        PhaseKind::Fault {
            action: FaultAction::Clear(None)
        }
    ));
    // power-on ends a boot: the guest restarts after it.
    assert!(ok.phases[3].kind.host_side() && !ok.phases[2].kind.host_side());
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"fault\"\nfault = \"read-error\"\noffset = \"255M\"\nlength = \"2M\"\n"
    ));
    assert!(e.starts_with("s.toml:5") && e.contains("fault:"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"fault\"\nfault = \"read-error\"\noffset = \"1000\"\nlength = \"512\"\n"
    ));
    assert!(e.contains("fault:"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"fault\"\nfault = \"stall\"\nms = 0\n"
    ));
    assert!(e.contains("--ms 0"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"fault\"\nfault = \"stall\"\nms = 5\noffset = \"0\"\n"
    ));
    assert!(e.contains("offset and length go with"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"fault\"\nfault = \"fire\"\n"
    ));
    assert!(e.contains("\"fire\""), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"fault\"\nclear = true\nms = 3\n"
    ));
    assert!(e.contains("clear = true takes only id"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"power-cut\"\nafter_writes = 3\nrandom = 1\n"
    ));
    assert!(e.contains("at most one of"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"power-cut\"\nafter_writes = 0\n"
    ));
    assert!(e.contains("after_writes 0"), "{e}");
    let e = bad(&format!("{HEAD}[[phase]]\nkind = \"power-cut\"\nat = 3\n"));
    assert!(e.contains("at"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nname = \"c\"\nkind = \"power-cut\"\n[[phase]]\nkind = \"expect\"\nchecks = [\"c.fsck_clean == 1\"]\n"
    ));
    assert!(e.contains("no metric \"fsck_clean\""), "{e}");
}

#[test]
fn files_and_fsck_phases_are_checked() {
    let sc = Scenario::parse(
        &format!(
            "{HEAD}[[phase]]\nkind = \"files\"\ncount = 4\nsize = \"64k\"\nfsync = true\n\
             [[phase]]\nkind = \"files\"\nmkfs = false\ncount = 2\nsize = \"4k\"\n\
             [[phase]]\nkind = \"fsck\"\n\
             [[phase]]\nkind = \"files\"\nmount_options = \"barrier=0\"\ncount = 1\nsize = \"4k\"\n\
             [[phase]]\nname = \"f2\"\nkind = \"fsck\"\n\
             [[phase]]\nkind = \"expect\"\nchecks = [\"f2.fsck_clean == 1\"]\n"
        ),
        "s.toml",
        None,
        &Overrides::default(),
    )
    .unwrap();
    let PhaseKind::Fsck { sets } = &sc.phases[2].kind else {
        panic!("{:?}", sc.phases[2].kind)
    };
    assert_eq!(
        sets,
        &[
            FileSet {
                phase: 0,
                count: 4,
                size: 65536,
                fsync: true
            },
            FileSet {
                phase: 1,
                count: 2,
                size: 4096,
                fsync: false
            }
        ]
    );
    // The second fsck checks only the filesystem made after the first.
    let PhaseKind::Fsck { sets } = &sc.phases[4].kind else {
        panic!()
    };
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].phase, 3);
    let e = bad(&format!("{HEAD}[[phase]]\nkind = \"fsck\"\n"));
    assert!(e.contains("no earlier files phase"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"files\"\nmkfs = false\ncount = 1\nsize = \"4k\"\n"
    ));
    assert!(e.contains("mkfs = false needs"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"files\"\ncount = 1\nsize = \"4k\"\nmount_options = \"ro; reboot\"\n"
    ));
    assert!(e.contains("mount_options"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"files\"\ncount = 1000\nsize = \"1M\"\n"
    ));
    assert!(e.contains("more than half"), "{e}");
    let e = bad(&format!(
        "{HEAD}[[phase]]\nkind = \"files\"\ncount = 0\nsize = \"4k\"\n"
    ));
    assert!(e.contains("count 0"), "{e}");
}
