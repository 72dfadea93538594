//! Saving and loading the FTL state (`vssd serve --state-dir`).
//!
//! Format version 3 (see `VERSION`), all integers little-endian:
//!
//! ```text
//! header   "VSSDFTL\0" | version u32 | CRC-32 of those 12 bytes (u32)
//! frames   len u32 | payload (len ≤ 1 MiB) | CRC-32 of (frame index u32, len, payload)
//!          ... a frame of length 0 ends the file; nothing may follow it.
//! ```
//!
//! The frames carry one byte stream, and no byte of it is interpreted
//! before the checksum of its frame has been verified: any damage
//! (a flipped byte anywhere, a truncation at any point, trailing data,
//! frames lost or swapped) is reported as damage, never as "another
//! profile" or a wrong version. The stream holds:
//!
//! - the profile's geometry as TOML (compared with the current profile),
//!   seed, write cursor, the 16 cumulative counters;
//! - per block: erase count, state, time of last program;
//! - per die: host and GC write points, free list;
//! - the mapping table (logical → physical) in chunks of 4096 entries, each
//!   chunk as whichever is smaller: "all unmapped" (one byte), runs
//!   (`len`, `first`: LEB128; `first` = 0 for unmapped, else consecutive
//!   values from `first`), or the packed entries as they are in memory.
//!
//! The reverse map, valid counts and mapped-unit count follow from the
//! mapping table and are rebuilt on load, then every invariant is checked.
//! So a fresh or trimmed drive saves in a few KiB, a sequentially written
//! one in a fraction of its table, and a randomly written one in at most
//! its in-memory mapping table plus 1 byte per 4096 entries. Timelines are
//! not saved: a loaded drive starts idle.
//!
//! Version 1 files (vssd before this format) are refused with a message
//! saying so.

use std::collections::VecDeque;
use std::io::{self, Read, Write};

use thiserror::Error;

use self::frames::{FrameReader, FrameWriter, encode_runs, read_full};
use super::blocks::SavedBlocks;
use super::log_blocks::{Log, MappingScheme};
use super::packed::PackedVec;
use super::ssd::Ssd;
use super::types::{BlockState, COUNTS, NONE, Stream, Tally};
use vssd_profile::Profile;

mod frames;

const MAGIC: &[u8; 8] = b"VSSDFTL\0";
const VERSION: u32 = 3;
/// Largest frame payload.
const FRAME_MAX: usize = 1 << 20;
/// Longest geometry text accepted.
const GEOMETRY_MAX: usize = 1 << 16;
/// Mapping-table entries per chunk: a multiple of 64, so a chunk is a
/// whole number of packed words.
const CHUNK: usize = 4096;

const TAG_UNMAPPED: u8 = 0;
const TAG_RUNS: u8 = 1;
const TAG_PACKED: u8 = 2;

/// Errors loading a saved drive state.
#[derive(Debug, Error)]
pub enum PersistError {
    /// Reading the state failed.
    #[error("I/O error reading drive state: {0}")]
    Io(#[from] std::io::Error),
    /// Checksum, magic, length or structure is wrong: the file is damaged
    /// (or is not a drive state at all).
    #[error("drive state is damaged: {0}")]
    Corrupt(String),
    /// An intact state saved by a drive with another profile or geometry.
    #[error("drive state was saved with a different profile: {0}")]
    ProfileMismatch(String),
    /// An intact state in another format version.
    #[error(
        "drive state format version {found} is not supported: this vssd reads version \
         {expected}{}",
        if *found < *expected { " (the file was written by an older vssd)" } else { " (the file was written by a newer vssd)" }
    )]
    Version {
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
}

pub(super) fn corrupt(what: impl Into<String>) -> PersistError {
    PersistError::Corrupt(what.into())
}

// ---------------------------------------------------------------- contents

fn geometry_text(p: &Profile) -> io::Result<String> {
    toml::to_string(&p.geometry).map_err(io::Error::other)
}

