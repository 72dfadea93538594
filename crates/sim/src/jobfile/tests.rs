use super::*;

#[test]
fn globals_apply_to_following_jobs() {
    let jf = parse(
        "; comment\n[global]\nbs=128k\niodepth=32 # trailing\ndirect=1\nioengine=libaio\n\n[a]\nrw=write\n[b]\nrw=randread\nbs=4k\nsize=50%\n",
        "t.fio",
    )
    .unwrap();
    assert_eq!(jf.jobs.len(), 2);
    assert!(jf.warnings.is_empty(), "{:?}", jf.warnings);
    let a = &jf.jobs[0];
    assert_eq!(
        (a.name.as_str(), a.rw, a.random, a.bs[1], a.iodepth),
        ("a", RwKind::Write, false, 131072, 32)
    );
    let b = &jf.jobs[1];
    assert_eq!((b.rw, b.random, b.bs), (RwKind::Read, true, [4096; 3]));
    assert_eq!(b.size, Some(SizeSpec::Percent(50.0)));
    assert_eq!(b.origin, "t.fio:10");
}

#[test]
fn later_global_affects_only_later_jobs() {
    let jf = parse("[a]\n[global]\nbs=8k\n[b]\n", "t").unwrap();
    assert_eq!(jf.jobs[0].bs[0], 4096);
    assert_eq!(jf.jobs[1].bs[0], 8192);
}

#[test]
fn bs_per_direction_like_fio() {
    let bs = |v: &str| {
        let mut s = JobSpec::new("j", "t");
        apply(&mut s, "bs", Some(v), "t", 1, &mut vec![]).unwrap();
        s.bs
    };
    assert_eq!(bs("256k"), [262144; 3]);
    assert_eq!(bs("8k,32k"), [8192, 32768, 32768]);
    assert_eq!(bs("8k,32k,"), [8192, 32768, 4096]);
    assert_eq!(bs(",8k"), [4096, 8192, 8192]);
    assert_eq!(bs(",8k,"), [4096, 8192, 4096]);
}

#[test]
fn flags_times_and_sizes() {
    let jf = parse(
        "[j]\nrw=randrw\nrwmixwrite=30\ntime_based\nruntime=2m\nramp_time=500ms\nthinktime=10\nstartdelay=1\nnorandommap=1\nrandrepeat=0\nbuffer_compress_percentage=50\nlog_avg_msec=250\noffset=10%\nio_size=1g\nnumber_ios=1000\nstonewall\npercentile_list=50:99.9\n",
        "t",
    )
    .unwrap();
    let j = &jf.jobs[0];
    assert_eq!(j.rwmixread, 70);
    assert!(j.time_based && j.norandommap && !j.randrepeat && j.stonewall);
    assert_eq!(j.runtime_ns, Some(120_000_000_000));
    assert_eq!(j.ramp_ns, 500_000_000);
    assert_eq!(j.thinktime_ns, 10_000);
    assert_eq!(j.startdelay_ns, 1_000_000_000);
    assert_eq!(j.payload, Payload::Compressible { percent: 50 });
    assert_eq!(j.log_avg_msec, 250);
    assert_eq!(j.offset, SizeSpec::Percent(10.0));
    assert_eq!(j.io_size, Some(SizeSpec::Bytes(1 << 30)));
    assert_eq!(j.number_ios, Some(1000));
    assert_eq!(j.percentiles, vec![50.0, 99.9]);
}

#[test]
fn fio_options_not_simulated_warn_once() {
    let jf = parse("[global]\nuid=3\n[a]\n[b]\nexitall_on_error\n", "t.fio").unwrap();
    assert_eq!(jf.warnings.len(), 2, "{:?}", jf.warnings);
    assert!(jf.warnings[0].contains("t.fio:2") && jf.warnings[0].contains("uid"));
    assert!(jf.warnings[1].contains("t.fio:5") && jf.warnings[1].contains("exitall_on_error"));
}

#[test]
fn names_fio_does_not_know_are_errors_with_the_nearest_one() {
    // fio refuses `iodepht=32`; running the job at QD 1 instead hid the typo.
    let e = parse("[a]\nrw=randwrite\niodepht=32\n", "t.fio")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.fio:3") && e.contains("iodepht") && e.contains("did you mean `iodepth`"),
        "{e}"
    );
    let e = parse("[a]\nfrobnicate=3\n", "t.fio")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no such option") && !e.contains("did you mean"),
        "{e}"
    );
    // Aliases and engine options are fio's too.
    assert!(parse("[a]\nreadwrite=read\nhipri\n", "t.fio").is_ok());
}

