//! What the guest runs for a boot's phases, and what it prints back: each
//! phase between `@@PHASE-BEGIN i UPTIME` and `@@PHASE-END i UPTIME` lines
//! (the host times phases and sends their faults on these), `@@METRIC i
//! NAME VALUE` lines, `@@FSBAD` lines for files an `fsck` phase found
//! missing or damaged, and the tools' output files at the end
//! ([`vssd_guest::console_files`]).

use std::collections::BTreeMap;

use crate::scenario::{DEV_VAR, FS_MOUNT, PhaseKind, Scenario, SurfaceOp, TrimMethod};
use vssd_guest::console_files;

/// A job file with its own `log_avg_msec` stretched by the time scale
/// `k`: a job's interval is drive time, as in the simulator, and fio in a
/// dilated guest logs on the wall clock, K times slower. Without it a
/// guest's entries of a few ms at K = 27 held one request or none.
pub(super) fn job_in_drive_time(text: &str, k: f64) -> String {
    if !(k.is_finite() && k > 1.0) {
        return text.to_string();
    }
    text.lines()
        .map(|l| {
            let t = l.trim();
            match t
                .strip_prefix("log_avg_msec")
                .map(|r| r.trim_start())
                .and_then(|r| r.strip_prefix('='))
                .and_then(|v| v.trim().parse::<u64>().ok())
            {
                Some(ms) => format!("log_avg_msec={}", ((ms as f64) * k).round().max(1.0) as u64),
                None => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The guest script of phases `range`, under time scale `k`.
pub(super) fn script(sc: &Scenario, range: std::ops::Range<usize>, exe: &str, k: f64) -> String {
    let dev = sc.bus.guest_dev();
    let mut s = format!("set -e\nexport {DEV_VAR}={dev}\nup() {{ cut -d' ' -f1 /proc/uptime; }}\n");
    for i in range {
        let p = &sc.phases[i];
        s.push_str(&format!("echo \"@@PHASE-BEGIN {i} $(up)\"\n"));
        match &p.kind {
            PhaseKind::Fio { text, .. } => {
                let text = job_in_drive_time(text, k);
                s.push_str(&format!(
                    "cat > /tmp/job{i}.fio <<'VSSD_BENCH_JOB_END'\n{text}\nVSSD_BENCH_JOB_END\n\
                     fio --output-format=json --write_bw_log=/tmp/bw{i} --log_avg_msec=1000 /tmp/job{i}.fio > /tmp/fio{i}.json\n"
                ));
            }
            PhaseKind::Surface {
                op,
                block,
                burst,
                positions,
                depth,
            } => {
                let op = match op {
                    SurfaceOp::Read => "read",
                    SurfaceOp::Write => "write",
                };
                s.push_str(&format!(
                    "'{exe}' surface --device {dev} --op {op} --block {block} --burst {burst} --positions {positions} --depth {depth} --json > /tmp/surface{i}.json\n"
                ));
            }
            PhaseKind::Trim {
                method,
                fs,
                offset,
                length,
            } => match method {
                TrimMethod::Blkdiscard if *length > 0 => {
                    s.push_str(&format!("blkdiscard -o {offset} -l {length} {dev}\n"))
                }
                TrimMethod::Blkdiscard => s.push_str(&format!("blkdiscard -o {offset} {dev}\n")),
                TrimMethod::Mkfs => s.push_str(&format!("{} >/dev/null\n", fs.mkfs(&dev, true))),
                TrimMethod::Fstrim => s.push_str(&format!(
                    "{} >/dev/null\nmkdir -p /tmp/mnt{i}\nmount {dev} /tmp/mnt{i}\nfstrim -v /tmp/mnt{i}\numount /tmp/mnt{i}\n",
                    fs.mkfs(&dev, false)
                )),
            },
            // The phase's seconds of wall time; in a dilated run the host
            // lets the drive idle the rest of them at once (see
            // `dilation::idle_fast_forward_ns`).
            PhaseKind::Idle { seconds } => s.push_str(&format!("sleep {seconds}\n")),
            // The host sends the request when it reads the phase's start
            // line; the guest gives it a second to land.
            PhaseKind::Fault { .. } | PhaseKind::PowerCut { .. } => s.push_str("sleep 1\n"),
            PhaseKind::Files {
                mkfs,
                mount_options,
                count,
                size,
                fsync,
            } => {
                if *mkfs {
                    s.push_str(&format!(
                        "mountpoint -q {FS_MOUNT} && umount {FS_MOUNT}\nmkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 {dev} >/dev/null\n"
                    ));
                }
                let conv = if *fsync { " conv=fsync" } else { "" };
                // A write that fails (the power went) ends the phase, not
                // the script.
                // The count is printed after each file: if the machine
                // loses its power mid-phase, the last one printed stands.
                s.push_str(&format!(
                    "mkdir -p {FS_MOUNT}\nmountpoint -q {FS_MOUNT} || mount -o {mount_options} {dev} {FS_MOUNT}\n\
                     echo \"@@METRIC {i} files_written 0\"\n\
                     for j in $(seq 1 {count}); do\n  \
                     {pattern} | head -c {size} | dd of={FS_MOUNT}/p{i}-f$j bs=64k iflag=fullblock{conv} 2>/dev/null || break\n  \
                     echo \"@@METRIC {i} files_written $j\"\ndone\n",
                    pattern = file_pattern(i),
                ));
            }
            PhaseKind::Fsck { sets } => {
                // The kernel replays the journal (mount, umount), then a
                // read-only e2fsck judges what the drive kept: only then a
                // repairing pass (if needed) so the files can be read.
                s.push_str(&format!(
                    "mountpoint -q {FS_MOUNT} && umount {FS_MOUNT}\nmkdir -p {FS_MOUNT}\n\
                     if mount {dev} {FS_MOUNT} 2>/dev/null; then umount {FS_MOUNT}; r=1; else r=0; fi\necho \"@@METRIC {i} replayed $r\"\n\
                     e2fsck -fn {dev} >/tmp/fsck{i}.txt 2>&1 && r=0 || r=$?\necho \"@@METRIC {i} fsck_check_exit $r\"\n\
                     if [ $r -ne 0 ]; then e2fsck -fy {dev} >/dev/null 2>&1 && r=0 || r=$?; fi\necho \"@@METRIC {i} fsck_fix_exit $r\"\n\
                     if mount -o ro {dev} {FS_MOUNT}; then\n  echo \"@@METRIC {i} mounted 1\"\n"
                ));
                for set in sets {
                    let (p, count, size) = (set.phase, set.count, set.size);
                    s.push_str(&format!(
                        "  for j in $(seq 1 {count}); do\n    f={FS_MOUNT}/p{p}-f$j\n    \
                         if [ ! -e $f ]; then echo \"@@FSBAD {i} {p} $j missing\"\n    \
                         elif ! {pattern} | head -c {size} | cmp -s - $f; then echo \"@@FSBAD {i} {p} $j damaged\"; fi\n  done\n",
                        pattern = file_pattern(p),
                    ));
                }
                s.push_str(&format!(
                    "  umount {FS_MOUNT}\nelse\n  echo \"@@METRIC {i} mounted 0\"\nfi\n"
                ));
            }
            _ => {}
        }
        s.push_str(&format!("echo \"@@PHASE-END {i} $(up)\"\n"));
    }
    // The results, after the timed part.
    s.push_str(&console_files::print_command(
        "/tmp/fsck*.txt /tmp/fio*.json /tmp/surface*.json /tmp/bw*_bw*.log",
    ));
    s
}

/// The shell pipeline that prints the contents of file `$j` of the
/// `files` phase `phase` (and more: the caller cuts it to size), so the
/// `fsck` phase can tell an intact file from a damaged one without
/// keeping a copy.
fn file_pattern(phase: usize) -> String {
    format!("yes \"vssd bench phase {phase} file $j\"")
}

/// `@@METRIC PHASE NAME VALUE` lines the guest printed: (phase, name) → value.
pub(super) fn guest_metrics(output: &str) -> BTreeMap<(usize, String), f64> {
    output
        .lines()
        .filter_map(|l| {
            let mut it = l.strip_prefix("@@METRIC ")?.split_whitespace();
            let i = it.next()?.parse().ok()?;
            let name = it.next()?.to_string();
            let v = it.next()?.parse().ok()?;
            Some(((i, name), v))
        })
        .collect()
}

/// Files an `fsck` phase found missing or damaged: `@@FSBAD PHASE SET J WHAT`
/// → (set's phase, file number).
pub(super) fn bad_files(output: &str, phase: usize) -> Vec<(usize, u32)> {
    output
        .lines()
        .filter_map(|l| {
            let mut it = l.strip_prefix("@@FSBAD ")?.split_whitespace();
            let i: usize = it.next()?.parse().ok()?;
            let p = it.next()?.parse().ok()?;
            let j = it.next()?.parse().ok()?;
            (i == phase).then_some((p, j))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_own_log_interval_is_stretched_by_the_time_scale() {
        let t = "[j]\nrw=write\nlog_avg_msec=2\nbs=1m";
        assert_eq!(
            job_in_drive_time(t, 27.0),
            "[j]\nrw=write\nlog_avg_msec=54\nbs=1m"
        );
        assert_eq!(job_in_drive_time(t, 1.0), t);
        assert_eq!(
            job_in_drive_time("log_avg_msec = 10", 2.5),
            "log_avg_msec=25"
        );
    }
}
