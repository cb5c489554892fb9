//! Automatic chunking: when the loop does not set how many iterations make one epoch,
//! its site chooses, grouping iterations much shorter than [`TARGET_EPOCH`] (or
//! [`QUIET_TARGET_EPOCH`] while no epoch is violated) so that the per-epoch cost stays
//! small, and halving the chunk when epochs roll back. A run of known length is cut
//! into enough epochs for every thread ([`run_chunk`]).

use super::LoopSite;
#[cfg(doc)]
use crate::rules::{QUIET_TARGET_EPOCH, TARGET_EPOCH};
use crate::rules::{chunk_for_target, halve_chunk, run_chunk};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// The largest short chunk (iterations per [`TARGET_EPOCH`]) for which a site whose
/// epochs wait for their own `on_commit` calls gets one iteration per epoch: 20, an
/// iteration of at least half a microsecond. One epoch per shorter iteration costs
/// more than it can overlap (the per-epoch cost is about a microsecond on a 2-core
/// VM): 100,000 iterations of 20 ns with a call at the end of each took 13-17 times
/// the plain loop's time that way, and twice it with 16 iterations per epoch.
const MAX_DELAYED_CALL_CHUNK: usize = 20;

impl LoopSite {
    /// Iterations per epoch, as chosen by [`LoopSite::tune_chunk`].
    #[inline]
    pub(crate) fn chunk(&self) -> usize {
        self.chunk.load(Relaxed) as usize
    }

    /// The length automatic chunking assumes for a run whose iterator's lower size
    /// bound is `hint`: the hint, or when it is 0 (unknown, as for a `filter`) the
    /// length of the site's last run (0 if none).
    pub(crate) fn run_length(&self, hint: usize) -> usize {
        match hint {
            0 => self.last_run_items.load(Relaxed) as usize,
            n => n,
        }
    }

    /// Iterations per epoch for a run of `items` iterations (see
    /// [`LoopSite::run_length`]; 0: unknown) on `threads` threads: [`LoopSite::chunk`],
    /// cut by [`run_chunk`] so that every thread gets enough epochs.
    #[inline]
    pub(crate) fn chunk_for_run(&self, items: usize, threads: usize) -> usize {
        let short = self.short_chunk.load(Relaxed) as usize;
        if self.synced.delayed_call_reads() && short <= MAX_DELAYED_CALL_CHUNK {
            // Iterations that make `on_commit` calls: one per epoch, so that a later
            // iteration's reads do not wait for the call of one before it in its
            // chunk (`memory::await_delayed_calls`). Not for iterations so short
            // that an epoch each would cost more than the loop: there the waits
            // make the chunk's later iterations plain code, and the adaptive policy
            // runs the site in order if nothing overlaps.
            return 1;
        }
        run_chunk(self.chunk(), short, items, threads)
    }

    /// An epoch of this site rolled back (by any amount, for any cause): automatic
    /// chunking keeps to the short target from now on (see
    /// [`LoopSite::tune_chunk`]). Noted at the rollback itself, by whichever thread
    /// rolls back, so that no thread's next tally can still take the site for quiet.
    #[inline]
    pub(crate) fn note_rollback(&self) {
        if !self.rolled_back_once.load(Relaxed) {
            self.rolled_back_once.store(true, Relaxed);
        }
    }

    /// A speculative run of this site committed `items` iterations.
    pub(crate) fn ran_items(&self, items: u64) {
        if self.last_run_items.load(Relaxed) != items {
            self.last_run_items.store(items, Relaxed);
        }
    }

    /// Adapts the iterations per epoch to what a participant measured: `items`
    /// iterations in `busy` of work over `epochs` epochs, `rolled_back` of them rolled
    /// back.
    ///
    /// Short iterations are grouped so that an epoch lasts about [`TARGET_EPOCH`] and
    /// the per-epoch cost (claiming, publishing, committing: a few cache-line
    /// transfers) stays small. A site none of whose epochs has ever rolled back aims
    /// at [`QUIET_TARGET_EPOCH`] instead, and goes there at once: the time per item
    /// is the epochs' own run time (see `Votes`) spread over their items, with the
    /// per-iteration costs of speculation in it, so it can only overstate an item
    /// and the chunk undershoot, and a new site's first run, one
    /// iteration an epoch at first, reaches its epoch length in a window or two.
    /// The first rollback ends that for good: longer epochs can turn a dependence
    /// that shorter ones straddled into violations of every epoch, and a site that
    /// went back and forth would pay a window of those each time; the chunk drops to
    /// the short target at once. From then on it never exceeds the short target,
    /// grows by at most double a window, and halves when more than a quarter of the
    /// epochs lose a good part of their work. While the site synchronizes a load
    /// (`synced.rs`), an epoch is one iteration.
    pub(crate) fn tune_chunk(&self, epochs: u32, items: u64, rolled_back: u32, busy: Duration) {
        if items == 0 || epochs == 0 {
            return;
        }
        let quiet = !self.rolled_back_once.load(Relaxed);
        let per_item = busy.as_nanos() as f64 / items as f64;
        let for_target = |quiet: bool| chunk_for_target(quiet, per_item) as u32;
        let short = for_target(false);
        self.short_chunk.store(short, Relaxed);
        let current = self.chunk.load(Relaxed).max(1);
        let next = if self.synced.active() {
            // An epoch that reaches a synchronized load waits there for the whole
            // epoch before it: with several iterations an epoch, only the first
            // one's work before the load would overlap. One iteration an epoch; if
            // that is too short to pay, the window says so and the site runs in
            // order.
            1
        } else if quiet {
            for_target(true)
        } else if halve_chunk(u64::from(rolled_back), u64::from(epochs)) {
            (current / 2).clamp(1, short)
        } else {
            // At most double a window, and at once down to the short target.
            short.min(current * 2)
        };
        self.chunk.store(next, Relaxed);
    }
}
