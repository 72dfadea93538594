//! The phase kinds as scenario files write them: [`PhaseSpec`] is the
//! table of kinds, one row each — the name a `[[phase]]`'s `kind` key gives
//! it, the keys it takes (a struct serde reads, refusing any other key),
//! and the check that turns those keys into a [`PhaseKind`] against the
//! drive and the phases before it. A new kind is a row, a struct and its
//! `check`.

use std::path::Path;

use serde::Deserialize;

use super::{
    BUILTIN_JOBS, DEV_VAR, DRIVE_METRICS, FaultAction, FileSet, Phase, PhaseKind, SurfaceOp,
    TrimMethod, builtin_job, job_for_sim, size_or_percent,
};
use crate::expr::Assertion;
use vssd_ctl::protocol::{CutTrigger, FaultSpec, Step};
use vssd_guest::fs::Fs;
use vssd_profile::size::parse_size;

/// What a phase's check knows besides its keys.
pub(super) struct Context<'a> {
    /// The drive's exported bytes (sizes may be percentages of it).
    pub capacity: u64,
    /// Where the scenario file is: its job files are looked up there first.
    pub dir: Option<&'a Path>,
    /// The phases before this one, checked.
    pub earlier: &'a [Phase],
}

impl Context<'_> {
    /// Key `what`: a size or a percentage of the drive, `default` if absent.
    fn size(&self, what: &str, v: &Option<String>, default: u64) -> Result<u64, String> {
        match v {
            None => Ok(default),
            Some(s) => size_or_percent(s, self.capacity).map_err(|e| format!("{what}: {e}")),
        }
    }
}

/// A checked phase's name as written (if any) and what it does, or what is
/// wrong with it.
type Checked = Result<(Option<String>, PhaseKind), String>;

/// Every phase kind: `kind = "..."` (the variant's name in kebab case)
/// selects the keys a `[[phase]]` may have, and [`PhaseSpec::check`] their
/// check.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(super) enum PhaseSpec {
    SecureErase(Named),
    Precondition(PreconditionKeys),
    Fio(FioKeys),
    Trim(TrimKeys),
    Surface(SurfaceKeys),
    Idle(IdleKeys),
    Expect(ExpectKeys),
    Fault(FaultKeys),
    PowerCut(PowerCutKeys),
    PowerOn(Named),
    Files(FilesKeys),
    Fsck(Named),
}

impl PhaseSpec {
    /// The phase's name as given and its kind, checked.
    pub(super) fn check(self, cx: &Context<'_>) -> Checked {
        match self {
            PhaseSpec::SecureErase(k) => Ok((k.name, PhaseKind::SecureErase)),
            PhaseSpec::Precondition(k) => k.check(cx),
            PhaseSpec::Fio(k) => k.check(cx),
            PhaseSpec::Trim(k) => k.check(cx),
            PhaseSpec::Surface(k) => k.check(cx),
            PhaseSpec::Idle(k) => k.check(),
            PhaseSpec::Expect(k) => k.check(cx),
            PhaseSpec::Fault(k) => k.check(cx),
            PhaseSpec::PowerCut(k) => k.check(),
            PhaseSpec::PowerOn(k) => Ok((k.name, PhaseKind::PowerOn)),
            PhaseSpec::Files(k) => k.check(cx),
            PhaseSpec::Fsck(k) => fsck(k, cx),
        }
    }
}

/// The keys of a kind that takes none but its name: `secure-erase`,
/// `power-on`, `fsck`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Named {
    name: Option<String>,
}

/// `precondition`: the drive aged in model time.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PreconditionKeys {
    name: Option<String>,
    #[serde(default)]
    trim_all: bool,
    fill: Option<String>,
    fill_bs: Option<String>,
    random_bs: Option<String>,
    amount: Option<String>,
}

impl PreconditionKeys {
    fn check(self, cx: &Context<'_>) -> Checked {
        let fill_bs = match self.fill.as_deref() {
            None => None,
            Some("seq") | Some("sequential") => {
                Some(cx.size("fill_bs", &self.fill_bs, 128 << 10)?)
            }
            Some(o) => return Err(format!("fill = {o:?}: only \"seq\"")),
        };
        let random = match self.random_bs {
            None => None,
            Some(bs) => {
                let bs = parse_size(&bs).map_err(|e| format!("random_bs: {e}"))?;
                let amount = self.amount.unwrap_or_else(|| "1x".into());
                vssd_ctl::protocol::parse_amount(&amount, cx.capacity, bs)
                    .map_err(|e| format!("amount: {e}"))?;
                Some((bs, amount))
            }
        };
        let steps: Vec<Step> = [
            self.trim_all.then_some(Step::TrimAll),
            fill_bs.map(|bs| Step::FillSeq { bs }),
            random.map(|(bs, amount)| Step::Random { bs, amount }),
        ]
        .into_iter()
        .flatten()
        .collect();
        if steps.is_empty() {
            return Err(
                "precondition: give trim_all = true, fill = \"seq\" and/or random_bs".into(),
            );
        }
        Ok((self.name, PhaseKind::Precondition { steps }))
    }
}

