//! fio job files: INI text → [`JobSpec`]s.
//!
//! The grammar is fio's: `[global]` and `[jobname]` sections, `key=value` or
//! bare `key` lines, comments starting with `#` or `;`. A `[global]` section
//! applies to the jobs that follow it in the same file. Every option is
//! classified (see [`apply`]): honoured, accepted without effect, unknown
//! (a warning), or known to fio but impossible to honour here (an error that
//! names the file, line and key).

use thiserror::Error;

use crate::model::Payload;
use crate::size::parse_size;

/// A job file could not be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum JobFileError {
    /// An option has a bad value or cannot be honoured by the simulator.
    #[error("{origin}:{line}: option `{key}`: {msg}")]
    Option {
        /// File name (or other origin label).
        origin: String,
        /// 1-based line number.
        line: usize,
        /// The option's key as written.
        key: String,
        /// What is wrong.
        msg: String,
    },
    /// A line is not `key`, `key=value`, a section header or a comment.
    #[error("{origin}:{line}: {msg}")]
    Syntax {
        /// File name.
        origin: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// The file could not be read.
    #[error("cannot read job file {origin}: {msg}")]
    Io {
        /// File name.
        origin: String,
        /// The OS error.
        msg: String,
    },
}

/// I/O direction, in fio's numbering (bandwidth logs use these numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Reads (0).
    Read = 0,
    /// Writes (1).
    Write = 1,
    /// TRIMs (2).
    Trim = 2,
}

impl Dir {
    /// All directions, in fio's order.
    pub const ALL: [Dir; 3] = [Dir::Read, Dir::Write, Dir::Trim];

    /// fio's JSON key: `read`, `write`, `trim`.
    pub fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
            Dir::Trim => "trim",
        }
    }
}

/// What a job does (fio's `rw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwKind {
    /// `read` / `randread`.
    Read,
    /// `write` / `randwrite`.
    Write,
    /// `trim` / `randtrim`.
    Trim,
    /// `rw`, `readwrite` / `randrw`: reads and writes mixed by `rwmixread`.
    ReadWrite,
}

/// A size given in bytes or as a percentage of the device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeSpec {
    /// Absolute bytes.
    Bytes(u64),
    /// Percent of the exported capacity (0 < p <= 100).
    Percent(f64),
}

impl SizeSpec {
    /// Resolve against the device capacity.
    pub fn resolve(self, capacity: u64) -> u64 {
        match self {
            SizeSpec::Bytes(b) => b,
            SizeSpec::Percent(p) => ((capacity as f64) * p / 100.0) as u64,
        }
    }
}

/// One job section with every option applied (globals first).
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Section name (or `name=`).
    pub name: String,
    /// Where the section starts, for messages: `file:line`.
    pub origin: String,
    /// Direction(s).
    pub rw: RwKind,
    /// Random offsets (`randread`, `randwrite`, `randrw`, `randtrim`).
    pub random: bool,
    /// The original `rw` value, for reports.
    pub rw_text: String,
    /// Block size per direction (read, write, trim), bytes.
    pub bs: [u64; 3],
    /// `size`: the region's length (default: from `offset` to the end).
    pub size: Option<SizeSpec>,
    /// `offset`: the region's start.
    pub offset: SizeSpec,
    /// `offset_increment`: added to `offset` for each `numjobs` clone.
    pub offset_increment: SizeSpec,
    /// `io_size` / `io_limit`: bytes to transfer (default `size` × `loops`);
    /// a percentage is of the region (`size`) and may exceed 100.
    pub io_size: Option<SizeSpec>,
    /// `loops`: passes over the region.
    pub loops: u64,
    /// `number_ios`: stop after this many I/Os.
    pub number_ios: Option<u64>,
    /// `runtime`, ns.
    pub runtime_ns: Option<u64>,
    /// `time_based`.
    pub time_based: bool,
    /// `ramp_time`, ns.
    pub ramp_ns: u64,
    /// `startdelay`, ns.
    pub startdelay_ns: u64,
    /// `thinktime`, ns.
    pub thinktime_ns: u64,
    /// `thinktime_blocks`.
    pub thinktime_blocks: u64,
    /// `iodepth`.
    pub iodepth: u32,
    /// `numjobs`.
    pub numjobs: u32,
    /// `rwmixread`, percent.
    pub rwmixread: u32,
    /// `stonewall` / `wait_for_previous`.
    pub stonewall: bool,
    /// `exitall`: when this job ends, the others of its group stop issuing.
    pub exitall: bool,
    /// `randseed`.
    pub randseed: Option<u64>,
    /// `randrepeat`.
    pub randrepeat: bool,
    /// `norandommap`.
    pub norandommap: bool,
    /// Write payload hint (`buffer_compress_percentage`, `zero_buffers`).
    pub payload: Payload,
    /// `log_avg_msec` (default 1000 here; fio's 0 means per-I/O and is not supported).
    pub log_avg_msec: u64,
    /// `write_bw_log=PREFIX`.
    pub write_bw_log: Option<String>,
    /// `group_reporting`.
    pub group_reporting: bool,
    /// `percentile_list`.
    pub percentiles: Vec<f64>,
    /// `end_fsync` / `fsync_on_close`: a FLUSH when the job's I/O is done.
    pub end_fsync: bool,
}

