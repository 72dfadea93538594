//! The driver side of a split virtqueue (what a guest's virtio driver
//! does): descriptor table, available ring and used ring in shared memory;
//! chains are added, published with a release store of `avail.idx`, and
//! collected from the used ring. With `VIRTIO_RING_F_EVENT_IDX` the driver
//! kicks only when the device asked for it (`avail_event`) and tells the
//! device when it wants the next interrupt (`used_event`).

use std::sync::atomic::Ordering;

use virtio_bindings::virtio_ring::{VRING_DESC_F_INDIRECT, VRING_DESC_F_NEXT, VRING_DESC_F_WRITE};
use virtio_queue::desc::split::Descriptor;
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryMmap};

/// One buffer of a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buf {
    /// Guest address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Device-writable.
    pub write: bool,
}

/// One descriptor of a hand-made chain ([`DriverQueue::add_raw`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawDesc {
    /// Guest address.
    pub addr: u64,
    /// Length.
    pub len: u32,
    /// `VRING_DESC_F_*` (`NEXT` is set from `next`).
    pub flags: u16,
    /// Index (in the same list) of the next descriptor.
    pub next: Option<usize>,
}

/// Errors of the queue.
#[derive(Debug, thiserror::Error)]
pub enum VringError {
    /// Not enough free descriptors.
    #[error("virtqueue full: {need} descriptors needed, {free} free")]
    Full {
        /// Descriptors the chain needs.
        need: usize,
        /// Free now.
        free: usize,
    },
    /// An empty chain.
    #[error("a chain needs at least one buffer")]
    Empty,
    /// The rings are outside the shared memory.
    #[error("virtqueue memory access failed: {0}")]
    Memory(#[from] vm_memory::GuestMemoryError),
    /// The device returned an id that is not an outstanding chain head.
    #[error("the device returned descriptor id {0}, which is not in flight")]
    BadId(u32),
}

/// Bytes a split queue of `size` entries occupies, each part aligned:
/// (descriptor table, available ring, used ring).
pub fn ring_sizes(size: u16) -> (u64, u64, u64) {
    let n = u64::from(size);
    (16 * n, 6 + 2 * n, 6 + 8 * n)
}

fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Total bytes (rounded to 4 KiB) for a queue of `size` entries.
pub fn ring_bytes(size: u16) -> u64 {
    let (d, a, u) = ring_sizes(size);
    align(align(d + a, 4) + u, 4096)
}

/// `vring_need_event` of the virtio spec: has `idx` moved past `event` since `old`?
pub fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

/// A split virtqueue, driver side.
#[derive(Debug)]
pub struct DriverQueue {
    size: u16,
    desc: GuestAddress,
    avail: GuestAddress,
    used: GuestAddress,
    free: Vec<u16>,
    /// Descriptors of each chain in flight, by head.
    chains: Vec<Vec<u16>>,
    avail_idx: u16,
    published_idx: u16,
    last_used: u16,
    event_idx: bool,
}

impl DriverQueue {
    /// A queue of `size` entries (a power of two) laid out at `base`
    /// (4 KiB-aligned, [`ring_bytes`] long); its rings are zeroed.
    pub fn new(
        mem: &GuestMemoryMmap,
        base: GuestAddress,
        size: u16,
        event_idx: bool,
    ) -> Result<DriverQueue, VringError> {
        let (d, a, _) = ring_sizes(size);
        let desc = base;
        let avail = GuestAddress(base.0 + d);
        let used = GuestAddress(align(base.0 + d + a, 4));
        let zeros = vec![0u8; ring_bytes(size) as usize];
        mem.write_slice(&zeros, base)?;
        Ok(DriverQueue {
            size,
            desc,
            avail,
            used,
            free: (0..size).rev().collect(),
            chains: vec![Vec::new(); size as usize],
            avail_idx: 0,
            published_idx: 0,
            last_used: 0,
            event_idx,
        })
    }

    /// Queue size.
    pub fn size(&self) -> u16 {
        self.size
    }

    /// Guest addresses of (descriptor table, available ring, used ring).
    pub fn addrs(&self) -> (u64, u64, u64) {
        (self.desc.0, self.avail.0, self.used.0)
    }

    /// Free descriptors.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// Chains added and not yet returned by the device.
    pub fn in_flight(&self) -> usize {
        self.chains.iter().filter(|c| !c.is_empty()).count()
    }

    /// Whether the device may be using this ring's interrupt suppression
    /// through event indices.
    pub fn event_idx(&self) -> bool {
        self.event_idx
    }

