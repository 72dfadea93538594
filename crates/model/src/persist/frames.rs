//! The state file's framing: a byte stream cut into checksummed frames,
//! read back so that no byte is handed out before its frame is verified.
//! Also the variable-length integers and mapping runs the stream uses.

use std::io::{self, Read, Write};

use super::super::blocks::WritePoint;
use super::super::packed::PackedVec;
use super::{FRAME_MAX, PersistError, corrupt};

fn frame_crc(index: u32, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&index.to_le_bytes());
    h.update(&(payload.len() as u32).to_le_bytes());
    h.update(payload);
    h.finalize()
}

// ------------------------------------------------------------------ writing

/// Cuts a byte stream into checksummed frames.
pub(super) struct FrameWriter<W: Write> {
    inner: W,
    index: u32,
    buf: Vec<u8>,
}

impl<W: Write> FrameWriter<W> {
    pub(super) fn new(inner: W) -> FrameWriter<W> {
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

    pub(super) fn put(&mut self, mut b: &[u8]) -> io::Result<()> {
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

    pub(super) fn u8(&mut self, v: u8) -> io::Result<()> {
        self.put(&[v])
    }

    pub(super) fn u32(&mut self, v: u32) -> io::Result<()> {
        self.put(&v.to_le_bytes())
    }

    pub(super) fn u64(&mut self, v: u64) -> io::Result<()> {
        self.put(&v.to_le_bytes())
    }

    pub(super) fn wp(&mut self, wp: &WritePoint) -> io::Result<()> {
        self.u32(wp.block())?;
        self.u32(wp.page())?;
        self.u32(wp.slot())?;
        self.u32(wp.compressed_fill())?;
        self.u32(wp.placed())
    }

    /// Write the last data frame and the end frame.
    pub(super) fn finish(mut self) -> io::Result<W> {
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
pub(super) fn encode_runs(
    t: &PackedVec,
    lo: usize,
    hi: usize,
    limit: usize,
    out: &mut Vec<u8>,
) -> bool {
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
pub(super) struct FrameReader<R: Read> {
    inner: R,
    index: u32,
    pub(super) buf: Vec<u8>,
    pos: usize,
}

pub(super) fn read_full<R: Read>(r: &mut R, b: &mut [u8], what: &str) -> Result<(), PersistError> {
    r.read_exact(b).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            corrupt(format!("file is truncated ({what})"))
        } else {
            PersistError::Io(e)
        }
    })
}

impl<R: Read> FrameReader<R> {
    pub(super) fn new(inner: R) -> FrameReader<R> {
        FrameReader {
            inner,
            index: 0,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// Read and verify the next frame; returns its length (0: the end frame).
    pub(super) fn next_frame(&mut self) -> Result<usize, PersistError> {
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

    pub(super) fn take(&mut self, out: &mut [u8]) -> Result<(), PersistError> {
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

    pub(super) fn u8(&mut self) -> Result<u8, PersistError> {
        let mut b = [0u8; 1];
        self.take(&mut b)?;
        Ok(b[0])
    }

    pub(super) fn u32(&mut self) -> Result<u32, PersistError> {
        let mut b = [0u8; 4];
        self.take(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub(super) fn u64(&mut self) -> Result<u64, PersistError> {
        let mut b = [0u8; 8];
        self.take(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub(super) fn varint(&mut self) -> Result<u64, PersistError> {
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

    /// A write point; format 2 had no `compressed_fill` / `placed`.
    pub(super) fn wp(&mut self, v2: bool) -> Result<WritePoint, PersistError> {
        let (block, page, slot) = (self.u32()?, self.u32()?, self.u32()?);
        let (compressed_fill, placed) = if v2 {
            (0, 0)
        } else {
            (self.u32()?, self.u32()?)
        };
        Ok(WritePoint::saved(
            block,
            page,
            slot,
            compressed_fill,
            placed,
        ))
    }

    /// The stream must end exactly here: the end frame, then end of file.
    pub(super) fn finish(mut self) -> Result<(), PersistError> {
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
