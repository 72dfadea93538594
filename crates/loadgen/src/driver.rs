//! A vhost-user-blk driver: the part QEMU (and the guest's virtio-blk
//! driver) play. It connects to any vhost-user-blk backend, negotiates
//! features, shares its memory through a memfd, sets up split virtqueues
//! and submits virtio-blk requests on them.
//!
//! Built on the rust-vmm `vhost` crate's frontend side and `vm-memory`;
//! the ring handling is [`super::vring`].

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vhost::vhost_user::message::{
    VhostUserConfigFlags, VhostUserHeaderFlag, VhostUserProtocolFeatures, VhostUserVirtioFeatures,
};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use virtio_bindings::virtio_blk::{VIRTIO_BLK_F_CONFIG_WCE, virtio_blk_config};
use virtio_bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use vm_memory::mmap::MmapRegion;
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryMmap, GuestRegionMmap};
use vmm_sys_util::eventfd::{EFD_NONBLOCK, EventFd};
use vssd_common::virtio::{OFFERED_FEATURES, feature_bits};

use super::vring::{Buf, DriverQueue, VringError, ring_bytes};

/// Errors of the driver.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The vhost-user conversation failed.
    #[error("vhost-user: {0}")]
    Vhost(#[from] vhost::Error),
    /// Setting up the shared memory failed.
    #[error("shared memory: {0}")]
    Memory(String),
    /// A ring operation failed.
    #[error(transparent)]
    Ring(#[from] VringError),
    /// The backend lacks something needed.
    #[error("the backend {0}")]
    Backend(String),
    /// Waiting for completions failed or timed out.
    #[error("waiting for completions: {0}")]
    Wait(String),
    /// The backend closed the vhost-user connection.
    #[error(
        "the backend closed the vhost-user connection (the daemon stopped, or the drive's power was cut)"
    )]
    Disconnected,
    /// System call failure.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> DriverError {
    move |source| DriverError::Io { what, source }
}

/// How to connect.
#[derive(Debug, Clone)]
pub struct DriverOptions {
    /// Queues to set up (at most what the backend offers).
    pub queues: u16,
    /// Entries per queue (a power of two).
    pub queue_size: u16,
    /// Shared memory size (rings, then data buffers).
    pub mem_bytes: u64,
    /// Negotiate `VIRTIO_RING_F_EVENT_IDX` if offered.
    pub event_idx: bool,
    /// Declare the memory region this long instead of its real size (a
    /// hostile frontend, for robustness tests).
    pub declared_mem_bytes: Option<u64>,
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions {
            queues: 1,
            queue_size: 128,
            mem_bytes: 64 << 20,
            event_idx: true,
            declared_mem_bytes: None,
        }
    }
}

/// One virtqueue and its eventfds.
pub struct Vq {
    /// The ring.
    pub ring: DriverQueue,
    kick: EventFd,
    call: EventFd,
    /// The vhost-user connection (a duplicate of its socket), watched for
    /// the backend hanging up.
    peer: Arc<OwnedFd>,
    /// Kicks sent (the backend asked to be notified).
    pub kicks: u64,
    /// Waits for the call eventfd that found it signalled.
    pub calls: u64,
}

impl Vq {
    /// Publish what was added, kicking the backend if it wants.
    pub fn kick(&mut self, mem: &GuestMemoryMmap) -> Result<(), DriverError> {
        if self.ring.publish(mem)? {
            self.kick.write(1).map_err(io("kick"))?;
            self.kicks += 1;
        }
        Ok(())
    }

    /// Store `idx` as the available ring's index and kick the backend,
    /// whatever the ring holds: a broken or hostile driver (robustness
    /// tests). The ring's own bookkeeping is left as it was.
    pub fn publish_raw_avail_idx(
        &mut self,
        mem: &GuestMemoryMmap,
        idx: u16,
    ) -> Result<(), DriverError> {
        let (_, avail, _) = self.ring.addrs();
        mem.store(
            idx,
            GuestAddress(avail + 2),
            std::sync::atomic::Ordering::Release,
        )
        .map_err(|e| DriverError::Memory(e.to_string()))?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        self.kick.write(1).map_err(io("kick"))?;
        self.kicks += 1;
        Ok(())
    }

