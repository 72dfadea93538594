//! The drive's timelines: when each die (and, with independent plane
//! reads, each plane) is busy until, the channels and the host link
//! (gap-filling reservations, `channel.rs`), the controller, and the host
//! side's clock (latest submission, latest completion, TRIM barrier).

use super::channel::Channel;
use super::geo::Geo;

/// Every resource's busy time (ns).
#[derive(Debug, Clone)]
pub(crate) struct Timelines {
    die_busy: Vec<u64>,
    /// With independent plane reads: per die, when its last program,
    /// erase or whole-die read ends (a plane read waits for that only),
    /// and per die and plane, when that plane's last read ends. Empty
    /// otherwise; `die_busy` then covers reads too.
    die_pe_busy: Vec<u64>,
    plane_busy: Vec<u64>,
    channels: Vec<Channel>,
    /// The host link (SATA, PCIe): transfers take the earliest gap after
    /// their data is ready, so a read whose data is ready early does not
    /// wait behind one that was sent before it (NCQ and NVMe complete out
    /// of order). One lane: reads and writes share it.
    link: Channel,
    /// The controller handles one command at a time: free from then on.
    ctrl_free: u64,
    /// Latest submission seen (time never goes back).
    now: u64,
    /// Latest completion of any host command (idle detection).
    last_host_done: u64,
    /// No command starts before this (a non-queued TRIM in progress).
    barrier: u64,
}

impl Timelines {
    /// Everything idle at time 0.
    pub(crate) fn new(g: &Geo) -> Timelines {
        Timelines {
            die_busy: vec![0; g.dies as usize],
            die_pe_busy: if g.plane_reads {
                vec![0; g.dies as usize]
            } else {
                Vec::new()
            },
            plane_busy: if g.plane_reads {
                vec![0; (g.dies * g.planes) as usize]
            } else {
                Vec::new()
            },
            channels: vec![Channel::new((g.dies / g.channels) as usize); g.channels as usize],
            link: Channel::new(1),
            ctrl_free: 0,
            now: 0,
            last_host_done: 0,
            barrier: 0,
        }
    }

    /// A fresh drive's timelines, idle from `now` on (a secure erase).
    pub(crate) fn idle_from(g: &Geo, now: u64) -> Timelines {
        Timelines {
            ctrl_free: now,
            now,
            last_host_done: now,
            ..Timelines::new(g)
        }
    }