    /// Add a chain (not yet visible to the device: see [`Self::publish`]).
    /// Returns its head.
    pub fn add(&mut self, mem: &GuestMemoryMmap, bufs: &[Buf]) -> Result<u16, VringError> {
        if bufs.is_empty() {
            return Err(VringError::Empty);
        }
        if bufs.len() > self.free.len() {
            return Err(VringError::Full {
                need: bufs.len(),
                free: self.free.len(),
            });
        }
        let ids: Vec<u16> = (0..bufs.len()).filter_map(|_| self.free.pop()).collect();
        for (i, b) in bufs.iter().enumerate() {
            let mut flags = 0u16;
            if b.write {
                flags |= VRING_DESC_F_WRITE as u16;
            }
            let next = if i + 1 < ids.len() {
                flags |= VRING_DESC_F_NEXT as u16;
                ids[i + 1]
            } else {
                0
            };
            let d = Descriptor::new(b.addr, b.len, flags, next);
            mem.write_obj(d, self.desc.unchecked_add(16 * u64::from(ids[i])))?;
        }
        let head = ids[0];
        self.make_available(mem, head, ids)
    }

    /// Add a hand-made chain (malformed-request tests): descriptor `i` gets
    /// `descs[i]`'s address, length and flags, and `NEXT` to the
    /// descriptor of index `next` in the same list (loops allowed). Returns
    /// the head (the first).
    pub fn add_raw(&mut self, mem: &GuestMemoryMmap, descs: &[RawDesc]) -> Result<u16, VringError> {
        if descs.is_empty() {
            return Err(VringError::Empty);
        }
        if descs.len() > self.free.len() {
            return Err(VringError::Full {
                need: descs.len(),
                free: self.free.len(),
            });
        }
        let ids: Vec<u16> = (0..descs.len()).filter_map(|_| self.free.pop()).collect();
        for (i, d) in descs.iter().enumerate() {
            let (flags, next) = match d.next.and_then(|n| ids.get(n)) {
                Some(&n) => (d.flags | VRING_DESC_F_NEXT as u16, n),
                None => (d.flags & !(VRING_DESC_F_NEXT as u16), 0),
            };
            let desc = Descriptor::new(d.addr, d.len, flags, next);
            mem.write_obj(desc, self.desc.unchecked_add(16 * u64::from(ids[i])))?;
        }
        let head = ids[0];
        self.make_available(mem, head, ids)
    }

    /// Add a chain as one indirect descriptor (what Linux does when
    /// `VIRTIO_RING_F_INDIRECT_DESC` is negotiated): the chain's
    /// descriptors are written to the table at `table` (16 bytes each,
    /// owned by the caller until the chain comes back), and only one ring
    /// descriptor is used. Returns the head.
    pub fn add_indirect(
        &mut self,
        mem: &GuestMemoryMmap,
        table: u64,
        bufs: &[Buf],
    ) -> Result<u16, VringError> {
        if bufs.is_empty() {
            return Err(VringError::Empty);
        }
        let Some(id) = self.free.pop() else {
            return Err(VringError::Full { need: 1, free: 0 });
        };
        write_table(mem, table, bufs)?;
        let d = Descriptor::new(
            table,
            16 * bufs.len() as u32,
            VRING_DESC_F_INDIRECT as u16,
            0,
        );
        mem.write_obj(d, self.desc.unchecked_add(16 * u64::from(id)))?;
        self.make_available(mem, id, vec![id])
    }

    fn make_available(
        &mut self,
        mem: &GuestMemoryMmap,
        head: u16,
        ids: Vec<u16>,
    ) -> Result<u16, VringError> {
        let slot = u64::from(self.avail_idx % self.size);
        mem.write_obj(head, self.avail.unchecked_add(4 + 2 * slot))?;
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.chains[head as usize] = ids;
        Ok(head)
    }

    /// Make added chains visible to the device. Returns whether the device
    /// must be kicked.
    pub fn publish(&mut self, mem: &GuestMemoryMmap) -> Result<bool, VringError> {
        let old = self.published_idx;
        let new = self.avail_idx;
        if old == new {
            return Ok(false);
        }
        mem.store(new, self.avail.unchecked_add(2), Ordering::Release)?;
        self.published_idx = new;
        std::sync::atomic::fence(Ordering::SeqCst);
        if !self.event_idx {
            let flags: u16 = mem.load(self.used, Ordering::Acquire)?;
            return Ok(flags & 1 == 0); // VRING_USED_F_NO_NOTIFY
        }
        let off = 4 + 8 * u64::from(self.size);
        let avail_event: u16 = mem.load(self.used.unchecked_add(off), Ordering::Acquire)?;
        Ok(need_event(avail_event, new, old))
    }