/// fio's default completion-latency percentiles.
pub const DEFAULT_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

impl JobSpec {
    /// A job with fio's defaults (`rw=read`, `bs=4k`, `iodepth=1`, ...).
    pub fn new(name: &str, origin: &str) -> JobSpec {
        JobSpec {
            name: name.to_string(),
            origin: origin.to_string(),
            rw: RwKind::Read,
            random: false,
            rw_text: "read".into(),
            bs: [4096; 3],
            size: None,
            offset: SizeSpec::Bytes(0),
            offset_increment: SizeSpec::Bytes(0),
            io_size: None,
            loops: 1,
            number_ios: None,
            runtime_ns: None,
            time_based: false,
            ramp_ns: 0,
            startdelay_ns: 0,
            thinktime_ns: 0,
            thinktime_blocks: 1,
            iodepth: 1,
            numjobs: 1,
            rwmixread: 50,
            stonewall: false,
            exitall: false,
            randseed: None,
            randrepeat: true,
            norandommap: false,
            payload: Payload::Unknown,
            log_avg_msec: 1000,
            write_bw_log: None,
            group_reporting: false,
            percentiles: DEFAULT_PERCENTILES.to_vec(),
            end_fsync: false,
        }
    }

    /// Directions this job issues.
    pub fn dirs(&self) -> &'static [Dir] {
        match self.rw {
            RwKind::Read => &[Dir::Read],
            RwKind::Write => &[Dir::Write],
            RwKind::Trim => &[Dir::Trim],
            RwKind::ReadWrite => &[Dir::Read, Dir::Write],
        }
    }
}

/// The jobs of one or more job files, plus warnings for the user.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFile {
    /// Jobs in file order.
    pub jobs: Vec<JobSpec>,
    /// Unknown options and other things worth telling the user.
    pub warnings: Vec<String>,
}

impl JobFile {
    /// Read and parse several files as fio does: each file's `[global]` applies
    /// to its own jobs, and the first job of every file after the first waits
    /// for all earlier jobs (an implied `stonewall`).
    pub fn load(paths: &[impl AsRef<std::path::Path>]) -> Result<JobFile, JobFileError> {
        let mut all = JobFile::default();
        for p in paths {
            let p = p.as_ref();
            let origin = p.display().to_string();
            let text = std::fs::read_to_string(p).map_err(|e| JobFileError::Io {
                origin: origin.clone(),
                msg: e.to_string(),
            })?;
            all.append(parse(&text, &origin)?);
        }
        Ok(all)
    }

    /// Append another file's jobs (stonewalling its first job).
    pub fn append(&mut self, mut other: JobFile) {
        if !self.jobs.is_empty()
            && let Some(first) = other.jobs.first_mut()
        {
            first.stonewall = true;
        }
        self.jobs.append(&mut other.jobs);
        self.warnings.append(&mut other.warnings);
    }
}

