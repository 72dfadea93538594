//! Executing virtio-blk requests: a descriptor chain is parsed once into a
//! [`Job`] (layout, header, validated request, status address), then
//! executed against guest memory and the device into a [`Done`]: the
//! used-ring entry to write and the device's pending completion, due at
//! its modelled time.

use std::sync::atomic::Ordering;

use log::debug;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, VolatileSlice};

use super::request::{
    BlkRequest, Desc, HEADER_LEN, Header, Layout, Limits, ParseError, SEGMENT_LEN, Seg,
    parse_request, parse_segments, split_layout, status_byte, virtio_status,
};
use vssd_device::{Connection, Device, OpKind, Pending, Status};

/// Longest descriptor chain accepted (indirect tables included).
pub const MAX_DESCS: usize = 1024;

/// Errors of the vhost-user-blk frontend.
#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    /// The request is malformed.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// Guest memory could not be accessed at the addresses given.
    #[error("guest memory access at {addr:#x}+{len} failed")]
    Memory {
        /// Guest address.
        addr: u64,
        /// Length.
        len: u64,
    },
}

impl FrontendError {
    /// The device-independent status for this error.
    pub fn status(&self) -> Status {
        match self {
            FrontendError::Parse(e) => e.status(),
            FrontendError::Memory { .. } => Status::Invalid,
        }
    }
}

/// A parsed request: everything execution needs, read from the chain once.
#[derive(Debug)]
pub struct Job {
    /// Descriptor head (the used-ring id).
    pub head: u16,
    /// Where the status byte goes, if anywhere.
    pub status: Option<u64>,
    /// The validated request and its layout, or why it is refused.
    pub req: Result<(BlkRequest, Layout), FrontendError>,
    /// When the queue thread popped it (daemon clock), if noted: only
    /// while a trace is being taken (`Device::tracing`).
    pub received_ns: Option<u64>,
}

impl Job {
    /// Parse the chain `descs` (header read from guest memory).
    pub fn parse(mem: &GuestMemoryMmap, head: u16, descs: &[Desc], lim: &Limits) -> Job {
        let req = (|| {
            let layout = split_layout(descs, MAX_DESCS)?;
            let mut hb = [0u8; HEADER_LEN];
            read_segs(mem, &layout.header, &mut hb)?;
            let req = parse_request(&Header::from_bytes(&hb), &layout, lim)?;
            Ok((req, layout))
        })();
        Job {
            head,
            status: status_byte(descs),
            req,
            received_ns: None,
        }
    }

    /// Whether it may block for long (an `fdatasync`, punching or zeroing
    /// big ranges): such requests run on the slow-op thread.
    pub fn is_slow(&self) -> bool {
        matches!(
            self.req,
            Ok((
                BlkRequest::Flush | BlkRequest::Discard { .. } | BlkRequest::WriteZeroes { .. },
                _
            ))
        )
    }
}

/// What the next entry of the available ring holds.
pub enum Next {
    /// A request, parsed.
    Job(Job),
    /// Nothing new.
    Empty,
    /// The ring is unusable: why.
    Broken(String),
}

/// Pop the next chain off `queue`'s available ring and parse it, telling
/// an empty ring from a broken one (an available index more than a queue
/// size ahead, an entry that cannot be read): `pop_descriptor_chain`
/// returns `None` for both. `descs` is scratch space. The one path from
/// the ring to a [`Job`], fuzzed (`fuzz/`) over arbitrary memory.
pub fn next_job(
    queue: &mut Queue,
    mem: &GuestMemoryMmap,
    lim: &Limits,
    descs: &mut Vec<Desc>,
) -> Next {
    if !queue.ready() {
        return Next::Empty;
    }
    let avail = match queue.avail_idx(mem, Ordering::Acquire) {
        Ok(i) => i,
        Err(e) => return Next::Broken(format!("cannot read the available index: {e}")),
    };
    let next = queue.next_avail();
    let ahead = avail.0.wrapping_sub(next);
    if ahead == 0 {
        return Next::Empty;
    }
    if ahead > queue.size() {
        return Next::Broken(format!(
            "invalid available ring index {} ({ahead} entries ahead of {next}, queue size {})",
            avail.0,
            queue.size()
        ));
    }
    let Some(chain) = queue.pop_descriptor_chain(mem) else {
        return Next::Broken(format!(
            "available ring entry {next} cannot be read (index {})",
            avail.0
        ));
    };
    let head = chain.head_index();
    descs.clear();
    descs.extend(chain.take(MAX_DESCS + 1).map(|d| Desc {
        addr: d.addr().0,
        len: d.len(),
        write_only: d.is_write_only(),
    }));
    Next::Job(Job::parse(mem, head, descs, lim))
}

