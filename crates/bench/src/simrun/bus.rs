//! What the guest's bus does to its requests on their way to the drive,
//! which a simulator run reproduces: the largest TRIM range the guest's
//! block layer sends, and the queue depth QEMU's NBD client lets through.

use vssd_guest::bus::Bus;

/// Largest TRIM range the guest's block layer sends on `bus`: ATA ranges
/// hold 65535 sectors (QEMU passes each range on), virtio-blk's limit is
/// 1 GiB per segment, NVMe's 4 GiB.
pub fn trim_range(bus: Bus) -> u64 {
    match bus {
        Bus::Sata => 65535 * 512,
        Bus::Virtio => 1 << 30,
        Bus::Nvme => 4 << 30,
    }
}

/// The most requests QEMU's NBD client keeps in flight on one connection
/// (`MAX_NBD_REQUESTS` in QEMU's block/nbd.c), whatever the guest's AHCI
/// or NVMe queue depth: the deepest queue a drive on those buses sees.
pub const NBD_CLIENT_MAX_REQUESTS: u32 = 16;

/// The deepest queue the drive sees from `bus`, if the bus caps it.
pub fn bus_depth_cap(bus: Bus) -> Option<u32> {
    match bus {
        Bus::Virtio => None,
        Bus::Sata | Bus::Nvme => Some(NBD_CLIENT_MAX_REQUESTS),
    }
}

/// Cap each job's depth so that its instances together keep no more in
/// flight than `bus` lets reach the drive; the depth the drive then sees
/// (summed over the jobs), if any job was capped.
pub fn cap_depth(jobs: &mut vssd_sim::jobfile::JobFile, bus: Bus) -> Option<u32> {
    let cap = bus_depth_cap(bus)?;
    let mut capped = None;
    for j in &mut jobs.jobs {
        let n = j.numjobs.max(1);
        let most = (cap / n).max(1);
        if j.iodepth > most {
            j.iodepth = most;
            capped = Some(capped.unwrap_or(0u32).max(most * n));
        }
    }
    capped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nbd_buses_cap_the_simulated_depth_at_what_qemu_passes_on() {
        let text = "[a]\nrw=randwrite\nbs=4k\niodepth=32\nsize=1m\n\
                    [b]\nrw=randread\nbs=4k\niodepth=8\nnumjobs=4\nsize=1m\nstonewall\n\
                    [c]\nrw=read\nbs=128k\niodepth=4\nsize=1m\nstonewall\n";
        let parse = || vssd_sim::jobfile::parse(text, "t").unwrap();
        let mut j = parse();
        assert_eq!(cap_depth(&mut j, Bus::Virtio), None);
        assert_eq!(j, parse());
        for bus in [Bus::Sata, Bus::Nvme] {
            let mut j = parse();
            assert_eq!(cap_depth(&mut j, bus), Some(16));
            let depths: Vec<u32> = j.jobs.iter().map(|j| j.iodepth).collect();
            // 32 → 16; 4 instances of 8 → 4 each; 4 stays.
            assert_eq!(depths, [16, 4, 4]);
        }
        let mut shallow =
            vssd_sim::jobfile::parse("[c]\nrw=read\niodepth=16\nsize=1m\n", "t").unwrap();
        assert_eq!(cap_depth(&mut shallow, Bus::Sata), None);
    }
}
