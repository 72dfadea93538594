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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
use super::exec::{Done, Job, Next, WriteCache, execute, next_job};
use super::queue::QueueSched;
use super::request::Desc;
use super::sigbus;
use super::slow::SlowOps;
pub use vssd_device::completion::Timing;
use vssd_device::stats::Negotiating;
use vssd_device::{Connection, Device, Frontend, Status};

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
    /// The guest turned the write cache off (`wce` = 0): writes are FUA.
    write_through: AtomicBool,
    queue_size: usize,
    event_idx: AtomicBool,
    mem: RwLock<Option<Mem>>,
    queues: Vec<QueueSched>,
    vrings: Vec<Mutex<Option<VringRwLock>>>,
    draining: AtomicBool,
    timing: Timing,
    slow: SlowOps<(usize, Job)>,
    /// Per queue: the driver published an available index the ring cannot
    /// hold (or an entry that cannot be read). The queue is not processed
    /// until the frontend stops it (GET_VRING_BASE) or resets the device.
    broken: Vec<AtomicBool>,
    /// The worker threads' exit-event consumers: vhost-user-backend 0.24
    /// turns each into a raw fd registered in its epoll set and never
    /// closes it, so they are closed here once every worker is gone.
    exit_fds: Mutex<Vec<RawFd>>,
    /// Every memory table this connection was given that may still be
    /// mapped, each with its mappings watched for faults (a frontend that
    /// shrinks the file behind its memory); pruned when only this holds it.
    watched: Mutex<Vec<(Arc<GuestMemoryMmap>, sigbus::Guard)>>,
    /// [`sigbus::fault_count`] when last looked at.
    faults_seen: AtomicU64,
    /// The memory table in use faulted: no request is served from it.
    memory_bad: AtomicBool,
    /// Held from the socket's accept until features are acknowledged.
    negotiating: Mutex<Option<Negotiating>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last backend clone is gone, so the workers (which hold
        // clones) have exited and their epoll sets are closed.
        for fd in self
            .exit_fds
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            // SAFETY: `fd` is an exit-event consumer this backend created
            // and handed to vhost-user-backend, which converted it into a
            // raw fd it never closes (0.24's `VringEpollHandler::new`);
            // nothing else owns it, and no thread uses it any more.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
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
                write_through: AtomicBool::new(config.space.0.wce == 0),
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
                broken: (0..num_queues).map(|_| AtomicBool::new(false)).collect(),
                exit_fds: Mutex::new(Vec::new()),
                watched: Mutex::new(Vec::new()),
                faults_seen: AtomicU64::new(sigbus::fault_count()),
                memory_bad: AtomicBool::new(false),
                negotiating: Mutex::new(None),
            }),
        })
    }

    fn conn(&self) -> &Connection {
        self.inner.conn.get_or_init(|| {
            drop(lock(&self.inner.negotiating).take());
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

    /// A frontend has connected to the socket: counted as negotiating
    /// until it acknowledges features (a paused VM waits before that).
    pub fn client_arrived(&self) {
        if self.inner.conn.get().is_none() {
            *lock(&self.inner.negotiating) = Some(self.inner.frontend.negotiating());
        }
    }

    /// The frontend's socket closed.
    pub fn client_left(&self) {
        drop(lock(&self.inner.negotiating).take());
    }

    fn mem(&self) -> Option<Mem> {
        self.inner
            .mem
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The write cache as the guest set it.
    fn cache(&self) -> WriteCache {
        if self.inner.write_through.load(Ordering::Relaxed) {
            WriteCache::WriteThrough
        } else {
            WriteCache::WriteBack
        }
    }

    fn draining(&self) -> bool {
        self.inner.draining.load(Ordering::Relaxed)
    }

    /// Execute a slow job on the slow-op thread and queue its completion.
    fn run_slow(&self, qi: usize, job: Job) {
        let Some(atomic) = self.mem() else { return };
        let mem = atomic.memory();
        let dev = &self.inner.device;
        let lim = &self.inner.config.limits;
        let mut done = execute(dev, self.conn(), &mem, lim, self.cache(), job);
        done.pending.set_queue(qi as u16);
        if self.memory_faulted() {
            done.pending.fail(Status::IoError);
        }
        let q = &self.inner.queues[qi];
        q.push(done);
        // Wake the queue thread: at the deadline, or now when draining.
        q.arm(dev, self.draining(), self.inner.timing.spin_ns);
    }

    fn complete(&self, vring: &VringRwLock, done: Done, now_ns: u64) {
        if !self.inner.device.powered() {
            // A drive without power completes nothing: the request is
            // dropped (abandoned); QEMU resubmits it after reconnecting.
            return;
        }
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
        if self.is_broken(qi) {
            return;
        }
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
                if !dev.powered() {
                    // The power went during the batch: take nothing more.
                    break;
                }
                // Bound the guard to this statement (holding it while
                // completing would deadlock on the vring lock).
                let next = next_job(vring.get_mut().get_queue_mut(), mem, lim, &mut descs);
                let mut job = match next {
                    Next::Job(j) => j,
                    Next::Empty => break,
                    Next::Broken(why) => {
                        self.mark_broken(qi, &why);
                        break;
                    }
                };
                job.received_ns = dev.tracing().then(|| dev.now_ns());
                if self.memory_faulted() {
                    // What was read came from a zero page: not a request.
                    break;
                }
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
                let mut done = execute(dev, self.conn(), mem, lim, self.cache(), job);
                done.pending.set_queue(qi as u16);
                if self.memory_faulted() {
                    done.pending.fail(Status::IoError);
                }
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
            // A broken ring keeps looking non-empty to enable_notification:
            // stop here, or the loop would never end. Same for memory that
            // faulted (the queues are marked broken).
            if !event_idx || self.is_broken(qi) || !dev.powered() {
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

    /// Watch a new memory table's mappings for faults, as long as they are
    /// mapped; forget tables nothing else holds any more.
    fn watch(&self, mem: &Mem) {
        let table = mem.memory().into_inner();
        let guard = sigbus::Guard::watch(table.iter().filter_map(|r| {
            let p = r.get_host_address(vm_memory::MemoryRegionAddress(0)).ok()?;
            Some((p as usize, r.len() as usize))
        }));
        let mut w = lock(&self.inner.watched);
        // Unwatch before the last reference goes (the mapping outlives it).
        w.retain(|(t, _)| Arc::strong_count(t) > 1);
        w.push((table, guard));
        self.inner.memory_bad.store(false, Ordering::Relaxed);
    }

    /// Whether a page of this connection's guest memory faulted (its file
    /// shrank after the memory table was set). The first time: every queue
    /// stops, logged once; the frontend must reset the device or go.
    fn memory_faulted(&self) -> bool {
        if self.inner.memory_bad.load(Ordering::Relaxed) {
            return true;
        }
        let n = sigbus::fault_count();
        if self.inner.faults_seen.swap(n, Ordering::Relaxed) == n {
            return false;
        }
        // The table in use is the last one watched.
        let at = lock(&self.inner.watched)
            .last()
            .and_then(|(_, g)| g.faulted());
        let Some(at) = at else { return false };
        self.inner.memory_bad.store(true, Ordering::Relaxed);
        let why = format!(
            "the frontend's guest memory faulted at {at:#x} (the file behind its memory \
             table shrank after it was mapped)"
        );
        for qi in 0..self.inner.broken.len() {
            self.mark_broken(qi, &why);
        }
        true
    }

    fn is_broken(&self, qi: usize) -> bool {
        self.inner
            .broken
            .get(qi)
            .is_some_and(|b| b.load(Ordering::Relaxed))
    }

    /// Stop processing queue `qi` until the frontend stops or resets it;
    /// logged once per breakage.
    fn mark_broken(&self, qi: usize, why: &str) {
        if let Some(b) = self.inner.broken.get(qi)
            && !b.swap(true, Ordering::Relaxed)
        {
            warn!(
                "queue {qi}: {why}; the driver's ring is broken, the queue is not served \
                 until the frontend resets it"
            );
        }
    }

    /// Whether the driver has made requests available that are not popped yet.
    fn ring_has_work(&self, qi: usize, vring: &VringRwLock) -> bool {
        if self.is_broken(qi) {
            return false;
        }
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
            if self.ring_has_work(qi, vring) {
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
        for b in &self.inner.broken {
            b.store(false, Ordering::Relaxed);
        }
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
        // Only the writeback flag is writable. With it off, the guest
        // sends no FLUSH: every write is then durable before it completes.
        if offset as usize == WCE_OFFSET && buf.len() == 1 {
            lock(&self.inner.space).0.wce = buf[0].min(1);
            self.inner
                .write_through
                .store(buf[0] == 0, Ordering::Relaxed);
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
                self.watch(&mem);
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
        let pair =
            new_event_consumer_and_notifier(EventFlag::NONBLOCK | EventFlag::CLOEXEC).ok()?;
        lock(&self.inner.exit_fds).push(pair.0.as_raw_fd());
        Some(pair)
    }

    fn stop_vring(&self, queue_index: u32) -> io::Result<()> {
        // The frontend is stopping the ring: complete what is pending now
        // rather than leave the guest waiting for it.
        let qi = queue_index as usize;
        let (Some(q), Some(slot)) = (self.inner.queues.get(qi), self.inner.vrings.get(qi)) else {
            return Ok(());
        };
        // The frontend sets the ring up again before restarting it.
        if let Some(b) = self.inner.broken.get(qi) {
            b.store(false, Ordering::Relaxed);
        }
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
        if u64::from(device_event) == self.timer_event_id() {
            q.fired();
        }
        if !self.inner.device.powered() {
            // The drive's power is off: it takes no request and completes
            // none (the daemon closes this connection; what is pending is
            // dropped with it).
            return Ok(());
        }
        if device_event == 0 {
            self.process_queue(thread_id, vring);
        }
        self.settle(thread_id, vring);
        Ok(())
    }
}

/// The vring path without QEMU: a driver-side split queue in plain memory
/// (virtio-queue's `MockSplitQueue`), the backend's event handler called
/// directly, the used ring and the call eventfd inspected.
#[cfg(test)]
mod tests;