/// An executed request waiting for its completion time.
#[derive(Debug)]
pub struct Done {
    /// Descriptor head.
    pub head: u16,
    /// Bytes written into the chain (data + status).
    pub used_len: u32,
    /// The device's completion (status, due time, accounting).
    pub pending: Pending,
}

impl Done {
    /// When the completion is due (daemon clock).
    pub fn due_ns(&self) -> u64 {
        self.pending.due_ns()
    }
}

/// How the guest set the device's write cache (`VIRTIO_BLK_F_CONFIG_WCE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCache {
    /// Write-back (`wce` = 1, the default): a write completes once the
    /// drive has it; FLUSH makes it durable.
    WriteBack,
    /// Write-through (`wce` = 0): the guest sends no FLUSH, so every write
    /// (and write-zeroes) is durable before it completes, as with FUA.
    WriteThrough,
}

/// Execute `job`: data I/O through the device, status byte written.
pub fn execute(
    dev: &Device,
    conn: &Connection,
    mem: &GuestMemoryMmap,
    lim: &Limits,
    cache: WriteCache,
    job: Job,
) -> Done {
    let received = job.received_ns;
    let (mut pending, mut used_len) = match job.req {
        Ok((req, layout)) => run(dev, conn, mem, lim, cache, req, &layout),
        Err(e) => {
            debug!("request at head {} refused: {e}", job.head);
            let mut p = dev.begin(conn, OpKind::Other, 0);
            p.fail(e.status());
            (p, 1)
        }
    };
    match job.status {
        Some(a) => {
            if mem
                .write_obj(virtio_status(pending.status()), GuestAddress(a))
                .is_err()
            {
                debug!("cannot write the status byte at {a:#x}");
                used_len = 0;
                if pending.status().is_ok() {
                    pending.fail(Status::Invalid);
                }
            }
        }
        None => used_len = 0,
    }
    if let Some(t) = received {
        pending.set_received(t);
    }
    Done {
        head: job.head,
        used_len,
        pending,
    }
}

fn refused(dev: &Device, conn: &Connection, op: OpKind, e: FrontendError) -> (Pending, u32) {
    debug!("{op:?} refused: {e}");
    let mut p = dev.begin(conn, op, 0);
    p.refuse(e.status());
    (p, 1)
}

/// Run a validated request; returns its completion and the used length.
fn run(
    dev: &Device,
    conn: &Connection,
    mem: &GuestMemoryMmap,
    lim: &Limits,
    cache: WriteCache,
    req: BlkRequest,
    layout: &Layout,
) -> (Pending, u32) {
    let fua = cache == WriteCache::WriteThrough;
    match req {
        BlkRequest::Read { offset, len } => match slices(mem, &layout.in_data) {
            Ok(bufs) => {
                let p = dev.read(conn, offset, &bufs);
                let used = if p.status().is_ok() {
                    len as u32 + 1
                } else {
                    1
                };
                (p, used)
            }
            Err(e) => refused(dev, conn, OpKind::Read, e),
        },
        BlkRequest::Write { offset, .. } => match slices(mem, &layout.out_data) {
            Ok(bufs) => (dev.write(conn, offset, &bufs, fua), 1),
            Err(e) => refused(dev, conn, OpKind::Write, e),
        },
        BlkRequest::Flush => (dev.flush(conn), 1),
        BlkRequest::GetId { len } => {
            let serial = dev.serial();
            match write_segs(mem, &layout.in_data, &serial[..len as usize]) {
                Ok(n) => (dev.begin(conn, OpKind::Other, 0), n as u32 + 1),
                Err(e) => refused(dev, conn, OpKind::Other, e),
            }
        }
        BlkRequest::Discard { segments } | BlkRequest::WriteZeroes { segments } => {
            let wz = matches!(req, BlkRequest::WriteZeroes { .. });
            let op = if wz {
                OpKind::WriteZeroes
            } else {
                OpKind::Discard
            };
            let mut raw = vec![0u8; segments as usize * SEGMENT_LEN];
            let ranges = read_segs(mem, &layout.out_data, &mut raw)
                .and_then(|()| Ok(parse_segments(&raw, wz, lim)?));
            let ranges = match ranges {
                Ok(r) => r,
                Err(e) => return refused(dev, conn, op, e),
            };
            let rs = |unmap: Option<bool>| -> Vec<(u64, u64)> {
                ranges
                    .iter()
                    .filter(|r| unmap.is_none_or(|u| r.unmap == u))
                    .map(|r| (r.offset, r.len))
                    .collect()
            };
            if !wz {
                return (dev.discard(conn, &rs(None), fua), 1);
            }
            // One write-zeroes segment is advertised, so one flavour per request.
            let unmap = ranges.first().is_some_and(|r| r.unmap);
            (dev.write_zeroes(conn, &rs(Some(unmap)), unmap, fua), 1)
        }
    }
}