/// Parse one job file's text; `origin` names it in messages.
pub fn parse(text: &str, origin: &str) -> Result<JobFile, JobFileError> {
    let mut out = JobFile::default();
    // Options of the [global] sections seen so far: (key, value, line).
    let mut global: Vec<(String, Option<String>, usize)> = Vec::new();
    // The job section being read: (name, line, options).
    type Section = (String, usize, Vec<(String, Option<String>, usize)>);
    let mut current: Option<Section> = None;
    let mut in_global = false;

    let finish = |sec: Section,
                  global: &[(String, Option<String>, usize)],
                  out: &mut JobFile|
     -> Result<(), JobFileError> {
        let (name, line, opts) = sec;
        let mut spec = JobSpec::new(&name, &format!("{origin}:{line}"));
        for (k, v, l) in global.iter().chain(opts.iter()) {
            apply(&mut spec, k, v.as_deref(), origin, *l, &mut out.warnings)?;
        }
        check(&spec, origin, line)?;
        out.jobs.push(spec);
        Ok(())
    };

    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(JobFileError::Syntax {
                    origin: origin.into(),
                    line: lineno,
                    msg: format!("section header {line:?} lacks a closing `]`"),
                });
            };
            let name = name.trim();
            if name.is_empty() {
                return Err(JobFileError::Syntax {
                    origin: origin.into(),
                    line: lineno,
                    msg: "empty section name".into(),
                });
            }
            if let Some(sec) = current.take() {
                finish(sec, &global, &mut out)?;
            }
            if name == "global" {
                in_global = true;
            } else {
                in_global = false;
                current = Some((name.to_string(), lineno, Vec::new()));
            }
            continue;
        }
        if line.starts_with("include ") || line == "include" {
            return Err(JobFileError::Syntax {
                origin: origin.into(),
                line: lineno,
                msg: "`include` directives are not supported; pass several job files instead"
                    .into(),
            });
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (line, None),
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(JobFileError::Syntax {
                origin: origin.into(),
                line: lineno,
                msg: format!("expected `key=value`, `key` or `[section]`, found {line:?}"),
            });
        }
        if value.as_deref().is_some_and(|v| v.contains('$')) {
            return Err(JobFileError::Option {
                origin: origin.into(),
                line: lineno,
                key: key.into(),
                msg: "`$` substitutions (environment variables, $ncpus, ...) are not supported"
                    .into(),
            });
        }
        let opt = (key.to_string(), value, lineno);
        if in_global {
            // Check it now, so a bad global is reported even without jobs.
            let mut probe = JobSpec::new("global", origin);
            apply(
                &mut probe,
                &opt.0,
                opt.1.as_deref(),
                origin,
                lineno,
                &mut Vec::new(),
            )?;
            global.push(opt);
        } else if let Some(sec) = current.as_mut() {
            sec.2.push(opt);
        } else {
            return Err(JobFileError::Syntax {
                origin: origin.into(),
                line: lineno,
                msg: format!("option `{key}` outside any section"),
            });
        }
    }
    if let Some(sec) = current.take() {
        finish(sec, &global, &mut out)?;
    }
    if out.jobs.is_empty() {
        out.warnings.push(format!("{origin}: no jobs defined"));
    }
    // Unknown-option warnings from globals repeat once per job: keep the first.
    let mut seen = std::collections::HashSet::new();
    out.warnings.retain(|w| seen.insert(w.clone()));
    Ok(out)
}

/// Remove a `#` or `;` comment: a whole line, or trailing after whitespace.
fn strip_comment(line: &str) -> &str {
    let t = line.trim_start();
    if t.starts_with('#') || t.starts_with(';') {
        return "";
    }
    let b = line.as_bytes();
    for i in 1..b.len() {
        if (b[i] == b'#' || b[i] == b';') && b[i - 1].is_ascii_whitespace() {
            return &line[..i];
        }
    }
    line
}

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
    "description",
    "refill_buffers",
    "scramble_buffers",
    "buffer_compress_chunk",
    "buffer_pattern",
    "gtod_reduce",
    "disable_lat",
    "disable_clat",
    "disable_slat",
    "disable_bw_measurement",
    "clat_percentiles",
    "lat_percentiles",
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
    "per_job_logs",
    "log_offset",
    "log_compression",
    "write_lat_log",
    "write_iops_log",
    "write_hist_log",
    "continue_on_error",
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
    "bwavgtime",
    "iopsavgtime",
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
    ("rate", "rate limiting is not simulated"),
    ("rate_iops", "rate limiting is not simulated"),
    ("rate_min", "rate limiting is not simulated"),
    ("rate_iops_min", "rate limiting is not simulated"),
    ("rate_process", "rate limiting is not simulated"),
    ("ratecycle", "rate limiting is not simulated"),
    ("percentage_random", "partly random jobs are not simulated"),
    (
        "file_service_type",
        "only one file (the device) is simulated",
    ),
    ("openfiles", "only one file (the device) is simulated"),
    (
        "do_verify",
        "data verification needs data; the model keeps none",
    ),
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
];

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
    let key_l = key.to_ascii_lowercase();
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
                            return Err(e(format!(
                                "{p:?}: block sizes must be positive multiples of 512"
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
        "write_bw_log" => spec.write_bw_log = Some(need()?.to_string()),
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
        "name" => spec.name = need()?.to_string(),
        "kb_base" => {
            if int()? != 1024 {
                return Err(e("only kb_base=1024 (fio's default) is supported".into()));
            }
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
            warnings.push(format!("{origin}:{line}: unknown option `{key}` ignored"));
        }
    }
    Ok(())
}

/// Whole-job checks after all options are applied.
fn check(spec: &JobSpec, origin: &str, line: usize) -> Result<(), JobFileError> {
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

#[cfg(test)]
mod tests {
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
    fn unknown_keys_warn_once() {
        let jf = parse("[global]\nfrobnicate=3\n[a]\n[b]\nwibble\n", "t.fio").unwrap();
        assert_eq!(jf.warnings.len(), 2, "{:?}", jf.warnings);
        assert!(jf.warnings[0].contains("t.fio:2") && jf.warnings[0].contains("frobnicate"));
        assert!(jf.warnings[1].contains("t.fio:5") && jf.warnings[1].contains("wibble"));
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
}
