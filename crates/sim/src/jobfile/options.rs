//! The option table: what each fio option means in the simulator.

use super::{Dir, JobFileError, JobSpec, RwKind, SizeSpec, SsKind, SteadyState};
use vssd_model::Payload;
use vssd_profile::size::{has_iec_unit, parse_size_fio};

/// Options whose values are sizes (for the kb_base warning).
const SIZE_OPTIONS: &[&str] = &[
    "bs",
    "blocksize",
    "size",
    "offset",
    "offset_increment",
    "io_size",
    "io_limit",
    "blockalign",
    "ba",
];

/// Options fio has that change nothing in a simulation of one block device.
const NO_EFFECT: &[&str] = &[
    "filename",
    "filename_format",
    "directory",
    "direct",
    "buffered",
    "ioengine",
    "iodepth_batch",
    "iodepth_batch_submit",
    "iodepth_batch_complete",
    "iodepth_batch_complete_min",
    "iodepth_batch_complete_max",
    "iodepth_low",
    "invalidate",
    "thread",
    "refill_buffers",
    "scramble_buffers",
    "buffer_compress_chunk",
    "buffer_pattern",
    "disable_slat",
    "disable_bw_measurement",
    "slat_percentiles",
    "cpus_allowed",
    "cpus_allowed_policy",
    "cpumask",
    "numa_cpu_nodes",
    "numa_mem_policy",
    "allow_mounted_write",
    "random_generator",
    "softrandommap",
    "unlink",
    "fallocate",
    "create_on_open",
    "overwrite",
    "log_compression",
    "ioscheduler",
    "nice",
    "prio",
    "prioclass",
    "hipri",
    "fixedbufs",
    "registerfiles",
    "sqthread_poll",
    "userspace_reap",
    "serialize_overlap",
    "significant_figures",
    "rwmixcycle",
    "iomem",
    "mem",
    "iomem_align",
    "create_serialize",
    "stats",
];

/// Options fio has whose effect this simulator cannot reproduce.
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "bssplit",
        "mixed block sizes are not simulated; use one `bs` per job",
    ),
    (
        "bsrange",
        "block-size ranges are not simulated; use one `bs` per job",
    ),
    (
        "blocksize_range",
        "block-size ranges are not simulated; use one `bs` per job",
    ),
    (
        "blocksize_unaligned",
        "unaligned block sizes are not simulated",
    ),
    ("bs_unaligned", "unaligned block sizes are not simulated"),
    ("zonemode", "zoned I/O is not simulated"),
    ("zonesize", "zoned I/O is not simulated"),
    ("zonerange", "zoned I/O is not simulated"),
    ("zoneskip", "zoned I/O is not simulated"),
    (
        "rate_min",
        "minimum-rate enforcement is not simulated (rate and rate_iops are)",
    ),
    (
        "rate_iops_min",
        "minimum-rate enforcement is not simulated (rate and rate_iops are)",
    ),
    (
        "rate_process",
        "rate_process is not simulated (leave it out: fio's default, linear, is what rate and rate_iops do)",
    ),
    ("ratecycle", "ratecycle is not simulated"),
    ("percentage_random", "partly random jobs are not simulated"),
    (
        "file_service_type",
        "only one file (the device) is simulated",
    ),
    ("openfiles", "only one file (the device) is simulated"),
    (
        "verify_only",
        "data verification needs data; the model keeps none",
    ),
    ("trim_percentage", "trim-after-verify is not simulated"),
    ("trim_backlog", "trim-after-verify is not simulated"),
    ("trim_verify_zero", "trim-after-verify is not simulated"),
    ("write_barrier", "write barriers are not simulated"),
    ("flow", "flow control between jobs is not simulated"),
    ("flow_id", "flow control between jobs is not simulated"),
    ("exec_prerun", "running commands is not simulated"),
    ("exec_postrun", "running commands is not simulated"),
    (
        "filesize",
        "only one file (the device) is simulated; use `size`",
    ),
    ("fill_fs", "no file system is simulated"),
    (
        "log_max_value",
        "bandwidth logs hold interval averages only",
    ),
    (
        "offset_align",
        "percentage offsets are aligned to the block size",
    ),
    ("thinktime_spin", "thinktime is simulated as sleep only"),
    (
        "thinktime_iotime",
        "thinktime is simulated per `thinktime_blocks` only",
    ),
    (
        "rw_sequencer",
        "sequential jobs always advance by one block",
    ),
    ("io_submit_mode", "I/O is always issued inline"),
    (
        "latency_target",
        "searching for the queue depth that meets a latency target is not simulated; use a fixed iodepth (and max_latency to stop on a latency)",
    ),
    (
        "latency_window",
        "searching for the queue depth that meets a latency target is not simulated",
    ),
    (
        "latency_percentile",
        "searching for the queue depth that meets a latency target is not simulated",
    ),
    (
        "latency_run",
        "searching for the queue depth that meets a latency target is not simulated",
    ),
];

