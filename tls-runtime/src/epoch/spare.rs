//! Buffers recycled between epochs on one thread: a write log, a list of commit-time
//! actions, and the slot and lock lists a commit builds from them.
//!
//! An epoch of short iterations logs tens of writes; a fresh vector per epoch grows
//! through five or six reallocations and is freed at commit, a few percent of a loop
//! whose iterations last a microsecond. Each thread keeps one of each, taken when
//! needed and given back empty, so a loop in its steady state allocates nothing for
//! them. A buffer is taken out (not borrowed), so a commit that runs a commit-time
//! action that commits a loop of its own simply finds none and allocates. A write
//! log goes back to the thread that commits its epoch, which need not be the one
//! that logged it; threads that both run and commit epochs each keep one.

use super::{Deferred, LoggedSlot, WriteRecord};
use crate::sync::Held;
use core::cell::Cell;

/// A slot named by a write record.
pub(crate) type SlotPtr = *const dyn LoggedSlot;

/// Buffers larger than this are freed rather than kept: one epoch with a huge write
/// set must not pin its memory on the thread for ever.
const MAX_KEPT: usize = 4096;

/// A per-thread spare `Vec<T>`.
pub(crate) struct Spare<T: 'static>(&'static std::thread::LocalKey<Cell<Vec<T>>>);

impl<T: 'static> Spare<T> {
    pub(crate) const fn new(key: &'static std::thread::LocalKey<Cell<Vec<T>>>) -> Self {
        Spare(key)
    }

    /// This thread's spare (empty), or a new vector if there is none.
    #[inline]
    pub(crate) fn take(&self) -> Vec<T> {
        // During thread teardown the key may be gone: a new vector does as well.
        self.0.try_with(Cell::take).unwrap_or_default()
    }

    /// Keeps `v`'s memory for this thread's next `take`, emptied.
    #[inline]
    pub(crate) fn give(&self, mut v: Vec<T>) {
        if v.capacity() == 0 || v.capacity() > MAX_KEPT {
            return;
        }
        v.clear();
        let _ = self.0.try_with(move |c| {
            // Keep the larger of the two.
            let kept = c.take();
            c.set(if kept.capacity() >= v.capacity() {
                kept
            } else {
                v
            });
        });
    }
}

thread_local! {
    static WRITES: Cell<Vec<WriteRecord>> = const { Cell::new(Vec::new()) };
    static SLOTS: Cell<Vec<SlotPtr>> = const { Cell::new(Vec::new()) };
    static HELD: Cell<Vec<Held>> = const { Cell::new(Vec::new()) };
    static ACTIONS: Cell<Vec<Deferred>> = const { Cell::new(Vec::new()) };
}

/// Write logs (`EpochCx::writes`).
pub(crate) static WRITE_LOGS: Spare<WriteRecord> = Spare::new(&WRITES);
/// The distinct slots of a commit's write log.
pub(crate) static SLOT_LISTS: Spare<SlotPtr> = Spare::new(&SLOTS);
/// The locks a commit holds.
pub(crate) static HELD_LISTS: Spare<Held> = Spare::new(&HELD);
/// Commit-time action lists (`EpochCx::commits`): an accumulation in every iteration
/// grew a fresh one through its reallocations in each epoch.
pub(crate) static ACTION_LISTS: Spare<Deferred> = Spare::new(&ACTIONS);
