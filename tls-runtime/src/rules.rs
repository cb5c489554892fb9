//! The scheduling rules that the speedup model of profile mode mirrors: the scheduler
//! and the adaptive policy act on them, `profile/model.rs` replays them. Changing one
//! here changes both sides.

use std::time::Duration;

/// Epochs in flight per thread: the window of epochs that may be claimed ahead of the
/// commit watermark is this many times the loop's threads.
pub(crate) const EPOCHS_PER_THREAD: usize = 4;

/// The epoch length automatic chunking aims for.
pub(crate) const TARGET_EPOCH: Duration = Duration::from_micros(10);

/// The most iterations automatic chunking puts in one epoch.
pub(crate) const MAX_CHUNK: u32 = 256;

/// "A quarter": the share of an epoch's work a rollback must throw away for the epoch
/// to count as rolled back, and the share of rolled-back epochs that halves the chunk.
pub(crate) const ROLLBACK_SHARE: u32 = 4;

/// Whether a rollback that lost `lost` of the `so_far` an epoch had run counts the
/// epoch as rolled back: it threw away at least a quarter of it. Going back to a late
/// checkpoint costs little and is what checkpoints are for.
#[inline]
pub(crate) fn lost_enough(lost: Duration, so_far: Duration) -> bool {
    lost * ROLLBACK_SHARE >= so_far
}

/// [`lost_enough`] in nanoseconds, for the model.
#[inline]
pub(crate) fn lost_enough_ns(lost: f64, so_far: f64) -> bool {
    lost * f64::from(ROLLBACK_SHARE) >= so_far
}

/// Whether automatic chunking halves the chunk: more than a quarter of `epochs` were
/// rolled back, and a larger epoch loses more work per violation.
#[inline]
pub(crate) fn halve_chunk(rolled_back: u64, epochs: u64) -> bool {
    rolled_back * u64::from(ROLLBACK_SHARE) > epochs
}