/// fio's aliases of the options the simulator knows, with their canonical
/// names (fio 3.33's option table): fio prints options under these.
const ALIASES: &[(&str, &str)] = &[
    ("readwrite", "rw"),
    ("blocksize", "bs"),
    ("blockalign", "ba"),
    ("blocksize_range", "bsrange"),
    ("blocksize_unaligned", "bs_unaligned"),
    ("io_limit", "io_size"),
    ("fill_fs", "fill_device"),
    ("fileoffset", "offset"),
    ("nr_files", "nrfiles"),
    ("timeout", "runtime"),
    ("iomem", "mem"),
    ("mem_align", "iomem_align"),
    ("ratemin", "rate_min"),
    ("ratecycle", "rate_cycle"),
    ("wait_for_previous", "stonewall"),
    ("disable_bw", "disable_bw_measurement"),
    ("iodepth_batch_submit", "iodepth_batch"),
    ("iodepth_batch_complete", "iodepth_batch_complete_min"),
    ("ss", "steadystate"),
    ("ss_dur", "steadystate_duration"),
    ("ss_ramp", "steadystate_ramp_time"),
];

/// I/O engine options (libaio, io_uring): fio parses them in a second pass,
/// so they come last in its printed option lists.
const ENGINE_OPTIONS: &[&str] = &[
    "userspace_reap",
    "hipri",
    "fixedbufs",
    "registerfiles",
    "sqthread_poll",
    "sqthread_poll_cpu",
    "nonvectored",
    "uncached",
    "nowait",
    "force_async",
    "cmdprio_percentage",
    "cmdprio_class",
    "cmdprio",
    "cmdprio_bssplit",
];

/// The name fio prints an option under: lower case, aliases resolved.
pub fn fio_name(key: &str) -> String {
    let k = key.to_ascii_lowercase();
    match ALIASES.iter().find(|(a, _)| *a == k) {
        Some((_, name)) => (*name).to_string(),
        None => k,
    }
}

/// Where fio parses an option among a section's (higher first): its option
/// priority (`kb_base`, `unit_base`, `lockfile`, `cpus_allowed_policy`: 1;
/// `filename`, `filename_format`: −1; others 0), and the I/O engine's
/// options after all of those.
pub fn print_rank(name: &str) -> i8 {
    match name {
        "kb_base" | "unit_base" | "lockfile" | "cpus_allowed_policy" => 1,
        "filename" | "filename_format" => -1,
        n if ENGINE_OPTIONS.contains(&n) => -2,
        _ => 0,
    }
}

fn err(origin: &str, line: usize, key: &str, msg: impl Into<String>) -> JobFileError {
    JobFileError::Option {
        origin: origin.into(),
        line,
        key: key.into(),
        msg: msg.into(),
    }
}

