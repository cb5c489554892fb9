//! Automatic chunking: when the loop does not set how many iterations make one epoch,
//! its site chooses, grouping iterations much shorter than [`TARGET_EPOCH`] so that
//! the per-epoch cost stays small, and halving the chunk when epochs roll back.

use super::LoopSite;
use crate::rules::{MAX_CHUNK, TARGET_EPOCH, halve_chunk};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

impl LoopSite {
    /// Iterations per epoch, as chosen by [`LoopSite::tune_chunk`].
    #[inline]
    pub(crate) fn chunk(&self) -> usize {
        self.chunk.load(Relaxed) as usize
    }

    /// Adapts the iterations per epoch to what a participant measured: `items`
    /// iterations in `busy` of work over `epochs` epochs, `rolled_back` of them rolled
    /// back. Short iterations are grouped so that an epoch lasts about
    /// [`TARGET_EPOCH`] and the per-epoch cost (claiming, publishing, committing:
    /// a few cache-line transfers) stays small; frequent rollbacks halve the chunk,
    /// since a larger epoch loses more work per violation.
    pub(crate) fn tune_chunk(&self, epochs: u32, items: u64, rolled_back: u32, busy: Duration) {
        if items == 0 || epochs == 0 {
            return;
        }
        let current = self.chunk.load(Relaxed).max(1);
        let next = if halve_chunk(u64::from(rolled_back), u64::from(epochs)) {
            (current / 2).max(1)
        } else {
            let per_item = busy.as_nanos() as f64 / items as f64;
            let ideal = (TARGET_EPOCH.as_nanos() as f64 / per_item.max(1.0))
                .clamp(1.0, f64::from(MAX_CHUNK));
            // Move by at most a factor of two per window.
            (ideal as u32).clamp((current / 2).max(1), current * 2)
        };
        self.chunk.store(next, Relaxed);
    }
}
