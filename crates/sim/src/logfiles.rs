//! Log files as fio 3.33 names and writes them.
//!
//! Every log is `PREFIX_KIND.N.log` (`N` = job instance from 1), or
//! `PREFIX_KIND.log` with `per_job_logs=0` (instances with the same prefix
//! then share the file, in instance order). Lines are
//! `msec, value, direction, bs, priority`, with an offset column before the
//! priority when `log_offset=1`; the histogram log's lines are
//! `msec, direction, bs, bin0, bin1, ...`.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use super::results::{JobReport, RunReport};

fn path(prefix: &str, kind: &str, j: &JobReport) -> PathBuf {
    if j.per_job_logs {
        PathBuf::from(format!("{prefix}_{kind}.{}.log", j.index))
    } else {
        PathBuf::from(format!("{prefix}_{kind}.log"))
    }
}

/// Write the logs of a run: bandwidth logs (`bw`: of every instance under
/// `bw_override` if given, else of instances with `write_bw_log`) and, with
/// `others`, the latency, IOPS and histogram logs the jobs asked for.
/// Returns the files written, or the file that failed and why.
pub fn write_logs(
    r: &RunReport,
    bw_override: Option<&str>,
    bw: bool,
    others: bool,
) -> Result<Vec<PathBuf>, (PathBuf, std::io::Error)> {
    let mut written: Vec<PathBuf> = Vec::new();
    let mut opened: HashSet<PathBuf> = HashSet::new();
    let mut open = |p: &PathBuf| -> std::io::Result<BufWriter<File>> {
        // A file shared by instances (per_job_logs=0) is appended to.
        let f = if opened.insert(p.clone()) {
            File::create(p)?
        } else {
            OpenOptions::new().append(true).open(p)?
        };
        Ok(BufWriter::new(f))
    };
    for j in &r.jobs {
        if bw && let Some(prefix) = bw_override.or(j.write_bw_log.as_deref()) {
            let p = path(prefix, "bw", j);
            let res = open(&p).and_then(|mut w| {
                for s in &j.bw_log {
                    if j.log_offset {
                        writeln!(
                            w,
                            "{}, {}, {}, {}, 0, 0",
                            s.msec, s.kib_s, s.dir as u8, s.bs
                        )?;
                    } else {
                        writeln!(w, "{}, {}, {}, {}, 0", s.msec, s.kib_s, s.dir as u8, s.bs)?;
                    }
                }
                w.flush()
            });
            res.map_err(|e| (p.clone(), e))?;
            if !written.contains(&p) {
                written.push(p);
            }
        }
        if !others {
            continue;
        }
        if let Some((file, ios)) = &j.iolog {
            let p = PathBuf::from(file);
            File::create(&p)
                .and_then(|f| {
                    vssd_trace::iolog::write(
                        BufWriter::new(f),
                        vssd_trace::iolog::Version::V3,
                        "vssd",
                        ios,
                    )
                    .map(|_| ())
                })
                .map_err(|e| (p.clone(), e))?;
            written.push(p);
        }
        for l in &j.logs {
            let p = path(&l.prefix, l.kind, j);
            open(&p)
                .and_then(|mut w| {
                    w.write_all(l.text.as_bytes())?;
                    w.flush()
                })
                .map_err(|e| (p.clone(), e))?;
            if !written.contains(&p) {
                written.push(p);
            }
        }
    }
    Ok(written)
}
