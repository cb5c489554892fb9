//! The scheduling rules that the speedup model of profile mode mirrors: the scheduler
//! and the adaptive policy act on them, `profile/model.rs` replays them. Changing one
//! here changes both sides.

use std::time::Duration;

/// Epochs in flight per thread: the window of epochs that may be claimed ahead of the
/// commit watermark is this many times the loop's threads.
pub(crate) const EPOCHS_PER_THREAD: usize = 4;

/// The epoch length automatic chunking aims for while the loop's epochs get violated.
pub(crate) const TARGET_EPOCH: Duration = Duration::from_micros(10);

/// The epoch length automatic chunking aims for while a loop's epochs see no violation
/// at all. Each epoch costs a fixed amount beside its body (claiming its items,
/// publishing it, committing it, and the cache lines its writes move between the
/// threads: 2 to 4 us on a 2-core VM), which is a third of a [`TARGET_EPOCH`] epoch;
/// a loop that never rolls back loses nothing by longer epochs, so it gets epochs this
/// long, where that cost is a twentieth or less. A loop that does roll back keeps the
/// shorter target: a violation throws away more of a longer epoch.
pub(crate) const QUIET_TARGET_EPOCH: Duration = Duration::from_micros(80);

/// The epoch length automatic chunking aims for: [`QUIET_TARGET_EPOCH`] when the
/// epochs it last measured were never violated, else [`TARGET_EPOCH`].
#[inline]
pub(crate) fn target_epoch(quiet: bool) -> Duration {
    if quiet {
        QUIET_TARGET_EPOCH
    } else {
        TARGET_EPOCH
    }
}

/// The iterations per epoch that make an epoch of iterations of `per_item_ns` each
/// last what automatic chunking aims for ([`target_epoch`]), between 1 and
/// [`MAX_CHUNK`]: what a thread's tally sets the site's chunk to
/// (`LoopSite::tune_chunk`), and the model with it.
#[inline]
pub(crate) fn chunk_for_target(quiet: bool, per_item_ns: f64) -> usize {
    (target_epoch(quiet).as_nanos() as f64 / per_item_ns.max(1.0)).clamp(1.0, f64::from(MAX_CHUNK))
        as usize
}

/// Epochs per thread that a loop run of known length is cut into at least, when its
/// epochs would otherwise be longer than [`TARGET_EPOCH`]: the last epochs of a run
/// finish while other threads idle, about half an epoch each, which must stay a small
/// part of the run.
pub(crate) const MIN_RUN_EPOCHS_PER_THREAD: usize = 16;

/// The iterations per epoch automatic chunking uses for a run of `items` iterations
/// (its iterator's lower size bound; 0 when unknown) on `threads` threads, given the
/// site's chunk `chosen` and the chunk `short` that [`TARGET_EPOCH`] gives: `chosen`,
/// cut to leave every thread [`MIN_RUN_EPOCHS_PER_THREAD`] epochs, but never below
/// `short` (a short run's epochs still amortize their fixed cost).
#[inline]
pub(crate) fn run_chunk(chosen: usize, short: usize, items: usize, threads: usize) -> usize {
    if items == 0 {
        return chosen;
    }
    let even = items / (threads.max(1) * MIN_RUN_EPOCHS_PER_THREAD);
    chosen.min(even.max(short)).max(1)
}

/// The iterations epoch `epoch` of a run of `items` iterations (its iterator's lower
/// size bound; 0 when unknown) takes under automatic chunking with chunk `chunk` on
/// `threads` threads: the run is cut into a multiple of `threads` epochs of at most
/// `chunk` iterations, their lengths within one iteration of each other, the longer
/// ones first, so that every thread gets the same share. Without this, a short run
/// ends unevenly: 10 iterations of 2.6 us in epochs of 3 on two threads (3, 3, 3, 1)
/// left one thread 6 iterations and the other 4, and the run took 0.70 of the plain
/// loop's time; as 3, 3, 2, 2 it takes about 0.60 (the ideal, with the 1.7 us a
/// spinning worker takes to join, is 0.57). Epochs past the plan (the bound was
/// low) take `chunk`.
#[inline]
pub(crate) fn planned_chunk(chunk: usize, items: usize, threads: usize, epoch: u64) -> usize {
    let chunk = chunk.max(1);
    // No plan for an unknown length, nor for one no run reaches (an endless iterator
    // such as `0..` gives `usize::MAX` as its lower bound).
    if items == 0 || items > MAX_PLANNED_ITEMS {
        return chunk;
    }
    let threads = threads.max(1);
    let epochs = items.div_ceil(chunk).div_ceil(threads) * threads;
    if epoch >= epochs as u64 {
        return chunk;
    }
    let (short, longer) = (items / epochs, items % epochs);
    let size = if epoch < longer as u64 {
        short + 1
    } else {
        short
    };
    size.clamp(1, chunk)
}

/// The longest run [`planned_chunk`] plans for: past it the bound is not a run's
/// length (an endless iterator's is `usize::MAX`), and planning could overflow.
pub(crate) const MAX_PLANNED_ITEMS: usize = 1 << 40;

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

#[cfg(test)]
mod tests {
    use super::planned_chunk;

    #[test]
    fn a_run_of_known_length_is_cut_into_even_epochs_for_every_thread() {
        let plan = |chunk, items, threads| -> Vec<usize> {
            let mut sizes = Vec::new();
            let mut left = items;
            while left > 0 {
                let size = planned_chunk(chunk, items, threads, sizes.len() as u64).min(left);
                sizes.push(size);
                left -= size;
            }
            sizes
        };
        // 10 iterations in epochs of at most 3 on two threads: four epochs, two each, of
        // 5 iterations a thread (uniform epochs of 3 left one thread 6 and the other 4).
        assert_eq!(plan(3, 10, 2), [3, 3, 2, 2]);
        assert_eq!(plan(2, 10, 2), [2, 2, 2, 2, 1, 1]);
        assert_eq!(plan(2, 11, 2), [2, 2, 2, 2, 2, 1]);
        // A run shorter than one chunk is split between the threads.
        assert_eq!(plan(30, 10, 2), [5, 5]);
        assert_eq!(plan(8, 3, 4), [1, 1, 1]);
        // Even cuts already: unchanged.
        assert_eq!(plan(4, 16, 2), [4, 4, 4, 4]);
        assert_eq!(plan(1, 5, 2), [1, 1, 1, 1, 1]);
        // Never more than the chunk, never empty; an unknown length keeps the chunk.
        for items in 1..200 {
            for chunk in 1..12 {
                for threads in 1..5 {
                    let sizes = plan(chunk, items, threads);
                    assert_eq!(sizes.iter().sum::<usize>(), items);
                    assert!(sizes.iter().all(|&s| (1..=chunk).contains(&s)));
                    let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                    assert!(hi - lo <= 1, "{chunk} {items} {threads}: {sizes:?}");
                }
            }
        }
        assert_eq!(planned_chunk(7, 0, 2, 0), 7);
        // An endless iterator's bound (`0..` says `usize::MAX`) is no run's length.
        for threads in 1..9 {
            for chunk in [1, 3, 256] {
                assert_eq!(planned_chunk(chunk, usize::MAX, threads, 0), chunk);
                assert_eq!(planned_chunk(chunk, usize::MAX, threads, 5), chunk);
            }
        }
        // Past the plan (the iterator's bound was low): the chunk.
        assert_eq!(planned_chunk(3, 10, 2, 4), 3);
    }
}
