//! vhost-user glue: queue events in, device calls, completions out at
//! their modelled time.
//!
//! One worker thread per queue (`queues_per_thread`), each with its own
//! timerfd registered in the worker's epoll set, so a queue's requests and
//! its completions are handled by the same thread and queues run in parallel
//! (`VhostUserBackend` takes `&self`; per-queue state is behind per-queue
//! locks). A request's data I/O runs when it is popped; its used-ring entry
//! waits in the queue's heap until the model's completion time.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak, mpsc};

use log::{debug, warn};
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost_user_backend::{VhostUserBackend, VringRwLock, VringT};
use virtio_bindings::virtio_blk::{
    VIRTIO_BLK_S_IOERR, VIRTIO_BLK_S_OK, VIRTIO_BLK_T_DISCARD, VIRTIO_BLK_T_FLUSH,
    VIRTIO_BLK_T_WRITE_ZEROES,
};
use virtio_queue::QueueT;
use vm_memory::{
    Bytes, GuestAddress, GuestAddressSpace, GuestMemoryAtomic, GuestMemoryBackend, GuestMemoryMmap,
    VolatileSlice,
};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{
    EventConsumer, EventFlag, EventNotifier, new_event_consumer_and_notifier,
};

use super::config::{BlkConfig, CONFIG_LEN, WCE_OFFSET};
use super::request::{
    BlkRequest, Desc, HEADER_LEN, Header, ParseError, Seg, parse_request, parse_segments,
    split_layout,
};
use crate::device::scheduler::{CompletionHeap, Timer, lower_timer_slack};
use crate::device::stats::OpKind;
use crate::device::{Device, DeviceError, Timing};

type Mem = GuestMemoryAtomic<GuestMemoryMmap>;

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
    /// The device failed the request.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

impl FrontendError {
    /// The virtio-blk status for this error.
    pub fn status(&self) -> u8 {
        match self {
            FrontendError::Parse(e) => e.status(),
            _ => VIRTIO_BLK_S_IOERR as u8,
        }
    }
}

/// A completion waiting for its time.
#[derive(Debug, Clone, Copy)]
struct Token {
    head: u16,
    used_len: u32,
    op: OpKind,
    bytes: u64,
    ok: bool,
    submit_ns: u64,
}

#[derive(Default)]
struct Sched {
    heap: CompletionHeap<Token>,
    armed_ns: Option<u64>,
}

struct QueueCtx {
    sched: Mutex<Sched>,
    timer: Timer,
    vring: Mutex<Option<VringRwLock>>,
}

struct Inner {
    device: Arc<Device>,
    config: BlkConfig,
    config_bytes: Mutex<[u8; CONFIG_LEN]>,
    queue_size: usize,
    event_idx: AtomicBool,
    mem: RwLock<Option<Mem>>,
    queues: Vec<QueueCtx>,
    draining: AtomicBool,
    realtime: bool,
    /// Requests handed to the slow-op thread and not yet in a heap.
    slow_pending: AtomicUsize,
    slow_tx: Mutex<Option<mpsc::Sender<SlowJob>>>,
}

/// A request that may block for long (FLUSH's fdatasync, DISCARD and
/// WRITE_ZEROES on the file): run off the queue thread so completions of
/// other requests are not held up behind it.
struct SlowJob {
    qi: usize,
    head: u16,
    descs: Vec<Desc>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Completions still queued when the connection's backend goes away
        // (e.g. a FLUSH finishing after QEMU left) are no longer in flight.
        let left: usize = self.queues.iter().map(|q| lock(&q.sched).heap.len()).sum();
        self.device
            .stats
            .in_flight
            .fetch_sub(left as u64, Ordering::Relaxed);
    }
}

/// The vhost-user-blk backend of one connection (clones share state).
#[derive(Clone)]
pub struct BlkBackend {
    inner: Arc<Inner>,
}

thread_local! {
    static SLACK_LOWERED: Cell<bool> = const { Cell::new(false) };
}