    /// Wait until the backend signals the call eventfd or `timeout`
    /// passes (then `Ok(false)`); the signal is consumed.
    pub fn wait_call(&mut self, timeout: Duration) -> Result<bool, DriverError> {
        let mut p = [
            libc::pollfd {
                fd: self.call.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.peer.as_raw_fd(),
                events: libc::POLLRDHUP,
                revents: 0,
            },
        ];
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: two valid pollfds.
        let r = unsafe { libc::poll(p.as_mut_ptr(), 2, ms) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io("poll")(e));
            }
            return Ok(false);
        }
        let signalled = self.call.read().is_ok();
        if signalled {
            self.calls += 1;
        } else if p[1].revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            return Err(DriverError::Disconnected);
        }
        Ok(signalled)
    }
}

/// The fields of the backend's config space a driver needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlkInfo {
    /// Disk size, bytes.
    pub capacity: u64,
    /// Largest segment, bytes (0: not given).
    pub size_max: u32,
    /// Most data segments (0: not given).
    pub seg_max: u32,
    /// Logical block, bytes.
    pub blk_size: u32,
    /// Largest discard, sectors.
    pub max_discard_sectors: u32,
    /// Most discard segments.
    pub max_discard_seg: u32,
    /// Largest write-zeroes, sectors.
    pub max_write_zeroes_sectors: u32,
    /// Queues the backend offers.
    pub num_queues: u16,
    /// Features acknowledged.
    pub features: u64,
}

/// A connected vhost-user-blk driver.
pub struct BlkDriver {
    fe: Frontend,
    mem: GuestMemoryMmap,
    _memfd: File,
    queues: Vec<Vq>,
    info: BlkInfo,
    next_free: u64,
    mem_bytes: u64,
}

fn memfd(bytes: u64) -> Result<File, DriverError> {
    let name = c"vssd-loadgen";
    // SAFETY: memfd_create takes a valid NUL-terminated name and flags.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io("memfd_create")(std::io::Error::last_os_error()));
    }
    // SAFETY: the fd was just created and is owned by nobody else.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(bytes).map_err(io("sizing the memfd"))?;
    Ok(f)
}