    /// Collect the chains the device has used: (head, bytes written).
    /// Their descriptors are free again. With EVENT_IDX the device is then
    /// asked to interrupt at the next used entry.
    pub fn take_used(&mut self, mem: &GuestMemoryMmap) -> Result<Vec<(u16, u32)>, VringError> {
        let mut out = Vec::new();
        self.take_used_into(mem, &mut out)?;
        Ok(out)
    }

    /// [`Self::take_used`], appending to `out` (no allocation once `out`
    /// has grown). Returns how many were appended.
    pub fn take_used_into(
        &mut self,
        mem: &GuestMemoryMmap,
        out: &mut Vec<(u16, u32)>,
    ) -> Result<usize, VringError> {
        let before = out.len();
        loop {
            let idx: u16 = mem.load(self.used.unchecked_add(2), Ordering::Acquire)?;
            while self.last_used != idx {
                let slot = u64::from(self.last_used % self.size);
                let at = self.used.unchecked_add(4 + 8 * slot);
                let id: u32 = mem.read_obj(at)?;
                let len: u32 = mem.read_obj(at.unchecked_add(4))?;
                let head = u16::try_from(id)
                    .ok()
                    .filter(|h| *h < self.size && !self.chains[*h as usize].is_empty())
                    .ok_or(VringError::BadId(id))?;
                let ids = std::mem::take(&mut self.chains[head as usize]);
                self.free.extend(ids.into_iter().rev());
                out.push((head, len));
                self.last_used = self.last_used.wrapping_add(1);
            }
            if !self.event_idx {
                return Ok(out.len() - before);
            }
            // used_event: interrupt when the next entry appears; re-check
            // that none slipped in before the device could see it.
            let off = 4 + 2 * u64::from(self.size);
            mem.store(
                self.last_used,
                self.avail.unchecked_add(off),
                Ordering::Release,
            )?;
            std::sync::atomic::fence(Ordering::SeqCst);
            let again: u16 = mem.load(self.used.unchecked_add(2), Ordering::Acquire)?;
            if again == self.last_used {
                return Ok(out.len() - before);
            }
        }
    }
}

/// Write `bufs` as a chained descriptor table at `table` (indices 0..n).
fn write_table(mem: &GuestMemoryMmap, table: u64, bufs: &[Buf]) -> Result<(), VringError> {
    for (i, b) in bufs.iter().enumerate() {
        let mut flags = 0u16;
        if b.write {
            flags |= VRING_DESC_F_WRITE as u16;
        }
        let next = if i + 1 < bufs.len() {
            flags |= VRING_DESC_F_NEXT as u16;
            i as u16 + 1
        } else {
            0
        };
        let d = Descriptor::new(b.addr, b.len, flags, next);
        mem.write_obj(d, GuestAddress(table + 16 * i as u64))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn need_event_matches_the_spec_examples() {
        // The device asked for a kick once idx passes 5.
        assert!(need_event(5, 6, 5));
        assert!(!need_event(5, 5, 4));
        assert!(need_event(5, 8, 3));
        // Wrap-around.
        assert!(need_event(u16::MAX, 0, u16::MAX));
    }

    #[test]
    fn chains_are_added_published_and_returned() {
        let mem = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 1 << 16)]).unwrap();
        let mut q = DriverQueue::new(&mem, GuestAddress(0), 8, true).unwrap();
        let bufs = [
            Buf {
                addr: 0x8000,
                len: 16,
                write: false,
            },
            Buf {
                addr: 0x9000,
                len: 1,
                write: true,
            },
        ];
        let h = q.add(&mem, &bufs).unwrap();
        assert_eq!(q.free(), 6);
        assert!(
            q.publish(&mem).unwrap(),
            "avail_event 0: the first publish kicks"
        );
        // Play the device: mark the chain used.
        let (_, _, used) = q.addrs();
        mem.write_obj(u32::from(h), GuestAddress(used + 4)).unwrap();
        mem.write_obj(1u32, GuestAddress(used + 8)).unwrap();
        mem.store(1u16, GuestAddress(used + 2), Ordering::Release)
            .unwrap();
        assert_eq!(q.take_used(&mem).unwrap(), vec![(h, 1)]);
        assert_eq!(q.free(), 8);
        assert_eq!(q.in_flight(), 0);
        // A bogus id from the device is an error, not a panic.
        mem.write_obj(77u32, GuestAddress(used + 12)).unwrap();
        mem.store(2u16, GuestAddress(used + 2), Ordering::Release)
            .unwrap();
        assert!(matches!(q.take_used(&mem), Err(VringError::BadId(77))));
        let too_long = vec![bufs[0]; 9];
        assert!(matches!(
            q.add(&mem, &too_long),
            Err(VringError::Full { .. })
        ));
    }
}
