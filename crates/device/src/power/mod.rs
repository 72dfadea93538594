//! Power loss (`vssd ctl power-cut`): which acknowledged writes a cut
//! loses, and the undo record that takes the store back to what the drive
//! shows after the cut.
//!
//! A drive without power-loss protection loses what it acknowledged from
//! its write buffer but had not programmed: vssd keeps, for every write
//! (and write-zeroes that writes) not yet durable, its range, when it was
//! submitted and acknowledged, and the previous contents of its range. A
//! write is durable once its data and the data of every host write placed
//! before it are programmed ([`vssd_model::Ssd::durability`]): the FTL
//! commits mapping updates in order, so what a cut loses is always the
//! most recent writes, and a FLUSH (which programs everything buffered)
//! or a FUA write makes everything before it durable. On a cut, the lost
//! writes are undone newest first, so the store holds what was there
//! before them: the old data, as a drive whose mapping update never
//! happened shows it.
//!
//! A discard (or write-zeroes with unmap) is a mapping update that vssd
//! treats as durable at once: the parts of pending writes it covers are
//! no longer audited (their data is gone either way).
//!
//! The record is bounded ([`MAX_RECORDS`], [`MAX_UNDO_BYTES`]); a drive's
//! write buffer bounds what is pending, so the bounds are reached only
//! when writes stay in open dpages for long. Beyond them the oldest
//! pending writes are treated as durable and counted as `untracked`.
//!
//! A preset may add the failure classes Zheng et al. found (FAST 2013,
//! "Understanding the Robustness of SSDs under Power Fault"), each with a
//! probability drawn from the device's seed ([`Classes`]): shorn writes (a
//! lost write's first sectors were programmed after all), unserializable
//! writes (a write the cut would lose was programmed out of order, so it
//! survives an earlier lost one) and lost mapping updates (writes durable
//! in the last `mapping_loss_window_ms`, flushed ones included, revert).
//! [`plan_cut`] decides, and lists every lost range with its cause.

mod audit;
mod domain;

use serde::{Deserialize, Serialize};

pub(crate) use self::audit::Audit;
pub(crate) use self::domain::{PowerDomain, PowerState, Undo};

/// Most pending writes kept.
pub const MAX_RECORDS: usize = 1 << 16;
/// Most bytes of previous contents kept.
pub const MAX_UNDO_BYTES: u64 = 512 << 20;
/// Most writes `--after-writes` (and `--random`) may wait for.
pub const MAX_AFTER_WRITES: u64 = 1 << 40;

/// When a cut happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "when", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CutTrigger {
    /// At once.
    Now,
    /// As the `writes`-th write from now arrives (it is executed, then the
    /// power goes at its submission, so it is never acknowledged).
    AfterWrites {
        /// 1 = the next write.
        writes: u64,
    },
    /// At `ms` of drive time from now (taking effect at the next request
    /// or the next second's sample, with what was durable at that time).
    AfterMs {
        /// Drive time, ms.
        ms: u64,
    },
    /// At drive time `ms` (absolute, as `ctl fault list` shows the drive's
    /// clock: `drive_time_ns`), taking effect as for `AfterMs`.
    At {
        /// Drive time, ms since the daemon started.
        ms: u64,
    },
    /// After a number of writes (1 ..= 1000) picked from `seed`.
    Random {
        /// The seed.
        seed: u64,
    },
}

/// Why a write was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossCause {
    /// Its data was not programmed (in the write buffer, an open dpage,
    /// or in flight): what every drive without power-loss protection loses.
    #[default]
    Unprogrammed,
    /// Shorn (Zheng et al.): the write's first sectors were programmed, the
    /// rest of it (this range) was not.
    Shorn,
    /// The mapping-table update of a write that was durable (maybe
    /// flushed) was lost with the power (Zheng et al.'s metadata
    /// corruption): it reads its old data again.
    Mapping,
}

/// A cut waiting for its moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "when", rename_all = "kebab-case")]
pub enum Armed {
    /// After this many more writes.
    AfterWrites {
        /// Writes still to come, the last one included.
        writes: u64,
    },
    /// At this drive time.
    At {
        /// Drive time, ns.
        model_ns: u64,
    },
}

