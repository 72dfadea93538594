//! Read-only questions about the mapping, for frontends that report what
//! the drive holds (NBD block status) and for the TRIM audit.

use super::ssd::Ssd;

impl Ssd {
    /// Bytes per mapping unit.
    pub fn unit_bytes(&self) -> u64 {
        self.geo.unit_bytes
    }

    fn mapped(&self, lpn: u64) -> bool {
        self.mapping.is_mapped(lpn) && !self.release.is_pending(lpn)
    }

    /// Of the mapping units lying entirely inside `offset..offset+len`:
    /// how many are mapped, and how many are not.
    pub fn unit_census(&self, offset: u64, len: u64) -> (u64, u64) {
        let ub = self.geo.unit_bytes;
        let end = offset.saturating_add(len).min(self.geo.capacity);
        let first = offset.div_ceil(ub);
        let last = end / ub;
        let mut mapped = 0;
        for lpn in first..last.max(first) {
            mapped += u64::from(self.mapped(lpn));
        }
        (mapped, last.saturating_sub(first) - mapped)
    }

    /// `offset..offset+len` (clamped to the drive) as runs of `(bytes,
    /// mapped)`, at most `max_runs` of them (the last may end early). A unit
    /// only partly covered counts whole: runs break at unit boundaries.
    pub fn mapped_runs(&self, offset: u64, len: u64, max_runs: usize) -> Vec<(u64, bool)> {
        let ub = self.geo.unit_bytes;
        let end = offset.saturating_add(len).min(self.geo.capacity);
        let mut runs: Vec<(u64, bool)> = Vec::new();
        let mut at = offset;
        while at < end {
            let lpn = at / ub;
            let next = ((lpn + 1) * ub).min(end);
            let m = self.mapped(lpn);
            match runs.last_mut() {
                Some((l, mm)) if *mm == m => *l += next - at,
                _ => {
                    if runs.len() == max_runs {
                        break;
                    }
                    runs.push((next - at, m));
                }
            }
            at = next;
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use crate::{Op, Payload, Request, Ssd};
    use vssd_profile::Profile;

    #[test]
    fn runs_and_census_follow_writes_and_trims() {
        let p = Profile::load_with_capacity("instant", Some(64 << 20)).unwrap();
        let mut s = Ssd::new(&p, 1);
        let ub = s.unit_bytes();
        let w = |s: &mut Ssd, op, offset, len| {
            s.submit(
                0,
                &Request {
                    op,
                    offset,
                    len,
                    payload: Payload::Unknown,
                },
            )
            .unwrap();
        };
        assert_eq!(s.mapped_runs(0, 8 * ub, 16), vec![(8 * ub, false)]);
        w(&mut s, Op::Write, 2 * ub, 3 * ub);
        assert_eq!(
            s.mapped_runs(0, 8 * ub, 16),
            vec![(2 * ub, false), (3 * ub, true), (3 * ub, false)]
        );
        assert_eq!(
            s.mapped_runs(0, 8 * ub, 2),
            vec![(2 * ub, false), (3 * ub, true)]
        );
        // An unaligned start: runs still add up to the request.
        assert_eq!(s.mapped_runs(512, ub, 16), vec![(ub, false)]);
        assert_eq!(s.unit_census(0, 8 * ub), (3, 5));
        // A range covering units partly counts only the whole ones.
        assert_eq!(s.unit_census(2 * ub + 512, 2 * ub), (1, 0));
        w(&mut s, Op::Trim, 3 * ub, ub);
        assert_eq!(s.unit_census(0, 8 * ub), (2, 6));
        // Past the end is clamped.
        let cap = s.capacity();
        assert_eq!(s.mapped_runs(cap - ub, 4 * ub, 16), vec![(ub, false)]);
    }
}
