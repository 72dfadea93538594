//! GC's victims: per die, the victim being collected (and its next page)
//! with its valid / invalid ratio when picked, and the scratch space every
//! victim reuses. What GC does is `gc.rs`'s.

/// The victims being collected.
#[derive(Debug, Clone)]
pub(crate) struct Victims {
    /// Per die: the GC victim being collected and its next page.
    current: Vec<Option<(u32, u32)>>,
    /// Per die: valid / invalid units of the current victim when picked.
    ratio: Vec<f64>,
    /// Scratch space reused by every GC victim (no allocation per victim):
    /// the lpns to copy, and per page read, (units, plane pages).
    lpns: Vec<u64>,
    pages: Vec<(usize, u32)>,
    /// Per die: when background GC may take its next step, after resting
    /// for its duty cycle (`gc.bg_duty`). Not saved: it only paces work
    /// within an idle gap.
    rest_until: Vec<u64>,
}

impl Victims {
    /// No victim being collected on any of `dies` dies.
    pub(crate) fn new(dies: u32) -> Victims {
        Victims {
            current: vec![None; dies as usize],
            ratio: vec![0.0; dies as usize],
            lpns: Vec::new(),
            pages: Vec::new(),
            rest_until: vec![0; dies as usize],
        }
    }

    /// When background GC may next work on `die`.
    #[inline(always)]
    pub(crate) fn rest_until(&self, die: usize) -> u64 {
        self.rest_until[die]
    }

    /// Background GC on `die` rests until `t`.
    #[inline(always)]
    pub(crate) fn rest(&mut self, die: usize, t: u64) {
        self.rest_until[die] = t;
    }

    /// The victim being collected on `die` and its next page.
    #[inline(always)]
    pub(crate) fn current(&self, die: usize) -> Option<(u32, u32)> {
        self.current[die]
    }

    /// Whether `die` has a victim being collected.
    #[inline(always)]
    pub(crate) fn busy(&self, die: usize) -> bool {
        self.current[die].is_some()
    }

    /// `victim` is collected on `die` from page 0, with `ratio` valid to
    /// invalid units.
    #[inline]
    pub(crate) fn begin(&mut self, die: usize, victim: u32, ratio: f64) {
        self.ratio[die] = ratio;
        self.current[die] = Some((victim, 0));
    }

    /// Collecting `victim` on `die` goes on at `page`.
    #[inline]
    pub(crate) fn resume_at(&mut self, die: usize, victim: u32, page: u32) {
        self.current[die] = Some((victim, page));
    }

    /// The victim on `die` is collected.
    #[inline]
    pub(crate) fn finish(&mut self, die: usize) {
        self.current[die] = None;
    }

    /// Valid to invalid units of the victim of `die` when picked.
    #[inline(always)]
    pub(crate) fn ratio(&self, die: usize) -> f64 {
        self.ratio[die]
    }

    /// The scratch lists, emptied (give them back with
    /// [`Victims::put_scratch`]).
    #[inline]
    pub(crate) fn take_scratch(&mut self) -> (Vec<u64>, Vec<(usize, u32)>) {
        let mut lpns = std::mem::take(&mut self.lpns);
        let mut pages = std::mem::take(&mut self.pages);
        lpns.clear();
        pages.clear();
        (lpns, pages)
    }

    /// Keep the scratch lists for the next victim.
    #[inline]
    pub(crate) fn put_scratch(&mut self, lpns: Vec<u64>, pages: Vec<(usize, u32)>) {
        self.lpns = lpns;
        self.pages = pages;
    }

    /// Victims being collected.
    pub(crate) fn in_progress(&self) -> usize {
        self.current.iter().flatten().count()
    }

    /// Per die count matches `dies`, and each victim (`is_victim(b)`) is a
    /// block of its die (`die_of(b)`) among `nblocks`.
    pub(crate) fn check(
        &self,
        dies: u32,
        nblocks: usize,
        is_victim: impl Fn(u32) -> bool,
        die_of: impl Fn(u32) -> u32,
    ) -> Result<(), String> {
        if self.current.len() != dies as usize {
            return Err("tables do not match the geometry".into());
        }
        for (d, cur) in self.current.iter().enumerate() {
            if let Some((b, _)) = *cur
                && (b as usize >= nblocks || !is_victim(b) || die_of(b) as usize != d)
            {
                return Err(format!(
                    "die {d}: collecting block {b}, which is not its victim"
                ));
            }
        }
        Ok(())
    }
}
