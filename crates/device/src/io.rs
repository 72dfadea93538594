//! The requests a frontend hands the drive: read, write, discard, write
//! zeroes, flush. Each goes through the pipeline ([`crate::pipeline`]),
//! applies what its kind needs under the same hold of the model lock
//! (media faults, the power audit, the TRIM census), then moves its bytes
//! in the store, outside the lock, and becomes a [`Pending`] completion.

use vm_memory::VolatileSlice;
use vssd_model::{Op, Payload};
use vssd_profile::ReadAfterTrim;

use crate::Device;
use crate::error::DeviceError;
use crate::faults::Media;
use crate::request::{Connection, OpKind, Pending};
use crate::stats::TrimOutcome;
use crate::store;
use crate::trimlog::TrimRecord;

impl Device {
    /// Account a request answered without the drive (e.g. an identify
    /// command), or refused by the frontend's own validation (then
    /// [`Pending::fail`] it). Due at once.
    pub fn begin(&self, conn: &Connection, op: OpKind, bytes: u64) -> Pending {
        conn.begin(op, bytes, self.now_ns())
    }

    /// Read `offset..` into `bufs`.
    pub fn read(&self, conn: &Connection, offset: u64, bufs: &[VolatileSlice<'_>]) -> Pending {
        let len = bufs.iter().map(|b| b.len() as u64).sum();
        let mut p = self.begin(conn, OpKind::Read, len);
        p.set_target(&[(offset, len)], false, false);
        let gate = self.power.enter();
        let r = self.read_at(&p, offset, len, bufs);
        drop(gate);
        self.finish_cut();
        self.answer(p, r)
    }

    fn read_at(
        &self,
        p: &Pending,
        offset: u64,
        len: u64,
        bufs: &[VolatileSlice<'_>],
    ) -> Result<u64, DeviceError> {
        let ranges = [(offset, len)];
        let mut a = self.admit(p, Op::Read, &ranges)?;
        let done = a.model(
            &self.drive,
            &self.faults,
            Op::Read,
            &ranges,
            Payload::Unknown,
            None,
        )?;
        let core = &mut *a.core;
        let worn = self
            .faults
            .read(&core.ssd, &mut core.media, offset, len, a.now);
        let due = self.conclude(a, done);
        if let Some(fault) = worn {
            return Err(DeviceError::Media { fault, due });
        }
        if let Some(fault) = self.faults.media_hit(Media::Read, &ranges) {
            return Err(DeviceError::Media { fault, due });
        }
        self.drive
            .store()
            .read(offset, bufs)
            .map_err(DeviceError::Io)?;
        if self.drive.read_after_trim() == ReadAfterTrim::Pattern {
            self.fill_unmapped(offset, len, bufs)?;
        }
        Ok(due)
    }

    /// `read_after_trim = "pattern"`: the unmapped parts of a read (trimmed
    /// or never written, as block status reports them) return the pattern.
    fn fill_unmapped(
        &self,
        offset: u64,
        len: u64,
        bufs: &[VolatileSlice<'_>],
    ) -> Result<(), DeviceError> {
        let mut at = offset;
        for (n, mapped) in self.allocation(offset, len, usize::MAX) {
            if !mapped {
                store::fill_bufs(bufs, offset, at, at + n, ReadAfterTrim::PATTERN_BYTE)
                    .map_err(DeviceError::Io)?;
            }
            at += n;
        }
        Ok(())
    }

    /// Write `bufs` at `offset..`. With `fua` the data is durable (on the
    /// backing file and programmed in the model) before the completion.
    pub fn write(
        &self,
        conn: &Connection,
        offset: u64,
        bufs: &[VolatileSlice<'_>],
        fua: bool,
    ) -> Pending {
        let len = bufs.iter().map(|b| b.len() as u64).sum();
        let mut p = self.begin(conn, OpKind::Write, len);
        p.set_target(&[(offset, len)], fua, false);
        // A data-reducing drive needs to know how compressible the data is.
        let payload = if self.profile().reduction.enabled {
            sample_payload(bufs, len)
        } else {
            Payload::Unknown
        };
        let gate = self.power.enter();
        let r = self.write_at(&p, offset, len, bufs, payload, fua);
        drop(gate);
        self.finish_cut();
        self.answer(p, r)
    }

    fn write_at(
        &self,
        p: &Pending,
        offset: u64,
        len: u64,
        bufs: &[VolatileSlice<'_>],
        payload: Payload,
        fua: bool,
    ) -> Result<u64, DeviceError> {
        let ranges = [(offset, len)];
        // What the write overwrites, read before the model lock is taken
        // (the gate keeps a cut from undoing anything meanwhile).
        let undo = self.undo_of(&ranges);
        let w = self.write_model(p, Op::Write, &ranges, payload, undo)?;
        if let Some(fault) = w.media {
            return Err(DeviceError::Media { fault, due: w.due });
        }
        self.drive
            .store()
            .write(offset, bufs)
            .map_err(DeviceError::Io)?;
        if w.cut_during {
            // The power went as this write arrived: never acknowledged.
            return Err(DeviceError::PoweredOff);
        }
        self.durable(p, w.due, fua)
    }

    /// A write of data (`Op::Write`, or zeros written): through the model,
    /// then the media faults and the power audit under the same lock.
    fn write_model(
        &self,
        p: &Pending,
        op: Op,
        ranges: &[(u64, u64)],
        payload: Payload,
        mut undo: crate::power::Undo,
    ) -> Result<Written, DeviceError> {
        let mut a = self.admit(p, op, ranges)?;
        let done = a.model(&self.drive, &self.faults, op, ranges, payload, None)?;
        let core = &mut *a.core;
        // A write an injected fault fails changes nothing to lose.
        let media = self.faults.media_hit(Media::Write, ranges);
        if media.is_some() {
            undo.clear();
        } else {
            core.media.rewritten(core.ssd.unit_bytes(), ranges);
        }
        let durability = core.ssd.durability();
        let cut_during = self.power.track_write(
            &mut core.power,
            &mut core.audit,
            durability,
            undo,
            (a.now, done),
        );
        let taken_ns = a.now;
        Ok(Written {
            due: self.conclude(a, done),
            taken_ns,
            media,
            cut_during,
        })
    }

    /// With `fua` (and a drive whose flushes are not lies), make a request
    /// due at `due` durable before it completes: the store synced and the
    /// drive's buffer programmed. Its completion.
    fn durable(&self, p: &Pending, due: u64, fua: bool) -> Result<u64, DeviceError> {
        if !fua || self.power.flush_lies() {
            return Ok(due);
        }
        self.drive.store().sync().map_err(DeviceError::Io)?;
        let flushed = self.submit(p, Op::Flush, &[(0, 0)])?;
        Ok(due.max(flushed))
    }

    /// TRIM `(offset, len)` ranges: the data reads as the profile's
    /// `read_after_trim` says afterwards (zeros by default). With `fua` the
    /// zeroing is durable before the completion.
    pub fn discard(&self, conn: &Connection, ranges: &[(u64, u64)], fua: bool) -> Pending {
        let len = ranges.iter().map(|r| r.1).sum();
        let mut p = self.begin(conn, OpKind::Discard, len);
        p.set_target(ranges, fua, false);
        let gate = self.power.enter();
        let r = self.trim_ranges(conn, &mut p, Op::Trim, ranges, fua);
        drop(gate);
        self.finish_cut();
        self.answer(p, r)
    }

    /// Write zeroes over `(offset, len)` ranges; with `unmap` the drive
    /// deallocates (a TRIM that guarantees zeros), without it the zeros are
    /// written. With `fua` they are durable before the completion.
    pub fn write_zeroes(
        &self,
        conn: &Connection,
        ranges: &[(u64, u64)],
        unmap: bool,
        fua: bool,
    ) -> Pending {
        let len = ranges.iter().map(|r| r.1).sum();
        let mut p = self.begin(conn, OpKind::WriteZeroes, len);
        // Deallocating guarantees zeros only on a drive whose trimmed LBAs
        // read as zeros (ATA RZAT, NVMe DLFEAT): any other writes them.
        let unmap = unmap && self.drive.read_after_trim() == ReadAfterTrim::Zeros;
        p.set_target(ranges, fua, unmap);
        let gate = self.power.enter();
        let r = if unmap {
            self.trim_ranges(conn, &mut p, Op::WriteZeroes { unmap }, ranges, fua)
        } else {
            self.zeros_written(conn, &p, ranges, fua)
        };
        drop(gate);
        self.finish_cut();
        self.answer(p, r)
    }

    /// Zeros written over `ranges` (write-zeroes without unmapping): a
    /// write like any other, audited for power loss.
    fn zeros_written(
        &self,
        conn: &Connection,
        p: &Pending,
        ranges: &[(u64, u64)],
        fua: bool,
    ) -> Result<u64, DeviceError> {
        let op = Op::WriteZeroes { unmap: false };
        let undo = self.undo_of(ranges);
        let w = self.write_model(p, op, ranges, Payload::Unknown, undo)?;
        if let Some(fault) = w.media {
            return Err(DeviceError::Media { fault, due: w.due });
        }
        self.log_trim(conn, op, ranges, w.taken_ns, TrimOutcome::default());
        for &(o, l) in ranges {
            self.drive
                .store()
                .zero(o, l, false)
                .map_err(DeviceError::Io)?;
        }
        if w.cut_during {
            // The power went as these zeros arrived: never acknowledged.
            return Err(DeviceError::PoweredOff);
        }
        // Written zeros are data like any other: with FUA they are
        // programmed before the completion, as a FUA write's are.
        self.durable(p, w.due, fua)
    }

    /// A TRIM (discard, or write-zeroes that deallocates) of `ranges`: the
    /// census of what it frees, the audit's pending writes under it clipped.
    fn trim_ranges(
        &self,
        conn: &Connection,
        p: &mut Pending,
        op: Op,
        ranges: &[(u64, u64)],
        fua: bool,
    ) -> Result<u64, DeviceError> {
        let mut outcome = TrimOutcome::default();
        let mut a = self.admit(p, op, ranges)?;
        let done = a.model(
            &self.drive,
            &self.faults,
            op,
            ranges,
            Payload::Unknown,
            Some(&mut outcome),
        )?;
        let core = &mut *a.core;
        let media = match op {
            Op::WriteZeroes { .. } => self.faults.media_hit(Media::Write, ranges),
            _ => None,
        };
        if media.is_none() {
            core.media.rewritten(core.ssd.unit_bytes(), ranges);
            for &(o, l) in ranges {
                core.audit.clip(o, l);
            }
        }
        let taken_ns = a.now;
        let due = self.conclude(a, done);
        if let Some(fault) = media {
            return Err(DeviceError::Media { fault, due });
        }
        self.log_trim(conn, op, ranges, taken_ns, outcome);
        // A TRIM on a drive without deterministic zeros leaves the data:
        // `old-data` returns it, `pattern` covers it on reads.
        let keep = op == Op::Trim && self.drive.read_after_trim() != ReadAfterTrim::Zeros;
        if !keep {
            for &(o, l) in ranges {
                self.drive
                    .store()
                    .zero(o, l, true)
                    .map_err(DeviceError::Io)?;
            }
        }
        if fua && !self.power.flush_lies() {
            self.drive.store().sync().map_err(DeviceError::Io)?;
        }
        p.set_trim(outcome);
        Ok(due)
    }

    /// The TRIM log's record of a discard or write-zeroes of `conn` the
    /// model took at drive time `taken_ns`.
    fn log_trim(
        &self,
        conn: &Connection,
        op: Op,
        ranges: &[(u64, u64)],
        taken_ns: u64,
        outcome: TrimOutcome,
    ) {
        self.accounting.trim_log().push(TrimRecord {
            seq: 0,
            model_ns: if ranges.is_empty() { 0 } else { taken_ns },
            wall_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            source: conn.label(),
            kind: match op {
                Op::Trim => "discard",
                Op::WriteZeroes { unmap: true } => "write-zeroes-unmap",
                _ => "write-zeroes",
            }
            .into(),
            ranges: ranges.to_vec(),
            freed_bytes: outcome.freed_bytes,
            already_unmapped_bytes: outcome.already_unmapped_bytes,
        });
    }

    /// Make everything written so far durable, then flush the drive's buffer.
    pub fn flush(&self, conn: &Connection) -> Pending {
        let p = self.begin(conn, OpKind::Flush, 0);
        let gate = self.power.enter();
        let r = if self.power.flush_lies() {
            // A drive that lies about flushes answers at once and programs
            // nothing (no range: the model is not asked).
            self.submit(&p, Op::Flush, &[])
        } else {
            self.drive
                .store()
                .sync()
                .map_err(DeviceError::Io)
                .and_then(|()| self.submit(&p, Op::Flush, &[(0, 0)]))
        };
        drop(gate);
        self.finish_cut();
        self.answer(p, r)
    }
}

/// What [`Device::write_model`] did.
struct Written {
    /// The completion (daemon clock).
    due: u64,
    /// Drive time the model took it.
    taken_ns: u64,
    /// The injected fault that fails it.
    media: Option<u64>,
    /// An armed cut went off with it.
    cut_during: bool,
}

/// How compressible the data in `bufs` (`len` bytes) is: a bounded sample
/// of it through [`vssd_model::payload::estimate`].
pub(crate) fn sample_payload(bufs: &[VolatileSlice<'_>], len: u64) -> Payload {
    let mut sample = [0u8; 2 * vssd_model::payload::SAMPLE_BYTES];
    let mut n = 0;
    for (at, want) in vssd_model::payload::sample_ranges(len) {
        let (mut at, mut want) = (at, want);
        for b in bufs {
            let blen = b.len() as u64;
            if want == 0 {
                break;
            }
            if at >= blen {
                at -= blen;
                continue;
            }
            let k = want.min((blen - at) as usize);
            match b.subslice(at as usize, k) {
                Ok(s) => n += s.copy_to(&mut sample[n..n + k]),
                Err(_) => return Payload::Unknown,
            }
            want -= k;
            at = 0;
        }
    }
    vssd_model::payload::estimate(&sample[..n])
}