/// `fio`: a job file, run unchanged.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FioKeys {
    name: Option<String>,
    job: String,
}

impl FioKeys {
    fn check(self, cx: &Context<'_>) -> Checked {
        let job = &self.job;
        let (origin, text) = match cx.dir.map(|d| d.join(job)).filter(|p| p.exists()) {
            Some(p) => (
                p.display().to_string(),
                std::fs::read_to_string(&p).map_err(|e| format!("job {}: {e}", p.display()))?,
            ),
            None => match builtin_job(job) {
                Some(t) => (format!("built-in job {job}"), t.to_string()),
                None => {
                    return Err(format!(
                        "job file {job:?} not found{} nor among the built-in jobs ({})",
                        cx.dir
                            .map(|d| format!(" in {}", d.display()))
                            .unwrap_or_default(),
                        BUILTIN_JOBS
                            .iter()
                            .map(|(n, _)| *n)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            },
        };
        if !text.contains(&format!("${{{DEV_VAR}}}")) {
            return Err(format!(
                "job {origin}: name the drive with filename=${{{DEV_VAR}}} (set to the guest's device)"
            ));
        }
        vssd_sim::jobfile::parse(&job_for_sim(&text), &origin).map_err(|e| format!("job: {e}"))?;
        Ok((self.name, PhaseKind::Fio { origin, text }))
    }
}

/// `trim`: TRIM the ways an OS sends it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TrimKeys {
    name: Option<String>,
    method: TrimMethod,
    fs: Option<Fs>,
    offset: Option<String>,
    length: Option<String>,
}

impl TrimKeys {
    fn check(self, cx: &Context<'_>) -> Checked {
        let capacity = cx.capacity;
        let offset = cx.size("offset", &self.offset, 0)?;
        let length = cx.size("length", &self.length, 0)?;
        if offset % 512 != 0 || length % 512 != 0 || offset.saturating_add(length) > capacity {
            return Err(format!(
                "trim range {offset}+{length} must be 512-byte aligned and inside the {capacity}-byte drive"
            ));
        }
        let method = self.method;
        if method != TrimMethod::Blkdiscard && (offset != 0 || length != 0) {
            return Err(format!(
                "{method:?}: offset and length go with blkdiscard only"
            ));
        }
        Ok((
            self.name,
            PhaseKind::Trim {
                method,
                fs: self.fs.unwrap_or(Fs::Ext4),
                offset,
                length,
            },
        ))
    }
}

/// `surface`: an HD Tune-style pass.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SurfaceKeys {
    name: Option<String>,
    op: SurfaceOp,
    block: Option<String>,
    burst: Option<String>,
    positions: Option<u32>,
    depth: Option<u32>,
}

impl SurfaceKeys {
    fn check(self, cx: &Context<'_>) -> Checked {
        let depth = self.depth.unwrap_or(1);
        if !(1..=64).contains(&depth) {
            return Err(format!("depth {depth}: 1 to 64"));
        }
        let block = cx.size("block", &self.block, 128 << 10)?;
        let burst = cx.size("burst", &self.burst, 1 << 20)?;
        let positions = self.positions.unwrap_or(64);
        if block == 0 || block % 4096 != 0 || block > 16 << 20 {
            return Err(format!(
                "block {block}: a multiple of 4 KiB, at most 16 MiB"
            ));
        }
        if burst < block || burst % block != 0 || burst > cx.capacity / 2 {
            return Err(format!(
                "burst {burst}: a multiple of block ({block}), at most half the drive"
            ));
        }
        if !(2..=10_000).contains(&positions) {
            return Err(format!("positions {positions}: 2 to 10000"));
        }
        Ok((
            self.name,
            PhaseKind::Surface {
                op: self.op,
                block,
                burst,
                positions,
                depth,
            },
        ))
    }
}

/// `idle`: nothing for a while.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct IdleKeys {
    name: Option<String>,
    seconds: f64,
}