/// Apply one option to a job. `value` is `None` for a bare `key` line.
pub fn apply(
    spec: &mut JobSpec,
    key: &str,
    value: Option<&str>,
    origin: &str,
    line: usize,
    warnings: &mut Vec<String>,
) -> Result<(), JobFileError> {
    let e = |msg: String| err(origin, line, key, msg);
    let kb = spec.kb_base;
    let key_l = key.to_ascii_lowercase();
    if kb == 1024
        && SIZE_OPTIONS.contains(&key_l.as_str())
        && let Some(v) = value.filter(|v| v.split(',').any(has_iec_unit))
    {
        warnings.push(format!(
            "{origin}:{line}: option `{key}`: {v:?}: with fio's default kb_base=1024, KiB/MiB/GiB units are decimal (1000-based) and k/m/g binary; write 4k for 4096 bytes, or set kb_base=1000"
        ));
    }
    let parse_size = |v: &str| parse_size_fio(v, kb);
    let need = || {
        value
            .filter(|v| !v.is_empty())
            .ok_or_else(|| e("needs a value".into()))
    };
    let size = || -> Result<u64, JobFileError> {
        let v = need()?;
        parse_size(v).map_err(|x| e(x.to_string()))
    };
    let int = || -> Result<u64, JobFileError> {
        let v = need()?;
        v.parse::<u64>()
            .map_err(|_| e(format!("{v:?} is not a non-negative integer")))
    };
    let flag = || -> Result<bool, JobFileError> {
        match value.map(|v| v.to_ascii_lowercase()) {
            None => Ok(true),
            Some(v) => match v.as_str() {
                "" | "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(e(format!("{v:?} is not a boolean (0 or 1)"))),
            },
        }
    };
    let size_or_pct = |zero_ok: bool| -> Result<SizeSpec, JobFileError> {
        let v = need()?;
        if let Some(p) = v.strip_suffix('%') {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| e(format!("{v:?} is not a percentage")))?;
            if !((p > 0.0 || (zero_ok && p == 0.0)) && p <= 100.0) {
                let lo = if zero_ok { "[0" } else { "(0" };
                return Err(e(format!("{v:?}: a percentage must be in {lo}, 100]")));
            }
            Ok(SizeSpec::Percent(p))
        } else {
            Ok(SizeSpec::Bytes(
                parse_size(v).map_err(|x| e(x.to_string()))?,
            ))
        }
    };
    match key_l.as_str() {
        "rw" | "readwrite" => {
            let v = need()?.to_ascii_lowercase();
            if v.contains(':') {
                return Err(e(format!(
                    "{v:?}: the `:N` suffix (holes / offset repeats) is not simulated"
                )));
            }
            let (rw, random) = match v.as_str() {
                "read" => (RwKind::Read, false),
                "write" => (RwKind::Write, false),
                "trim" => (RwKind::Trim, false),
                "randread" => (RwKind::Read, true),
                "randwrite" => (RwKind::Write, true),
                "randtrim" => (RwKind::Trim, true),
                "rw" | "readwrite" => (RwKind::ReadWrite, false),
                "randrw" => (RwKind::ReadWrite, true),
                "trimwrite" | "randtrimwrite" => {
                    return Err(e(format!("{v:?} is not simulated")));
                }
                _ => return Err(e(format!("{v:?} is not an I/O pattern fio knows"))),
            };
            spec.rw = rw;
            spec.random = random;
            spec.rw_text = v;
        }
        "bs" | "blocksize" => {
            let v = need()?;
            let parts: Vec<&str> = v.split(',').map(str::trim).collect();
            if parts.len() > 3 {
                return Err(e(format!("{v:?}: at most three sizes (read,write,trim)")));
            }
            let mut bs = [4096u64; 3];
            let mut last = None;
            for (i, slot) in bs.iter_mut().enumerate() {
                match parts.get(i) {
                    Some(p) if !p.is_empty() => {
                        let b = parse_size(p).map_err(|x| e(x.to_string()))?;
                        if b == 0 || !b.is_multiple_of(512) {
                            let hint = if kb == 1024 && has_iec_unit(p) {
                                " (with fio's default kb_base=1024, KiB means 1000 bytes: write 4k for 4096)"
                            } else {
                                ""
                            };
                            return Err(e(format!(
                                "{p:?} = {b} bytes: block sizes must be positive multiples of 512{hint}"
                            )));
                        }
                        *slot = b;
                        last = Some(b);
                    }
                    Some(_) => last = None,
                    None => {
                        if let Some(b) = last {
                            *slot = b;
                        }
                    }
                }
            }
            spec.bs = bs;
        }
        "size" => spec.size = Some(size_or_pct(false)?),
        "fill_device" => {
            if flag()? {
                spec.size = Some(SizeSpec::Percent(100.0));
            }
        }
        "offset" => spec.offset = size_or_pct(true)?,
        "offset_increment" => spec.offset_increment = size_or_pct(true)?,
        "io_size" | "io_limit" => {
            let v = need()?;
            spec.io_size = Some(match v.strip_suffix('%') {
                Some(p) => {
                    let p: f64 = p
                        .trim()
                        .parse()
                        .map_err(|_| e(format!("{v:?} is not a percentage")))?;
                    if !(p > 0.0 && p <= 100_000.0) {
                        return Err(e(format!("{v:?}: a percentage must be in (0, 100000]")));
                    }
                    SizeSpec::Percent(p)
                }
                None => SizeSpec::Bytes(size()?),
            });
        }
        "loops" => {
            let n = int()?;
            if n == 0 {
                return Err(e("must be at least 1".into()));
            }
            spec.loops = n;
        }
        "number_ios" => spec.number_ios = Some(int()?).filter(|&n| n > 0),
        "runtime" | "timeout" => {
            let t = parse_time(need()?, 1_000_000_000).map_err(e)?;
            spec.runtime_ns = if t == 0 { None } else { Some(t) };
        }
        "time_based" => spec.time_based = flag()?,
        "ramp_time" => spec.ramp_ns = parse_time(need()?, 1_000_000_000).map_err(e)?,
        "startdelay" => {
            let v = need()?;
            if v.contains('-') {
                return Err(e(format!("{v:?}: random start delays are not simulated")));
            }
            spec.startdelay_ns = parse_time(v, 1_000_000_000).map_err(e)?;
        }
        "thinktime" => spec.thinktime_ns = parse_time(need()?, 1_000).map_err(e)?,
        "rate_iops" | "rate" => {
            let v = need()?;
            if v.contains(',') {
                return Err(e(format!(
                    "{v:?}: separate read/write rates are not simulated (give one rate for the job)"
                )));
            }
            if key_l == "rate_iops" {
                spec.rate_iops = int()?;
            } else {
                spec.rate_bytes = size()?;
            }
        }
        "thinktime_blocks" => {
            let n = int()?;
            spec.thinktime_blocks = n.max(1);
        }
        "iodepth" => {
            let n = int()?;
            if !(1..=65536).contains(&n) {
                return Err(e(format!("{n}: allowed range 1..=65536")));
            }
            spec.iodepth = n as u32;
        }
        "numjobs" => {
            let n = int()?;
            if !(1..=4096).contains(&n) {
                return Err(e(format!("{n}: allowed range 1..=4096")));
            }
            spec.numjobs = n as u32;
        }
        "rwmixread" | "rwmixwrite" => {
            let n = int()?;
            if n > 100 {
                return Err(e(format!("{n}: a percentage must be 0..=100")));
            }
            spec.rwmixread = if key_l == "rwmixread" { n } else { 100 - n } as u32;
        }
        "stonewall" | "wait_for_previous" => spec.stonewall = flag()?,
        "exitall" => spec.exitall = flag()?,
        "randseed" => spec.randseed = Some(int()?),
        "randrepeat" | "allrandrepeat" => spec.randrepeat = flag()?,
        "norandommap" => spec.norandommap = flag()?,
        "buffer_compress_percentage" => {
            let n = int()?;
            if n > 100 {
                return Err(e(format!("{n}: a percentage must be 0..=100")));
            }
            spec.payload = Payload::Compressible { percent: n as u8 };
        }
        "zero_buffers" => {
            if flag()? {
                spec.payload = Payload::Zeroes;
            }
        }
        "log_avg_msec" => {
            let n = int()?;
            if n == 0 {
                return Err(e(
                    "0 (one log entry per I/O) is not supported; give an interval in ms".into(),
                ));
            }
            spec.log_avg_msec = n;
        }
        "write_bw_log" => spec.write_bw_log = Some(value.unwrap_or("").to_string()),
        "write_lat_log" => spec.write_lat_log = Some(value.unwrap_or("").to_string()),
        "write_iops_log" => spec.write_iops_log = Some(value.unwrap_or("").to_string()),
        "write_hist_log" => spec.write_hist_log = Some(value.unwrap_or("").to_string()),
        "log_hist_msec" => spec.log_hist_msec = int()?,
        "log_hist_coarseness" => {
            let n = int()?;
            if n > 6 {
                return Err(e(format!("{n}: allowed range 0..=6")));
            }
            spec.log_hist_coarseness = n as u32;
        }
        "log_offset" => spec.log_offset = flag()?,
        "per_job_logs" => spec.per_job_logs = flag()?,
        "do_verify" => {
            // Only meaningful with `verify`, which must be off here.
            flag()?;
        }
        "steadystate" | "ss" => spec.ss = parse_ss(need()?, kb).map_err(e)?,
        "steadystate_duration" | "ss_dur" => {
            let t = parse_time(need()?, 1_000_000_000).map_err(e)?;
            if t != 0 && (!t.is_multiple_of(1_000_000_000) || t > 86_400_000_000_000) {
                return Err(e(format!(
                    "{t} ns: steady state is judged on one sample per second: give whole seconds, at most a day"
                )));
            }
            spec.ss_dur_s = t / 1_000_000_000;
        }
        "steadystate_ramp_time" | "ss_ramp" => {
            spec.ss_ramp_ns = parse_time(need()?, 1_000_000_000).map_err(e)?;
        }
        "max_latency" => {
            let v = need()?;
            let parts: Vec<&str> = v.split(',').map(str::trim).collect();
            if parts.len() > 3 {
                return Err(e(format!("{v:?}: at most three times (read,write,trim)")));
            }
            let mut lim = [None; 3];
            let mut last = None;
            for (i, slot) in lim.iter_mut().enumerate() {
                match parts.get(i) {
                    Some(p) if !p.is_empty() => {
                        let t = parse_time(p, 1_000).map_err(e)?;
                        *slot = (t > 0).then_some(t);
                        last = *slot;
                    }
                    Some(_) => last = None,
                    None => *slot = last,
                }
            }
            spec.max_latency_ns = lim;
        }
        "group_reporting" => spec.group_reporting = flag()?,
        "percentile_list" => {
            let v = need()?;
            let mut list = Vec::new();
            for p in v.split(':') {
                let x: f64 = p
                    .trim()
                    .parse()
                    .map_err(|_| e(format!("{p:?} is not a number")))?;
                if !(0.0..=100.0).contains(&x) {
                    return Err(e(format!("{x}: percentiles must be 0..=100")));
                }
                list.push(x);
            }
            if list.is_empty() || list.len() > 64 {
                return Err(e("give 1 to 64 percentiles".into()));
            }
            spec.percentiles = list;
        }
        "end_fsync" | "fsync_on_close" => spec.end_fsync = flag()?,
        "bwavgtime" | "iopsavgtime" => {
            let n = int()?;
            if n == 0 {
                return Err(e("give an interval of at least 1 ms".into()));
            }
            if key_l == "bwavgtime" {
                spec.bwavgtime_ms = Some(n);
            } else {
                spec.iopsavgtime_ms = Some(n);
            }
        }
        "clat_percentiles" => spec.clat_percentiles = flag()?,
        "lat_percentiles" => spec.lat_percentiles = flag()?,
        "disable_clat" => spec.disable_clat = flag()?,
        "disable_lat" => spec.disable_lat = flag()?,
        "gtod_reduce" => {
            if flag()? {
                spec.disable_clat = true;
                spec.disable_lat = true;
            }
        }
        "description" => spec.description = Some(value.unwrap_or("").to_string()),
        "read_iolog" => spec.read_iolog = Some(need()?.to_string()),
        "write_iolog" => spec.write_iolog = Some(need()?.to_string()),
        "replay_no_stall" => spec.replay.no_stall = flag()?,
        "replay_time_scale" => {
            let v = int()?;
            if !(1..=1_000_000).contains(&v) {
                return Err(e(format!(
                    "{v}: a percentage from 1 to 1000000 (200 replays twice as fast)"
                )));
            }
            spec.replay.time_scale_pct = v;
        }
        "replay_redirect" => spec.replay.redirect = Some(need()?.to_string()),
        "replay_align" => {
            let v = size()?;
            if v != 0 && !v.is_power_of_two() {
                return Err(e(format!("{v} is not a power of two")));
            }
            spec.replay.align = v;
        }
        "replay_scale" => {
            let v = int()?;
            if v == 0 {
                return Err(e("must be at least 1".into()));
            }
            spec.replay.scale = v;
        }
        "replay_skip" => {
            let mut m = 0u8;
            for d in need()?.split(',') {
                m |= match d.trim().to_ascii_lowercase().as_str() {
                    "read" => 1 << Dir::Read as u8,
                    "write" => 1 << Dir::Write as u8,
                    "trim" => 1 << Dir::Trim as u8,
                    "sync" => 1 << 3,
                    o => {
                        return Err(e(format!(
                            "{o:?}: replay_skip takes read, write, trim, sync"
                        )));
                    }
                };
            }
            spec.replay.skip = m;
        }
        "read_iolog_chunked" => {
            // Reading the log in chunks saves fio memory; the whole log is
            // read here either way.
            flag()?;
        }
        "continue_on_error" => {
            let v = need()?.to_ascii_lowercase();
            spec.continue_on_error = match v.as_str() {
                "none" | "0" => false,
                "read" | "write" | "io" | "verify" | "all" | "1" => true,
                _ => {
                    return Err(e(format!(
                        "{v:?}: one of none, read, write, io, verify, all, 0, 1"
                    )));
                }
            };
        }
        "name" => spec.name = need()?.to_string(),
        "kb_base" => {
            let n = int()?;
            if n != 1024 && n != 1000 {
                return Err(e(format!("{n}: fio accepts 1024 (its default) or 1000")));
            }
            spec.kb_base = n as u32;
        }
        "unified_rw_reporting" => {
            let v = value.unwrap_or("1").to_ascii_lowercase();
            if !matches!(v.as_str(), "0" | "none") {
                return Err(e("unified reporting is not supported".into()));
            }
        }
        "fsync" | "fdatasync" | "sync" => {
            let v = value.unwrap_or("1").to_ascii_lowercase();
            if !matches!(v.as_str(), "0" | "none" | "false") {
                return Err(e("periodic syncs are not simulated; use end_fsync".into()));
            }
        }
        "verify" => {
            let v = value.unwrap_or("").to_ascii_lowercase();
            if !matches!(v.as_str(), "0" | "none" | "") {
                return Err(e(
                    "data verification needs data; the model keeps none".into()
                ));
            }
        }
        "nrfiles" => {
            if int()? != 1 {
                return Err(e("only one file (the device) is simulated".into()));
            }
        }
        "random_distribution" => {
            if !need()?.eq_ignore_ascii_case("random") {
                return Err(e(
                    "only the uniform `random` distribution is simulated".into()
                ));
            }
        }
        "blockalign" | "ba" => {
            let b = size()?;
            if b != 0 && spec.bs.iter().any(|&s| !s.is_multiple_of(b)) {
                return Err(e("offsets are always aligned to the block size".into()));
            }
        }
        k if NO_EFFECT.contains(&k) => {}
        k => {
            if let Some((_, why)) = UNSUPPORTED.iter().find(|(u, _)| *u == k) {
                return Err(e((*why).to_string()));
            }
            if !fio_knows(k) {
                // fio refuses a name it does not know; so does the simulator.
                return Err(e(match nearest_option(k) {
                    Some(n) => format!("fio has no such option (did you mean `{n}`?)"),
                    None => "fio has no such option".into(),
                }));
            }
            warnings.push(format!(
                "{origin}:{line}: fio option `{key}` is not simulated; ignored"
            ));
        }
    }
    Ok(())
}

