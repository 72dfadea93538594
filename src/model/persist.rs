//! Saving and loading the FTL state (`vssd serve --state-dir`).
//!
//! Format version 2, all integers little-endian:
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

use super::packed::PackedVec;
use super::ssd::{BlockState, NONE, Raw, Ssd};
use super::write_point::{Stream, WritePoint};
use crate::profile::Profile;

const MAGIC: &[u8; 8] = b"VSSDFTL\0";
const VERSION: u32 = 2;
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

fn corrupt(what: impl Into<String>) -> PersistError {
    PersistError::Corrupt(what.into())
}

fn frame_crc(index: u32, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&index.to_le_bytes());
    h.update(&(payload.len() as u32).to_le_bytes());
    h.update(payload);
    h.finalize()
}

// ------------------------------------------------------------------ writing

/// Cuts a byte stream into checksummed frames.
struct FrameWriter<W: Write> {
    inner: W,
    index: u32,
    buf: Vec<u8>,
}

impl<W: Write> FrameWriter<W> {
    fn new(inner: W) -> FrameWriter<W> {
        FrameWriter {
            inner,
            index: 0,
            buf: Vec::with_capacity(FRAME_MAX),
        }
    }

    fn emit(&mut self, n: usize) -> io::Result<()> {
        let crc = frame_crc(self.index, &self.buf[..n]);
        self.inner.write_all(&(n as u32).to_le_bytes())?;
        self.inner.write_all(&self.buf[..n])?;
        self.inner.write_all(&crc.to_le_bytes())?;
        self.buf.drain(..n);
        self.index = self
            .index
            .checked_add(1)
            .ok_or_else(|| io::Error::other("drive state too large"))?;
        Ok(())
    }

    fn put(&mut self, mut b: &[u8]) -> io::Result<()> {
        while !b.is_empty() {
            let k = (FRAME_MAX - self.buf.len()).min(b.len());
            self.buf.extend_from_slice(&b[..k]);
            b = &b[k..];
            if self.buf.len() == FRAME_MAX {
                self.emit(FRAME_MAX)?;
            }
        }
        Ok(())
    }

    fn u8(&mut self, v: u8) -> io::Result<()> {
        self.put(&[v])
    }

    fn u32(&mut self, v: u32) -> io::Result<()> {
        self.put(&v.to_le_bytes())
    }

    fn u64(&mut self, v: u64) -> io::Result<()> {
        self.put(&v.to_le_bytes())
    }

    fn wp(&mut self, wp: &WritePoint) -> io::Result<()> {
        self.u32(wp.block)?;
        self.u32(wp.page)?;
        self.u32(wp.slot)
    }

    /// Write the last data frame and the end frame.
    fn finish(mut self) -> io::Result<W> {
        if !self.buf.is_empty() {
            self.emit(self.buf.len())?;
        }
        self.emit(0)?;
        self.inner.flush()?;
        Ok(self.inner)
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Encode entries `lo..hi` of `t` as runs into `out`; false as soon as that
/// takes `limit` bytes or more (the packed form is then smaller).
fn encode_runs(t: &PackedVec, lo: usize, hi: usize, limit: usize, out: &mut Vec<u8>) -> bool {
    out.clear();
    let mut i = lo;
    while i < hi {
        let first = t.get(i);
        let mut j = i + 1;
        if first == 0 {
            while j < hi && t.get(j) == 0 {
                j += 1;
            }
        } else {
            while j < hi && t.get(j) == first + (j - i) as u64 {
                j += 1;
            }
        }
        put_varint(out, (j - i) as u64);
        put_varint(out, first);
        if out.len() >= limit {
            return false;
        }
        i = j;
    }
    true
}

// ------------------------------------------------------------------ reading

/// Reads the byte stream back, verifying each frame before handing out
/// any of its bytes.
struct FrameReader<R: Read> {
    inner: R,
    index: u32,
    buf: Vec<u8>,
    pos: usize,
}

fn read_full<R: Read>(r: &mut R, b: &mut [u8], what: &str) -> Result<(), PersistError> {
    r.read_exact(b).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            corrupt(format!("file is truncated ({what})"))
        } else {
            PersistError::Io(e)
        }
    })
}