impl BlkBackend {
    /// A backend for `device` with `num_queues` queues of up to `queue_size` entries.
    /// With `realtime`, queue threads ask for `SCHED_FIFO` (see `vssd serve --realtime`).
    pub fn new(
        device: Arc<Device>,
        num_queues: u16,
        queue_size: u16,
        realtime: bool,
    ) -> io::Result<BlkBackend> {
        let config = BlkConfig::new(
            device.profile(),
            device.capacity(),
            num_queues,
            device.has_write_cache(),
        );
        let queues = (0..num_queues)
            .map(|_| {
                Ok(QueueCtx {
                    sched: Mutex::new(Sched::default()),
                    timer: Timer::new()?,
                    vring: Mutex::new(None),
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(BlkBackend {
            inner: Arc::new(Inner {
                device,
                config_bytes: Mutex::new(config.bytes),
                config,
                queue_size: queue_size as usize,
                event_idx: AtomicBool::new(false),
                mem: RwLock::new(None),
                queues,
                draining: AtomicBool::new(false),
                realtime,
                slow_pending: AtomicUsize::new(0),
                slow_tx: Mutex::new(None),
            }),
        })
    }

    /// Hand a request to the slow-op thread (started on first use; it ends
    /// when the backend is dropped). False if it could not be handed over.
    fn send_slow(&self, job: SlowJob) -> Result<(), SlowJob> {
        let mut tx = lock(&self.inner.slow_tx);
        if tx.is_none() {
            let (t, rx) = mpsc::channel::<SlowJob>();
            let weak: Weak<Inner> = Arc::downgrade(&self.inner);
            let spawned = std::thread::Builder::new()
                .name("vssd-slow-ops".into())
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        let Some(inner) = weak.upgrade() else { break };
                        BlkBackend { inner }.run_slow(job);
                    }
                });
            if spawned.is_err() {
                return Err(job);
            }
            *tx = Some(t);
        }
        self.inner.slow_pending.fetch_add(1, Ordering::SeqCst);
        match tx.as_ref().map(|t| t.send(job)) {
            Some(Ok(())) => Ok(()),
            Some(Err(mpsc::SendError(job))) => {
                self.inner.slow_pending.fetch_sub(1, Ordering::SeqCst);
                *tx = None;
                Err(job)
            }
            None => unreachable!("sender set above"),
        }
    }

    fn run_slow(&self, job: SlowJob) {
        if let Some(atomic) = self.mem() {
            let mem = atomic.memory();
            let (token, due) = self.execute(&mem, &job.descs, job.head);
            let q = &self.inner.queues[job.qi];
            let mut s = lock(&q.sched);
            s.heap.push(due, token);
            // Wake the queue thread: at the deadline, or now when draining.
            let at = if self.inner.draining.load(Ordering::Relaxed) {
                1
            } else {
                due
            };
            if s.armed_ns.is_none_or(|a| at < a) {
                let r = if at == 1 {
                    q.timer.arm_at(1)
                } else {
                    q.timer.arm_at(self.inner.device.to_monotonic(at))
                };
                if let Err(e) = r {
                    warn!("timerfd: {e}");
                }
                s.armed_ns = Some(at);
            }
        } else {
            self.inner
                .device
                .stats
                .in_flight
                .fetch_sub(1, Ordering::Relaxed);
        }
        self.inner.slow_pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether the request may block for long (see [`SlowJob`]), from its header type.
    fn is_slow(mem: &GuestMemoryMmap, descs: &[Desc]) -> bool {
        let Ok(layout) = split_layout(descs, MAX_DESCS) else {
            return false;
        };
        let mut hb = [0u8; HEADER_LEN];
        if read_segs(mem, &layout.header, &mut hb).is_err() {
            return false;
        }
        matches!(
            Header::from_bytes(&hb).kind,
            VIRTIO_BLK_T_FLUSH | VIRTIO_BLK_T_DISCARD | VIRTIO_BLK_T_WRITE_ZEROES
        )
    }

    /// The epoll event id of queue `q`'s timer in its worker's epoll set.
    pub fn timer_event_id(&self) -> u64 {
        self.inner.queues.len() as u64 + 1
    }

    /// Raw fd of queue `q`'s timer (register it with [`Self::timer_event_id`]).
    pub fn timer_fd(&self, q: usize) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.inner.queues[q].timer.as_raw_fd()
    }

    /// Completions not yet delivered, all queues.
    pub fn pending(&self) -> usize {
        self.inner
            .queues
            .iter()
            .map(|q| lock(&q.sched).heap.len())
            .sum()
    }

    /// Deliver every pending completion now and complete new requests at
    /// once from here on (clean shutdown).
    pub fn drain(&self) {
        self.inner.draining.store(true, Ordering::SeqCst);
        for q in &self.inner.queues {
            let mut s = lock(&q.sched);
            if !s.heap.is_empty() {
                let _ = q.timer.arm_at(1);
                s.armed_ns = Some(1);
            }
        }
    }

    /// Forget pending completions (the frontend is gone; their data is already stored).
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

    /// Run one request: parse, do the I/O, write the status. Returns what to
    /// put in the used ring and when.
    fn execute(&self, mem: &GuestMemoryMmap, descs: &[Desc], head: u16) -> (Token, u64) {
        let dev = &self.inner.device;
        let submit_ns = dev.now_ns();
        let status_addr = descs
            .iter()
            .rev()
            .find(|d| d.write_only && d.len > 0)
            .and_then(|d| d.addr.checked_add(u64::from(d.len) - 1));
        let mut token = Token {
            head,
            used_len: 0,
            op: OpKind::Other,
            bytes: 0,
            ok: false,
            submit_ns,
        };
        let result = self.run(mem, descs, &mut token);
        let (status, due) = match result {
            Ok(t) => {
                token.ok = true;
                (VIRTIO_BLK_S_OK as u8, t.due_ns)
            }
            Err(e) => {
                debug!("request at head {head} failed: {e}");
                dev.stats.rejected.fetch_add(1, Ordering::Relaxed);
                token.used_len = 1;
                (e.status(), submit_ns)
            }
        };
        match status_addr {
            Some(a) => {
                if mem.write_obj(status, GuestAddress(a)).is_err() {
                    debug!("cannot write status byte at {a:#x}");
                    token.used_len = 0;
                }
            }
            None => token.used_len = 0,
        }
        (token, due)
    }

    fn run(
        &self,
        mem: &GuestMemoryMmap,
        descs: &[Desc],
        token: &mut Token,
    ) -> Result<Timing, FrontendError> {
        let dev = &self.inner.device;
        let lim = &self.inner.config.limits;
        let layout = split_layout(descs, MAX_DESCS)?;
        let mut hb = [0u8; HEADER_LEN];
        read_segs(mem, &layout.header, &mut hb)?;
        let header = Header::from_bytes(&hb);
        let req = parse_request(&header, &layout, lim)?;
        token.used_len = 1;
        match req {
            BlkRequest::Read { offset, len } => {
                token.op = OpKind::Read;
                token.bytes = len;
                let bufs = slices(mem, &layout.in_data)?;
                let t = dev.read(offset, &bufs)?;
                token.used_len = len as u32 + 1;
                Ok(t)
            }
            BlkRequest::Write { offset, len } => {
                token.op = OpKind::Write;
                token.bytes = len;
                let bufs = slices(mem, &layout.out_data)?;
                Ok(dev.write(offset, &bufs)?)
            }
            BlkRequest::Flush => {
                token.op = OpKind::Flush;
                Ok(dev.flush()?)
            }
            BlkRequest::GetId { len } => {
                let serial = dev.serial();
                let n = write_segs(mem, &layout.in_data, &serial[..len as usize])?;
                token.used_len = n as u32 + 1;
                let now = dev.now_ns();
                Ok(Timing {
                    submit_ns: now,
                    due_ns: now,
                })
            }
            BlkRequest::Discard { segments } | BlkRequest::WriteZeroes { segments } => {
                let wz = matches!(req, BlkRequest::WriteZeroes { .. });
                token.op = if wz {
                    OpKind::WriteZeroes
                } else {
                    OpKind::Discard
                };
                let mut raw = vec![0u8; segments as usize * super::request::SEGMENT_LEN];
                read_segs(mem, &layout.out_data, &mut raw)?;
                let ranges = parse_segments(&raw, wz, lim)?;
                token.bytes = ranges.iter().map(|r| r.len).sum();
                if wz {
                    let mut due = Timing {
                        submit_ns: token.submit_ns,
                        due_ns: token.submit_ns,
                    };
                    for unmap in [false, true] {
                        let rs: Vec<(u64, u64)> = ranges
                            .iter()
                            .filter(|r| r.unmap == unmap)
                            .map(|r| (r.offset, r.len))
                            .collect();
                        if !rs.is_empty() {
                            let t = dev.write_zeroes(&rs, unmap)?;
                            due.due_ns = due.due_ns.max(t.due_ns);
                        }
                    }
                    Ok(due)
                } else {
                    let rs: Vec<(u64, u64)> = ranges.iter().map(|r| (r.offset, r.len)).collect();
                    Ok(dev.discard(&rs)?)
                }
            }
        }
    }

    fn complete(&self, vring: &VringRwLock, t: &Token, due_ns: u64, now_ns: u64) {
        if let Err(e) = vring.add_used(t.head, t.used_len) {
            warn!("add_used failed for head {}: {e:?}", t.head);
        }
        let st = &self.inner.device.stats;
        st.complete(t.op, t.bytes, t.ok, t.submit_ns, due_ns, now_ns);
        st.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// Deliver what is due (everything if draining). True if anything was added.
    fn deliver_due(&self, qi: usize, vring: &VringRwLock) -> bool {
        let dev = &self.inner.device;
        let all = self.inner.draining.load(Ordering::Relaxed);
        let now = dev.now_ns();
        let mut due = Vec::new();
        {
            let mut s = lock(&self.inner.queues[qi].sched);
            loop {
                let e = if all {
                    s.heap.pop()
                } else {
                    s.heap.pop_due(now)
                };
                match e {
                    Some(e) => due.push(e),
                    None => break,
                }
            }
        }
        for (d, t) in &due {
            self.complete(vring, t, *d, now);
        }
        !due.is_empty()
    }

    fn rearm(&self, qi: usize) {
        let q = &self.inner.queues[qi];
        let mut s = lock(&q.sched);
        let next = s.heap.next_due();
        if next != s.armed_ns {
            let r = match next {
                Some(d) => q.timer.arm_at(self.inner.device.to_monotonic(d)),
                None => q.timer.disarm(),
            };
            if let Err(e) = r {
                warn!("timerfd: {e}");
            }
            s.armed_ns = next;
        }
    }

    fn process_queue(&self, qi: usize, vring: &VringRwLock) {
        let Some(atomic) = self.mem() else { return };
        let event_idx = self.inner.event_idx.load(Ordering::Relaxed);
        let dev = &self.inner.device;
        let mut used = false;
        let mut descs: Vec<Desc> = Vec::with_capacity(8);
        loop {
            if event_idx && let Err(e) = vring.disable_notification() {
                debug!("disable_notification: {e:?}");
            }
            let mut n = 0u32;
            loop {
                let mem = atomic.memory();
                // Bound the guard to this statement (holding it while
                // completing would deadlock on the vring lock).
                let chain = vring
                    .get_mut()
                    .get_queue_mut()
                    .pop_descriptor_chain(mem.clone());
                let Some(chain) = chain else { break };
                let head = chain.head_index();
                descs.clear();
                descs.extend(chain.take(MAX_DESCS + 1).map(|d| Desc {
                    addr: d.addr().0,
                    len: d.len(),
                    write_only: d.is_write_only(),
                }));
                dev.stats.in_flight.fetch_add(1, Ordering::Relaxed);
                if Self::is_slow(&mem, &descs) {
                    match self.send_slow(SlowJob {
                        qi,
                        head,
                        descs: std::mem::take(&mut descs),
                    }) {
                        Ok(()) => {
                            n += 1;
                            continue;
                        }
                        Err(job) => descs = job.descs,
                    }
                }
                let (token, due) = self.execute(&mem, &descs, head);
                let now = dev.now_ns();
                if due <= now || self.inner.draining.load(Ordering::Relaxed) {
                    self.complete(vring, &token, due, now);
                    used = true;
                } else {
                    lock(&self.inner.queues[qi].sched).heap.push(due, token);
                }
                n += 1;
                if n.is_multiple_of(16) {
                    used |= self.deliver_due(qi, vring);
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
        self.rearm(qi);
    }
}

/// Put the calling thread in `SCHED_FIFO` at the lowest real-time priority,
/// so it preempts ordinary threads (QEMU's vCPUs) when a completion is due.
fn set_realtime() {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if r != 0 {
        warn!(
            "--realtime: cannot use SCHED_FIFO: {}",
            io::Error::last_os_error()
        );
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

fn slices<'m>(
    mem: &'m GuestMemoryMmap,
    segs: &[Seg],
) -> Result<Vec<VolatileSlice<'m>>, FrontendError> {
    let mut v = Vec::with_capacity(segs.len());
    for s in segs {
        let err = || FrontendError::Memory {
            addr: s.addr,
            len: u64::from(s.len),
        };
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

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::CONFIG
            | VhostUserProtocolFeatures::REPLY_ACK
    }

    fn reset_device(&self) {
        for q in &self.inner.queues {
            let mut s = lock(&q.sched);
            while s.heap.pop().is_some() {
                self.inner
                    .device
                    .stats
                    .in_flight
                    .fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    fn set_event_idx(&self, enabled: bool) {
        self.inner.event_idx.store(enabled, Ordering::Relaxed);
    }

    fn get_config(&self, offset: u32, size: u32) -> Vec<u8> {
        BlkConfig::read(&lock(&self.inner.config_bytes)[..], offset, size)
    }

    fn set_config(&self, offset: u32, buf: &[u8]) -> io::Result<()> {
        // Only the writeback flag is writable; data is always on the
        // backing file before completion and FLUSH syncs it either way.
        if offset as usize == WCE_OFFSET && buf.len() == 1 {
            lock(&self.inner.config_bytes)[WCE_OFFSET] = buf[0].min(1);
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(libc::EINVAL))
        }
    }

    fn update_memory(&self, mem: GuestMemoryAtomic<GuestMemoryMmap>) -> io::Result<()> {
        *self.inner.mem.write().unwrap_or_else(|e| e.into_inner()) = Some(mem);
        Ok(())
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
        let Some(q) = self.inner.queues.get(qi) else {
            return Ok(());
        };
        let vring = lock(&q.vring).clone();
        let now = self.inner.device.now_ns();
        let pending: Vec<_> = {
            let mut s = lock(&q.sched);
            std::iter::from_fn(|| s.heap.pop()).collect()
        };
        match vring {
            Some(v) => {
                for (d, t) in &pending {
                    self.complete(&v, t, *d, now);
                }
                if !pending.is_empty() {
                    notify(&v);
                }
            }
            None => {
                let st = &self.inner.device.stats;
                st.in_flight
                    .fetch_sub(pending.len() as u64, Ordering::Relaxed);
            }
        }
        self.rearm(qi);
        Ok(())
    }

    fn handle_event(
        &self,
        device_event: u16,
        _evset: EventSet,
        vrings: &[VringRwLock],
        thread_id: usize,
    ) -> io::Result<()> {
        SLACK_LOWERED.with(|s| {
            if !s.get() {
                lower_timer_slack();
                if self.inner.realtime {
                    set_realtime();
                }
                s.set(true);
            }
        });
        let (Some(vring), true) = (vrings.first(), thread_id < self.inner.queues.len()) else {
            return Ok(());
        };
        {
            let mut slot = lock(&self.inner.queues[thread_id].vring);
            if slot.is_none() {
                *slot = Some(vring.clone());
            }
        }
        if device_event == 0 {
            self.process_queue(thread_id, vring);
        } else if u64::from(device_event) == self.timer_event_id() {
            self.inner.queues[thread_id].timer.ack();
            lock(&self.inner.queues[thread_id].sched).armed_ns = None;
            if self.deliver_due(thread_id, vring) {
                notify(vring);
            }
            self.rearm(thread_id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::request::tests::{r, w};
    use super::*;
    use crate::device::{DataLocation, DeviceOptions};
    use crate::profile::Profile;
    use proptest::prelude::*;
    use virtio_bindings::virtio_blk::*;

    const MEM: u64 = 1 << 20;

    fn backend() -> (BlkBackend, GuestMemoryMmap) {
        let profile = Profile::load_with_capacity("instant", Some(64 << 20)).unwrap();
        let dev = Device::open(DeviceOptions {
            profile,
            data: DataLocation::Memory,
            state_file: None,
            seed: 1,
        })
        .unwrap();
        let b = BlkBackend::new(Arc::new(dev), 1, 128, false).unwrap();
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM as usize)]).unwrap();
        (b, mem)
    }

    fn header(mem: &GuestMemoryMmap, at: u64, kind: u32, sector: u64) {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&kind.to_le_bytes());
        h[8..16].copy_from_slice(&sector.to_le_bytes());
        mem.write_slice(&h, GuestAddress(at)).unwrap();
    }

    /// Run a request; returns (status byte, used length).
    fn run(b: &BlkBackend, mem: &GuestMemoryMmap, descs: &[Desc], status_at: u64) -> (u8, u32) {
        mem.write_obj(0xffu8, GuestAddress(status_at)).unwrap();
        let (t, _due) = b.execute(mem, descs, 0);
        (
            mem.read_obj::<u8>(GuestAddress(status_at)).unwrap(),
            t.used_len,
        )
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
        assert_eq!(id, b.inner.device.serial());

        header(&mem, 0x100, VIRTIO_BLK_T_FLUSH, 0);
        assert_eq!(
            run(&b, &mem, &[r(0x100, 16), w(0x200, 1)], 0x200).0,
            VIRTIO_BLK_S_OK as u8
        );
        let c = b.inner.device.counters();
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
        let (t, _) = b.execute(&mem, &[r(0x100, 16)], 0);
        assert_eq!(t.used_len, 0);
        // Status outside memory: used length 0, no panic.
        let (t, _) = b.execute(&mem, &[r(0x100, 16), w(MEM + 10, 1)], 0);
        assert_eq!(t.used_len, 0);
        assert!(b.inner.device.stats.rejected.load(Ordering::Relaxed) >= 5);
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
            let (t, _) = b.execute(&mem, &ds, 0);
            prop_assert!(t.used_len as u64 <= ds.iter().map(|d| u64::from(d.len)).sum::<u64>());
        }
    }
}