/// Counters in the state file: format 2 had the first 16.
const TALLY_FIELDS: usize = COUNTS;

fn tally_fields(r: &Tally) -> [u64; TALLY_FIELDS] {
    *r.all()
}

fn tally_from(f: &[u64; TALLY_FIELDS]) -> Tally {
    Tally::from_all(*f)
}

/// The profile sections that shape the saved state besides the geometry
/// (mapping policy, data reduction, SLC cache), as TOML.
fn period_text(p: &Profile) -> io::Result<String> {
    #[derive(serde::Serialize)]
    struct Shape<'a> {
        mapping: &'a vssd_profile::Mapping,
        reduction: &'a vssd_profile::Reduction,
        slc_cache: &'a vssd_profile::SlcCache,
    }
    toml::to_string(&Shape {
        mapping: &p.mapping,
        reduction: &p.reduction,
        slc_cache: &p.slc_cache,
    })
    .map_err(io::Error::other)
}

/// Whether a drive with `p` has state that format 2 did not save.
fn needs_v3(p: &Profile) -> bool {
    p.mapping != Default::default()
        || p.reduction != Default::default()
        || p.slc_cache != Default::default()
        || p.trim.deferred_release
}

impl Ssd {
    /// Write the FTL state (versioned, checksummed, the mapping table
    /// compacted). Timelines are not saved.
    /// Refuses (an error, nothing written) while the model is
    /// [damaged](Ssd::damaged).
    pub fn save<W: Write>(&self, mut w: W) -> io::Result<()> {
        if let Some(what) = self.damaged {
            return Err(io::Error::other(format!(
                "the drive model is damaged ({what}); its state is not saved"
            )));
        }
        let geometry = geometry_text(&self.profile)?;
        let mut head = [0u8; 16];
        head[..8].copy_from_slice(MAGIC);
        head[8..12].copy_from_slice(&VERSION.to_le_bytes());
        let crc = crc32fast::hash(&head[..12]);
        head[12..].copy_from_slice(&crc.to_le_bytes());
        w.write_all(&head)?;

        let mut f = FrameWriter::new(w);
        f.u32(geometry.len() as u32)?;
        f.put(geometry.as_bytes())?;
        let period = period_text(&self.profile)?;
        f.u32(period.len() as u32)?;
        f.put(period.as_bytes())?;
        f.u64(self.seed)?;
        f.u32(self.blocks.cursor())?;
        f.u32(TALLY_FIELDS as u32)?;
        for v in tally_fields(&self.tally) {
            f.u64(v)?;
        }
        let nblocks = self.blocks.count();
        f.u32(nblocks as u32)?;
        for &e in self.blocks.erase_counts() {
            f.u32(e)?;
        }
        // A victim being collected is saved as a full block: the collection
        // simply restarts after a load.
        for &st in self.blocks.states() {
            f.u8(if st == BlockState::Victim as u8 {
                BlockState::Full as u8
            } else {
                st
            })?;
        }
        for &t in self.blocks.last_writes() {
            f.u64(t)?;
        }
        f.u32(self.geo.dies)?;
        for d in 0..self.geo.dies as usize {
            f.wp(self.blocks.wp(Stream::Host, d))?;
            f.wp(self.blocks.wp(Stream::Gc, d))?;
            let free = self.blocks.free_list(d);
            f.u32(free.len() as u32)?;
            for &b in free {
                f.u32(b)?;
            }
        }

        // The mapping table, chunk by chunk.
        let t = self.mapping.forward();
        let width = t.width() as usize;
        let words = t.data_words();
        let mut runs = Vec::new();
        let mut bytes = Vec::new();
        for (c, lo) in (0..t.len()).step_by(CHUNK).enumerate() {
            let hi = (lo + CHUNK).min(t.len());
            let w0 = c * CHUNK / 64 * width;
            let chunk_words = &words[w0..(w0 + CHUNK / 64 * width).min(words.len())];
            if chunk_words.iter().all(|&x| x == 0) {
                f.u8(TAG_UNMAPPED)?;
            } else if encode_runs(t, lo, hi, chunk_words.len() * 8, &mut runs) {
                f.u8(TAG_RUNS)?;
                f.put(&runs)?;
            } else {
                f.u8(TAG_PACKED)?;
                bytes.clear();
                for x in chunk_words {
                    bytes.extend_from_slice(&x.to_le_bytes());
                }
                f.put(&bytes)?;
            }
        }
        self.save_period(&mut f)?;
        f.finish()?;
        Ok(())
    }