/// Guest memory of `segs` as slices (no copy).
pub fn slices<'m>(
    mem: &'m GuestMemoryMmap,
    segs: &[Seg],
) -> Result<Vec<VolatileSlice<'m>>, FrontendError> {
    let mut v = Vec::with_capacity(segs.len());
    for s in segs {
        let err = || FrontendError::Memory {
            addr: s.addr,
            len: u64::from(s.len),
        };
        // One region holds the segment (the common case): one lookup.
        if let Ok(sl) = GuestMemoryBackend::get_slice(mem, GuestAddress(s.addr), s.len as usize) {
            v.push(sl);
            continue;
        }
        for sl in GuestMemoryBackend::get_slices(mem, GuestAddress(s.addr), s.len as usize) {
            v.push(sl.map_err(|_| err())?);
        }
    }
    Ok(v)
}

fn read_segs(mem: &GuestMemoryMmap, segs: &[Seg], out: &mut [u8]) -> Result<(), FrontendError> {
    let mut pos = 0;
    for s in segs {
        if pos >= out.len() {
            break;
        }
        let n = (s.len as usize).min(out.len() - pos);
        mem.read_slice(&mut out[pos..pos + n], GuestAddress(s.addr))
            .map_err(|_| FrontendError::Memory {
                addr: s.addr,
                len: n as u64,
            })?;
        pos += n;
    }
    Ok(())
}