impl<R: Read> FrameReader<R> {
    fn new(inner: R) -> FrameReader<R> {
        FrameReader {
            inner,
            index: 0,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// Read and verify the next frame; returns its length (0: the end frame).
    fn next_frame(&mut self) -> Result<usize, PersistError> {
        let mut len = [0u8; 4];
        read_full(&mut self.inner, &mut len, "frame header")?;
        let n = u32::from_le_bytes(len) as usize;
        if n > FRAME_MAX {
            return Err(corrupt(format!("frame {} has a bad length", self.index)));
        }
        self.buf.resize(n, 0);
        read_full(&mut self.inner, &mut self.buf, "frame")?;
        let mut crc = [0u8; 4];
        read_full(&mut self.inner, &mut crc, "frame checksum")?;
        if u32::from_le_bytes(crc) != frame_crc(self.index, &self.buf) {
            return Err(corrupt(format!(
                "checksum mismatch in frame {}",
                self.index
            )));
        }
        self.index = self.index.wrapping_add(1);
        self.pos = 0;
        Ok(n)
    }

    fn take(&mut self, out: &mut [u8]) -> Result<(), PersistError> {
        let mut done = 0;
        while done < out.len() {
            if self.pos == self.buf.len() && self.next_frame()? == 0 {
                return Err(corrupt("the state ends early"));
            }
            let k = (self.buf.len() - self.pos).min(out.len() - done);
            out[done..done + k].copy_from_slice(&self.buf[self.pos..self.pos + k]);
            self.pos += k;
            done += k;
        }
        Ok(())
    }

    fn u8(&mut self) -> Result<u8, PersistError> {
        let mut b = [0u8; 1];
        self.take(&mut b)?;
        Ok(b[0])
    }

    fn u32(&mut self) -> Result<u32, PersistError> {
        let mut b = [0u8; 4];
        self.take(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, PersistError> {
        let mut b = [0u8; 8];
        self.take(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn varint(&mut self) -> Result<u64, PersistError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            let bits = (b & 0x7f) as u64;
            if shift == 63 && bits > 1 {
                break;
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(corrupt("bad variable-length integer"))
    }

    fn wp(&mut self) -> Result<WritePoint, PersistError> {
        Ok(WritePoint {
            block: self.u32()?,
            page: self.u32()?,
            slot: self.u32()?,
            ready_ns: 0,
        })
    }

    /// The stream must end exactly here: the end frame, then end of file.
    fn finish(mut self) -> Result<(), PersistError> {
        if self.pos != self.buf.len() || self.next_frame()? != 0 {
            return Err(corrupt("more data than the drive's geometry holds"));
        }
        let mut extra = [0u8; 1];
        loop {
            match self.inner.read(&mut extra) {
                Ok(0) => return Ok(()),
                Ok(_) => return Err(corrupt("trailing data after the end of the state")),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(PersistError::Io(e)),
            }
        }
    }
}

// ---------------------------------------------------------------- contents

fn geometry_text(p: &Profile) -> io::Result<String> {
    toml::to_string(&p.geometry).map_err(io::Error::other)
}

fn raw_fields(r: &Raw) -> [u64; 16] {
    [
        r.host_read_bytes,
        r.host_written_bytes,
        r.host_trimmed_bytes,
        r.host_read_cmds,
        r.host_write_cmds,
        r.host_trim_cmds,
        r.host_flush_cmds,
        r.nand_pages_read,
        r.nand_pages_programmed,
        r.nand_bytes_programmed,
        r.erases,
        r.gc_copies,
        r.fg_gc_victims,
        r.bg_gc_victims,
        r.rmw_reads,
        r.buffer_stall_ns,
    ]
}

fn raw_from(f: &[u64; 16]) -> Raw {
    Raw {
        host_read_bytes: f[0],
        host_written_bytes: f[1],
        host_trimmed_bytes: f[2],
        host_read_cmds: f[3],
        host_write_cmds: f[4],
        host_trim_cmds: f[5],
        host_flush_cmds: f[6],
        nand_pages_read: f[7],
        nand_pages_programmed: f[8],
        nand_bytes_programmed: f[9],
        erases: f[10],
        gc_copies: f[11],
        fg_gc_victims: f[12],
        bg_gc_victims: f[13],
        rmw_reads: f[14],
        buffer_stall_ns: f[15],
    }
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
        f.u64(self.seed)?;
        f.u32(self.cursor)?;
        for v in raw_fields(&self.raw) {
            f.u64(v)?;
        }
        let nblocks = self.valid.len();
        f.u32(nblocks as u32)?;
        for &e in &self.erase_count {
            f.u32(e)?;
        }
        // A victim being collected is saved as a full block: the collection
        // simply restarts after a load.
        for &st in &self.state {
            f.u8(if st == BlockState::Victim as u8 {
                BlockState::Full as u8
            } else {
                st
            })?;
        }
        for &t in &self.last_write {
            f.u64(t)?;
        }
        f.u32(self.free.len() as u32)?;
        for d in 0..self.free.len() {
            f.wp(self.wp(Stream::Host, d))?;
            f.wp(self.wp(Stream::Gc, d))?;
            f.u32(self.free[d].len() as u32)?;
            for &b in &self.free[d] {
                f.u32(b)?;
            }
        }

        // The mapping table, chunk by chunk.
        let t = &self.l2p;
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
        f.finish()?;
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
        if version != VERSION {
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
            return Err(PersistError::ProfileMismatch(format!(
                "saved geometry:\n{}\ncurrent geometry:\n{}",
                String::from_utf8_lossy(&geometry),
                expected
            )));
        }
        let seed = f.u64()?;
        let mut ssd = Ssd::new(profile, seed);
        let g = ssd.geo.clone();
        let cursor = f.u32()?;
        let mut raw = [0u64; 16];
        for v in &mut raw {
            *v = f.u64()?;
        }
        let nblocks = ssd.valid.len();
        if f.u32()? as usize != nblocks {
            return Err(corrupt("block count does not match the geometry"));
        }
        for e in &mut ssd.erase_count {
            *e = f.u32()?;
        }
        for s in &mut ssd.state {
            *s = f.u8()?;
            if !matches!(
                BlockState::from_u8(*s),
                Some(BlockState::Free | BlockState::Open | BlockState::Full)
            ) {
                return Err(corrupt("unknown block state"));
            }
        }
        for t in &mut ssd.last_write {
            *t = f.u64()?;
        }
        if f.u32()? != g.dies {
            return Err(corrupt("die count does not match the geometry"));
        }
        for d in 0..g.dies as usize {
            let host = f.wp()?;
            let gc = f.wp()?;
            for wp in [host, gc] {
                let inside = wp.block == NONE
                    || ((wp.block as usize) < nblocks
                        && g.die_of_block(wp.block) as usize == d
                        && wp.page < g.pages_per_block
                        && wp.slot < g.units_per_dpage);
                if !inside {
                    return Err(corrupt("write point outside its die"));
                }
            }
            ssd.wps[d] = [host, gc];
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
            ssd.free[d] = list;
        }
        if cursor >= g.dies {
            return Err(corrupt("write cursor outside the geometry"));
        }
        ssd.cursor = cursor;
        ssd.raw = raw_from(&raw);
        let chunks = read_mapping(&mut f, &mut ssd.l2p, g.physical_units)?;
        f.finish()?;

        // The reverse map, valid counts and mapped units follow from the
        // mapping table (only chunks with mapped units need a look); two
        // units at one physical place is damage. This makes the mapping
        // consistent by construction: what is left to check is the rest.
        let (l2p, p2l, valid) = (&ssd.l2p, &mut ssd.p2l, &mut ssd.valid);
        let mut mapped = 0u64;
        for c in chunks {
            let lo = c * CHUNK;
            for lpn in lo..(lo + CHUNK).min(l2p.len()) {
                let e = l2p.get(lpn);
                if e == 0 {
                    continue;
                }
                let ppn = e - 1;
                if ppn >= g.physical_units {
                    return Err(corrupt(format!("unit {lpn} maps outside the NAND")));
                }
                if p2l.get(ppn as usize) != 0 {
                    return Err(corrupt(format!("two units map to physical unit {ppn}")));
                }
                p2l.set(ppn as usize, lpn as u64 + 1);
                valid[g.block_of_ppn(ppn) as usize] += 1;
                mapped += 1;
            }
        }
        ssd.mapped_units = mapped;
        ssd.rebuild_buckets();
        // Block ages are relative to the old run's clock; restart them at 0.
        let base = ssd.last_write.iter().copied().max().unwrap_or(0);
        for t in &mut ssd.last_write {
            *t = t.saturating_sub(base);
        }
        ssd.check_shapes()
            .and_then(|()| ssd.check_blocks())
            .map_err(|e| corrupt(format!("inconsistent FTL state: {e}")))?;
        Ok(ssd)
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
mod tests {
    use super::*;
    use crate::model::proptests::tiny;
    use crate::model::{Op, Payload, Precondition, Request};

    fn small() -> Profile {
        Profile::load("sata-mlc-2011")
            .unwrap()
            .with_capacity(256 << 20)
            .unwrap()
    }

    fn saved(ssd: &Ssd) -> Vec<u8> {
        let mut buf = Vec::new();
        ssd.save(&mut buf).unwrap();
        buf
    }

    /// The model state a save keeps (timelines are not saved).
    fn same_ftl(a: &Ssd, b: &Ssd) {
        assert_eq!(a.counters(), b.counters());
        assert_eq!(a.l2p, b.l2p);
        assert_eq!(a.p2l, b.p2l);
        assert_eq!(a.valid, b.valid);
        assert_eq!(a.erase_count, b.erase_count);
        assert_eq!(a.free, b.free);
        assert_eq!(a.wps.len(), b.wps.len());
        for (x, y) in a.wps.iter().flatten().zip(b.wps.iter().flatten()) {
            assert_eq!((x.block, x.page, x.slot), (y.block, y.page, y.slot));
        }
        assert_eq!(a.cursor, b.cursor);
        assert_eq!(a.seed, b.seed);
    }

    #[test]
    fn roundtrip_keeps_mapping_and_counters() {
        let p = small();
        let mut ssd = Ssd::new(&p, 7);
        let end = ssd.precondition(
            0,
            &Precondition::Random {
                bs: 4096,
                amount: 600 << 20,
            },
            1,
        );
        ssd.submit(
            end,
            &Request {
                op: Op::Trim,
                offset: 0,
                len: 1 << 20,
                payload: Payload::Unknown,
            },
        )
        .unwrap();
        let buf = saved(&ssd);
        let back = Ssd::load(&p, &buf[..]).unwrap();
        same_ftl(&back, &ssd);
        back.check_invariants().unwrap();
        // Loading rebases block ages; from then on a save and a load
        // change nothing.
        let again = saved(&back);
        assert_eq!(saved(&Ssd::load(&p, &again[..]).unwrap()), again);
    }

    #[test]
    fn fresh_and_sequential_states_are_small() {
        let p = small();
        let mut ssd = Ssd::new(&p, 7);
        let fresh = saved(&ssd).len();
        ssd.precondition(0, &Precondition::FillSequential { bs: 1 << 20 }, 1);
        let full = saved(&ssd).len();
        let table = ssd.l2p.data_words().len() * 8;
        assert!(fresh < 2 * ssd.valid.len() * 13 + 4096, "{fresh}");
        // Runs are one dpage long (host dpages stripe over the dies).
        assert!(full < table * 2 / 3, "{full} vs table {table}");
        let back = Ssd::load(&p, &saved(&ssd)[..]).unwrap();
        same_ftl(&back, &ssd);
        back.check_invariants().unwrap();
    }

    fn used_tiny() -> (Profile, Ssd) {
        let p = tiny("8KiB", "4KiB", 2, "128KiB", "greedy", 5.0);
        let mut ssd = Ssd::new(&p, 1);
        let end = ssd.precondition(
            0,
            &Precondition::Random {
                bs: 4096,
                amount: ssd.capacity() * 2,
            },
            9,
        );
        // Some unmapped stretches too.
        ssd.submit(
            end,
            &Request {
                op: Op::Trim,
                offset: 64 << 10,
                len: 64 << 10,
                payload: Payload::Unknown,
            },
        )
        .unwrap();
        (p, ssd)
    }

    #[test]
    fn every_flipped_byte_is_reported_as_damage() {
        let (p, ssd) = used_tiny();
        let buf = saved(&ssd);
        assert!(buf.len() < 4000, "{}", buf.len());
        for i in 0..buf.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = buf.clone();
                bad[i] ^= bit;
                match Ssd::load(&p, &bad[..]) {
                    Err(PersistError::Corrupt(_)) => {}
                    other => panic!("byte {i} ^ {bit:#x}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn truncation_and_trailing_data_are_damage() {
        let (p, ssd) = used_tiny();
        let buf = saved(&ssd);
        for n in 0..buf.len() {
            assert!(
                matches!(Ssd::load(&p, &buf[..n]), Err(PersistError::Corrupt(_))),
                "truncated to {n}"
            );
        }
        for extra in [&[0u8][..], b"x", &[0, 0, 0, 0], &buf[16..]] {
            let mut long = buf.clone();
            long.extend_from_slice(extra);
            assert!(
                matches!(Ssd::load(&p, &long[..]), Err(PersistError::Corrupt(_))),
                "{} trailing bytes",
                extra.len()
            );
        }
        // A frame dropped or repeated (each frame's checksum covers its index).
        let frames = {
            let mut v = Vec::new();
            let mut at = 16;
            while at < buf.len() {
                let n = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
                v.push(at..at + 8 + n);
                at += 8 + n;
            }
            v
        };
        assert!(frames.len() >= 2);
        let mut dup = buf[..frames[1].end].to_vec();
        dup.extend_from_slice(&buf[frames[1].clone()]);
        dup.extend_from_slice(&buf[frames[1].end..]);
        assert!(matches!(
            Ssd::load(&p, &dup[..]),
            Err(PersistError::Corrupt(_))
        ));
        let mut dropped = buf[..frames[0].start].to_vec();
        dropped.extend_from_slice(&buf[frames[0].end..]);
        assert!(matches!(
            Ssd::load(&p, &dropped[..]),
            Err(PersistError::Corrupt(_))
        ));
        assert!(matches!(
            Ssd::load(&p, &b"garbage"[..]),
            Err(PersistError::Corrupt(_))
        ));
    }

    #[test]
    fn another_profile_and_other_versions_are_named() {
        let p = small();
        let mut ssd = Ssd::new(&p, 7);
        ssd.precondition(0, &Precondition::FillSequential { bs: 1 << 20 }, 1);
        let buf = saved(&ssd);
        let other = Profile::load("sata-mlc-2011")
            .unwrap()
            .with_capacity(1 << 30)
            .unwrap();
        assert!(matches!(
            Ssd::load(&other, &buf[..]),
            Err(PersistError::ProfileMismatch(_))
        ));
        // An intact header of another version.
        let mut v3 = buf.clone();
        v3[8] = 3;
        let crc = crc32fast::hash(&v3[..12]);
        v3[12..16].copy_from_slice(&crc.to_le_bytes());
        let e = Ssd::load(&p, &v3[..]).unwrap_err();
        assert!(matches!(e, PersistError::Version { found: 3, .. }), "{e}");
        assert!(e.to_string().contains("newer"), "{e}");
        // A version 1 file (no header checksum).
        let mut v1 = b"VSSDFTL\0".to_vec();
        v1.extend_from_slice(&1u32.to_le_bytes());
        v1.extend_from_slice(&[0x99; 64]);
        let e = Ssd::load(&p, &v1[..]).unwrap_err();
        assert!(matches!(e, PersistError::Version { found: 1, .. }), "{e}");
        assert!(e.to_string().contains("older vssd"), "{e}");
    }

    /// Re-frame a stream of contents as `save` would (for crafted states).
    fn framed(contents: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        let crc = crc32fast::hash(&out[..12]);
        out.extend_from_slice(&crc.to_le_bytes());
        let mut f = FrameWriter::new(out);
        f.put(contents).unwrap();
        f.finish().unwrap()
    }

    /// The contents stream of a saved state (frames joined).
    fn contents(buf: &[u8]) -> Vec<u8> {
        let mut r = FrameReader::new(&buf[16..]);
        let mut out = Vec::new();
        while r.next_frame().unwrap() > 0 {
            out.extend_from_slice(&r.buf);
        }
        out
    }

    #[test]
    fn checksummed_but_inconsistent_states_are_refused() {
        let (p, ssd) = used_tiny();
        let buf = saved(&ssd);
        let c = contents(&buf);
        assert_eq!(framed(&c), buf, "test framing matches save");
        // Change every byte after the geometry in turn, framed properly:
        // the load must refuse it as damage or accept a consistent state,
        // and never panic.
        let geo_end = 4 + u32::from_le_bytes(c[..4].try_into().unwrap()) as usize;
        let mut accepted = 0;
        for i in geo_end..c.len() {
            for v in [c[i] ^ 0x01, c[i] ^ 0x10, 0xff] {
                let mut bad = c.clone();
                bad[i] = v;
                match Ssd::load(&p, &framed(&bad)[..]) {
                    Err(PersistError::Corrupt(_)) => {}
                    Ok(s) => {
                        s.check_invariants().unwrap();
                        accepted += 1;
                    }
                    Err(e) => panic!("byte {i} = {v:#x}: {e}"),
                }
            }
        }
        // Counters, erase counts and ages may take any value.
        assert!(accepted > 0);
    }
}
