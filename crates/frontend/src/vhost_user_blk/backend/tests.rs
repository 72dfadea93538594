//! Tests of the parent module.

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
use vssd_device::completion::SchedPolicy;
use vssd_device::{DataLocation, DeviceOptions};
use vssd_profile::Profile;

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
    let timing = Timing {
        spin_ns,
        ..Timing::default()
    };
    rig_with(overhead_ns, event_idx, timing)
}

/// [`rig`] with its queue threads' `timing`.
fn rig_with(overhead_ns: Option<u64>, event_idx: bool, timing: Timing) -> Rig {
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
            time_scale: Default::default(),
        })
        .unwrap(),
    );
    let fe = device.register_frontend("test", "mock", "");
    let backend = BlkBackend::new(device, fe, 1, QSIZE, timing).unwrap();
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
        self.status_at(BUF + i * 8192 + 16)
    }

    /// The status byte at guest address `addr`.
    fn status_at(&self, addr: u64) -> u8 {
        self.mem.read_obj(GuestAddress(addr)).unwrap()
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

/// The thread that handles a queue's events takes the scheduling policy
/// it was given (`batch` for the instant profile under `--sched auto`).
#[test]
fn the_queue_thread_takes_its_scheduling_policy() {
    let policy = std::thread::spawn(|| {
        let timing = Timing {
            sched: SchedPolicy::Auto.resolve(false),
            spin_ns: 0,
        };
        let mut r = rig_with(None, true, timing);
        r.add(0, VIRTIO_BLK_T_IN, 0);
        r.kick();
        assert_eq!(r.used_idx(), 1);
        // SAFETY: pid 0 is the calling thread.
        unsafe { libc::sched_getscheduler(0) }
    })
    .join()
    .unwrap();
    assert_eq!(policy, libc::SCHED_BATCH);
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
    assert_eq!(r.status_at(base + 16), VIRTIO_BLK_S_OK as u8);
    assert_eq!(r.status_at(fb + 16), VIRTIO_BLK_S_OK as u8);
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
    assert_eq!(r.status_at(base + 16), VIRTIO_BLK_S_UNSUPP as u8);
    assert_eq!(r.status_at(base + 17), VIRTIO_BLK_S_IOERR as u8);
    assert_eq!(r.status(0), VIRTIO_BLK_S_IOERR as u8);
    assert_eq!(r.status(1), VIRTIO_BLK_S_OK as u8);
    let rep = r.backend.inner.device.report();
    assert_eq!(rep.connection.rejected, 3);
}