fn write_segs(mem: &GuestMemoryMmap, segs: &[Seg], data: &[u8]) -> Result<usize, FrontendError> {
    let mut pos = 0;
    for s in segs {
        if pos >= data.len() {
            break;
        }
        let n = (s.len as usize).min(data.len() - pos);
        mem.write_slice(&data[pos..pos + n], GuestAddress(s.addr))
            .map_err(|_| FrontendError::Memory {
                addr: s.addr,
                len: n as u64,
            })?;
        pos += n;
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::super::config::BlkConfig;
    use super::super::request::tests::{r, w};
    use super::*;
    use proptest::prelude::*;
    use virtio_bindings::virtio_blk::*;
    use virtio_bindings::virtio_blk::{VIRTIO_BLK_S_IOERR, VIRTIO_BLK_S_OK, VIRTIO_BLK_S_UNSUPP};
    use vssd_device::{DataLocation, DeviceOptions};
    use vssd_profile::Profile;

    const MEM: u64 = 1 << 20;

    /// A device, a connection to it, its limits, and 1 MiB of guest memory.
    struct Bench {
        dev: Device,
        conn: Connection,
        lim: Limits,
    }

    impl Bench {
        fn execute(&self, mem: &GuestMemoryMmap, descs: &[Desc], head: u16) -> Done {
            let job = Job::parse(mem, head, descs, &self.lim);
            execute(
                &self.dev,
                &self.conn,
                mem,
                &self.lim,
                WriteCache::WriteBack,
                job,
            )
        }
    }

    fn backend() -> (Bench, GuestMemoryMmap) {
        let profile = Profile::load_with_capacity("instant", Some(64 << 20)).unwrap();
        let dev = Device::open(DeviceOptions {
            profile,
            data: DataLocation::Memory,
            state_file: None,
            seed: 1,
            time_scale: Default::default(),
        })
        .unwrap();
        let conn = dev.register_frontend("test", "", "").connect("test");
        let lim = BlkConfig::new(dev.topology(), 1).limits;
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM as usize)]).unwrap();
        (Bench { dev, conn, lim }, mem)
    }

    fn header(mem: &GuestMemoryMmap, at: u64, kind: u32, sector: u64) {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&kind.to_le_bytes());
        h[8..16].copy_from_slice(&sector.to_le_bytes());
        mem.write_slice(&h, GuestAddress(at)).unwrap();
    }

    /// Run a request; returns (status byte, used length).
    fn run(b: &Bench, mem: &GuestMemoryMmap, descs: &[Desc], status_at: u64) -> (u8, u32) {
        mem.write_obj(0xffu8, GuestAddress(status_at)).unwrap();
        let d = b.execute(mem, descs, 0);
        let used = d.used_len;
        d.pending.complete(0);
        (mem.read_obj::<u8>(GuestAddress(status_at)).unwrap(), used)
    }

    #[test]
    fn read_write_discard_write_zeroes_get_id() {
        let (b, mem) = backend();
        let data: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
        mem.write_slice(&data, GuestAddress(0x1000)).unwrap();
        header(&mem, 0x100, VIRTIO_BLK_T_OUT, 8);
        // Data split over two descriptors.
        let st = run(
            &b,
            &mem,
            &[r(0x100, 16), r(0x1000, 4096), r(0x2000, 4096), w(0x200, 1)],
            0x200,
        );
        assert_eq!(st, (VIRTIO_BLK_S_OK as u8, 1));

        header(&mem, 0x100, VIRTIO_BLK_T_IN, 8);
        let st = run(
            &b,
            &mem,
            &[r(0x100, 16), w(0x10000, 8192), w(0x200, 1)],
            0x200,
        );
        assert_eq!(st, (VIRTIO_BLK_S_OK as u8, 8193));
        let mut back = vec![0u8; 8192];
        mem.read_slice(&mut back, GuestAddress(0x10000)).unwrap();
        assert_eq!(back, data);

        // Discard sectors 8..16 (the first 4 KiB): zeros there, data after.
        let mut seg = 8u64.to_le_bytes().to_vec();
        seg.extend(8u32.to_le_bytes());
        seg.extend(0u32.to_le_bytes());
        mem.write_slice(&seg, GuestAddress(0x300)).unwrap();
        header(&mem, 0x100, VIRTIO_BLK_T_DISCARD, 0);
        assert_eq!(
            run(&b, &mem, &[r(0x100, 16), r(0x300, 16), w(0x200, 1)], 0x200).0,
            VIRTIO_BLK_S_OK as u8
        );
        header(&mem, 0x100, VIRTIO_BLK_T_IN, 8);
        run(
            &b,
            &mem,
            &[r(0x100, 16), w(0x10000, 8192), w(0x200, 1)],
            0x200,
        );
        mem.read_slice(&mut back, GuestAddress(0x10000)).unwrap();
        assert!(back[..4096].iter().all(|&x| x == 0));
        assert_eq!(back[4096..], data[4096..]);

        // Discard with the UNMAP flag is unsupported; write zeroes accepts it.
        seg[12] = 1;
        seg[0] = 16;
        mem.write_slice(&seg, GuestAddress(0x300)).unwrap();
        header(&mem, 0x100, VIRTIO_BLK_T_DISCARD, 0);
        assert_eq!(
            run(&b, &mem, &[r(0x100, 16), r(0x300, 16), w(0x200, 1)], 0x200).0,
            VIRTIO_BLK_S_UNSUPP as u8
        );
        header(&mem, 0x100, VIRTIO_BLK_T_WRITE_ZEROES, 0);
        assert_eq!(
            run(&b, &mem, &[r(0x100, 16), r(0x300, 16), w(0x200, 1)], 0x200).0,
            VIRTIO_BLK_S_OK as u8
        );
        header(&mem, 0x100, VIRTIO_BLK_T_IN, 8);
        run(
            &b,
            &mem,
            &[r(0x100, 16), w(0x10000, 8192), w(0x200, 1)],
            0x200,
        );
        mem.read_slice(&mut back, GuestAddress(0x10000)).unwrap();
        assert!(back.iter().all(|&x| x == 0));

        header(&mem, 0x100, VIRTIO_BLK_T_GET_ID, 0);
        let st = run(&b, &mem, &[r(0x100, 16), w(0x400, 20), w(0x200, 1)], 0x200);
        assert_eq!(st, (VIRTIO_BLK_S_OK as u8, 21));
        let mut id = [0u8; 20];
        mem.read_slice(&mut id, GuestAddress(0x400)).unwrap();
        assert_eq!(id, b.dev.serial());

        header(&mem, 0x100, VIRTIO_BLK_T_FLUSH, 0);
        assert_eq!(
            run(&b, &mem, &[r(0x100, 16), w(0x200, 1)], 0x200).0,
            VIRTIO_BLK_S_OK as u8
        );
        let c = b.dev.counters();
        assert_eq!(c.host_written_bytes, 8192);
    }

    #[test]
    fn bad_requests_get_error_statuses() {
        let (b, mem) = backend();
        let cap_sectors = (64u64 << 20) / 512;
        header(&mem, 0x100, VIRTIO_BLK_T_IN, cap_sectors - 1);
        let st = run(
            &b,
            &mem,
            &[r(0x100, 16), w(0x1000, 1024), w(0x200, 1)],
            0x200,
        );
        assert_eq!(st.0, VIRTIO_BLK_S_IOERR as u8);
        header(&mem, 0x100, 42, 0);
        assert_eq!(
            run(&b, &mem, &[r(0x100, 16), w(0x200, 1)], 0x200).0,
            VIRTIO_BLK_S_UNSUPP as u8
        );
        // Data outside guest memory.
        header(&mem, 0x100, VIRTIO_BLK_T_IN, 0);
        let st = run(
            &b,
            &mem,
            &[r(0x100, 16), w(MEM - 512, 4096), w(0x200, 1)],
            0x200,
        );
        assert_eq!(st.0, VIRTIO_BLK_S_IOERR as u8);
        // Header outside guest memory.
        assert_eq!(
            run(&b, &mem, &[r(MEM + 4096, 16), w(0x200, 1)], 0x200).0,
            VIRTIO_BLK_S_IOERR as u8
        );
        // No status byte: nothing written, used length 0.
        header(&mem, 0x100, VIRTIO_BLK_T_FLUSH, 0);
        let d = b.execute(&mem, &[r(0x100, 16)], 0);
        assert_eq!(d.used_len, 0);
        d.pending.complete(0);
        // Status outside memory: used length 0, no panic.
        let d = b.execute(&mem, &[r(0x100, 16), w(MEM + 10, 1)], 0);
        assert_eq!(d.used_len, 0);
        d.pending.complete(0);
        let rep = b.dev.report();
        assert!(rep.connection.rejected >= 5, "{:?}", rep.connection);
        assert_eq!(rep.connection.in_flight, 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        /// Arbitrary chains over arbitrary memory never panic; the status,
        /// when there is one, is OK, IOERR or UNSUPP.
        #[test]
        fn arbitrary_chains_never_panic(
            descs in prop::collection::vec(
                (prop_oneof![0u64..MEM, any::<u64>()], prop_oneof![0u32..64, 0u32..70000, any::<u32>()], any::<bool>()),
                0..8),
            hdr in prop::collection::vec(any::<u8>(), 16),
            kind in prop_oneof![Just(0u32), Just(1), Just(4), Just(8), Just(11), Just(13), any::<u32>()],
            sector in prop_oneof![0u64..200_000, any::<u64>()],
        ) {
            let (b, mem) = backend();
            mem.write_slice(&hdr, GuestAddress(0x100)).unwrap();
            header(&mem, 0x100, kind, sector);
            let mut ds: Vec<Desc> = vec![r(0x100, 16)];
            ds.extend(descs.into_iter().map(|(addr, len, write_only)| Desc { addr, len, write_only }));
            let d = b.execute(&mem, &ds, 0);
            prop_assert!(d.used_len as u64 <= ds.iter().map(|d| u64::from(d.len)).sum::<u64>());
            d.pending.complete(0);
            prop_assert_eq!(b.dev.stats().in_flight(), 0);
        }
    }
}