impl IdleKeys {
    fn check(self) -> Checked {
        let seconds = self.seconds;
        if !(seconds.is_finite() && (0.0..=86_400.0).contains(&seconds)) {
            return Err(format!("idle seconds {seconds}: 0 to 86400"));
        }
        Ok((self.name, PhaseKind::Idle { seconds }))
    }
}

/// `expect`: assertions over the metrics of earlier phases.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExpectKeys {
    name: Option<String>,
    checks: Vec<String>,
}

impl ExpectKeys {
    fn check(self, cx: &Context<'_>) -> Checked {
        if self.checks.is_empty() {
            return Err("expect: no checks".into());
        }
        let mut parsed = Vec::new();
        for c in &self.checks {
            let a = Assertion::parse(c).map_err(|e| format!("check {c:?}: {e}"))?;
            for (pn, m) in a.refs() {
                let Some(p) = cx.earlier.iter().find(|p| p.name == pn) else {
                    return Err(format!(
                        "check {c:?}: no earlier phase named {pn:?} (phases so far: {})",
                        cx.earlier
                            .iter()
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                };
                if !p.kind.metrics().contains(&m.as_str()) && !DRIVE_METRICS.contains(&m.as_str()) {
                    return Err(format!(
                        "check {c:?}: a {} phase has no metric {m:?} (it has: {})",
                        p.kind.name(),
                        p.kind
                            .metrics()
                            .iter()
                            .chain(DRIVE_METRICS)
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
            parsed.push(a);
        }
        Ok((self.name, PhaseKind::Expect { checks: parsed }))
    }
}

/// `fault`: add a media fault or a stall, or clear faults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FaultKeys {
    name: Option<String>,
    #[serde(default)]
    clear: bool,
    id: Option<u64>,
    fault: Option<String>,
    offset: Option<String>,
    length: Option<String>,
    ms: Option<u64>,
    every_ms: Option<u64>,
    after_ms: Option<u64>,
}

impl FaultKeys {
    fn check(self, cx: &Context<'_>) -> Checked {
        let action = if self.clear {
            self.clear_action()?
        } else {
            if self.id.is_some() {
                return Err("fault: id goes with clear = true".into());
            }
            let spec = self.fault_spec(cx)?;
            // The daemon's own checks, against this drive.
            vssd_device::faults::Faults::default()
                .add(spec.clone(), cx.capacity, 0)
                .map_err(|e| format!("fault: {e}"))?;
            FaultAction::Add(spec)
        };
        Ok((self.name, PhaseKind::Fault { action }))
    }

    /// `clear = true`: by id, or every fault.
    fn clear_action(&self) -> Result<FaultAction, String> {
        if self.fault.is_some()
            || self.offset.is_some()
            || self.length.is_some()
            || self.ms.is_some()
            || self.every_ms.is_some()
            || self.after_ms.is_some()
        {
            return Err("fault: clear = true takes only id (none: every fault)".into());
        }
        Ok(FaultAction::Clear(self.id))
    }

    /// The fault to add, as `vssd ctl fault add` sends it.
    fn fault_spec(&self, cx: &Context<'_>) -> Result<FaultSpec, String> {
        Ok(match self.fault.as_deref() {
            Some("read-error") => {
                let (offset, length) = self.range("read-error", cx)?;
                FaultSpec::ReadError { offset, length }
            }
            Some("write-error") => {
                let (offset, length) = self.range("write-error", cx)?;
                FaultSpec::WriteError { offset, length }
            }
            Some("stall") => {
                if self.offset.is_some() || self.length.is_some() {
                    return Err(
                        "fault stall: offset and length go with read-error and write-error".into(),
                    );
                }
                let Some(ms) = self.ms else {
                    return Err("fault stall: give ms".into());
                };
                FaultSpec::Stall {
                    ms,
                    every_ms: self.every_ms,
                    after_ms: self.after_ms,
                }
            }
            Some(o) => return Err(format!("fault = {o:?}: read-error, write-error or stall")),
            None => {
                return Err(
                    "fault: give fault = \"read-error\", \"write-error\" or \"stall\" (or clear = true)"
                        .into(),
                );
            }
        })
    }

    /// The range of a media fault (`what`): offset and length, no stall keys.
    fn range(&self, what: &str, cx: &Context<'_>) -> Result<(u64, u64), String> {
        if self.ms.is_some() || self.every_ms.is_some() || self.after_ms.is_some() {
            return Err(format!(
                "fault {what}: ms, every_ms and after_ms go with fault = \"stall\""
            ));
        }
        let (Some(o), Some(l)) = (&self.offset, &self.length) else {
            return Err(format!("fault {what}: give offset and length"));
        };
        Ok((
            size_or_percent(o, cx.capacity).map_err(|e| format!("offset: {e}"))?,
            size_or_percent(l, cx.capacity).map_err(|e| format!("length: {e}"))?,
        ))
    }
}

/// `power-cut`: cut the drive's power now or arm a cut.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PowerCutKeys {
    name: Option<String>,
    after_writes: Option<u64>,
    after_ms: Option<u64>,
    random: Option<u64>,
}

impl PowerCutKeys {
    fn check(self) -> Checked {
        use vssd_device::faults::MAX_PERIOD_MS;
        use vssd_device::power::MAX_AFTER_WRITES;
        let trigger = match (self.after_writes, self.after_ms, self.random) {
            (None, None, None) => CutTrigger::Now,
            (Some(0), None, None) => {
                return Err("power-cut: after_writes 0: 1 = the next write".into());
            }
            (Some(writes), None, None) if writes <= MAX_AFTER_WRITES => {
                CutTrigger::AfterWrites { writes }
            }
            (Some(writes), None, None) => {
                return Err(format!(
                    "power-cut: after_writes {writes}: at most {MAX_AFTER_WRITES}"
                ));
            }
            (None, Some(ms), None) if ms <= MAX_PERIOD_MS => CutTrigger::AfterMs { ms },
            (None, Some(ms), None) => {
                return Err(format!("power-cut: after_ms {ms}: at most {MAX_PERIOD_MS}"));
            }
            (None, None, Some(seed)) => CutTrigger::Random { seed },
            _ => {
                return Err("power-cut: give at most one of after_writes, after_ms, random".into());
            }
        };
        Ok((self.name, PhaseKind::PowerCut { trigger }))
    }
}

/// `files`: ext4 files written in the guest.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilesKeys {
    name: Option<String>,
    #[serde(default = "yes")]
    mkfs: bool,
    mount_options: Option<String>,
    count: u32,
    size: String,
    #[serde(default)]
    fsync: bool,
}

fn yes() -> bool {
    true
}

impl FilesKeys {
    fn check(self, cx: &Context<'_>) -> Checked {
        let (capacity, count) = (cx.capacity, self.count);
        let size = parse_size(&self.size).map_err(|e| format!("files size: {e}"))?;
        if !(1..=10_000).contains(&count) {
            return Err(format!("files count {count}: 1 to 10000"));
        }
        if size == 0 || size > capacity / 2 {
            return Err(format!(
                "files size {size}: more than 0, at most half the drive"
            ));
        }
        let total = size.saturating_mul(count as u64);
        if total > capacity / 2 {
            return Err(format!(
                "files: {count} × {size} bytes is more than half the {capacity}-byte drive"
            ));
        }
        let mount_options = self.mount_options.unwrap_or_else(|| "defaults".into());
        if mount_options.is_empty()
            || !mount_options
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ",=_-".contains(c))
        {
            return Err(format!(
                "mount_options {mount_options:?}: letters, digits and , = _ - only"
            ));
        }
        if !self.mkfs
            && !cx
                .earlier
                .iter()
                .any(|p| matches!(p.kind, PhaseKind::Files { .. }))
        {
            return Err(
                "files: mkfs = false needs an earlier files phase that made the filesystem".into(),
            );
        }
        Ok((
            self.name,
            PhaseKind::Files {
                mkfs: self.mkfs,
                mount_options,
                count,
                size,
                fsync: self.fsync,
            },
        ))
    }
}

/// `fsck`: the files of the earlier `files` phases on the latest
/// filesystem made, checked.
fn fsck(k: Named, cx: &Context<'_>) -> Checked {
    // Only the files of the latest filesystem made.
    let Some(last_mkfs) = cx
        .earlier
        .iter()
        .rposition(|p| matches!(p.kind, PhaseKind::Files { mkfs: true, .. }))
    else {
        return Err("fsck: no earlier files phase made a filesystem to check".into());
    };
    let sets = cx
        .earlier
        .iter()
        .enumerate()
        .filter_map(|(j, p)| match p.kind {
            PhaseKind::Files {
                count, size, fsync, ..
            } => Some(FileSet {
                phase: j,
                count,
                size,
                fsync,
            }),
            _ => None,
        })
        .filter(|s| s.phase >= last_mkfs)
        .collect();
    Ok((k.name, PhaseKind::Fsck { sets }))
}
