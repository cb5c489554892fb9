//! Containers dropped or consumed while epochs hold versions of them.
//!
//! An epoch's write log points at the slots it wrote. A container can go away while
//! such records exist in two ways:
//!
//! - the epoch running on this thread wrote it (a container it made, used and dropped,
//!   or consumed with `into_inner`): its records of the container are removed from its
//!   log, and a consuming epoch gets the value it sees (its own newest version, else
//!   the committed value), as the sequential program would;
//! - other epochs wrote it: in a correct schedule they cannot still reach a container
//!   that is gone, so they were running on stale data. Their versions are removed and
//!   they are violated (they re-run), and since their logs still point at the slots,
//!   the slots' memory is kept, emptied, in a graveyard until every loop those epochs
//!   belonged to has ended.
//!
//! A container no epoch ever wrote needs none of this (its `written` flag is clear).

use super::slot::Slot;
use crate::epoch::{self, Tag};
use core::alloc::Layout;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, Ordering};

/// A boxed slot as a boxed slice of one.
pub(crate) fn one<T>(slot: Box<Slot<T>>) -> Box<[Slot<T>]> {
    let raw: *mut [Slot<T>] = core::ptr::slice_from_raw_parts_mut(Box::into_raw(slot), 1);
    // SAFETY: a `[Slot<T>; 1]` has the layout of a `Slot<T>`, so the allocation of the
    // box is that of a one-element boxed slice.
    unsafe { Box::from_raw(raw) }
}

/// Drops the slots of a container.
pub(crate) fn drop_slots<T>(slots: Box<[Slot<T>]>, written: bool) {
    if !written {
        return drop(slots);
    }
    let owner = forget_own_records(&slots);
    let (evicted, loops) = evict_others(&slots, owner);
    if evicted.is_empty() {
        drop(slots);
    } else {
        let mut values = Vec::with_capacity(slots.len());
        for s in slots.iter() {
            // SAFETY: the slots are buried below and never read or dropped as slots.
            let (visible, committed, state) = unsafe { s.take_out(owner) };
            values.push((visible, committed, state));
        }
        bury(slots, loops);
        drop(values);
    }
    drop(evicted);
}

/// Consumes the slots of a container, returning the value each holds for the caller.
pub(crate) fn consume_slots<T>(slots: Box<[Slot<T>]>, written: bool) -> Vec<T> {
    if !written {
        return slots
            .into_vec()
            .into_iter()
            .map(Slot::into_committed)
            .collect();
    }
    let owner = forget_own_records(&slots);
    let (evicted, loops) = evict_others(&slots, owner);
    let mut out = Vec::with_capacity(slots.len());
    let mut rest = Vec::new();
    for s in slots.iter() {
        // SAFETY: the slots are freed or buried below, never read or dropped as slots.
        let (visible, committed, state) = unsafe { s.take_out(owner) };
        out.push(visible);
        rest.push((committed, state));
    }
    if evicted.is_empty() {
        free_shells(slots);
    } else {
        bury(slots, loops);
    }
    drop(rest);
    drop(evicted);
    out
}

/// Removes the running epoch's records of `slots` from its write log; returns its tag.
fn forget_own_records<T>(slots: &[Slot<T>]) -> Option<Tag> {
    let cx = epoch::current_quiet()?;
    let range = slots.as_ptr_range();
    let (start, end) = (range.start as usize, range.end as usize);
    cx.writes.borrow_mut().retain(|w| {
        let a = w.slot.cast::<()>() as usize;
        !(start <= a && a < end)
    });
    Some(cx.tag)
}

type Evicted<T> = (Vec<SmallVec<[T; 1]>>, SmallVec<[u32; 1]>);

/// Removes (and violates) the versions of epochs other than `owner`.
fn evict_others<T>(slots: &[Slot<T>], owner: Option<Tag>) -> Evicted<T> {
    let mut values = Vec::new();
    let mut loops: SmallVec<[u32; 1]> = SmallVec::new();
    for s in slots {
        let (v, l) = s.evict_others(owner);
        if !v.is_empty() {
            values.push(v);
        }
        for serial in l {
            if !loops.contains(&serial) {
                loops.push(serial);
            }
        }
    }
    (values, loops)
}

/// Frees slots whose values were moved out, without dropping them.
fn free_shells<T>(slots: Box<[Slot<T>]>) {
    let raw = Box::into_raw(slots) as *mut [core::mem::ManuallyDrop<Slot<T>>];
    // SAFETY: `ManuallyDrop<Slot<T>>` has the layout of `Slot<T>`; the box frees the
    // allocation and drops nothing (the values were moved out by `take_out`, and what
    // is left, a lock and an empty state, owns no memory).
    drop(unsafe { Box::from_raw(raw) });
}

/// Slot memory kept until the loops whose logs may still point into it have ended.
struct Grave {
    ptr: *mut u8,
    layout: Layout,
    loops: SmallVec<[u32; 1]>,
}

// SAFETY: a grave is raw memory holding emptied slots (a lock and an empty state, no
// value of any type); only `sweep_graves` frees it, on whichever thread.
unsafe impl Send for Grave {}

static GRAVES: std::sync::Mutex<Vec<Grave>> = std::sync::Mutex::new(Vec::new());
static ANY_GRAVE: AtomicBool = AtomicBool::new(false);

/// Keeps the emptied `slots` until every loop in `loops` has ended.
fn bury<T>(slots: Box<[Slot<T>]>, loops: SmallVec<[u32; 1]>) {
    let layout = Layout::for_value(&*slots);
    let ptr = Box::into_raw(slots) as *mut u8;
    GRAVES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Grave { ptr, layout, loops });
    ANY_GRAVE.store(true, Ordering::SeqCst);
}

/// Frees the graves no running loop can reach any more (called as a loop ends).
pub(crate) fn sweep_graves() {
    if !ANY_GRAVE.load(Ordering::SeqCst) {
        return;
    }
    let mut graves = GRAVES.lock().unwrap_or_else(|e| e.into_inner());
    graves.retain(|g| {
        if g.loops.iter().any(|&s| crate::live_loops::is_running(s)) {
            return true;
        }
        if g.layout.size() > 0 {
            // SAFETY: `ptr` came from a box of this layout (see `bury`); its slots are
            // empty and no record points into them any more (their loops ended).
            unsafe { std::alloc::dealloc(g.ptr, g.layout) };
        }
        false
    });
    ANY_GRAVE.store(!graves.is_empty(), Ordering::SeqCst);
}