impl BlkDriver {
    /// Connect to the backend at `socket` and set everything up.
    pub fn connect(socket: &Path, opts: &DriverOptions) -> Result<BlkDriver, DriverError> {
        if !opts.queue_size.is_power_of_two() {
            return Err(DriverError::Backend(format!(
                "queue size {} is not a power of two",
                opts.queue_size
            )));
        }
        let ring = ring_bytes(opts.queue_size);
        let rings = ring * u64::from(opts.queues);
        if opts.mem_bytes < rings + (1 << 20) {
            return Err(DriverError::Memory(format!(
                "{} bytes of memory is too little for the rings and buffers",
                opts.mem_bytes
            )));
        }
        let file = memfd(opts.mem_bytes)?;
        let region = MmapRegion::<()>::from_file(
            FileOffset::new(file.try_clone().map_err(io("dup memfd"))?, 0),
            opts.mem_bytes as usize,
        )
        .map_err(|e| DriverError::Memory(e.to_string()))?;
        let va = region.as_ptr() as u64;
        let mem = GuestMemoryMmap::from_regions(vec![
            GuestRegionMmap::new(region, GuestAddress(0))
                .ok_or_else(|| DriverError::Memory("bad region".into()))?,
        ])
        .map_err(|e| DriverError::Memory(e.to_string()))?;

        let mut fe = Frontend::connect(socket, u64::from(opts.queues))?;
        fe.set_owner()?;
        let offered = fe.get_features()?;
        // What the device offers, but the write-cache toggle (the load
        // generator leaves the cache as the device has it) and, unless
        // asked, event indices.
        let mut want = feature_bits(&OFFERED_FEATURES)
            & !(1 << VIRTIO_BLK_F_CONFIG_WCE)
            & !(1 << VIRTIO_RING_F_EVENT_IDX)
            | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();
        if opts.event_idx {
            want |= 1 << VIRTIO_RING_F_EVENT_IDX;
        }
        let features = offered & want;
        if features & VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits() == 0 {
            return Err(DriverError::Backend(
                "does not offer VHOST_USER_F_PROTOCOL_FEATURES".into(),
            ));
        }
        let proto = fe.get_protocol_features()?
            & (VhostUserProtocolFeatures::MQ
                | VhostUserProtocolFeatures::CONFIG
                | VhostUserProtocolFeatures::REPLY_ACK);
        fe.set_protocol_features(proto)?;
        if proto.contains(VhostUserProtocolFeatures::REPLY_ACK) {
            // As QEMU does: have every message acknowledged, so a refused
            // memory table or ring setup is reported here.
            fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
        }
        let num_queues = if proto.contains(VhostUserProtocolFeatures::MQ) {
            fe.get_queue_num()? as u16
        } else {
            1
        };
        if opts.queues == 0 || opts.queues > num_queues {
            return Err(DriverError::Backend(format!(
                "offers {num_queues} queues, {} asked",
                opts.queues
            )));
        }
        // Ask for the fields up to write-zeroes, as QEMU does (57 bytes):
        // older backends refuse a read past the end of their config space
        // (libvhost-user then answers with an empty payload).
        let cfg_len = (std::mem::offset_of!(virtio_blk_config, write_zeroes_may_unmap) + 1) as u32;
        let (_, cfg) = fe.get_config(
            0,
            cfg_len,
            VhostUserConfigFlags::empty(),
            &vec![0; cfg_len as usize],
        )?;
        let mut c = virtio_blk_config::default();
        // SAFETY: `virtio_blk_config` is packed plain data; we copy at most
        // its size from the reply into it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                cfg.as_ptr(),
                &mut c as *mut virtio_blk_config as *mut u8,
                cfg.len().min(cfg_len as usize),
            );
        }
        let info = BlkInfo {
            capacity: u64::from_le(c.capacity).saturating_mul(512),
            size_max: u32::from_le(c.size_max),
            seg_max: u32::from_le(c.seg_max),
            blk_size: u32::from_le(c.blk_size),
            max_discard_sectors: u32::from_le(c.max_discard_sectors),
            max_discard_seg: u32::from_le(c.max_discard_seg),
            max_write_zeroes_sectors: u32::from_le(c.max_write_zeroes_sectors),
            num_queues,
            features,
        };
        fe.set_features(features)?;
        let region = VhostUserMemoryRegionInfo {
            guest_phys_addr: 0,
            memory_size: opts.declared_mem_bytes.unwrap_or(opts.mem_bytes),
            userspace_addr: va,
            mmap_offset: 0,
            mmap_handle: file.as_raw_fd(),
        };
        fe.set_mem_table(&[region])?;

        let event_idx = features & (1 << VIRTIO_RING_F_EVENT_IDX) != 0;
        // SAFETY: dup of the connection's socket, a valid open fd; the
        // duplicate is owned here.
        let dup = unsafe { libc::dup(fe.as_raw_fd()) };
        if dup < 0 {
            return Err(io("dup the vhost-user socket")(
                std::io::Error::last_os_error(),
            ));
        }
        // SAFETY: `dup` is a new fd nothing else owns.
        let peer = Arc::new(unsafe { OwnedFd::from_raw_fd(dup) });
        let mut queues = Vec::new();
        for i in 0..opts.queues {
            let base = GuestAddress(ring * u64::from(i));
            let q = DriverQueue::new(&mem, base, opts.queue_size, event_idx)?;
            let (d, a, u) = q.addrs();
            let qi = usize::from(i);
            fe.set_vring_num(qi, opts.queue_size)?;
            fe.set_vring_base(qi, 0)?;
            fe.set_vring_addr(
                qi,
                &VringConfigData {
                    queue_max_size: opts.queue_size,
                    queue_size: opts.queue_size,
                    flags: 0,
                    desc_table_addr: va + d,
                    used_ring_addr: va + u,
                    avail_ring_addr: va + a,
                    log_addr: None,
                },
            )?;
            let kick = EventFd::new(EFD_NONBLOCK).map_err(io("eventfd"))?;
            let call = EventFd::new(EFD_NONBLOCK).map_err(io("eventfd"))?;
            fe.set_vring_kick(qi, &kick)?;
            fe.set_vring_call(qi, &call)?;
            fe.set_vring_enable(qi, true)?;
            queues.push(Vq {
                ring: q,
                kick,
                call,
                peer: peer.clone(),
                kicks: 0,
                calls: 0,
            });
        }
        Ok(BlkDriver {
            fe,
            mem,
            _memfd: file,
            queues,
            info,
            next_free: rings.div_ceil(4096) * 4096,
            mem_bytes: opts.mem_bytes,
        })
    }

    /// What the backend's config space says.
    pub fn info(&self) -> &BlkInfo {
        &self.info
    }

    /// The shared memory (guest addresses from 0).
    pub fn memory(&self) -> &GuestMemoryMmap {
        &self.mem
    }

    /// Reserve `bytes` of shared memory (aligned to 4 KiB) for buffers.
    pub fn alloc(&mut self, bytes: u64) -> Result<u64, DriverError> {
        let at = self.next_free;
        let end = at
            .checked_add(bytes.div_ceil(4096) * 4096)
            .filter(|e| *e <= self.mem_bytes)
            .ok_or_else(|| {
                DriverError::Memory(format!(
                    "{bytes} more bytes do not fit in the shared memory"
                ))
            })?;
        self.next_free = end;
        Ok(at)
    }

    /// Hostile: cut the shared memory file to `bytes` behind the backend's
    /// back, after it has mapped the memory table (what a frontend that
    /// shrinks its memfd does). This driver must not touch memory past
    /// `bytes` afterwards: its own mapping faults there too.
    pub fn truncate_shared_memory(&self, bytes: u64) -> Result<(), DriverError> {
        self._memfd
            .set_len(bytes)
            .map_err(io("shrinking the memfd"))
    }

    /// The number of queues set up.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Queue `q`.
    pub fn queue(&mut self, q: usize) -> &mut Vq {
        &mut self.queues[q]
    }

    /// Add a chain to queue `q` (not yet visible; see [`Self::kick`]).
    pub fn add(&mut self, q: usize, bufs: &[Buf]) -> Result<u16, DriverError> {
        Ok(self.queues[q].ring.add(&self.mem, bufs)?)
    }

    /// Store `idx` as queue `q`'s available index and kick, whatever the
    /// ring holds ([`Vq::publish_raw_avail_idx`]).
    pub fn publish_raw_avail_idx(&mut self, q: usize, idx: u16) -> Result<(), DriverError> {
        self.queues[q].publish_raw_avail_idx(&self.mem, idx)
    }

    /// Publish what was added to queue `q`, kicking the backend if it wants.
    pub fn kick(&mut self, q: usize) -> Result<(), DriverError> {
        self.queues[q].kick(&self.mem)
    }

    /// Take the queues out (to run each on its own thread, with a clone of
    /// [`Self::memory`]); the driver keeps the connection and the memory,
    /// so it must outlive them. [`Self::return_queues`] puts them back.
    pub fn take_queues(&mut self) -> Vec<Vq> {
        std::mem::take(&mut self.queues)
    }

    /// Put back queues taken by [`Self::take_queues`].
    pub fn return_queues(&mut self, queues: Vec<Vq>) {
        self.queues = queues;
    }

    /// Completed chains of queue `q` (head, used length), waiting up to
    /// `timeout` for at least one when `timeout` is non-zero.
    pub fn complete(
        &mut self,
        q: usize,
        timeout: Duration,
    ) -> Result<Vec<(u16, u32)>, DriverError> {
        let deadline = Instant::now() + timeout;
        loop {
            let vq = &mut self.queues[q];
            let done = vq.ring.take_used(&self.mem)?;
            if !done.is_empty() || timeout.is_zero() {
                return Ok(done);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(DriverError::Wait(format!(
                    "no completion on queue {q} within {timeout:?}"
                )));
            }
            vq.wait_call(left.min(Duration::from_secs(1)))?;
        }
    }

    /// The vhost-user connection, for raw messages.
    pub fn frontend(&mut self) -> &mut Frontend {
        &mut self.fe
    }

    /// Read bytes of shared memory.
    pub fn read_mem(&self, addr: u64, out: &mut [u8]) -> Result<(), DriverError> {
        self.mem
            .read_slice(out, GuestAddress(addr))
            .map_err(|e| DriverError::Memory(e.to_string()))
    }

    /// Write bytes of shared memory.
    pub fn write_mem(&self, addr: u64, data: &[u8]) -> Result<(), DriverError> {
        self.mem
            .write_slice(data, GuestAddress(addr))
            .map_err(|e| DriverError::Memory(e.to_string()))
    }
}
