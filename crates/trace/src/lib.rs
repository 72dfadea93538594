//! Request traces: what a drive received, request by request.
//!
//! - [`vssd`]: the daemon's own binary format (`vssd serve --trace`): every
//!   request as the drive saw it, with arrival, modelled completion and
//!   delivery times in drive time, its connection, queue and status;
//! - [`iolog`]: fio's iolog, versions 2 and 3 (read and written), so real
//!   fio can replay a vssd trace and fio's own logs come in;
//! - [`blkparse`]: blkparse's default text output, for traces taken with
//!   blktrace on real machines;
//! - [`blktrace`]: blktrace's binary per-CPU files, as fio's `read_iolog`
//!   takes them.
//!
//! - [`command`]: `vssd trace info|convert`, the command line over them.
//!
//! Every format reads into the same [`Trace`]: a list of [`Io`]s in
//! arrival order with the names of the files (devices) they went to.
//! Readers never trust a count or a length in the input: memory grows with
//! what the file really holds, and every refusal names the line or record.

/// The longest time a trace may span, ns (about 146 years): the drive
/// clock's end (`vssd_common::clock::MAX_DRIVE_NS`), so that a replayed
/// time never overflows it. Readers refuse a timestamp or wait beyond it.
pub const MAX_TIME_NS: u64 = u64::MAX / 2;

pub mod blkparse;
pub mod blktrace;
pub mod command;
pub mod iolog;
pub mod vssd;

use std::io::Read;
use std::path::Path;

use thiserror::Error;

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read `len` bytes.
    Read,
    /// Write `len` bytes.
    Write,
    /// Make everything written before durable (fio's `sync`).
    Flush,
    /// Deallocate (TRIM / DISCARD / UNMAP).
    Discard,
    /// Write zeroes; with `unmap` the drive may deallocate instead.
    WriteZeroes {
        /// Deallocation allowed.
        unmap: bool,
    },
}

impl Op {
    /// Short name: `read`, `write`, `flush`, `discard`, `write-zeroes`.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Discard => "discard",
            Op::WriteZeroes { .. } => "write-zeroes",
        }
    }
}

/// One entry of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// A request.
    Io(Io),
    /// fio iolog v2's `wait`: issue nothing until `since_start_ns` after
    /// the job started.
    Wait {
        /// Time since the job's start, ns.
        since_start_ns: u64,
    },
}

/// One request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Io {
    /// When it arrived, ns from the trace's start (`None`: the format
    /// carries no times, fio iolog v2).
    pub t_ns: Option<u64>,
    /// What it does.
    pub op: Op,
    /// First byte.
    pub offset: u64,
    /// Bytes (0 for a flush).
    pub len: u64,
    /// Index into [`Trace::files`].
    pub file: u32,
    /// Force unit access.
    pub fua: bool,
}

/// The formats [`load`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// vssd's binary trace.
    Vssd,
    /// fio iolog version 2 (times only as `wait` lines, in ms).
    IologV2,
    /// fio iolog version 3 (times in µs).
    IologV3,
    /// blkparse text output.
    Blkparse,
    /// blktrace binary.
    Blktrace,
}

impl Format {
    /// Name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Vssd => "vssd",
            Format::IologV2 => "iolog2",
            Format::IologV3 => "iolog3",
            Format::Blkparse => "blkparse",
            Format::Blktrace => "blktrace",
        }
    }
}

/// A trace in arrival order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trace {
    /// The files (devices) requests went to, as the trace names them.
    pub files: Vec<String>,
    /// Requests and waits, in arrival order.
    pub items: Vec<Item>,
}

impl Trace {
    /// The requests alone.
    pub fn ios(&self) -> impl Iterator<Item = &Io> {
        self.items.iter().filter_map(|i| match i {
            Item::Io(io) => Some(io),
            Item::Wait { .. } => None,
        })
    }

    /// Whether it holds fio iolog v2 `wait`s.
    pub fn has_waits(&self) -> bool {
        self.items.iter().any(|i| matches!(i, Item::Wait { .. }))
    }

    /// The trace with iolog v2's `wait`s turned into times: a request
    /// without a time arrives at the latest wait's time before it (0
    /// before the first), which is when fio issues it at the earliest.
    /// Requests with times and traces without waits are left as they are.
    pub fn timed_by_waits(&self) -> Trace {
        if !self.has_waits() {
            return self.clone();
        }
        let mut since = 0u64;
        let items = self
            .items
            .iter()
            .filter_map(|i| match *i {
                Item::Wait { since_start_ns } => {
                    since = since.max(since_start_ns);
                    None
                }
                Item::Io(io) => Some(Item::Io(Io {
                    t_ns: Some(io.t_ns.unwrap_or(since)),
                    ..io
                })),
            })
            .collect();
        Trace {
            files: self.files.clone(),
            items,
        }
    }