    /// Format 3's tail: the period mechanisms' state.
    fn save_period<W: Write>(&self, f: &mut FrameWriter<W>) -> io::Result<()> {
        if self.slc.enabled() {
            let flags: Vec<u8> = self.slc.flags().iter().map(|&m| m as u8).collect();
            f.put(&flags)?;
        }
        if self.reduction.enabled() {
            let (slots, sizes) = self.reduction.tables();
            for &c in slots {
                f.u32(c)?;
            }
            f.put(sizes)?;
        }
        if self.geo.deferred_release {
            let (words, queue, credit) = self.release.saved();
            for &w in words {
                f.u64(w)?;
            }
            f.u32(queue.len() as u32)?;
            for &(lo, hi) in queue {
                f.u64(lo)?;
                f.u64(hi)?;
            }
            f.u64(credit.to_bits())?;
        }
        if let MappingScheme::Hybrid(hybrid) = &self.scheme {
            let (data, dirty) = hybrid.saved_tables();
            for &d in data {
                f.u32(d)?;
            }
            let dirty: Vec<u8> = dirty.iter().map(|&d| d as u8).collect();
            f.put(&dirty)?;
            f.u32(hybrid.log_count() as u32)?;
            for li in hybrid.order() {
                let Some(l) = hybrid.log_if_used(li) else {
                    return Err(io::Error::other("hybrid: merge order names an unused log"));
                };
                f.u32(l.physical_sb())?;
                f.u32(l.next())?;
                f.u8(l.seq() as u8)?;
                f.u8((hybrid.random_log() == li) as u8)?;
                f.u32(l.logical_sbs().len() as u32)?;
                for &x in l.logical_sbs() {
                    f.u32(x)?;
                }
            }
        }
        Ok(())
    }

