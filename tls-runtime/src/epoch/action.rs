//! [`Action`]: a call-once closure an epoch keeps for later (a commit-time action, an
//! undo action), stored in place when it is small.
//!
//! An accumulation records one action per update, and an iteration of a few hundred
//! nanoseconds may make one: boxed, each cost an allocation by the epoch's thread and a
//! free by the committing one, which is another thread half the time. In callgrind
//! that was about 180 instructions of `malloc` and `free` per update (most of them the
//! free of a block another thread allocated), more than the rest of recording and
//! applying it. A closure of up to [`INLINE_BYTES`] (an accumulation's: the target, its
//! lock and the update's own captures) lives in the action itself, and the action lists
//! are recycled (`epoch/spare.rs`), so recording allocates nothing.

use core::mem::{ManuallyDrop, MaybeUninit, align_of, size_of};

/// Room for a closure stored in place: six words.
pub(crate) const INLINE_BYTES: usize = 6 * size_of::<usize>();

type Room = MaybeUninit<[usize; INLINE_BYTES / size_of::<usize>()]>;

/// A call-once closure, in place (see the module docs) or boxed when larger than
/// [`INLINE_BYTES`] or aligned more strictly than a word. Dropping it drops the closure
/// unrun.
pub(crate) struct Action {
    /// The closure's bytes, or (boxed) the pointer to it.
    room: Room,
    /// Takes the closure out of `room` and calls it (`true`) or drops it (`false`).
    take: unsafe fn(*mut Room, bool),
}

// SAFETY: every constructor takes a `Send` closure, and the action owns it.
unsafe impl Send for Action {}

impl Action {
    /// Keeps `f` for later.
    pub(crate) fn new(f: impl FnOnce() + Send + 'static) -> Action {
        // SAFETY: `f` is 'static.
        unsafe { Action::new_unbounded(f) }
    }

    /// Keeps `f` for later, whatever its lifetime.
    ///
    /// # Safety
    /// What `f` borrows must outlive the action's call or drop.
    pub(crate) unsafe fn new_unbounded<F: FnOnce() + Send>(f: F) -> Action {
        let mut room = Room::uninit();
        if fits_in_place::<F>() {
            // SAFETY: `room` has room and alignment for an `F` (just checked).
            unsafe { room.as_mut_ptr().cast::<F>().write(f) };
            Action {
                room,
                take: take_in_place::<F>,
            }
        } else {
            let boxed = Box::into_raw(Box::new(f));
            // SAFETY: `room` has room and alignment for a pointer.
            unsafe { room.as_mut_ptr().cast::<*mut F>().write(boxed) };
            Action {
                room,
                take: take_boxed::<F>,
            }
        }
    }

    /// Calls the closure.
    pub(crate) fn call(self) {
        // Not dropped: `take` moves the closure out, and a panic of the call drops
        // what the call had not consumed as it unwinds through it.
        let mut me = ManuallyDrop::new(self);
        // SAFETY: `room` holds the closure `take` was made for, and `me` is never
        // used or dropped again.
        unsafe { (me.take)(&mut me.room, true) }
    }
}

impl Drop for Action {
    fn drop(&mut self) {
        // SAFETY: `room` holds the closure `take` was made for (`call` consumes the
        // action without dropping it).
        unsafe { (self.take)(&mut self.room, false) }
    }
}

/// Whether an `F` is stored in an action's room rather than boxed.
const fn fits_in_place<F>() -> bool {
    size_of::<F>() <= size_of::<Room>() && align_of::<F>() <= align_of::<Room>()
}

/// [`Action::take`] for an `F` stored in place.
///
/// # Safety
/// `room` holds an `F`, which is not used again.
unsafe fn take_in_place<F: FnOnce()>(room: *mut Room, call: bool) {
    // SAFETY: the caller's contract.
    let f = unsafe { room.cast::<F>().read() };
    if call {
        f()
    }
}

/// [`Action::take`] for a boxed `F`.
///
/// # Safety
/// `room` holds a pointer from `Box::<F>::into_raw`, which is not used again.
unsafe fn take_boxed<F: FnOnce()>(room: *mut Room, call: bool) {
    // SAFETY: the caller's contract.
    let f = unsafe { Box::from_raw(room.cast::<*mut F>().read()) };
    if call {
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// Counts its drops.
    struct Owned(Arc<AtomicUsize>);
    impl Drop for Owned {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    fn case(big: bool, call: bool, panics: bool) -> (usize, usize) {
        let (calls, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let owned = Owned(Arc::clone(&drops));
        let pad = [7u64; 16];
        let c = Arc::clone(&calls);
        let a = Action::new(move || {
            let _owned = &owned;
            if big {
                assert_eq!(pad.iter().sum::<u64>(), 7 * 16);
            }
            c.fetch_add(1, SeqCst);
            if panics {
                panic!("an action's panic");
            }
        });
        if call {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.call()));
            assert_eq!(r.is_err(), panics);
        } else {
            drop(a);
        }
        (calls.load(SeqCst), drops.load(SeqCst))
    }

    #[test]
    fn an_action_runs_once_or_is_dropped_unrun_and_drops_what_it_owns_once() {
        for big in [false, true] {
            assert_eq!(case(big, true, false), (1, 1), "big {big}: called");
            assert_eq!(case(big, true, true), (1, 1), "big {big}: called, panicked");
            assert_eq!(case(big, false, false), (0, 1), "big {big}: dropped");
        }
    }

    #[test]
    fn small_closures_are_stored_in_place_and_large_or_aligned_ones_boxed() {
        const WORDS: usize = INLINE_BYTES / size_of::<usize>();
        #[repr(align(64))]
        struct Aligned(u8);
        assert!(fits_in_place::<[usize; WORDS]>());
        assert!(fits_in_place::<()>());
        assert!(!fits_in_place::<[usize; WORDS + 1]>());
        assert!(!fits_in_place::<Aligned>());
        // Each form keeps the closure's captures intact.
        let x = [3usize; WORDS];
        Action::new(move || assert_eq!(x, [3; WORDS])).call();
        let y = [4usize; WORDS + 1];
        Action::new(move || assert_eq!(y, [4; WORDS + 1])).call();
        let z = Aligned(5);
        Action::new(move || assert_eq!(z.0, 5)).call();
    }
}