    /// Index of `name` in the file list, added if new.
    pub fn file_index(&mut self, name: &str) -> Result<u32, TraceError> {
        if let Some(i) = self.files.iter().position(|f| f == name) {
            return Ok(i as u32);
        }
        if self.files.len() >= MAX_FILES {
            return Err(TraceError::Limit(format!(
                "more than {MAX_FILES} distinct files or devices"
            )));
        }
        self.files.push(name.to_string());
        Ok((self.files.len() - 1) as u32)
    }

    fn push(&mut self, item: Item) -> Result<(), TraceError> {
        if self.items.len() >= MAX_ITEMS {
            return Err(TraceError::Limit(format!(
                "more than {MAX_ITEMS} requests; split the trace"
            )));
        }
        let t = match &item {
            Item::Wait { since_start_ns } => Some(*since_start_ns),
            Item::Io(io) => io.t_ns,
        };
        if let Some(t) = t
            && t > MAX_TIME_NS
        {
            return Err(TraceError::Limit(format!(
                "request {}: its time, {t} ns, is beyond the longest time a trace may span ({MAX_TIME_NS} ns, about 146 years)",
                self.items.len() + 1
            )));
        }
        self.items.push(item);
        Ok(())
    }
}

/// Most entries one trace may hold in memory (at 40 bytes each, 2.5 GiB).
pub const MAX_ITEMS: usize = 64 << 20;
/// Most distinct files or devices in one trace.
pub const MAX_FILES: usize = 4096;

/// A trace could not be read or written.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The content is not a valid trace.
    #[error("{at}: {msg}")]
    Bad {
        /// Where: `file:line` or `file: record N`.
        at: String,
        /// What is wrong.
        msg: String,
    },
    /// The trace is larger than this reader takes.
    #[error("trace too large: {0}")]
    Limit(String),
    /// Nothing in the file says what it is.
    #[error(
        "{0}: not a trace vssd reads (a vssd trace, a fio iolog v2 or v3, blkparse text or a blktrace binary)"
    )]
    Unknown(String),
}

impl TraceError {
    pub(crate) fn bad(at: impl Into<String>, msg: impl Into<String>) -> Self {
        TraceError::Bad {
            at: at.into(),
            msg: msg.into(),
        }
    }
}

/// What the first bytes of a file say it is.
pub fn detect(head: &[u8]) -> Option<Format> {
    if head.starts_with(&vssd::MAGIC) {
        return Some(Format::Vssd);
    }
    if blktrace::is_blktrace(head) {
        return Some(Format::Blktrace);
    }
    let text = std::str::from_utf8(&head[..head.len().min(256)]).ok();
    let first = text.and_then(|t| t.lines().next()).unwrap_or("");
    if first.starts_with(iolog::V2_HEADER) {
        return Some(Format::IologV2);
    }
    if first.starts_with(iolog::V3_HEADER) {
        return Some(Format::IologV3);
    }
    if blkparse::looks_like(first) {
        return Some(Format::Blkparse);
    }
    None
}

/// Read until `buf` is full or the input ends; returns the bytes read.
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The format of the file at `path`, from its first bytes.
pub fn detect_path(path: &Path) -> Result<Format, TraceError> {
    let name = path.display().to_string();
    let io_err = |source| TraceError::Io {
        path: name.clone(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io_err)?;
    let mut head = vec![0u8; 256];
    let got = read_full(&mut f, &mut head).map_err(io_err)?;
    head.truncate(got);
    detect(&head).ok_or_else(|| TraceError::Unknown(name.clone()))
}

/// Open `path` for reading, buffered.
pub fn open(path: &Path) -> Result<std::io::BufReader<std::fs::File>, TraceError> {
    let f = std::fs::File::open(path).map_err(|source| TraceError::Io {
        path: path.display().to_string(),
        source,
    })?;
    Ok(std::io::BufReader::with_capacity(1 << 20, f))
}

/// Read a trace of any format [`detect`] knows (blkparse text: its queue
/// events).
pub fn load(path: &Path) -> Result<(Format, Trace), TraceError> {
    let name = path.display().to_string();
    let format = detect_path(path)?;
    let r = open(path)?;
    let trace = match format {
        Format::Vssd => vssd::read(r, &name)?.to_trace(),
        Format::IologV2 | Format::IologV3 => iolog::read(r, &name)?,
        Format::Blkparse => blkparse::read(r, &name, blkparse::Event::Queue)?,
        Format::Blktrace => blktrace::read(r, &name)?,
    };
    Ok((format, trace))
}
