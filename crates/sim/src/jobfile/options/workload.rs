//! Options that say what I/O a job issues: its pattern, block sizes, the
//! region it covers, its depth and clones, its random stream and payload.

use super::super::{RwKind, SizeSpec};
use super::{Opt, Value};
use crate::jobfile::{JobFileError, JobSpec};
use vssd_model::Payload;
use vssd_profile::size::has_iec_unit;

/// The workload options, under each name fio accepts for them.
pub(super) const OPTIONS: &[Opt] = &[
    (&["rw", "readwrite"], rw),
    (&["bs", "blocksize"], bs),
    (&["size"], |s, v| {
        s.size = Some(v.size_or_pct(false)?);
        Ok(())
    }),
    (&["fill_device"], |s, v| {
        if v.flag()? {
            s.size = Some(SizeSpec::Percent(100.0));
        }
        Ok(())
    }),
    (&["offset"], |s, v| {
        s.offset = v.size_or_pct(true)?;
        Ok(())
    }),
    (&["offset_increment"], |s, v| {
        s.offset_increment = v.size_or_pct(true)?;
        Ok(())
    }),
    (&["io_size", "io_limit"], io_size),
    (&["iodepth"], |s, v| {
        let n = v.int()?;
        if !(1..=65536).contains(&n) {
            return Err(v.err(format!("{n}: allowed range 1..=65536")));
        }
        s.iodepth = n as u32;
        Ok(())
    }),
    (&["numjobs"], |s, v| {
        let n = v.int()?;
        if !(1..=4096).contains(&n) {
            return Err(v.err(format!("{n}: allowed range 1..=4096")));
        }
        s.numjobs = n as u32;
        Ok(())
    }),
    (&["rwmixread", "rwmixwrite"], |s, v| {
        let n = v.int()?;
        if n > 100 {
            return Err(v.err(format!("{n}: a percentage must be 0..=100")));
        }
        s.rwmixread = if v.name == "rwmixread" { n } else { 100 - n } as u32;
        Ok(())
    }),
    (&["stonewall", "wait_for_previous"], |s, v| {
        s.stonewall = v.flag()?;
        Ok(())
    }),
    (&["exitall"], |s, v| {
        s.exitall = v.flag()?;
        Ok(())
    }),
    (&["randseed"], |s, v| {
        s.randseed = Some(v.int()?);
        Ok(())
    }),
    (&["randrepeat", "allrandrepeat"], |s, v| {
        s.randrepeat = v.flag()?;
        Ok(())
    }),
    (&["norandommap"], |s, v| {
        s.norandommap = v.flag()?;
        Ok(())
    }),
    (&["buffer_compress_percentage"], |s, v| {
        let n = v.int()?;
        if n > 100 {
            return Err(v.err(format!("{n}: a percentage must be 0..=100")));
        }
        s.payload = Payload::Compressible { percent: n as u8 };
        Ok(())
    }),
    (&["zero_buffers"], |s, v| {
        if v.flag()? {
            s.payload = Payload::Zeroes;
        }
        Ok(())
    }),
    (&["continue_on_error"], continue_on_error),
    (&["name"], |s, v| {
        s.name = v.need()?.to_string();
        Ok(())
    }),
    (&["kb_base"], |s, v| {
        let n = v.int()?;
        if n != 1024 && n != 1000 {
            return Err(v.err(format!("{n}: fio accepts 1024 (its default) or 1000")));
        }
        s.kb_base = n as u32;
        Ok(())
    }),
    (&["blockalign", "ba"], |s, v| {
        let b = v.size()?;
        if b != 0 && s.bs.iter().any(|&x| !x.is_multiple_of(b)) {
            return Err(v.err("offsets are always aligned to the block size"));
        }
        Ok(())
    }),
];

/// `rw`: the I/O pattern.
fn rw(spec: &mut JobSpec, value: &Value) -> Result<(), JobFileError> {
    let v = value.need()?.to_ascii_lowercase();
    if v.contains(':') {
        return Err(value.err(format!(
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
            return Err(value.err(format!("{v:?} is not simulated")));
        }
        _ => return Err(value.err(format!("{v:?} is not an I/O pattern fio knows"))),
    };
    spec.rw = rw;
    spec.random = random;
    spec.rw_text = v;
    Ok(())
}

/// `bs=read[,write[,trim]]`: an omitted size repeats the one before it, an
/// empty one keeps the default.
fn bs(spec: &mut JobSpec, value: &Value) -> Result<(), JobFileError> {
    let v = value.need()?;
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        return Err(value.err(format!("{v:?}: at most three sizes (read,write,trim)")));
    }
    let mut bs = [4096u64; 3];
    let mut last = None;
    for (i, slot) in bs.iter_mut().enumerate() {
        match parts.get(i) {
            Some(p) if !p.is_empty() => {
                let b = value.parse_size(p)?;
                if b == 0 || !b.is_multiple_of(512) {
                    let hint = if value.kb == 1024 && has_iec_unit(p) {
                        " (with fio's default kb_base=1024, KiB means 1000 bytes: write 4k for 4096)"
                    } else {
                        ""
                    };
                    return Err(value.err(format!(
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
    Ok(())
}

/// `io_size`: bytes, or a percentage of the region (up to 100000 %).
fn io_size(spec: &mut JobSpec, value: &Value) -> Result<(), JobFileError> {
    let v = value.need()?;
    spec.io_size = Some(match v.strip_suffix('%') {
        Some(p) => {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| value.err(format!("{v:?} is not a percentage")))?;
            if !(p > 0.0 && p <= 100_000.0) {
                return Err(value.err(format!("{v:?}: a percentage must be in (0, 100000]")));
            }
            SizeSpec::Percent(p)
        }
        None => SizeSpec::Bytes(value.size()?),
    });
    Ok(())
}

/// `continue_on_error`: any error class keeps the job going.
fn continue_on_error(spec: &mut JobSpec, value: &Value) -> Result<(), JobFileError> {
    let v = value.need()?.to_ascii_lowercase();
    spec.continue_on_error = match v.as_str() {
        "none" | "0" => false,
        "read" | "write" | "io" | "verify" | "all" | "1" => true,
        _ => {
            return Err(value.err(format!(
                "{v:?}: one of none, read, write, io, verify, all, 0, 1"
            )));
        }
    };
    Ok(())
}
