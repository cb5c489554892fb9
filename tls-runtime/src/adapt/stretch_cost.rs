//! What an in-order stretch's iterations cost as it runs, so that a stretch whose
//! loop moved on to much longer iterations ends early.
//!
//! A stretch is sized by the backoff of the probes that failed before it, and may run
//! for up to `MAX_STRETCH`. A loop whose iterations change on the way (a phase of tiny
//! iterations, each depending on the last, then one of independent iterations of
//! microseconds) would run the second phase in a stretch sized for the first: a loop
//! alternating 5,000 of each ran wholly in order, at the plain loop's speed, where
//! speculating its long phases took it to 0.58 of that. Longer iterations are where
//! speculation may pay again (its fixed costs weigh less), so such a stretch ends and
//! speculation is probed; shorter ones change nothing. So does a stretch whose
//! iterations from the start cost far more than the site's in-order cost says: the
//! window that sent it in order was judged against iterations the loop no longer
//! runs.

use super::site::STALE;

/// Iterations between two looks at the clock in an in-order stretch.
pub(crate) const BLOCK: u64 = 64;
/// Blocks in a row whose iterations cost [`STALE`] times the first block's before the
/// stretch ends: one block can be long because the thread was descheduled in it.
const CHANGED_BLOCKS: u32 = 2;

/// The cost of a stretch's blocks of [`BLOCK`] iterations, against its first block's.
#[derive(Debug)]
pub(crate) struct StretchCost {
    /// The site's in-order cost per iteration when the stretch began, in
    /// picoseconds (0: not known).
    expected_ps: u64,
    /// What the blocks are compared with, in picoseconds a iteration: the cheaper of
    /// `expected_ps` and the first block's cost (0: no block yet).
    first_ps: u64,
    /// The last block's.
    last_ps: u64,
    /// When the current block began ([`super::site::now_ns`]).
    block_began: u64,
    /// Iterations before the current block.
    counted: u64,
    /// Blocks in a row above [`STALE`] times the first one's cost.
    dearer: u32,
}

impl StretchCost {
    /// A stretch beginning at `now`, on a site whose iterations cost `expected_ps`
    /// in order as last measured (0: not known).
    pub(crate) fn new(now: u64, expected_ps: u64) -> Self {
        StretchCost {
            expected_ps,
            first_ps: 0,
            last_ps: 0,
            block_began: now,
            counted: 0,
            dearer: 0,
        }
    }

    /// The stretch has run `n` iterations at `now`: ends the current block and
    /// returns whether the iterations now cost much more than at the start.
    pub(crate) fn dearer_at(&mut self, now: u64, n: u64) -> bool {
        let items = n.saturating_sub(self.counted);
        if items == 0 {
            return false;
        }
        let ps = now.saturating_sub(self.block_began).saturating_mul(1000) / items;
        self.block_began = now;
        self.counted = n;
        self.last_ps = ps;
        if self.first_ps == 0 {
            // Against the cheaper of the site's cost and this block's: a first
            // block is slow when the data is still in the other CPU's cache after
            // speculation, and the site's cost is old when the loop has moved on to
            // cheaper iterations.
            self.first_ps = match self.expected_ps {
                0 => ps.max(1),
                expected => expected.min(ps).max(1),
            };
        }
        self.dearer = if ps > self.first_ps.saturating_mul(STALE) {
            self.dearer + 1
        } else {
            0
        };
        self.dearer >= CHANGED_BLOCKS
    }

    /// The last block's cost per iteration, in picoseconds.
    pub(crate) fn last_ps(&self) -> u64 {
        self.last_ps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stretch_ends_when_its_iterations_stay_dearer() {
        let mut c = StretchCost::new(1_000, 0);
        let mut now = 1_000;
        let mut n = 0;
        let mut block = |c: &mut StretchCost, per_item_ns: u64| {
            n += BLOCK;
            now += BLOCK * per_item_ns;
            c.dearer_at(now, n)
        };
        // 10 ns iterations, one block descheduled for 4 ms: not a change.
        assert!(!block(&mut c, 10));
        assert!(!block(&mut c, 12));
        assert!(!block(&mut c, 4_000_000 / BLOCK));
        assert!(!block(&mut c, 10));
        // Cheaper iterations change nothing either.
        assert!(!block(&mut c, 1));
        assert!(!block(&mut c, 1));
        // 5 us iterations, two blocks in a row: the stretch ends, and says what
        // they cost.
        assert!(!block(&mut c, 5_000));
        assert!(block(&mut c, 5_000));
        assert_eq!(c.last_ps(), 5_000_000);
    }

    #[test]
    fn a_stretch_of_iterations_far_dearer_than_the_site_measured_ends() {
        // The site measured 10 ns iterations; the stretch's blocks take 5 us an
        // iteration: it ends after two.
        let mut c = StretchCost::new(0, 10_000);
        assert!(!c.dearer_at(BLOCK * 5_000, BLOCK));
        assert!(c.dearer_at(2 * BLOCK * 5_000, 2 * BLOCK));
        assert_eq!(c.last_ps(), 5_000_000);
        // A first block slowed by cold data, then the measured cost: it runs on.
        let mut c = StretchCost::new(0, 10_000);
        assert!(!c.dearer_at(BLOCK * 100, BLOCK));
        assert!(!c.dearer_at(BLOCK * 110, 2 * BLOCK));
        assert!(!c.dearer_at(BLOCK * 120, 3 * BLOCK));
        // The site measured 5 us iterations, the stretch runs 10 ns ones, then 5 us
        // ones again: those are far dearer than the stretch's own start.
        let mut c = StretchCost::new(0, 5_000_000);
        assert!(!c.dearer_at(BLOCK * 10, BLOCK));
        assert!(!c.dearer_at(BLOCK * 5_010, 2 * BLOCK));
        assert!(c.dearer_at(BLOCK * 10_010, 3 * BLOCK));
    }
}
