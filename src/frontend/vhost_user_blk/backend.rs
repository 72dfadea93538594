//! The vhost-user glue: queue events in, jobs parsed and executed
//! ([`super::exec`]), completions out at their modelled time
//! ([`super::queue`]).
//!
//! One worker thread per queue (`queues_per_thread`), each with its own
//! timerfd registered in the worker's epoll set, so a queue's requests and
//! its completions are handled by the same thread and queues run in
//! parallel (`VhostUserBackend` takes `&self`; per-queue state is behind
//! per-queue locks). A request's data I/O runs when it is popped; its
//! used-ring entry waits in the queue's heap until the model's completion
//! time. Requests that may block run on the slow-op thread ([`super::slow`]).

use std::cell::Cell;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use log::{debug, info, warn};
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost_user_backend::{VhostUserBackend, VringRwLock, VringT};
use virtio_queue::QueueT;
use vm_memory::{
    GuestAddressSpace, GuestMemoryAtomic, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion,
};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{
    EventConsumer, EventFlag, EventNotifier, new_event_consumer_and_notifier,
};

use super::config::{BlkConfig, ConfigSpace, WCE_OFFSET};
use super::exec::{Done, Job, MAX_DESCS, execute};
use super::queue::QueueSched;
use super::request::Desc;
use super::slow::SlowOps;
pub use crate::device::scheduler::Timing;
use crate::device::{Connection, Device, Frontend};

type Mem = GuestMemoryAtomic<GuestMemoryMmap>;

/// Longest a queue thread spins on near deadlines before going back to
/// its epoll loop once (other events, shutdown).
const SPIN_SESSION_NS: u64 = 1_000_000;

struct Inner {
    device: Arc<Device>,
    frontend: Frontend,
    /// Opened when the frontend acknowledges features: a client that only
    /// connects (a liveness probe) is not counted as a connection.
    conn: OnceLock<Connection>,
    config: BlkConfig,
    space: Mutex<ConfigSpace>,
    queue_size: usize,
    event_idx: AtomicBool,
    mem: RwLock<Option<Mem>>,
    queues: Vec<QueueSched>,
    vrings: Vec<Mutex<Option<VringRwLock>>>,
    draining: AtomicBool,
    timing: Timing,
    slow: SlowOps<(usize, Job)>,
}

/// The vhost-user-blk backend of one connection (clones share state).
#[derive(Clone)]
pub struct BlkBackend {
    inner: Arc<Inner>,
}

thread_local! {
    static THREAD_SET_UP: Cell<bool> = const { Cell::new(false) };
}

