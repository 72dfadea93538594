//! Saving and loading the FTL state (`vssd serve --state-dir`).
//!
//! Layout: magic `VSSDFTL\0`, format version (u32 LE), then a body, then the
//! CRC-32 of the body (u32 LE). The body holds the profile's geometry (as
//! TOML, compared on load), the mapping tables, the block table, free lists,
//! write points and cumulative counters, all little-endian. Timelines are not
//! saved: a loaded drive starts idle.

use std::io::{self, Read, Write};

use thiserror::Error;

use super::packed::PackedVec;
use super::ssd::{BlockState, Raw, Ssd};
use super::write_point::{Stream, WritePoint};
use crate::profile::Profile;

const MAGIC: &[u8; 8] = b"VSSDFTL\0";
const VERSION: u32 = 1;

/// Errors loading a saved drive state.
#[derive(Debug, Error)]
pub enum PersistError {
    /// Reading the state failed.
    #[error("I/O error reading drive state: {0}")]
    Io(#[from] std::io::Error),
    /// Checksum, magic or structure is wrong.
    #[error("drive state is damaged: {0}")]
    Corrupt(String),
    /// Saved by a drive with another profile or geometry.
    #[error("drive state was saved with a different profile: {0}")]
    ProfileMismatch(String),
    /// Saved by another format version.
    #[error("drive state format version {found} is not supported (expected {expected})")]
    Version {
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
}

struct CrcWriter<W: Write> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> CrcWriter<W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.crc.update(b);
        self.inner.write_all(b)
    }
    fn u64(&mut self, v: u64) -> io::Result<()> {
        self.put(&v.to_le_bytes())
    }
    fn u64s(&mut self, v: &[u64]) -> io::Result<()> {
        self.u64(v.len() as u64)?;
        let mut buf = Vec::with_capacity(8 * 8192);
        for chunk in v.chunks(8192) {
            buf.clear();
            for x in chunk {
                buf.extend_from_slice(&x.to_le_bytes());
            }
            self.put(&buf)?;
        }
        Ok(())
    }
    fn u32s(&mut self, v: &[u32]) -> io::Result<()> {
        self.u64(v.len() as u64)?;
        let mut buf = Vec::with_capacity(4 * v.len().min(16384));
        for chunk in v.chunks(16384) {
            buf.clear();
            for x in chunk {
                buf.extend_from_slice(&x.to_le_bytes());
            }
            self.put(&buf)?;
        }
        Ok(())
    }
    fn bytes(&mut self, v: &[u8]) -> io::Result<()> {
        self.u64(v.len() as u64)?;
        self.put(v)
    }
    fn wp(&mut self, wp: &WritePoint) -> io::Result<()> {
        self.u64(wp.block as u64)?;
        self.u64(wp.page as u64)?;
        self.u64(wp.slot as u64)
    }
}

struct CrcReader<R: Read> {
    inner: R,
    crc: crc32fast::Hasher,
}

fn corrupt(what: &str) -> PersistError {
    PersistError::Corrupt(what.to_string())
}

impl<R: Read> CrcReader<R> {
    fn take(&mut self, b: &mut [u8]) -> Result<(), PersistError> {
        self.inner.read_exact(b).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                corrupt("file is truncated")
            } else {
                PersistError::Io(e)
            }
        })?;
        self.crc.update(b);
        Ok(())
    }
    fn u64(&mut self) -> Result<u64, PersistError> {
        let mut b = [0u8; 8];
        self.take(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn len(&mut self, expected: usize, what: &str) -> Result<usize, PersistError> {
        let n = self.u64()?;
        if n != expected as u64 {
            return Err(corrupt(&format!(
                "{what}: {n} entries, expected {expected}"
            )));
        }
        Ok(expected)
    }
    fn u64s(&mut self, expected: usize, what: &str) -> Result<Vec<u64>, PersistError> {
        let n = self.len(expected, what)?;
        let mut out = Vec::with_capacity(n);
        let mut buf = vec![0u8; 8 * 8192];
        let mut left = n;
        while left > 0 {
            let k = left.min(8192);
            self.take(&mut buf[..8 * k])?;
            out.extend(
                buf[..8 * k]
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))),
            );
            left -= k;
        }
        Ok(out)
    }
    fn u32s(&mut self, expected: usize, what: &str) -> Result<Vec<u32>, PersistError> {
        let n = self.len(expected, what)?;
        let mut buf = vec![0u8; 4 * n];
        self.take(&mut buf)?;
        Ok(buf
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect())
    }
    fn bytes(&mut self, max: usize, what: &str) -> Result<Vec<u8>, PersistError> {
        let n = self.u64()?;
        if n > max as u64 {
            return Err(corrupt(&format!("{what}: length {n} exceeds {max}")));
        }
        let mut buf = vec![0u8; n as usize];
        self.take(&mut buf)?;
        Ok(buf)
    }
    fn wp(&mut self, ssd: &Ssd) -> Result<WritePoint, PersistError> {
        let (block, page, slot) = (self.u64()?, self.u64()?, self.u64()?);
        let g = &ssd.geo;
        let nblocks = ssd.valid.len() as u64;
        if block == super::ssd::NONE as u64 {
            return Ok(WritePoint::EMPTY);
        }
        if block >= nblocks || page >= g.pages_per_block as u64 || slot >= g.units_per_dpage as u64
        {
            return Err(corrupt("write point outside the geometry"));
        }
        Ok(WritePoint {
            block: block as u32,
            page: page as u32,
            slot: slot as u32,
            ready_ns: 0,
        })
    }
}