/// fio 3.33's option names (`fio --cmdhelp=all`), one per line.
const FIO_OPTIONS: &str = include_str!("fio_options.txt");

fn fio_names() -> impl Iterator<Item = &'static str> {
    FIO_OPTIONS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// Whether fio has an option of this name (lower case; aliases included).
fn fio_knows(k: &str) -> bool {
    fio_names().any(|n| n == k)
        || ALIASES.iter().any(|(a, _)| *a == k)
        || ENGINE_OPTIONS.contains(&k)
}

/// The fio option name closest to a misspelt one, if any is close.
fn nearest_option(k: &str) -> Option<&'static str> {
    fio_names()
        .chain(ALIASES.iter().map(|(a, _)| *a))
        .chain(ENGINE_OPTIONS.iter().copied())
        .map(|n| (strsim::jaro_winkler(k, n), n))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}

/// Whole-job checks after all options are applied.
pub(super) fn check(spec: &JobSpec, origin: &str, line: usize) -> Result<(), JobFileError> {
    if spec.time_based && spec.runtime_ns.is_none() {
        return Err(err(
            origin,
            line,
            "time_based",
            format!("job [{}] is time_based but has no runtime", spec.name),
        ));
    }
    Ok(())
}

/// Parse a time such as `30`, `500ms`, `2m`, `10us`; a bare number is in
/// `default_unit_ns`.
pub fn parse_time(v: &str, default_unit_ns: u64) -> Result<u64, String> {
    let t = v.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("{v:?} is not a time (examples: 30, 500ms, 2m)"));
    }
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" => default_unit_ns,
        "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        u => {
            return Err(format!(
                "{v:?}: unknown time unit {u:?} (us, ms, s, m, h, d)"
            ));
        }
    };
    let x: f64 = num
        .parse()
        .map_err(|_| format!("{v:?} is not a time (examples: 30, 500ms, 2m)"))?;
    let ns = x * mult as f64;
    if !ns.is_finite() || ns >= u64::MAX as f64 / 2.0 {
        return Err(format!("{v:?} is too long"));
    }
    Ok(ns.round() as u64)
}