/// Why a frontend's memory table is refused.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// A region's file is shorter than the region: touching its end would
    /// kill the daemon with SIGBUS.
    #[error(
        "memory region at guest address {gpa:#x} ({len} bytes from file offset {offset}) \
         extends past the end of its file ({file_len} bytes)"
    )]
    PastEndOfFile {
        /// Guest physical address.
        gpa: u64,
        /// Region length.
        len: u64,
        /// Offset in the file.
        offset: u64,
        /// File size.
        file_len: u64,
    },
    /// The file's size cannot be read.
    #[error("memory region at guest address {gpa:#x}: cannot stat its file")]
    Stat {
        /// Guest physical address.
        gpa: u64,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Check every file-backed region of `mem` against its file's size (mapped
/// past the end of a file, an access is a SIGBUS rather than an error).
pub fn check_regions(mem: &GuestMemoryMmap) -> Result<(), MemoryError> {
    for r in mem.iter() {
        let Some(fo) = r.file_offset() else { continue };
        let gpa = r.start_addr().0;
        let file_len = fo
            .file()
            .metadata()
            .map_err(|source| MemoryError::Stat { gpa, source })?
            .len();
        let len = r.len();
        let offset = fo.start();
        if offset.checked_add(len).is_none_or(|end| end > file_len) {
            return Err(MemoryError::PastEndOfFile {
                gpa,
                len,
                offset,
                file_len,
            });
        }
    }
    Ok(())
}

impl BlkBackend {
    /// A backend for `device` with `num_queues` queues of up to `queue_size` entries,
    /// accounted under `frontend`, waiting for completion times as `timing` says.
    pub fn new(
        device: Arc<Device>,
        frontend: Frontend,
        num_queues: u16,
        queue_size: u16,
        timing: Timing,
    ) -> io::Result<BlkBackend> {
        let config = BlkConfig::new(device.topology(), num_queues);
        let queues = (0..num_queues)
            .map(|_| QueueSched::new())
            .collect::<io::Result<Vec<_>>>()?;
        Ok(BlkBackend {
            inner: Arc::new(Inner {
                device,
                frontend,
                conn: OnceLock::new(),
                space: Mutex::new(config.space),
                config,
                queue_size: queue_size as usize,
                event_idx: AtomicBool::new(false),
                mem: RwLock::new(None),
                vrings: (0..num_queues).map(|_| Mutex::new(None)).collect(),
                queues,
                draining: AtomicBool::new(false),
                timing,
                slow: SlowOps::default(),
            }),
        })
    }

    fn conn(&self) -> &Connection {
        self.inner.conn.get_or_init(|| {
            let c = self.inner.frontend.connect("vhost-user frontend");
            info!("frontend connected (connection {})", c.id());
            c
        })
    }

    /// The epoll event id of every queue's timer in its worker's epoll set.
    pub fn timer_event_id(&self) -> u64 {
        self.inner.queues.len() as u64 + 1
    }

    /// Raw fd of queue `q`'s timer (register it with [`Self::timer_event_id`]).
    pub fn timer_fd(&self, q: usize) -> RawFd {
        self.inner.queues[q].timer_fd()
    }

    /// Completions not yet delivered, all queues (slow ops included).
    pub fn pending(&self) -> usize {
        self.inner.queues.iter().map(QueueSched::len).sum::<usize>() + self.inner.slow.pending()
    }

    /// Deliver every pending completion now and complete new requests at
    /// once from here on (clean shutdown).
    pub fn drain(&self) {
        self.inner.draining.store(true, Ordering::SeqCst);
        for q in &self.inner.queues {
            q.arm(&self.inner.device, true, 0);
        }
    }

    /// Forget pending completions (the frontend is gone; their data is
    /// already stored). They are counted as abandoned.
    pub fn reset_pending(&self) {
        VhostUserBackend::reset_device(self);
    }

    fn mem(&self) -> Option<Mem> {
        self.inner
            .mem
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn draining(&self) -> bool {
        self.inner.draining.load(Ordering::Relaxed)
    }

    /// Execute a slow job on the slow-op thread and queue its completion.
    fn run_slow(&self, qi: usize, job: Job) {
        let Some(atomic) = self.mem() else { return };
        let mem = atomic.memory();
        let dev = &self.inner.device;
        let done = execute(dev, self.conn(), &mem, &self.inner.config.limits, job);
        let q = &self.inner.queues[qi];
        q.push(done);
        // Wake the queue thread: at the deadline, or now when draining.
        q.arm(dev, self.draining(), self.inner.timing.spin_ns);
    }

    fn complete(&self, vring: &VringRwLock, done: Done, now_ns: u64) {
        if let Err(e) = vring.add_used(done.head, done.used_len) {
            warn!("add_used failed for head {}: {e:?}", done.head);
        }
        done.pending.complete(now_ns);
    }

    /// Deliver what is due (everything if draining). True if anything was added.
    fn deliver_due(&self, qi: usize, vring: &VringRwLock) -> bool {
        let now = self.inner.device.now_ns();
        let due = self.inner.queues[qi].take_due(now, self.draining());
        let any = !due.is_empty();
        for d in due {
            self.complete(vring, d, now);
        }
        any
    }

    /// Pop, parse and execute everything on the ring (with EVENT_IDX:
    /// until re-enabling notifications finds nothing new), completing
    /// inline what is due. Between requests of a batch, completions that
    /// fell due meanwhile are delivered and signalled at once; what the
    /// batch completed inline is signalled once at its end.
    fn process_queue(&self, qi: usize, vring: &VringRwLock) {
        let Some(atomic) = self.mem() else { return };
        let event_idx = self.inner.event_idx.load(Ordering::Relaxed);
        let dev = &self.inner.device;
        let q = &self.inner.queues[qi];
        let lim = &self.inner.config.limits;
        let mut used = false;
        let mut descs: Vec<Desc> = Vec::with_capacity(8);
        // One memory guard for the whole batch (a new table applies from
        // the next kick).
        let mem = atomic.memory();
        let mem: &GuestMemoryMmap = &mem;
        loop {
            if event_idx && let Err(e) = vring.disable_notification() {
                debug!("disable_notification: {e:?}");
            }
            loop {
                // Bound the guard to this statement (holding it while
                // completing would deadlock on the vring lock).
                let chain = vring.get_mut().get_queue_mut().pop_descriptor_chain(mem);
                let Some(chain) = chain else { break };
                let head = chain.head_index();
                descs.clear();
                descs.extend(chain.take(MAX_DESCS + 1).map(|d| Desc {
                    addr: d.addr().0,
                    len: d.len(),
                    write_only: d.is_write_only(),
                }));
                let mut job = Job::parse(mem, head, &descs, lim);
                if job.is_slow() {
                    let weak = Arc::downgrade(&self.inner);
                    match self.inner.slow.send((qi, job), move || {
                        move |(qi, job)| match weak.upgrade() {
                            Some(inner) => {
                                BlkBackend { inner }.run_slow(qi, job);
                                true
                            }
                            None => false,
                        }
                    }) {
                        Ok(()) => continue,
                        Err((_, j)) => job = j,
                    }
                }
                let done = execute(dev, self.conn(), mem, lim, job);
                let now = dev.now_ns();
                if done.due_ns() <= now || self.draining() {
                    self.complete(vring, done, now);
                    used = true;
                } else {
                    q.push(done);
                }
                if q.next_due().is_some_and(|d| d <= now) && self.deliver_due(qi, vring) {
                    // Completions that fell due during a long batch go out now.
                    notify(vring);
                    used = false;
                }
            }
            if !event_idx {
                break;
            }
            match vring.enable_notification() {
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    debug!("enable_notification: {e:?}");
                    break;
                }
            }
        }
        used |= self.deliver_due(qi, vring);
        if used {
            notify(vring);
        }
    }

    /// Whether the driver has made requests available that are not popped yet.
    fn ring_has_work(&self, vring: &VringRwLock) -> bool {
        let Some(atomic) = self.mem() else {
            return false;
        };
        let mem = atomic.memory();
        let v = vring.get_ref();
        let queue = v.get_queue();
        queue.ready()
            && queue
                .avail_idx(&*mem, Ordering::Acquire)
                .is_ok_and(|i| i.0 != queue.next_avail())
    }

    /// Deliver what is due; while the next completion is due within the
    /// spin margin, poll the clock (and the ring, executing new requests)
    /// instead of sleeping; then arm the timer a spin margin early.
    fn settle(&self, qi: usize, vring: &VringRwLock) {
        let dev = &self.inner.device;
        let q = &self.inner.queues[qi];
        let spin = self.inner.timing.spin_ns;
        let start = dev.now_ns();
        while let Some(due) = q.next_due() {
            let now = dev.now_ns();
            if due <= now || self.draining() {
                if self.deliver_due(qi, vring) {
                    notify(vring);
                }
                continue;
            }
            if due - now > spin || now.saturating_sub(start) > SPIN_SESSION_NS {
                break;
            }
            if self.ring_has_work(vring) {
                self.process_queue(qi, vring);
            } else {
                std::hint::spin_loop();
            }
        }
        q.arm(dev, self.draining(), spin);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn notify(vring: &VringRwLock) {
    match vring.needs_notification() {
        Ok(true) => {
            if let Err(e) = vring.signal_used_queue() {
                debug!("signal_used_queue: {e}");
            }
        }
        Ok(false) => {}
        Err(e) => debug!("needs_notification: {e:?}"),
    }
}

impl VhostUserBackend for BlkBackend {
    type Bitmap = ();
    type Vring = VringRwLock;

    fn num_queues(&self) -> usize {
        self.inner.queues.len()
    }

    fn max_queue_size(&self) -> usize {
        self.inner.queue_size
    }

    fn features(&self) -> u64 {
        self.inner.config.features
    }

    fn acked_features(&self, _features: u64) {
        self.conn();
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::CONFIG
            | VhostUserProtocolFeatures::REPLY_ACK
    }

    fn reset_device(&self) {
        for q in &self.inner.queues {
            drop(q.take_due(0, true));
            q.arm(&self.inner.device, false, 0);
        }
    }

    fn set_event_idx(&self, enabled: bool) {
        self.inner.event_idx.store(enabled, Ordering::Relaxed);
    }

    fn get_config(&self, offset: u32, size: u32) -> Vec<u8> {
        BlkConfig::read(&lock(&self.inner.space), offset, size)
    }

    fn set_config(&self, offset: u32, buf: &[u8]) -> io::Result<()> {
        // Only the writeback flag is writable; data is always on the
        // backing file before completion and FLUSH syncs it either way.
        if offset as usize == WCE_OFFSET && buf.len() == 1 {
            lock(&self.inner.space).0.wce = buf[0].min(1);
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(libc::EINVAL))
        }
    }

    fn update_memory(&self, mem: GuestMemoryAtomic<GuestMemoryMmap>) -> io::Result<()> {
        let checked = check_regions(&mem.memory());
        let mut slot = self.inner.mem.write().unwrap_or_else(|e| e.into_inner());
        match checked {
            Ok(()) => {
                *slot = Some(mem);
                Ok(())
            }
            Err(e) => {
                // Never touch this memory: requests wait until a valid table.
                warn!("refusing the frontend's memory table: {e}");
                *slot = None;
                Err(io::Error::new(io::ErrorKind::InvalidInput, e))
            }
        }
    }

    fn queues_per_thread(&self) -> Vec<u64> {
        (0..self.inner.queues.len()).map(|i| 1u64 << i).collect()
    }

    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        new_event_consumer_and_notifier(EventFlag::NONBLOCK | EventFlag::CLOEXEC).ok()
    }

    fn stop_vring(&self, queue_index: u32) -> io::Result<()> {
        // The frontend is stopping the ring: complete what is pending now
        // rather than leave the guest waiting for it.
        let qi = queue_index as usize;
        let (Some(q), Some(slot)) = (self.inner.queues.get(qi), self.inner.vrings.get(qi)) else {
            return Ok(());
        };
        let dev = &self.inner.device;
        let pending = q.take_due(0, true);
        if let Some(v) = lock(slot).clone() {
            let now = dev.now_ns();
            let any = !pending.is_empty();
            for d in pending {
                self.complete(&v, d, now);
            }
            if any {
                notify(&v);
            }
        }
        q.arm(dev, false, 0);
        Ok(())
    }

    fn handle_event(
        &self,
        device_event: u16,
        _evset: EventSet,
        vrings: &[VringRwLock],
        thread_id: usize,
    ) -> io::Result<()> {
        THREAD_SET_UP.with(|s| {
            if !s.get() {
                self.inner.timing.setup_thread();
                s.set(true);
            }
        });
        let (Some(vring), Some(q)) = (vrings.first(), self.inner.queues.get(thread_id)) else {
            return Ok(());
        };
        lock(&self.inner.vrings[thread_id]).get_or_insert_with(|| vring.clone());
        if device_event == 0 {
            self.process_queue(thread_id, vring);
        } else if u64::from(device_event) == self.timer_event_id() {
            q.fired();
        }
        self.settle(thread_id, vring);
        Ok(())
    }
}

/// The vring path without QEMU: a driver-side split queue in plain memory
/// (virtio-queue's `MockSplitQueue`), the backend's event handler called
/// directly, the used ring and the call eventfd inspected.
#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::os::fd::{FromRawFd, IntoRawFd};
    use std::time::Duration;

    use virtio_bindings::virtio_blk::*;
    use virtio_bindings::virtio_ring::{VRING_DESC_F_NEXT, VRING_DESC_F_WRITE};
    use virtio_queue::desc::RawDescriptor;
    use virtio_queue::desc::split::Descriptor as SplitDescriptor;
    use virtio_queue::mock::MockSplitQueue;
    use vm_memory::{Bytes, GuestAddress};
    use vmm_sys_util::eventfd::{EFD_NONBLOCK, EventFd};

    use super::*;
    use crate::device::{DataLocation, DeviceOptions};
    use crate::profile::Profile;

    const QSIZE: u16 = 256;
    const MEM: usize = 16 << 20;
    /// Request buffers start here (the rings are below).
    const BUF: u64 = 1 << 20;

    struct Rig {
        backend: BlkBackend,
        vring: VringRwLock,
        call: EventFd,
        mem: GuestMemoryMmap,
        next_desc: u16,
    }

    /// A backend on a 64 MiB drive whose every command takes
    /// `overhead_ns` of model time (0: the instant profile), one queue.
    fn rig(overhead_ns: Option<u64>, event_idx: bool, spin_ns: u64) -> Rig {
        let mut profile = match overhead_ns {
            None => Profile::load_with_capacity("instant", Some(64 << 20)).unwrap(),
            Some(ns) => {
                let mut p = Profile::load_with_capacity("sata-mlc-2011", Some(1 << 30)).unwrap();
                p.host.command_overhead_ns = ns;
                p
            }
        };
        profile.host.queue_depth = profile.host.queue_depth.max(64);
        let device = Arc::new(
            Device::open(DeviceOptions {
                profile,
                data: DataLocation::Memory,
                state_file: None,
                seed: 1,
            })
            .unwrap(),
        );
        let fe = device.register_frontend("test", "mock", "");
        let backend = BlkBackend::new(
            device,
            fe,
            1,
            QSIZE,
            Timing {
                realtime: false,
                spin_ns,
            },
        )
        .unwrap();
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM)]).unwrap();
        let atomic = GuestMemoryAtomic::new(mem.clone());
        backend.update_memory(atomic.clone()).unwrap();
        backend.acked_features(backend.features());
        backend.set_event_idx(event_idx);
        let mq = MockSplitQueue::new(&mem, QSIZE);
        assert_eq!(
            (mq.avail_addr().0, mq.used_addr().0),
            (avail_addr(), used_addr())
        );
        let vring = VringRwLock::new(atomic, QSIZE).unwrap();
        vring
            .set_queue_info(mq.desc_table_addr().0, mq.avail_addr().0, mq.used_addr().0)
            .unwrap();
        vring.set_queue_size(QSIZE);
        vring.set_queue_event_idx(event_idx);
        vring.set_queue_ready(true);
        vring.set_enabled(true);
        let call = EventFd::new(EFD_NONBLOCK).unwrap();
        // SAFETY: a fresh fd from the eventfd clone, owned by the File.
        let f = unsafe { File::from_raw_fd(call.try_clone().unwrap().into_raw_fd()) };
        vring.set_call(Some(f));
        Rig {
            backend,
            vring,
            call,
            mem,
            next_desc: 0,
        }
    }

    // MockSplitQueue's layout (its used ring follows the available ring's
    // first `QSIZE` bytes, so the two overlap past ~30 entries: the tests
    // stay below that).
    fn avail_addr() -> u64 {
        16 * u64::from(QSIZE)
    }

    fn used_addr() -> u64 {
        (avail_addr() + 4 + u64::from(QSIZE)).next_multiple_of(4)
    }

    impl Rig {
        /// Driver side: request `i` (its buffers at `BUF + i * 8 KiB`):
        /// header, 4 KiB of data (read or write), status.
        fn add(&mut self, i: u64, kind: u32, sector: u64) {
            let base = BUF + i * 8192;
            let mut hdr = [0u8; 16];
            hdr[0..4].copy_from_slice(&kind.to_le_bytes());
            hdr[8..16].copy_from_slice(&sector.to_le_bytes());
            self.mem.write_slice(&hdr, GuestAddress(base)).unwrap();
            self.mem.write_obj(0xffu8, GuestAddress(base + 16)).unwrap();
            let data_flags = if kind == VIRTIO_BLK_T_IN {
                VRING_DESC_F_WRITE
            } else {
                0
            };
            self.chain(&[
                (base, 16, 0),
                (base + 4096, 4096, data_flags),
                (base + 16, 1, VRING_DESC_F_WRITE),
            ]);
        }

        /// Driver side: any chain of (addr, len, flags).
        fn chain(&mut self, descs: &[(u64, u32, u32)]) {
            let first = self.next_desc;
            let raw: Vec<RawDescriptor> = descs
                .iter()
                .enumerate()
                .map(|(k, &(addr, len, flags))| {
                    let last = k + 1 == descs.len();
                    let next = if last { 0 } else { first + k as u16 + 1 };
                    let flags = if last {
                        flags
                    } else {
                        flags | VRING_DESC_F_NEXT
                    };
                    RawDescriptor::from(SplitDescriptor::new(addr, len, flags as u16, next))
                })
                .collect();
            let mq = self.mock();
            mq.add_desc_chains(&raw, first).unwrap();
            self.next_desc = (first + descs.len() as u16) % QSIZE;
        }

        fn mock(&self) -> MockSplitQueue<'_, GuestMemoryMmap> {
            // Same layout as the queue the rig set up (the rings are not
            // re-zeroed: MockSplitQueue::new only writes flags/idx/event,
            // so keep the indices across calls).
            let avail_idx: u16 = self.mem.read_obj(GuestAddress(avail_addr() + 2)).unwrap();
            let used_idx: u16 = self.mem.read_obj(GuestAddress(used_addr() + 2)).unwrap();
            let used_event = self.used_event();
            let mq = MockSplitQueue::new(&self.mem, QSIZE);
            self.mem
                .write_obj(avail_idx, GuestAddress(avail_addr() + 2))
                .unwrap();
            self.mem
                .write_obj(used_idx, GuestAddress(used_addr() + 2))
                .unwrap();
            self.set_used_event(used_event);
            mq
        }

        fn used_event(&self) -> u16 {
            self.mem
                .read_obj(GuestAddress(avail_addr() + 4 + 2 * u64::from(QSIZE)))
                .unwrap()
        }

        /// Driver side: interrupt me when the used index passes `v`.
        fn set_used_event(&self, v: u16) {
            self.mem
                .write_obj(v, GuestAddress(avail_addr() + 4 + 2 * u64::from(QSIZE)))
                .unwrap();
        }

        fn used_idx(&self) -> u16 {
            self.mem.read_obj(GuestAddress(used_addr() + 2)).unwrap()
        }

        /// (id, len) of used entry `k`.
        fn used(&self, k: u16) -> (u32, u32) {
            let at = used_addr() + 4 + 8 * u64::from(k % QSIZE);
            (
                self.mem.read_obj(GuestAddress(at)).unwrap(),
                self.mem.read_obj(GuestAddress(at + 4)).unwrap(),
            )
        }

        fn status(&self, i: u64) -> u8 {
            self.mem
                .read_obj(GuestAddress(BUF + i * 8192 + 16))
                .unwrap()
        }

        /// Signals since the last call.
        fn signals(&self) -> u64 {
            self.call.read().unwrap_or(0)
        }

        fn kick(&self) {
            self.backend
                .handle_event(0, EventSet::IN, std::slice::from_ref(&self.vring), 0)
                .unwrap();
        }

        /// Wait (up to 10 s) for the queue's timer, then handle it.
        fn timer(&self) {
            let mut p = libc::pollfd {
                fd: self.backend.timer_fd(0),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut p, 1, 10_000) };
            assert_eq!(n, 1, "the timer did not fire");
            let id = self.backend.timer_event_id() as u16;
            self.backend
                .handle_event(id, EventSet::IN, std::slice::from_ref(&self.vring), 0)
                .unwrap();
        }
    }

    /// One kick with 8 requests: all executed, all completed inline (the
    /// instant profile), the used ring has them with their lengths, and
    /// the driver is interrupted once for the batch.
    #[test]
    fn a_batch_of_requests_is_completed_with_one_signal() {
        let mut r = rig(None, true, 0);
        for i in 0..8 {
            let kind = if i % 2 == 0 {
                VIRTIO_BLK_T_OUT
            } else {
                VIRTIO_BLK_T_IN
            };
            r.add(i, kind, i * 8);
        }
        r.kick();
        assert_eq!(r.used_idx(), 8);
        for k in 0..8u16 {
            let (id, len) = r.used(k);
            assert_eq!(id, 3 * u32::from(k), "in order for the instant profile");
            assert_eq!(len, if k % 2 == 0 { 1 } else { 4097 });
            assert_eq!(r.status(u64::from(k)), VIRTIO_BLK_S_OK as u8);
        }
        assert_eq!(r.signals(), 1, "one interrupt for the batch");
        assert_eq!(r.backend.pending(), 0);
    }

    /// EVENT_IDX: the driver's used_event is honoured — no signal until
    /// the used index passes it, then one.
    #[test]
    fn event_index_suppresses_signals_until_used_event() {
        let mut r = rig(None, true, 0);
        r.set_used_event(20);
        for i in 0..8 {
            r.add(i, VIRTIO_BLK_T_IN, 0);
        }
        r.kick();
        assert_eq!(r.used_idx(), 8);
        assert_eq!(r.signals(), 0, "used_event 20 not reached");
        for i in 8..24 {
            r.add(i, VIRTIO_BLK_T_IN, 0);
        }
        r.kick();
        assert_eq!(r.used_idx(), 24);
        assert_eq!(r.signals(), 1);
        // After a kick the device asks to be kicked again (avail_event).
        let avail_event: u16 = r
            .mem
            .read_obj(GuestAddress(used_addr() + 4 + 8 * u64::from(QSIZE)))
            .unwrap();
        assert_eq!(avail_event, 24);
    }

    /// Without EVENT_IDX every batch is signalled.
    #[test]
    fn without_event_index_every_batch_is_signalled() {
        let mut r = rig(None, false, 0);
        for round in 0..3u64 {
            for i in 0..4 {
                r.add(round * 4 + i, VIRTIO_BLK_T_IN, 0);
            }
            r.kick();
            assert_eq!(r.signals(), 1);
        }
        assert_eq!(r.used_idx(), 12);
    }

    /// A timed drive: nothing is in the used ring before its modelled
    /// time; the queue's timer delivers it, with one signal.
    #[test]
    fn completions_wait_for_their_modelled_time() {
        let mut r = rig(Some(200_000_000), true, 0);
        for i in 0..3 {
            r.add(i, VIRTIO_BLK_T_IN, 0);
        }
        r.kick();
        assert_eq!(r.used_idx(), 0, "delivered before the modelled time");
        assert_eq!(r.signals(), 0);
        assert_eq!(r.backend.pending(), 3);
        r.timer();
        if r.used_idx() < 3 {
            // The commands are queued behind each other in the model: the
            // timer is re-armed for the later ones.
            r.timer();
        }
        while r.used_idx() < 3 {
            r.timer();
        }
        assert_eq!(r.backend.pending(), 0);
        assert!(r.signals() >= 1);
        let rep = r.backend.inner.device.report();
        assert_eq!(rep.ops["read"].cmds, 3);
        assert!(rep.ops["read"].delivered.p50_ns >= 200_000_000);
    }

    /// Spinning: a completion due within the spin margin is delivered
    /// by the handler that executed it, without waiting for the timer.
    #[test]
    fn near_deadlines_are_spun_on_not_slept_on() {
        let mut r = rig(Some(300_000), true, 5_000_000);
        r.add(0, VIRTIO_BLK_T_IN, 0);
        let t0 = std::time::Instant::now();
        r.kick();
        if t0.elapsed() < Duration::from_nanos(SPIN_SESSION_NS) {
            // Not preempted for longer than a spin session: it spun.
            assert_eq!(r.used_idx(), 1);
        } else {
            while r.used_idx() < 1 {
                r.timer();
            }
        }
        assert_eq!(r.backend.pending(), 0);
    }

    /// Draining (clean shutdown) delivers everything pending at once.
    #[test]
    fn draining_delivers_everything_now() {
        let mut r = rig(Some(60_000_000_000), true, 0);
        for i in 0..4 {
            r.add(i, VIRTIO_BLK_T_OUT, i * 8);
        }
        r.kick();
        assert_eq!(r.used_idx(), 0);
        r.backend.drain();
        r.timer();
        assert_eq!(r.used_idx(), 4);
        assert_eq!(r.backend.pending(), 0);
    }

    /// Flush and discard run on the slow-op thread; their completion comes
    /// back through the queue's timer.
    #[test]
    fn slow_requests_complete_through_the_timer() {
        let mut r = rig(None, true, 0);
        let base = BUF + 100 * 8192;
        let mut seg = 0u64.to_le_bytes().to_vec();
        seg.extend(2048u32.to_le_bytes());
        seg.extend(0u32.to_le_bytes());
        r.mem.write_slice(&seg, GuestAddress(base + 4096)).unwrap();
        let mut hdr = [0u8; 16];
        hdr[0..4].copy_from_slice(&VIRTIO_BLK_T_DISCARD.to_le_bytes());
        r.mem.write_slice(&hdr, GuestAddress(base)).unwrap();
        r.chain(&[
            (base, 16, 0),
            (base + 4096, 16, 0),
            (base + 16, 1, VRING_DESC_F_WRITE),
        ]);
        let fb = BUF + 101 * 8192;
        hdr[0..4].copy_from_slice(&VIRTIO_BLK_T_FLUSH.to_le_bytes());
        r.mem.write_slice(&hdr, GuestAddress(fb)).unwrap();
        r.chain(&[(fb, 16, 0), (fb + 16, 1, VRING_DESC_F_WRITE)]);
        r.kick();
        while r.used_idx() < 2 {
            r.timer();
        }
        assert_eq!(
            r.mem.read_obj::<u8>(GuestAddress(base + 16)).unwrap(),
            VIRTIO_BLK_S_OK as u8
        );
        assert_eq!(
            r.mem.read_obj::<u8>(GuestAddress(fb + 16)).unwrap(),
            VIRTIO_BLK_S_OK as u8
        );
    }

    /// Malformed chains get their error status in the used ring; the
    /// requests after them are served.
    #[test]
    fn malformed_chains_are_answered_and_the_queue_goes_on() {
        let mut r = rig(None, true, 0);
        let base = BUF + 200 * 8192;
        let mut hdr = [0u8; 16];
        hdr[0..4].copy_from_slice(&77u32.to_le_bytes());
        r.mem.write_slice(&hdr, GuestAddress(base)).unwrap();
        r.mem.write_obj(0xffu8, GuestAddress(base + 16)).unwrap();
        // Unknown type, then a writable header, then data outside memory.
        r.chain(&[(base, 16, 0), (base + 16, 1, VRING_DESC_F_WRITE)]);
        r.chain(&[
            (base, 16, VRING_DESC_F_WRITE),
            (base + 17, 1, VRING_DESC_F_WRITE),
        ]);
        r.add(0, VIRTIO_BLK_T_IN, 0);
        r.mem
            .write_obj(
                SplitDescriptor::new(
                    MEM as u64 + 4096,
                    4096,
                    (VRING_DESC_F_WRITE | VRING_DESC_F_NEXT) as u16,
                    r.next_desc - 1,
                ),
                GuestAddress(16 * u64::from(r.next_desc - 2)),
            )
            .unwrap();
        r.add(1, VIRTIO_BLK_T_IN, 0);
        r.kick();
        assert_eq!(r.used_idx(), 4);
        assert_eq!(
            r.mem.read_obj::<u8>(GuestAddress(base + 16)).unwrap(),
            VIRTIO_BLK_S_UNSUPP as u8
        );
        assert_eq!(
            r.mem.read_obj::<u8>(GuestAddress(base + 17)).unwrap(),
            VIRTIO_BLK_S_IOERR as u8
        );
        assert_eq!(r.status(0), VIRTIO_BLK_S_IOERR as u8);
        assert_eq!(r.status(1), VIRTIO_BLK_S_OK as u8);
        let rep = r.backend.inner.device.report();
        assert_eq!(rep.connection.rejected, 3);
    }
}
