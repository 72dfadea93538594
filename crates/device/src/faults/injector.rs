//! The fault injector: the registry of injected faults, the NAND's wear
//! models and what they did to the drive (uncorrectable units, failed
//! erases, the read-only end of life), applied to each request under the
//! model lock by the request pipeline.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use log::warn;
use vssd_common::rng::{Rng, derive_seed};
use vssd_model::{RetireError, Ssd};
use vssd_profile::{EndOfLife, Profile};

use super::media::MediaModel;
use super::{FaultError, FaultInfo, FaultReport, FaultSpec, Faults, MAX_BAD_BLOCKS, Media};
use crate::Device;

/// Most uncorrectable units remembered; beyond, a failed read is not sticky.
pub const MAX_UNCORRECTABLE: usize = 1 << 16;

/// What the wear models left, kept under the model lock (their draws are
/// in the model's order).
pub(crate) struct MediaState {
    /// Draws of the media-wear models.
    rng: Rng,
    /// Erases already looked at by the bad-block model.
    erases_seen: u64,
    /// Mapping units a media-wear read found uncorrectable: reads of them
    /// fail until they are written or trimmed (bounded, [`MAX_UNCORRECTABLE`]).
    uncorrectable: BTreeSet<u64>,
}

impl MediaState {
    /// The state of a drive whose model has done `erases`, drawing from `seed`.
    pub fn new(seed: u64, erases: u64) -> MediaState {
        MediaState {
            rng: Rng::new(derive_seed(&[seed, 0x006d_6564_6961])), // "media"
            erases_seen: erases,
            uncorrectable: BTreeSet::new(),
        }
    }

    /// Units written or trimmed in `ranges` are readable again (the drive
    /// wrote them to a new place). `unit` is the mapping unit's size.
    pub fn rewritten(&mut self, unit: u64, ranges: &[(u64, u64)]) {
        if self.uncorrectable.is_empty() {
            return;
        }
        for &(o, l) in ranges {
            // Only units the write covers whole are rewritten.
            let (first, end) = (o.div_ceil(unit), (o + l) / unit);
            if first < end {
                let gone: Vec<u64> = self.uncorrectable.range(first..end).copied().collect();
                for lpn in gone {
                    self.uncorrectable.remove(&lpn);
                }
            }
        }
    }

    /// The wear the model has now is no news (ageing, a secure erase):
    /// no block fails on those erases.
    pub fn seen(&mut self, erases: u64) {
        self.erases_seen = erases;
    }

    /// Forget the unreadable units (a secure erase).
    pub fn forget(&mut self) {
        self.uncorrectable.clear();
    }