/// One write a cut lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostWrite {
    /// Byte offset.
    pub offset: u64,
    /// Bytes.
    pub length: u64,
    /// Drive time it was submitted, ns.
    pub submitted_model_ns: u64,
    /// Drive time it was (or would have been) acknowledged, ns.
    pub acked_model_ns: u64,
    /// Whether it was acknowledged before the cut (otherwise its
    /// completion was still due when the power went).
    pub acknowledged: bool,
    /// Why it was lost.
    #[serde(default)]
    pub cause: LossCause,
    /// A shorn write: the whole write's `[offset, length]` (this entry's
    /// range is the part that was lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shorn_from: Option<[u64; 2]>,
}

/// What a cut did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutReport {
    /// Drive time of the cut, ns.
    pub model_ns: u64,
    /// What set it off.
    pub trigger: String,
    /// The drive had power-loss protection: nothing was lost.
    pub protected: bool,
    /// The writes lost, oldest first.
    pub lost: Vec<LostWrite>,
    /// Σ of their lengths.
    pub lost_bytes: u64,
    /// Writes that were pending when the cut came and survived it (their
    /// data was in NAND by then).
    pub survived: u64,
    /// Of those, writes not programmed in order that survived although an
    /// earlier write was lost (unserializable writes).
    #[serde(default)]
    pub reordered: u64,
    /// The cut lost the mapping updates of the last
    /// `mapping_loss_window_ms` (metadata corruption).
    #[serde(default)]
    pub mapping_lost: bool,
    /// The drive powers itself on again at this drive time (`power-cut
    /// --restart-after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_at_model_ns: Option<u64>,
}

/// The power state and the audit, for `ctl fault list` and `ctl stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerReport {
    /// Power is on.
    pub powered: bool,
    /// The drive's clock now, ns (what `power-cut --at` counts in).
    #[serde(default)]
    pub drive_time_ns: u64,
    /// An automatic power-on after the armed cut, ms of drive time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub armed_restart_after_ms: Option<u64>,
    /// The failure classes this preset adds to a cut (Zheng et al.).
    #[serde(default)]
    pub classes: Classes,
    /// A cut waiting for its moment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub armed: Option<Armed>,
    /// The preset's power-loss protection.
    pub power_loss_protection: bool,
    /// The preset's flushes are lies.
    pub flush_lies: bool,
    /// Cuts so far.
    pub cuts: u64,
    /// The latest cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cut: Option<CutReport>,
    /// Writes acknowledged or in flight, not yet durable, now.
    pub pending_writes: u64,
    /// Bytes of previous contents held for them.
    pub pending_undo_bytes: u64,
    /// Pending writes dropped from the audit at its bounds (then treated
    /// as durable), since the daemon started.
    pub untracked_writes: u64,
}

impl Default for PowerReport {
    fn default() -> Self {
        PowerReport {
            powered: true,
            drive_time_ns: 0,
            armed_restart_after_ms: None,
            classes: Classes::default(),
            armed: None,
            power_loss_protection: false,
            flush_lies: false,
            cuts: 0,
            last_cut: None,
            pending_writes: 0,
            pending_undo_bytes: 0,
            untracked_writes: 0,
        }
    }
}

/// The failure classes of Zheng et al. (FAST 2013) a preset adds to a
/// cut (`[reliability]`), each a probability in [0, 1]; all 0 by default.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Classes {
    /// Per lost write of two sectors or more: it is shorn instead.
    pub shorn: f64,
    /// Per write a cut would lose: it was programmed out of order and survives.
    pub unserializable: f64,
    /// Per cut: the mapping updates of the last `window_ms` are lost.
    pub mapping: f64,
    /// How far back a lost mapping update reaches, ms of drive time.
    pub window_ms: u64,
}

impl Default for Classes {
    fn default() -> Self {
        Classes {
            shorn: 0.0,
            unserializable: 0.0,
            mapping: 0.0,
            window_ms: 1000,
        }
    }
}

impl Classes {
    /// The classes of `r`.
    pub fn of(r: &vssd_profile::Reliability) -> Classes {
        Classes {
            shorn: r.shorn_write_probability,
            unserializable: r.unserializable_write_probability,
            mapping: r.mapping_loss_probability,
            window_ms: r.mapping_loss_window_ms,
        }
    }

    /// Whether any class is on.
    pub fn any(&self) -> bool {
        self.shorn > 0.0 || self.unserializable > 0.0 || self.mapping > 0.0
    }

    /// How long a durable write's undo record is kept (for a lost mapping
    /// update), ns: 0 unless the mapping class is on.
    pub(crate) fn keep_ns(&self) -> u64 {
        if self.mapping > 0.0 {
            self.window_ms.saturating_mul(1_000_000)
        } else {
            0
        }
    }
}
