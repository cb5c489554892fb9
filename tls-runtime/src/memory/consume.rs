//! Containers dropped or consumed while epochs hold versions of them.
//!
//! An epoch's write log points at the slots it wrote. A container can go away while
//! such records exist in three ways:
//!
//! - the epoch running on this thread wrote it (a container it made, used and dropped,
//!   or consumed with `into_inner`): its records of the container are removed from its
//!   log, and a consuming epoch gets the value it sees (its own newest version, else
//!   the committed value), as the sequential program would;
//! - other epochs wrote it: in a correct schedule they cannot still reach a container
//!   that is gone, so they were running on stale data. Their versions are removed and
//!   they are violated (they re-run), and since their logs still point at the slots,
//!   the slots' memory is kept, emptied, in a graveyard until every loop those epochs
//!   belonged to has ended;
//! - a commit-time action drops it while its commit holds the locks of slots the
//!   iteration wrote (see `commit_hold`): its values go at once, its memory is handed
//!   to the commit, which still has records of it and frees it once it has unlocked
//!   everything.
//!
//! A container no epoch ever wrote needs none of this (its `written` flag is clear).

use super::commit_hold;
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
    let committer = committer_of(&slots);
    let owner = forget_own_records(&slots);
    let (evicted, loops) = evict_others(&slots, owner, committer);
    if evicted.is_empty() && committer.is_none() {
        drop(slots);
    } else {
        let mut values = Vec::with_capacity(slots.len());
        for s in slots.iter() {
            // SAFETY: the slots are put away below and never read or dropped as slots.
            let (visible, committed, state) = unsafe { s.take_out(owner) };
            values.push((visible, committed, state));
        }
        put_away(slots, loops, committer.is_some());
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
    let committer = committer_of(&slots);
    let owner = forget_own_records(&slots);
    let (evicted, loops) = evict_others(&slots, owner, committer);
    let mut out = Vec::with_capacity(slots.len());
    let mut rest = Vec::new();
    for s in slots.iter() {
        // SAFETY: the slots are put away below, never read or dropped as slots.
        let (visible, committed, state) = unsafe { s.take_out(owner) };
        out.push(visible);
        rest.push((committed, state));
    }
    put_away(slots, loops, committer.is_some());
    drop(rest);
    drop(evicted);
    out
}

/// The address range of `slots`.
fn span<T>(slots: &[Slot<T>]) -> (usize, usize) {
    let range = slots.as_ptr_range();
    (range.start as usize, range.end as usize)
}

/// The epoch whose commit, on this thread, holds the lock of one of `slots` (the
/// container is being dropped by one of its commit-time actions), if any.
fn committer_of<T>(slots: &[Slot<T>]) -> Option<Tag> {
    let (start, end) = span(slots);
    commit_hold::committer_of(start, end)
}

/// Frees or keeps the memory of slots whose contents were taken out: handed to the
/// commit that holds some of their locks (`under_commit`), else kept in a grave while
/// the `loops` whose logs may point into them run, else freed.
fn put_away<T>(slots: Box<[Slot<T>]>, loops: SmallVec<[u32; 1]>, under_commit: bool) {
    let (start, end) = span(&slots);
    let grave = Grave::of(slots, loops);
    if under_commit {
        commit_hold::retire_under_commit(start, end, Box::new(move || grave.release()));
    } else {
        grave.release();
    }
}

/// Removes the running epoch's records of `slots` from its write log; returns its tag.
fn forget_own_records<T>(slots: &[Slot<T>]) -> Option<Tag> {
    let cx = epoch::current_quiet()?;
    let (start, end) = span(slots);
    cx.forget_writes_in(start, end);
    Some(cx.tag)
}

type Evicted<T> = (Vec<SmallVec<[T; 1]>>, SmallVec<[u32; 1]>);

/// Removes (and violates) the versions of epochs other than `owner` and `committer`.
fn evict_others<T>(slots: &[Slot<T>], owner: Option<Tag>, committer: Option<Tag>) -> Evicted<T> {
    let keep: SmallVec<[Tag; 2]> = owner.into_iter().chain(committer).collect();
    let mut values = Vec::new();
    let mut loops: SmallVec<[u32; 1]> = SmallVec::new();
    for s in slots {
        let (v, l) = s.evict_others(&keep);
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

impl Grave {
    /// The memory of `slots`, whose contents were taken out, for the `loops` whose
    /// logs may still point into it.
    fn of<T>(slots: Box<[Slot<T>]>, loops: SmallVec<[u32; 1]>) -> Self {
        let layout = Layout::for_value(&*slots);
        let ptr = Box::into_raw(slots) as *mut u8;
        Grave { ptr, layout, loops }
    }

    /// Frees the memory now if no loop can reach it, else keeps it until those loops
    /// have ended.
    fn release(self) {
        if self.loops.is_empty() {
            self.free();
            return;
        }
        GRAVES.lock().unwrap_or_else(|e| e.into_inner()).push(self);
        ANY_GRAVE.store(true, Ordering::SeqCst);
    }

    fn free(self) {
        if self.layout.size() > 0 {
            // SAFETY: `ptr` came from a box of this layout (see `Grave::of`); its slots
            // were emptied by `take_out` (what is left, a lock and an empty state, owns
            // no memory, so nothing is dropped) and no record points into them any more.
            unsafe { std::alloc::dealloc(self.ptr, self.layout) };
        }
    }
}

/// Frees the graves no running loop can reach any more (called as a loop ends).
pub(crate) fn sweep_graves() {
    if !ANY_GRAVE.load(Ordering::SeqCst) {
        return;
    }
    let mut graves = GRAVES.lock().unwrap_or_else(|e| e.into_inner());
    let (ended, running): (Vec<Grave>, Vec<Grave>) = core::mem::take(&mut *graves)
        .into_iter()
        .partition(|g| !g.loops.iter().any(|&s| crate::live_loops::is_running(s)));
    *graves = running;
    ANY_GRAVE.store(!graves.is_empty(), Ordering::SeqCst);
    drop(graves);
    for g in ended {
        g.free();
    }
}
