//! The metrics of the phases whose figures come from the daemon's fault
//! registry and power audit (`fault`, `power-cut`, `power-on`) or from
//! what the guest's `fsck` found.

use std::collections::BTreeMap;

use crate::results::PhaseResult;
use crate::scenario::{FileSet, PhaseKind, Scenario};

/// The metrics of a `fault`, `power-cut` or `power-on` phase from the
/// fault registry and the power audit at its end.
pub(super) fn fault_metrics(
    kind: &PhaseKind,
    f: &vssd_ctl::protocol::FaultReport,
    m: &mut BTreeMap<String, f64>,
) {
    match kind {
        PhaseKind::Fault { .. } => {
            let c = &f.counters;
            m.insert("faults_active".into(), f.active.len() as f64);
            m.insert("read_errors_injected".into(), c.read_errors_injected as f64);
            m.insert(
                "write_errors_injected".into(),
                c.write_errors_injected as f64,
            );
            m.insert(
                "errors_injected".into(),
                (c.read_errors_injected + c.write_errors_injected) as f64,
            );
            m.insert("stalls_injected".into(), c.stalls_injected as f64);
        }
        PhaseKind::PowerCut { .. } | PhaseKind::PowerOn => {
            let p = &f.power;
            // A power-cut phase that armed a cut reports no losses (the
            // latest cut, if any, is an earlier one): its cut goes off
            // later, and the `power-on` after it reports what it lost.
            let cut = p.last_cut.as_ref().filter(|_| {
                !matches!(kind, PhaseKind::PowerCut { trigger } if *trigger != vssd_ctl::protocol::CutTrigger::Now)
            });
            m.insert("armed".into(), f64::from(u8::from(p.armed.is_some())));
            m.insert("powered".into(), f64::from(u8::from(p.powered)));
            m.insert("cuts".into(), p.cuts as f64);
            m.insert(
                "lost_writes".into(),
                cut.map_or(0.0, |c| c.lost.len() as f64),
            );
            m.insert(
                "lost_acked_writes".into(),
                cut.map_or(0.0, |c| {
                    c.lost.iter().filter(|w| w.acknowledged).count() as f64
                }),
            );
            m.insert(
                "lost_bytes".into(),
                cut.map_or(0.0, |c| c.lost_bytes as f64),
            );
            m.insert(
                "protected".into(),
                f64::from(u8::from(p.power_loss_protection)),
            );
            m.insert("pending_writes".into(), p.pending_writes as f64);
        }
        _ => {}
    }
}

/// An `fsck` phase's metrics: whether the filesystem was consistent as the
/// drive kept it (the journal replayed by a mount, then a read-only e2fsck
/// clean: `fsck_clean`), whether a repairing pass had to change something
/// (`fsck_fixed`), and how many of the files the earlier `files` phases
/// wrote (as far as each got before the power went) read back intact.
#[allow(clippy::too_many_arguments)]
pub(super) fn fsck_metrics(
    sets: &[FileSet],
    done: &[PhaseResult],
    sc: &Scenario,
    fix_exit: f64,
    check_exit: f64,
    replayed: f64,
    mounted: f64,
    bad: &[(usize, u32)],
    m: &mut BTreeMap<String, f64>,
) {
    // The read-only check ran before any repair: exit 0 is clean as kept.
    m.insert("fsck_fixed".into(), f64::from(u8::from(fix_exit != 0.0)));
    m.insert(
        "fsck_clean".into(),
        f64::from(u8::from(
            check_exit == 0.0 && replayed == 1.0 && mounted == 1.0,
        )),
    );
    let (mut checked, mut intact, mut lost, mut synced_lost) = (0u64, 0u64, 0u64, 0u64);
    for set in sets {
        let written = sc
            .phases
            .get(set.phase)
            .and_then(|p| done.iter().find(|r| r.name == p.name))
            .and_then(|r| r.metrics.get("files_written"))
            .map_or(0, |n| *n as u32);
        for j in 1..=written.min(set.count) {
            checked += 1;
            // A filesystem that did not mount lost everything.
            if mounted != 1.0 || bad.contains(&(set.phase, j)) {
                lost += 1;
                if set.fsync {
                    synced_lost += 1;
                }
            } else {
                intact += 1;
            }
        }
    }
    m.insert("files_checked".into(), checked as f64);
    m.insert("files_intact".into(), intact as f64);
    m.insert("files_lost".into(), lost as f64);
    m.insert("synced_files_lost".into(), synced_lost as f64);
}