    /// Heap bytes of the reservations.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.channels.iter().map(|c| c.len() * 16).sum::<usize>()
            + self.link.len() * 16
            + (self.die_pe_busy.len() + self.plane_busy.len()) * 8
    }

    // ------------------------------------------------------------ host clock

    /// Latest submission seen.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    /// A request is submitted at `now` (not before [`Timelines::now`]):
    /// forget the channel and link reservations that ended by then.
    pub(crate) fn advance(&mut self, now: u64) {
        self.now = now;
        for c in &mut self.channels {
            c.prune(now);
        }
        self.link.prune(now);
    }

    /// Latest completion of any host command.
    #[inline]
    pub(crate) fn last_host_done(&self) -> u64 {
        self.last_host_done
    }

    /// A host command completes at `done`; or the idle gap before `done`
    /// is used up.
    #[inline]
    pub(crate) fn host_done(&mut self, done: u64) {
        self.last_host_done = self.last_host_done.max(done);
    }

    /// No command starts before this.
    #[inline]
    pub(crate) fn barrier(&self) -> u64 {
        self.barrier
    }

    /// Nothing else runs until `done` (a non-queued command).
    #[inline]
    pub(crate) fn raise_barrier(&mut self, done: u64) {
        self.barrier = self.barrier.max(done);
    }

    /// When the controller is free.
    #[inline]
    pub(crate) fn ctrl_free(&self) -> u64 {
        self.ctrl_free
    }

    /// The controller is busy until `t`.
    #[inline]
    pub(crate) fn set_ctrl_free(&mut self, t: u64) {
        self.ctrl_free = t;
    }

    // ---------------------------------------------------------------- dies

    /// When `die` is free.
    #[inline(always)]
    pub(crate) fn die_busy(&self, die: usize) -> u64 {
        self.die_busy[die]
    }

    /// The least busy die and its busy time (`fallback`, 0 with no dies).
    pub(crate) fn least_busy_die(&self, fallback: usize) -> (usize, u64) {
        self.die_busy
            .iter()
            .enumerate()
            .min_by_key(|&(_, &b)| b)
            .map(|(d, &b)| (d, b))
            .unwrap_or((fallback, 0))
    }

    /// When the busiest die is free.
    pub(crate) fn busiest_die(&self) -> u64 {
        self.die_busy.iter().copied().max().unwrap_or(0)
    }

    /// The whole of `die` is taken until `until` (a program, an erase, a
    /// whole-die read): everything after waits for it, plane reads too
    /// (where planes read independently).
    #[inline(always)]
    pub(crate) fn occupy_die(&mut self, die: usize, until: u64) {
        self.die_busy[die] = until;
        if let Some(b) = self.die_pe_busy.get_mut(die) {
            *b = until;
        }
    }

    /// A NAND read on `die` of `bytes` bytes, occupying the whole die;
    /// returns when the data has crossed the channel.
    #[inline(always)]
    pub(crate) fn nand_read(&mut self, g: &Geo, die: usize, t: u64, bytes: u64) -> u64 {
        self.nand_read_tr(g, die, t, bytes, g.t_read)
    }

    /// [`Timelines::nand_read`] with a sense time of `t_read` (an SLC-mode
    /// block's, `slc_cache.t_read_us`).
    #[inline]
    pub(crate) fn nand_read_tr(
        &mut self,
        g: &Geo,
        die: usize,
        t: u64,
        bytes: u64,
        t_read: u64,
    ) -> u64 {
        let (ch, lane) = g.channel_of(die);
        let rs = t.max(self.die_busy[die]);
        let sensed = rs + t_read;
        let dur = g.chan_ns(bytes);
        let xe = self.channels[ch].reserve(lane, sensed, dur) + dur;
        self.occupy_die(die, xe);
        xe
    }

    /// A read of one plane's page (independent plane reads): it waits for
    /// the die's programs and erases and for that plane's previous read,
    /// not for reads on the other planes; the die counts as busy until it
    /// ends for programs and erases.
    pub(crate) fn plane_read(
        &mut self,
        g: &Geo,
        die: usize,
        plane: usize,
        t: u64,
        bytes: u64,
        t_read: u64,
    ) -> u64 {
        let (ch, lane) = g.channel_of(die);
        let p = die * g.planes as usize + plane;
        let rs = t.max(self.die_pe_busy[die]).max(self.plane_busy[p]);
        let sensed = rs + t_read;
        let dur = g.chan_ns(bytes);
        let xe = self.channels[ch].reserve_anywhere(lane, sensed, dur) + dur;
        self.plane_busy[p] = xe;
        self.die_busy[die] = self.die_busy[die].max(xe);
        xe
    }

    /// Transfer `dur` ns of data for a program on `die` over its channel,
    /// once the data is ready and the die free; returns when it ends.
    #[inline(always)]
    pub(crate) fn program_transfer(&mut self, g: &Geo, die: usize, ready: u64, dur: u64) -> u64 {
        let (ch, lane) = g.channel_of(die);
        self.channels[ch].reserve(lane, ready.max(self.die_busy[die]), dur) + dur
    }

    /// A copy on `die`: a read's transfer of `d_read` ns from `sensed` on,
    /// then a program's of `d_prog` as soon as it ends, reserved in one
    /// step; returns the program transfer's start.
    #[inline(always)]
    pub(crate) fn copy_transfers(
        &mut self,
        g: &Geo,
        die: usize,
        sensed: u64,
        d_read: u64,
        d_prog: u64,
    ) -> u64 {
        let (ch, lane) = g.channel_of(die);
        self.channels[ch]
            .reserve_pair(lane, sensed, d_read, d_prog)
            .1
    }

    /// Transfer `dur` ns over the host link in its earliest gap from `t`
    /// on; returns the start.
    #[inline(always)]
    pub(crate) fn link_transfer(&mut self, t: u64, dur: u64) -> u64 {
        self.link.reserve_anywhere(0, t, dur)
    }
}