    /// A uniform draw in [0, 1).
    fn draw(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The registry, the wear models and the end of life.
pub(crate) struct FaultInjector {
    registry: Faults,
    media: MediaModel,
    /// Worn out with `end_of_life = "read-only"`, or out of spare blocks:
    /// writes fail.
    read_only: AtomicBool,
}

impl FaultInjector {
    /// No faults yet, the wear models of `profile`.
    pub fn new(profile: &Profile) -> FaultInjector {
        FaultInjector {
            registry: Faults::default(),
            media: MediaModel::of(profile),
            read_only: AtomicBool::new(false),
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Faults {
        &self.registry
    }

    /// Whether the drive is read-only.
    pub fn read_only(&self) -> bool {
        self.read_only.load(Relaxed)
    }

    /// An injected media fault over `ranges`, if one hits.
    pub fn media_hit(&self, dir: Media, ranges: &[(u64, u64)]) -> Option<u64> {
        self.registry.media_hit(dir, ranges)
    }

    /// A drive whose preset goes read-only at end of life does once its
    /// mean erase count reaches the rated cycles.
    pub fn check_end_of_life(&self, profile: &Profile, ssd: &Ssd) {
        if profile.wear.end_of_life == EndOfLife::ReadOnly
            && !self.read_only.load(Relaxed)
            && ssd.worn_out()
        {
            self.read_only.store(true, Relaxed);
            warn!(
                "the drive has reached its rated {} P/E cycles and is read-only from now on (as its kind was)",
                profile.wear.rated_pe_cycles
            );
        }
    }

    /// Media-wear, for a read of `offset..+len` the model took at `now`:
    /// whether a unit it reads is uncorrectable (then the media-wear
    /// fault's id, 0 for a unit an earlier read left uncorrectable), drawn
    /// from the raw bit-error model for the unit's block wear and data age.
    pub fn read(
        &self,
        ssd: &Ssd,
        st: &mut MediaState,
        offset: u64,
        len: u64,
        now: u64,
    ) -> Option<u64> {
        let ub = ssd.unit_bytes();
        if !st.uncorrectable.is_empty()
            && st
                .uncorrectable
                .range(offset / ub..(offset + len).div_ceil(ub))
                .next()
                .is_some()
        {
            self.registry.count_media(None, 1, 0);
            return Some(0);
        }
        let (id, accel, extra_age) = self.registry.media_wear()?;
        let mut failed = Vec::new();
        ssd.unit_wear(offset, len, |lpn, erases, written| {
            let age = now.saturating_sub(written).saturating_add(extra_age);
            let p = self.media.unit_failure(erases, age, accel, ub);
            if p > 0.0 && st.draw() < p {
                failed.push(lpn);
            }
        });
        if failed.is_empty() {
            return None;
        }
        for lpn in failed {
            if st.uncorrectable.len() < MAX_UNCORRECTABLE {
                st.uncorrectable.insert(lpn);
            }
        }
        self.registry.count_media(Some(id), 1, 0);
        Some(id)
    }

    /// Media-wear: the erases since the last look each fail with the
    /// bad-block model's probability; a failed block is retired (the most
    /// worn free one). Out of spare blocks, the drive turns read-only.
    pub fn erases(&self, ssd: &mut Ssd, st: &mut MediaState) {
        let erases = ssd.erases();
        let new = erases.saturating_sub(st.erases_seen);
        st.erases_seen = erases;
        if new == 0 {
            return;
        }
        let Some((id, accel, _)) = self.registry.media_wear() else {
            return;
        };
        let mean = erases as f64 / f64::from(ssd.block_count().max(1));
        let p = self.media.erase_failure(mean, accel);
        if p <= 0.0 {
            return;
        }
        // Failures among `new` erases: a binomial draw (at most 64 a request).
        let mut fails = 0u64;
        for _ in 0..new.min(1 << 20) {
            if st.draw() < p {
                fails += 1;
                if fails == 64 {
                    break;
                }
            }
        }
        let mut retired = 0;
        for _ in 0..fails {
            match ssd.retire_worn_free_block() {
                Some(b) => {
                    retired += 1;
                    log::warn!("media-wear: block {b} failed its erase and is retired");
                }
                None => {
                    if !self.read_only.swap(true, Relaxed) {
                        warn!(
                            "media-wear: a block failed and no spare block is left: the drive is read-only from now on"
                        );
                    }
                    break;
                }
            }
        }
        self.registry.count_media(Some(id), 0, retired);
    }

    /// Retire up to `count` blocks picked from the media draws at drive
    /// time `now` (their data moved out first): how many were, or why
    /// none could be. A model that failed doing it is reported in the
    /// second value.
    fn retire(
        &self,
        ssd: &mut Ssd,
        st: &mut MediaState,
        count: u32,
        now: u64,
    ) -> (Result<u64, FaultError>, Option<String>) {
        let nblocks = u64::from(ssd.block_count());
        let mut done = 0u64;
        let mut last_err = None;
        let mut attempts = 0u64;
        let mut damaged = None;
        while done < u64::from(count) && attempts < 64 * u64::from(count) + 1024 {
            attempts += 1;
            let b = st.rng.below(nblocks) as u32;
            match ssd.retire_block(now, b) {
                Ok(()) => done += 1,
                Err(e @ (RetireError::Hybrid | RetireError::NoSpare { .. })) => {
                    last_err = Some(e);
                    // Another die may have spare blocks; a hybrid drive has none.
                    if matches!(last_err, Some(RetireError::Hybrid)) {
                        break;
                    }
                }
                Err(e) => last_err = Some(e),
            }
            if let Some(e) = ssd.damaged() {
                damaged = Some(format!("the drive model failed retiring a block: {e}"));
                break;
            }
        }
        if done == 0 {
            let why = match last_err {
                Some(e) => format!("no block could be retired: {e}"),
                None => "no block could be retired".into(),
            };
            return (
                Err(FaultError::Bad {
                    kind: "bad-block",
                    why,
                }),
                damaged,
            );
        }
        (Ok(done), damaged)
    }
}

impl Device {
    /// Register an injected fault (`ctl fault add`), checked against the
    /// drive. A `bad-block` fault retires its blocks now (at least one, or
    /// it is refused).
    pub fn add_fault(&self, spec: FaultSpec) -> Result<FaultInfo, FaultError> {
        let registry = self.faults.registry();
        if let FaultSpec::BadBlock { count } = spec {
            if !(1..=MAX_BAD_BLOCKS).contains(&count) {
                // The registry says why.
                return registry.add(spec, self.capacity(), 0);
            }
            if !self.powered() {
                return Err(FaultError::Bad {
                    kind: "bad-block",
                    why: "the drive's power is off (vssd ctl power-on)".into(),
                });
            }
            let retired = {
                let mut core = self.drive.lock();
                let now = self.drive.now(&core).max(core.clock.last_ns());
                let core = &mut *core;
                let (r, damaged) = self
                    .faults
                    .retire(&mut core.ssd, &mut core.media, count, now);
                if let Some(why) = damaged {
                    self.drive.stop(why);
                }
                r?
            };
            let now = self.drive.now(&self.drive.lock());
            let mut info = registry.add(spec, self.capacity(), now)?;
            registry.count_media(Some(info.id), 0, retired);
            info.hits = retired;
            log::warn!(
                "fault {}: {retired} of {count} blocks retired as grown bad blocks",
                info.id
            );
            return Ok(info);
        }
        let now = {
            let mut core = self.drive.lock();
            // Media-wear counts erases from now on.
            let erases = core.ssd.erases();
            core.media.seen(erases);
            self.drive.now(&core)
        };
        let info = registry.add(spec, self.capacity(), now)?;
        log::info!("fault {} added: {:?}", info.id, info.spec);
        Ok(info)
    }

    /// Remove injected fault `id`, or all (`None`): how many were removed.
    pub fn clear_faults(&self, id: Option<u64>) -> Result<usize, FaultError> {
        let n = self.faults.registry().clear(id)?;
        log::info!("{n} fault(s) cleared");
        Ok(n)
    }

    /// The injected faults and what they did.
    pub fn faults(&self) -> FaultReport {
        self.poll_power();
        FaultReport {
            power: self.power_report(),
            read_only: self.read_only(),
            ..self.faults.registry().report()
        }
    }

    /// Whether the drive is worn out and read-only.
    pub fn read_only(&self) -> bool {
        self.faults.read_only()
    }
}