fn geometry_text(p: &Profile) -> String {
    toml::to_string(&p.geometry).expect("geometry serialises")
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

fn raw_from(f: &[u64]) -> Raw {
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
    /// Write the FTL state (versioned, checksummed). Timelines are not saved.
    /// Refuses (an error, nothing written) while the model is
    /// [damaged](Ssd::damaged).
    pub fn save<W: Write>(&self, w: W) -> io::Result<()> {
        if let Some(what) = self.damaged {
            return Err(io::Error::other(format!(
                "the drive model is damaged ({what}); its state is not saved"
            )));
        }
        let mut w = CrcWriter {
            inner: w,
            crc: crc32fast::Hasher::new(),
        };
        w.inner.write_all(MAGIC)?;
        w.inner.write_all(&VERSION.to_le_bytes())?;
        w.bytes(geometry_text(&self.profile).as_bytes())?;
        w.u64(self.seed)?;
        w.u64(self.cursor as u64)?;
        w.u64(self.mapped_units)?;
        w.u64s(&raw_fields(&self.raw))?;
        w.u64s(self.l2p.words())?;
        w.u64s(self.p2l.words())?;
        w.u32s(&self.valid)?;
        w.u32s(&self.erase_count)?;
        // A victim being collected is saved as a full block: the collection
        // simply restarts after a load.
        let state: Vec<u8> = self
            .state
            .iter()
            .map(|&st| {
                if st == BlockState::Victim as u8 {
                    BlockState::Full as u8
                } else {
                    st
                }
            })
            .collect();
        w.bytes(&state)?;
        w.u64s(&self.last_write)?;
        for d in 0..self.free.len() {
            let f: Vec<u32> = self.free[d].iter().copied().collect();
            w.u32s(&f)?;
            w.wp(self.wp(Stream::Host, d))?;
            w.wp(self.wp(Stream::Gc, d))?;
        }
        let crc = w.crc.clone().finalize();
        w.inner.write_all(&crc.to_le_bytes())?;
        w.inner.flush()
    }

    /// Load a state saved by [`Ssd::save`] for a drive with `profile`'s
    /// geometry. Refuses (never silently resets) a damaged or foreign file.
    pub fn load<R: Read>(profile: &Profile, r: R) -> Result<Ssd, PersistError> {
        let mut r = CrcReader {
            inner: r,
            crc: crc32fast::Hasher::new(),
        };
        let mut head = [0u8; 12];
        r.inner
            .read_exact(&mut head)
            .map_err(|_| corrupt("file is too short to be a drive state"))?;
        if &head[..8] != MAGIC {
            return Err(corrupt("not a vssd drive state (bad magic)"));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(PersistError::Version {
                found: version,
                expected: VERSION,
            });
        }
        let geo = r.bytes(1 << 16, "geometry")?;
        let expected_geo = geometry_text(profile);
        if geo != expected_geo.as_bytes() {
            return Err(PersistError::ProfileMismatch(format!(
                "saved geometry:\n{}\ncurrent geometry:\n{}",
                String::from_utf8_lossy(&geo),
                expected_geo
            )));
        }
        let seed = r.u64()?;
        let mut ssd = Ssd::new(profile, seed);
        let cursor = r.u64()?;
        let mapped = r.u64()?;
        let raw = r.u64s(16, "counters")?;
        let l2p_words = r.u64s(ssd.l2p.words().len(), "mapping table")?;
        let p2l_words = r.u64s(ssd.p2l.words().len(), "reverse map")?;
        let nblocks = ssd.valid.len();
        let valid = r.u32s(nblocks, "valid counts")?;
        let erase = r.u32s(nblocks, "erase counts")?;
        let state = r.bytes(nblocks, "block states")?;
        let last_write = r.u64s(nblocks, "block ages")?;
        let mut free = Vec::new();
        let mut wps = Vec::new();
        for d in 0..ssd.free.len() {
            let n = r.u64()?;
            if n > ssd.geo.blocks_per_die as u64 {
                return Err(corrupt("free list longer than a die"));
            }
            let mut buf = vec![0u8; 4 * n as usize];
            r.take(&mut buf)?;
            let list: std::collections::VecDeque<u32> = buf
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect();
            if list
                .iter()
                .any(|&b| b as usize >= nblocks || ssd.geo.die_of_block(b) as usize != d)
            {
                return Err(corrupt("free list names a block of another die"));
            }
            free.push(list);
            wps.push([r.wp(&ssd)?, r.wp(&ssd)?]);
        }
        let computed = r.crc.clone().finalize();
        let mut tail = [0u8; 4];
        r.inner
            .read_exact(&mut tail)
            .map_err(|_| corrupt("file is truncated (no checksum)"))?;
        if u32::from_le_bytes(tail) != computed {
            return Err(corrupt("checksum mismatch"));
        }
        if state.len() != nblocks
            || state.iter().any(|&s| {
                !matches!(
                    BlockState::from_u8(s),
                    Some(BlockState::Free | BlockState::Open | BlockState::Full)
                )
            })
        {
            return Err(corrupt("unknown block state"));
        }
        if valid.iter().any(|&v| v > ssd.geo.units_per_block) {
            return Err(corrupt("valid count larger than a block"));
        }
        if cursor >= ssd.geo.dies as u64 {
            return Err(corrupt("write cursor outside the geometry"));
        }
        ssd.l2p = PackedVec::from_words(
            l2p_words,
            ssd.geo.logical_units as usize,
            ssd.geo.physical_units,
        )
        .ok_or_else(|| corrupt("mapping table size"))?;
        ssd.p2l = PackedVec::from_words(
            p2l_words,
            ssd.geo.physical_units as usize,
            ssd.geo.logical_units,
        )
        .ok_or_else(|| corrupt("reverse map size"))?;
        ssd.valid = valid;
        ssd.erase_count = erase;
        ssd.state = state;
        ssd.last_write = last_write;
        ssd.free = free;
        ssd.wps = wps;
        ssd.cursor = cursor as u32;
        ssd.mapped_units = mapped;
        ssd.raw = raw_from(&raw);
        ssd.rebuild_buckets();
        // Block ages are relative to the old run's clock; restart them at 0.
        let base = ssd.last_write.iter().copied().max().unwrap_or(0);
        for t in &mut ssd.last_write {
            *t = t.saturating_sub(base);
        }
        ssd.check_invariants()
            .map_err(|e| corrupt(&format!("inconsistent FTL state: {e}")))?;
        Ok(ssd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Op, Payload, Precondition, Request};

    fn small() -> Profile {
        Profile::load("sata-mlc-2011")
            .unwrap()
            .with_capacity(256 << 20)
            .unwrap()
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
        let mut buf = Vec::new();
        ssd.save(&mut buf).unwrap();
        let back = Ssd::load(&p, &buf[..]).unwrap();
        assert_eq!(back.counters(), ssd.counters());
        assert_eq!(back.l2p, ssd.l2p);
        back.check_invariants().unwrap();
    }

    #[test]
    fn damage_is_refused() {
        let p = small();
        let mut ssd = Ssd::new(&p, 7);
        ssd.precondition(0, &Precondition::FillSequential { bs: 1 << 20 }, 1);
        let mut buf = Vec::new();
        ssd.save(&mut buf).unwrap();
        let mut bad = buf.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x40;
        assert!(matches!(
            Ssd::load(&p, &bad[..]),
            Err(PersistError::Corrupt(_))
        ));
        assert!(matches!(
            Ssd::load(&p, &buf[..buf.len() - 10]),
            Err(PersistError::Corrupt(_))
        ));
        assert!(Ssd::load(&p, &b"garbage"[..]).is_err());
        let other = Profile::load("sata-mlc-2011")
            .unwrap()
            .with_capacity(1 << 30)
            .unwrap();
        assert!(matches!(
            Ssd::load(&other, &buf[..]),
            Err(PersistError::ProfileMismatch(_))
        ));
        let mut v2 = buf.clone();
        v2[8] = 9;
        assert!(matches!(
            Ssd::load(&p, &v2[..]),
            Err(PersistError::Version { .. })
        ));
    }
}