#[test]
fn unsupported_uses_are_errors_naming_key_and_line() {
    for (text, key, line) in [
        ("[a]\nrw=randwrite:8\n", "rw", 2),
        ("[a]\n\nbssplit=4k/50:64k/50\n", "bssplit", 3),
        ("[global]\nzonemode=zbd\n", "zonemode", 2),
        ("[a]\nverify=crc32c\n", "verify", 2),
        ("[a]\nfsync=8\n", "fsync", 2),
        ("[a]\nbs=1000\n", "bs", 2),
        ("[a]\niodepth=0\n", "iodepth", 2),
        ("[a]\nrw=sideways\n", "rw", 2),
        ("[a]\nsize=150%\n", "size", 2),
        ("[a]\nlog_avg_msec=0\n", "log_avg_msec", 2),
        ("[a]\nruntime=5parsecs\n", "runtime", 2),
        ("[a]\nfilename=${DEV}\n", "filename", 2),
    ] {
        let e = parse(text, "x.fio").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("x.fio:{line}")) && msg.contains(&format!("`{key}`")),
            "{text:?}: {msg}"
        );
    }
    let e = parse("[a]\ntime_based\n", "x.fio").unwrap_err().to_string();
    assert!(e.contains("time_based") && e.contains("runtime"), "{e}");
}

#[test]
fn syntax_errors() {
    assert!(parse("bs=4k\n", "t").is_err());
    assert!(parse("[a\n", "t").is_err());
    assert!(parse("[a]\nfoo bar\n", "t").is_err());
    assert!(parse("include other.fio\n", "t").is_err());
}

#[test]
fn later_files_are_stonewalled() {
    let mut all = parse("[a]\n[b]\n", "1").unwrap();
    all.append(parse("[c]\n[d]\n", "2").unwrap());
    let sw: Vec<bool> = all.jobs.iter().map(|j| j.stonewall).collect();
    assert_eq!(sw, [false, false, true, false]);
}

#[test]
fn times() {
    assert_eq!(parse_time("30", 1_000_000_000), Ok(30_000_000_000));
    assert_eq!(parse_time("250ms", 1_000_000_000), Ok(250_000_000));
    assert_eq!(parse_time("1.5s", 1), Ok(1_500_000_000));
    assert_eq!(parse_time("100", 1_000), Ok(100_000));
    assert!(parse_time("x", 1).is_err());
    assert!(parse_time("3 fortnights", 1).is_err());
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The parser never panics, whatever the text.
        #[test]
        fn never_panics(text in "(\\[[a-z ]{0,6}\\]?|[a-z_]{1,12}(=[0-9a-z%:,.]{0,8})?|[#;].*|)(\n(\\[[a-z]{0,6}\\]|[a-z_]{1,12}(=[0-9a-zA-Z%:,.$]{0,8})?|[#;].*|))*") {
            let _ = parse(&text, "p");
        }

        /// Any bs the parser accepts is a positive multiple of 512 in every direction.
        #[test]
        fn accepted_bs_is_aligned(a in 0u64..1_000_000, b in 0u64..1_000_000) {
            let text = format!("[j]\nbs={a},{b}\n");
            if let Ok(jf) = parse(&text, "p") {
                for bs in jf.jobs[0].bs {
                    prop_assert!(bs > 0 && bs.is_multiple_of(512));
                }
            }
        }
    }
}

/// Hardening 4: numjobs=4096 in eight sections is refused, naming the
/// section that crosses fio's limit of 4096 instances.
#[test]
fn too_many_instances_name_the_section() {
    let text: String = (0..8).map(|i| format!("[j{i}]\nnumjobs=4096\n")).collect();
    let e = parse(&text, "many.fio").unwrap_err();
    assert!(
        matches!(e, JobFileError::TooManyJobs { total: 8192, .. }),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with("many.fio:3: job [j1]") && msg.contains("4096"),
        "{msg}"
    );
    assert!(parse("[a]\nnumjobs=4000\n[b]\nnumjobs=96\n", "t").is_ok());
    // Across files too.
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.fio");
    let b = dir.path().join("b.fio");
    std::fs::write(&a, "[a]\nnumjobs=4000\n").unwrap();
    std::fs::write(&b, "[b]\nnumjobs=97\n").unwrap();
    let e = JobFile::load(&[&a, &b]).unwrap_err().to_string();
    assert!(e.contains("b.fio:1: job [b]") && e.contains("4097"), "{e}");
}

/// Sizes in job files mean what they mean to fio, kb_base included.
#[test]
fn sizes_follow_fio_kb_base() {
    let jf = parse(
        "[a]\nsize=1g\nbs=8k\n[b]\nkb_base=1000\nsize=1GiB\nbs=4KiB\n",
        "t",
    )
    .unwrap();
    assert_eq!(jf.jobs[0].size, Some(SizeSpec::Bytes(1 << 30)));
    assert_eq!(jf.jobs[0].bs, [8192; 3]);
    assert_eq!(jf.jobs[1].size, Some(SizeSpec::Bytes(1 << 30)));
    assert_eq!(jf.jobs[1].bs, [4096; 3]);
    assert!(jf.warnings.is_empty(), "{:?}", jf.warnings);
    // fio's compatibility mode: KiB is 1000, so 4KiB is an unaligned 4000.
    let e = parse("[a]\nbs=4KiB\n", "t").unwrap_err().to_string();
    assert!(e.contains("512"), "{e}");
    let jf = parse("[a]\nsize=1MiB\n", "t").unwrap();
    assert_eq!(jf.jobs[0].size, Some(SizeSpec::Bytes(1_000_000)));
    assert!(jf.warnings[0].contains("kb_base"), "{:?}", jf.warnings);
}