    /// Load a state saved by [`Ssd::save`] for a drive with `profile`'s
    /// geometry. Refuses (never silently resets) a damaged or foreign file.
    pub fn load<R: Read>(profile: &Profile, mut r: R) -> Result<Ssd, PersistError> {
        let mut head = [0u8; 16];
        read_full(&mut r, &mut head, "header")?;
        if &head[..8] != MAGIC {
            return Err(corrupt("not a vssd drive state (bad magic)"));
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        let crc = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
        if crc != crc32fast::hash(&head[..12]) {
            // Version 1 had no header checksum: its bytes 12..16 are data.
            if version == 1 {
                return Err(PersistError::Version {
                    found: 1,
                    expected: VERSION,
                });
            }
            return Err(corrupt("header checksum mismatch"));
        }
        // Format 2 (no period state) still loads for a drive that has none.
        let v2 = version == 2 && !needs_v3(profile);
        if version != VERSION && !v2 {
            return Err(PersistError::Version {
                found: version,
                expected: VERSION,
            });
        }

        let mut f = FrameReader::new(r);
        let n = f.u32()? as usize;
        if n > GEOMETRY_MAX {
            return Err(corrupt("geometry text too long"));
        }
        let mut geometry = vec![0u8; n];
        f.take(&mut geometry)?;
        let expected = geometry_text(profile)?;
        if geometry != expected.as_bytes() {
            return Err(PersistError::ProfileMismatch(differences(
                "geometry",
                &String::from_utf8_lossy(&geometry),
                &expected,
            )));
        }
        if !v2 {
            let n = f.u32()? as usize;
            if n > GEOMETRY_MAX {
                return Err(corrupt("profile text too long"));
            }
            let mut text = vec![0u8; n];
            f.take(&mut text)?;
            let expected = period_text(profile)?;
            if text != expected.as_bytes() {
                return Err(PersistError::ProfileMismatch(differences(
                    "mapping, reduction and SLC cache",
                    &String::from_utf8_lossy(&text),
                    &expected,
                )));
            }
        }
        let seed = f.u64()?;
        let mut ssd = Ssd::new(profile, seed);
        let g = ssd.geo.clone();
        let cursor = f.u32()?;
        // Format 2 had 16 counters; format 3 files have 24 or more (a
        // counter added later reads as 0 from an older file).
        let ntally = if v2 { 16 } else { f.u32()? as usize };
        if if v2 {
            ntally != 16
        } else {
            !(24..=TALLY_FIELDS).contains(&ntally)
        } {
            return Err(corrupt("unexpected number of counters"));
        }
        let mut tally = [0u64; TALLY_FIELDS];
        for v in tally.iter_mut().take(ntally) {
            *v = f.u64()?;
        }
        let nblocks = ssd.blocks.count();
        if f.u32()? as usize != nblocks {
            return Err(corrupt("block count does not match the geometry"));
        }
        let mut erase_count = vec![0u32; nblocks];
        for e in &mut erase_count {
            *e = f.u32()?;
        }
        let mut state = vec![0u8; nblocks];
        for s in &mut state {
            *s = f.u8()?;
            let ok = match BlockState::from_u8(*s) {
                Some(BlockState::Free | BlockState::Open | BlockState::Full) => true,
                Some(BlockState::Mapped) => g.hybrid,
                // Which blocks are retired is checked against the geometry below.
                Some(BlockState::Retired) => true,
                _ => false,
            };
            if !ok {
                return Err(corrupt("unknown block state"));
            }
        }
        let mut last_write = vec![0u64; nblocks];
        for t in &mut last_write {
            *t = f.u64()?;
        }
        if f.u32()? != g.dies {
            return Err(corrupt("die count does not match the geometry"));
        }
        let mut write_points = Vec::with_capacity(g.dies as usize);
        let mut free = Vec::with_capacity(g.dies as usize);
        for d in 0..g.dies as usize {
            let host = f.wp(v2)?;
            let gc = f.wp(v2)?;
            for wp in [host, gc] {
                let inside = wp.block() == NONE
                    || ((wp.block() as usize) < nblocks
                        && g.die_of_block(wp.block()) as usize == d
                        && wp.page() < g.pages_per_block
                        && wp.slot() < g.units_per_dpage);
                if !inside {
                    return Err(corrupt("write point outside its die"));
                }
            }
            write_points.push([host, gc]);
            let n = f.u32()?;
            if n > g.blocks_per_die {
                return Err(corrupt("free list longer than a die"));
            }
            let mut list = VecDeque::with_capacity(n as usize);
            for _ in 0..n {
                let b = f.u32()?;
                if b as usize >= nblocks || g.die_of_block(b) as usize != d {
                    return Err(corrupt("free list names a block of another die"));
                }
                list.push_back(b);
            }
            free.push(list);
        }
        if cursor >= g.dies {
            return Err(corrupt("write cursor outside the geometry"));
        }
        ssd.blocks.restore(SavedBlocks {
            erase_count,
            state,
            last_write,
            write_points,
            free,
            cursor,
        });
        ssd.tally = tally_from(&tally);
        let mut forward = PackedVec::new(g.logical_units as usize, g.physical_units);
        let chunks = read_mapping(&mut f, &mut forward, g.physical_units)?;
        if !v2 {
            ssd.load_period(&mut f)?;
        }
        f.finish()?;

        // The reverse map, valid counts and mapped units follow from the
        // mapping table (only chunks with mapped units need a look); two
        // units at one physical place is damage. This makes the mapping
        // consistent by construction: what is left to check is the rest.
        let blocks = &mut ssd.blocks;
        ssd.mapping
            .restore(forward, &chunks, CHUNK, |ppn| {
                blocks.add_valid(g.block_of_ppn(ppn))
            })
            .map_err(corrupt)?;
        ssd.blocks.rebuild_buckets(&g);
        // A restarted drive's map cache is empty; a translation page is in
        // NAND where it maps something.
        if ssd.map_cache.enabled() {
            let per = ssd.map_cache.units_per_tpage();
            let mapped = super::map_cache::mapped_tpages(&ssd.mapping, per);
            ssd.map_cache.restore(mapped.into_iter());
        }
        ssd.check_shapes()
            .and_then(|()| ssd.check_blocks())
            .and_then(|()| ssd.check_period())
            .map_err(|e| corrupt(format!("inconsistent FTL state: {e}")))?;
        Ok(ssd)
    }
}

impl Ssd {
    /// Format 3's tail (see [`Ssd::save_period`]); checked afterwards by
    /// the invariants.
    fn load_period<R: Read>(&mut self, f: &mut FrameReader<R>) -> Result<(), PersistError> {
        let nblocks = self.blocks.count();
        if self.slc.enabled() {
            let mut flags = vec![0u8; nblocks];
            f.take(&mut flags)?;
            if flags.iter().any(|&x| x > 1) {
                return Err(corrupt("bad SLC flag"));
            }
            self.slc.restore(flags.iter().map(|&x| x == 1).collect());
        }
        if self.reduction.enabled() {
            let mut slots = vec![0u32; nblocks];
            for c in &mut slots {
                *c = f.u32()?;
                if *c > self.geo.units_per_block {
                    return Err(corrupt("block slot count beyond the block"));
                }
            }
            let mut sizes = vec![0u8; self.geo.logical_units as usize];
            f.take(&mut sizes)?;
            self.reduction
                .restore(slots, sizes, self.geo.units_per_block)
                .map_err(corrupt)?;
        }
        if self.geo.deferred_release {
            let mut words = vec![0u64; self.release.saved().0.len()];
            for w in &mut words {
                *w = f.u64()?;
            }
            let n = f.u32()? as u64;
            if n > self.geo.logical_units {
                return Err(corrupt("more release ranges than units"));
            }
            let mut queue = VecDeque::new();
            for _ in 0..n {
                let lo = f.u64()?;
                let hi = f.u64()?;
                queue.push_back((lo, hi));
            }
            let credit = f64::from_bits(f.u64()?);
            self.release
                .restore(&words, queue, credit)
                .map_err(corrupt)?;
        }
        if let MappingScheme::Hybrid(hybrid) = &mut self.scheme {
            let bpd = self.geo.blocks_per_die;
            let mut data = vec![0u32; hybrid.logical_sbs() as usize];
            for d in &mut data {
                *d = f.u32()?;
                if *d != NONE && *d >= bpd {
                    return Err(corrupt("data superblock outside the die"));
                }
            }
            let mut dirty = vec![0u8; bpd as usize];
            f.take(&mut dirty)?;
            if dirty.iter().any(|&x| x > 1) {
                return Err(corrupt("bad dirty flag"));
            }
            hybrid.restore_tables(data, dirty.iter().map(|&x| x == 1).collect());
            let n = f.u32()?;
            if n > bpd {
                return Err(corrupt("more log blocks than superblocks"));
            }
            let s = hybrid.sb_units();
            for _ in 0..n {
                let physical_sb = f.u32()?;
                let next = f.u32()?;
                let seq = f.u8()?;
                let rand = f.u8()?;
                let k = f.u32()?;
                if physical_sb >= bpd || next > s || seq > 1 || rand > 1 || k > s.max(1) {
                    return Err(corrupt("bad log block"));
                }
                let mut logical_sbs = Vec::with_capacity(k as usize);
                for _ in 0..k {
                    let x = f.u32()?;
                    if x >= hybrid.logical_sbs() {
                        return Err(corrupt("log block names a logical block beyond the drive"));
                    }
                    logical_sbs.push(x);
                }
                hybrid.restore_log(
                    Log::restored(physical_sb, next, seq == 1, logical_sbs),
                    rand == 1,
                );
            }
        }
        Ok(())
    }
}

/// Read the mapping table's chunks into `t` (zeroed), values at most `max`;
/// returns the indices of the chunks that may hold mapped units.
fn read_mapping<R: Read>(
    f: &mut FrameReader<R>,
    t: &mut PackedVec,
    max: u64,
) -> Result<Vec<usize>, PersistError> {
    let mut mapped = Vec::new();
    let width = t.width() as usize;
    let len = t.len();
    let mut bytes = Vec::new();
    for (c, lo) in (0..len).step_by(CHUNK).enumerate() {
        let hi = (lo + CHUNK).min(len);
        let tag = f.u8()?;
        if tag != TAG_UNMAPPED {
            mapped.push(c);
        }
        match tag {
            TAG_UNMAPPED => {}
            TAG_RUNS => {
                let mut i = lo;
                while i < hi {
                    let n = f.varint()?;
                    let first = f.varint()?;
                    if n == 0 || n > (hi - i) as u64 {
                        return Err(corrupt("mapping run of a bad length"));
                    }
                    if first != 0 {
                        if first.checked_add(n - 1).is_none_or(|last| last > max) {
                            return Err(corrupt("mapping run outside the NAND"));
                        }
                        for k in 0..n {
                            t.set(i + k as usize, first + k);
                        }
                    }
                    i += n as usize;
                }
            }
            TAG_PACKED => {
                let words = t.data_words_mut();
                let w0 = c * CHUNK / 64 * width;
                let w1 = (w0 + CHUNK / 64 * width).min(words.len());
                bytes.resize((w1 - w0) * 8, 0);
                f.take(&mut bytes)?;
                for (w, b) in words[w0..w1].iter_mut().zip(bytes.chunks_exact(8)) {
                    let mut le = [0u8; 8];
                    le.copy_from_slice(b);
                    *w = u64::from_le_bytes(le);
                }
            }
            _ => return Err(corrupt("unknown mapping chunk")),
        }
    }
    t.clear_tail();
    Ok(mapped)
}

#[cfg(test)]
mod tests;

/// What differs between a saved and the current profile text (`key =
/// value` lines): the keys that differ with both values, the capacity
/// first, rather than both texts whole.
fn differences(what: &str, saved: &str, now: &str) -> String {
    let pairs = |t: &str| -> Vec<(String, String)> {
        t.lines()
            .filter_map(|l| l.split_once(" = "))
            .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
            .collect()
    };
    let (old, new) = (pairs(saved), pairs(now));
    let value = |list: &[(String, String)], k: &str| {
        list.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    let mut keys: Vec<&str> = old.iter().chain(&new).map(|(k, _)| k.as_str()).collect();
    keys.dedup();
    let mut seen = std::collections::BTreeSet::new();
    keys.retain(|k| seen.insert(*k));
    let mut diffs: Vec<String> = keys
        .iter()
        .filter_map(|k| {
            let (a, b) = (value(&old, k), value(&new, k));
            (a != b).then(|| {
                format!(
                    "{k}: saved {}, now {}",
                    a.as_deref().unwrap_or("(absent)"),
                    b.as_deref().unwrap_or("(absent)")
                )
            })
        })
        .collect();
    if diffs.is_empty() {
        diffs.push("the texts differ in layout".into());
    }
    let cap = (
        value(&old, "exported_capacity"),
        value(&new, "exported_capacity"),
    );
    let lead = match cap {
        (Some(a), Some(b)) if a != b => {
            format!(
                "it was saved at capacity {a} and this drive is {b} (--capacity {a} loads it); "
            )
        }
        _ => String::new(),
    };
    format!("{lead}{what} differs: {}", diffs.join("; "))
}