/// Parse fio's `steadystate=criterion:limit` (`iops_slope:0.1%`, `bw:10m`).
fn parse_ss(v: &str, kb_base: u32) -> Result<SteadyState, String> {
    let (crit, limit) = v
        .split_once(':')
        .ok_or_else(|| format!("{v:?}: expected criterion:limit, e.g. iops_slope:0.1%"))?;
    let kind = match crit.trim().to_ascii_lowercase().as_str() {
        "iops" => SsKind::Iops,
        "iops_slope" => SsKind::IopsSlope,
        "bw" => SsKind::Bw,
        "bw_slope" => SsKind::BwSlope,
        c => {
            return Err(format!(
                "{c:?}: the criterion is one of iops, iops_slope, bw, bw_slope"
            ));
        }
    };
    let limit = limit.trim();
    let (value, pct) = match limit.strip_suffix('%') {
        Some(p) => (
            p.trim()
                .parse::<f64>()
                .map_err(|_| format!("{limit:?} is not a percentage"))?,
            true,
        ),
        None if matches!(kind, SsKind::Bw | SsKind::BwSlope) => (
            parse_size_fio(limit, kb_base).map_err(|x| x.to_string())? as f64,
            false,
        ),
        None => (
            limit
                .parse::<f64>()
                .map_err(|_| format!("{limit:?} is not a number"))?,
            false,
        ),
    };
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!(
            "{limit:?}: the limit must be a non-negative number"
        ));
    }
    Ok(SteadyState {
        kind,
        limit: value,
        pct,
    })
}