/// Options fio has that used to be ignored: now honoured or refused.
#[test]
fn logs_steady_state_and_latency_options() {
    let jf = parse(
        "[j]\ndo_verify=0\nwrite_lat_log=a\nwrite_iops_log\nwrite_hist_log=h\nlog_hist_msec=500\nlog_hist_coarseness=2\nlog_offset=1\nper_job_logs=0\nss=bw_slope:10m\nss_dur=30\nss_ramp=5s\nmax_latency=1ms,,2\n",
        "t",
    )
    .unwrap();
    assert!(jf.warnings.is_empty(), "{:?}", jf.warnings);
    let j = &jf.jobs[0];
    assert_eq!(j.write_lat_log.as_deref(), Some("a"));
    assert_eq!(j.write_iops_log.as_deref(), Some(""));
    assert_eq!((j.log_hist_msec, j.log_hist_coarseness), (500, 2));
    assert!(j.log_offset && !j.per_job_logs);
    assert_eq!(
        j.ss,
        SteadyState {
            kind: SsKind::BwSlope,
            limit: (10 << 20) as f64,
            pct: false
        }
    );
    assert_eq!((j.ss_dur_s, j.ss_ramp_ns), (30, 5_000_000_000));
    assert_eq!(j.max_latency_ns, [Some(1_000_000), None, Some(2_000)]);
    for (text, key) in [
        ("[a]\nlatency_target=10ms\n", "latency_target"),
        ("[a]\nss=foo:1\n", "ss"),
        ("[a]\nss=iops\n", "ss"),
        ("[a]\nss_dur=1500ms\n", "ss_dur"),
        ("[a]\nlog_hist_coarseness=7\n", "log_hist_coarseness"),
        ("[a]\ndo_verify=maybe\n", "do_verify"),
    ] {
        let e = parse(text, "x.fio").unwrap_err().to_string();
        assert!(
            e.contains("x.fio:2") && e.contains(&format!("`{key}`")),
            "{text:?}: {e}"
        );
    }
}

/// fio 3.33 prints each section's `key=value` options (checked against fio:
/// `job options` and `global options` in its JSON): canonical names, values
/// as written, repeats kept, bare flags left out, `kb_base` first and
/// `filename` and engine options last; only the last file's globals.
#[test]
fn options_are_kept_as_fio_prints_them() {
    let jf = parse(
        "[global]\nfilename=/dev/vdb\nsize = 4M\nkb_base=1024\ntime_based\n[global]\nbs=16k\n[j]\nhipri=1\nreadwrite=randread\nblocksize=8k,16k\nnorandommap\nrw=randwrite\nss=iops:5%\nRuntime=30s # half a minute\n",
        "a.fio",
    )
    .unwrap();
    let pairs = |v: &[(String, String)]| -> Vec<String> {
        v.iter().map(|(k, v)| format!("{k}={v}")).collect()
    };
    assert_eq!(
        pairs(&jf.global_options),
        ["kb_base=1024", "size= 4M", "filename=/dev/vdb", "bs=16k"]
    );
    assert_eq!(
        pairs(&jf.jobs[0].options),
        [
            "rw=randread",
            "bs=8k,16k",
            "rw=randwrite",
            "steadystate=iops:5%",
            "runtime=30s",
            "hipri=1"
        ]
    );
    let mut all = jf.clone();
    all.append(parse("[k]\nrw=write\n", "b.fio").unwrap());
    assert!(all.global_options.is_empty(), "fio starts afresh per file");
    assert_eq!(pairs(&all.jobs[1].options), ["rw=write"]);
}

#[test]
fn reporting_options() {
    let jf = parse(
        "[a]\ndescription=hello there\ncontinue_on_error=io\nlat_percentiles=1\nbwavgtime=250\niopsavgtime=1000\n[b]\ngtod_reduce=1\ncontinue_on_error=none\n",
        "t",
    )
    .unwrap();
    let (a, b) = (&jf.jobs[0], &jf.jobs[1]);
    assert_eq!(a.description.as_deref(), Some("hello there"));
    assert!(a.continue_on_error && !b.continue_on_error);
    assert!(a.lat_percentiles && a.clat_percentiles && !a.disable_clat);
    assert_eq!((a.bwavgtime_ms, a.iopsavgtime_ms), (Some(250), Some(1000)));
    assert!(b.disable_clat && b.disable_lat);
    let e = parse("[a]\ncontinue_on_error=sometimes\n", "t").unwrap_err();
    assert!(e.to_string().contains("continue_on_error"), "{e}");
    assert!(parse("[a]\nbwavgtime=0\n", "t").is_err());
}
