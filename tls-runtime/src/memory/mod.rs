//! Speculative memory: the containers whose reads and writes the runtime tracks.
//!
//! Every container is made of [`slot::Slot`]s, one per tracked location: the single
//! value of a [`Spec`], each element of a [`SpecVec`], each key of a [`SpecMap`], each
//! 64-byte line of a [`SpecMemory`]. Slots live on the heap, at an address that does
//! not change while the container lives, because an epoch's write log points at them.
//! The functions here route an access to the committed value (outside any epoch: no
//! bookkeeping, and for small values without drop glue no lock either, see
//! `Slot::read_committed`) or through the speculative protocol of `slot` (inside an
//! epoch; a profile-mode epoch that holds no version of its own reads the committed
//! value too, see `read_in_epoch`).
//!
//! A container created inside an epoch is private to that epoch until the next
//! checkpoint: no other epoch can reach it yet, except through a write of this epoch
//! that a later epoch reads, which a direct write then violates. Its accesses go
//! straight to the committed value, with no version and no record
//! ([`Origin::private_to`]).
//!
//! Containers dropped or consumed while epochs still hold versions of them are the
//! business of `consume`.

pub(crate) mod slot;

mod commit_hold;
mod consume;
mod lines;
mod log;
mod map;
pub(crate) mod nesting;
mod spec;
mod vec;

pub(crate) use consume::sweep_graves;
pub use lines::{LINE_SIZE, SpecMemory};
pub(crate) use log::publish_prefix;
pub(crate) use log::{CommitOutcome, commit_epoch, undo_to};
pub use map::SpecMap;
pub use spec::Spec;
pub use vec::SpecVec;

use crate::epoch::{self, Access, EpochCx, LoggedSlot, Tag};
use core::panic::Location;
use core::sync::atomic::{AtomicBool, Ordering};
use slot::Slot;

/// Where a container was created: by which epoch attempt, in which segment (`tag` 0:
/// outside any epoch).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    tag: Tag,
    segment: u32,
    /// The epoch's commit-time actions registered by then (`EpochCx::generation`).
    generation: u32,
}

impl Origin {
    /// The origin of a container created now, on this thread.
    #[inline]
    pub(crate) fn here() -> Self {
        match epoch::current() {
            None => Origin {
                tag: 0,
                segment: 0,
                generation: 0,
            },
            Some(cx) => Origin {
                tag: cx.tag,
                segment: cx.segment.get(),
                generation: cx.generation(),
            },
        }
    }

    /// Whether the container is private to the running epoch `cx`: `cx` created it in
    /// its current segment, and has registered no commit-time action since. A
    /// rollback to or before that segment re-creates it, so its changes need no
    /// versions; a later segment writes versions as usual (a rollback to that segment
    /// must undo them). So does a write after a commit-time action (`on_commit`, an
    /// accumulation): if the action panics at commit, the iteration ends there and
    /// what it wrote after the action must be discarded, which a change made in place
    /// cannot be (a chunk's iteration that makes a node, and the next, which changes
    /// it after an action that panics, kept that change).
    #[inline]
    fn private_to(self, cx: &EpochCx) -> bool {
        self.tag == cx.tag && self.segment == cx.segment.get() && self.generation == cx.generation()
    }
}

/// Erases the lifetime of a slot for an epoch's write log.
///
/// The log only holds the pointer while the epoch that wrote the slot is in flight: the
/// loop drains every log before it returns, and a container dropped or consumed while
/// a log points into it takes care of the record (see `consume`).
fn erase<'a, T: 'a>(slot: &'a Slot<T>) -> *const dyn LoggedSlot {
    let p: *const (dyn LoggedSlot + 'a) = slot;
    // SAFETY: only the trait object's lifetime bound changes; the pointer is never
    // dereferenced after the slot is gone (see above).
    unsafe { core::mem::transmute::<*const (dyn LoggedSlot + 'a), *const dyn LoggedSlot>(p) }
}

/// Reads `slot` through `f`, speculatively when an epoch runs on this thread (but for
/// profile mode's epochs while they hold no version of their own).
///
/// Always inlined, so that a read outside any loop is the thread-local check and the
/// committed read at the call site; the speculative path is a call.
#[inline(always)]
pub(crate) fn read_with<T, R>(
    slot: &Slot<T>,
    origin: Origin,
    load: &'static Location<'static>,
    f: impl FnOnce(&T) -> R,
) -> R {
    match epoch::current() {
        None => slot.read_committed(f),
        Some(cx) => read_in_epoch(cx, slot, origin, load, f),
    }
}

#[inline(never)]
fn read_in_epoch<T, R>(
    cx: &EpochCx,
    slot: &Slot<T>,
    origin: Origin,
    load: &'static Location<'static>,
    f: impl FnOnce(&T) -> R,
) -> R {
    if cx.profiling.get() {
        cx.note(slot as *const Slot<T> as usize, false, load);
        // Profile mode's epochs run one at a time, in order, homefree: while one
        // holds no version of its own (it writes in place once it publishes, at its
        // first write, unless that write is made inside another location's closure
        // or while a panic unwinds) and no delayed call of its own waits, the
        // committed value is what it would see, and it reads as plain code does.
        // Through the tracked path (the slot's lock taken, a reader record), a read
        // cost 50 to 110 ns more than a plain one, by the loop's access pattern, too
        // much and too varied to take out of an epoch's recorded length: a loop of
        // 100 reads per 2 us iteration was recorded at 3 to 6 us an iteration, and
        // predicted 1.6-1.8x on 2 cores where it ran at 1.1-1.3x.
        if !cx.delayed_call_pending() && cx.holds_no_versions() {
            return slot.read_committed(f);
        }
    }
    if origin.private_to(cx) {
        return slot.read_committed(f);
    }
    if cx.loads_need_care() {
        if !cx.published() {
            synchronize(cx, load);
        }
        // Waiting for a delayed call publishes the epoch.
        if cx.published() {
            return slot.read_committed(f);
        }
    }
    let a = cx.begin_access();
    slot.read_spec(&a, load, f)
}

/// Before a speculative load at `load`: if the epoch holds a delayed call of the
/// program's, runs it first ([`await_delayed_calls`]); if the loop's site
/// synchronizes the load (it violated most epochs, see `adapt::SyncedLoads`), waits
/// until the epoch is homefree.
#[inline]
fn synchronize(cx: &EpochCx, load: &'static Location<'static>) {
    if cx.delayed_call_pending() {
        await_delayed_calls(cx, load);
        return;
    }
    if let Some(s) = cx.synced
        && !cx.homefree()
        && !cx.raising.get()
        && let Some(behind) = s.must_wait(load, cx.ring().len())
        // Waiting may unwind (a violation, or giving up): not from a destructor
        // that runs while the iteration's own panic unwinds.
        && !std::thread::panicking()
        // Nor while a closure of this thread holds another location, which an
        // earlier epoch may need to commit: the load stays speculative there.
        && !nesting::nested()
    {
        let signal = epoch::AwaitHomefreeSignal::SyncedLoad(load);
        crate::adapt::wait_until_committed(cx, load, signal, behind);
    }
}

/// Before a speculative load at `load` in an epoch that holds a delayed call of the
/// program's (`on_commit`): the call may write what the load reads, and the
/// sequential program made it before the load, so the epoch waits until it is
/// homefree, then publishes what it did (the commit runs the call) and reads as plain
/// code. (Without the wait, the load saw the value from before the call and the
/// commit kept what the epoch computed from it, with no violation to tell.) Later
/// runs of the loop's site put one iteration in each epoch when the runtime chooses
/// the chunk, so that a call and a later iteration's reads are not in one epoch.
#[cold]
#[inline(never)]
fn await_delayed_calls(cx: &EpochCx, load: &'static Location<'static>) {
    if cx.raising.get() {
        // A destructor run while a rollback unwinds: its work is thrown away.
        return;
    }
    if std::thread::panicking() {
        // A destructor run while the iteration's own panic unwinds, which cannot
        // wait (waiting may unwind). The attempt is then re-run homefree, where
        // the call runs where it is made (`Shared::attempt`).
        cx.unwound_past_call.set(Some(load));
        return;
    }
    if let Some(s) = cx.synced {
        s.note_delayed_call_read();
    }
    let _ = cx.begin_access();
    if nesting::nested() {
        // A closure of this thread holds a location, which an earlier epoch may
        // need to commit: no waiting here. Re-run from the segment's start once
        // homefree; there the call runs at once (`deferred::defer`).
        if !cx.homefree() {
            cx.raise(epoch::AwaitHomefreeSignal::DelayedCall(load));
        }
        panic!(
            "tls-runtime: the speculative load at {} follows an `on_commit` call made inside \
             the `update` or `with` closure that is still running; the call may write what \
             the load reads, and inside the closure the iteration cannot wait for it: make \
             the call after the closure returns",
            crate::report::SourceLocation(load)
        );
    }
    crate::adapt::wait_until_committed(cx, load, epoch::AwaitHomefreeSignal::DelayedCall(load), 1);
    publish_prefix(cx);
}

/// A container's bookkeeping shared by every access: where it was created and whether
/// an epoch ever wrote a version of it.
#[derive(Debug)]
pub(crate) struct Header {
    origin: Origin,
    written: AtomicBool,
}

impl Header {
    /// The header of a container created now. Made before the container's
    /// contents: the first one made outside a loop starts the workers, and a
    /// new thread first runs some 0.1 ms after its start on the 2-core
    /// development machine, time it can spend starting while this thread makes
    /// the contents (800 elements of a `SpecVec`: 0.05 ms) rather than after.
    #[inline]
    pub(crate) fn new() -> Self {
        let origin = Origin::here();
        // Made outside any loop: a loop over it is likely to follow; have its
        // workers started by then (a no-op after the first time).
        #[cfg(not(loom))]
        if origin.tag == 0 {
            crate::workers::prestart();
        }
        Header {
            origin,
            written: AtomicBool::new(false),
        }
    }

    #[inline]
    pub(crate) fn origin(&self) -> Origin {
        self.origin
    }

    /// Whether an epoch ever wrote a version of the container (else dropping it needs
    /// no care).
    pub(crate) fn was_written(&self) -> bool {
        self.written.load(Ordering::Relaxed)
    }

    #[inline]
    fn note_written(&self) {
        if !self.written.load(Ordering::Relaxed) {
            self.written.store(true, Ordering::Relaxed);
        }
    }

    /// Logs the new version `slot` got from the access `a` of `cx`.
    #[inline]
    fn log<T>(&self, cx: &EpochCx, a: &Access<'_>, slot: &Slot<T>) {
        self.note_written();
        cx.log_write(erase(slot), a);
    }
}

/// Whether the epoch of `cx` writes in place: the container is private to it, or it is
/// homefree and has published what it did before (publishing it now if it can: not
/// while a closure of this thread holds a lock, which publishing could wait for, nor
/// while a rollback unwinds).
#[inline]
fn writes_in_place(cx: &EpochCx, h: &Header) -> bool {
    if h.origin.private_to(cx) || cx.published() {
        return true;
    }
    publish_if_homefree(cx)
}

/// Publishes what the epoch of `cx` did (it runs as plain code from then on) if it
/// can: it is homefree, nothing unwinds (publishing may unwind itself: a violation
/// by plain code, a delayed call's panic; and a destructor that read speculative
/// data during a panic must be able to re-run its attempt), and no closure of this
/// thread holds a location (publishing could wait for it). Returns whether it is
/// published.
pub(crate) fn publish_if_homefree(cx: &EpochCx) -> bool {
    if cx.homefree() && !cx.raising.get() && !nesting::nested() && !std::thread::panicking() {
        publish_prefix(cx);
        return true;
    }
    false
}

/// Writes `value` to `slot`, a location of the container with header `h`.
#[inline]
pub(crate) fn write<T>(slot: &Slot<T>, h: &Header, store: &'static Location<'static>, value: T) {
    let old = match epoch::current() {
        None => Some(slot.write_committed(None, store, value)),
        Some(cx) if writes_in_place(cx, h) => {
            cx.note(slot as *const Slot<T> as usize, true, store);
            Some(slot.write_committed(Some(&cx.access()), store, value))
        }
        Some(cx) => {
            let a = cx.begin_access();
            cx.note(slot as *const Slot<T> as usize, true, store);
            slot.write_spec(&a, store, value, || h.log(cx, &a, slot))
        }
    };
    // Dropped here, with no lock held: it may own speculative containers.
    drop(old);
}

/// Applies `f` to `slot`'s value (a location of the container with header `h`): a
/// read and a write, as one atomic access.
#[inline]
pub(crate) fn update<T: Clone, R>(
    slot: &Slot<T>,
    h: &Header,
    site: &'static Location<'static>,
    f: impl FnOnce(&mut T) -> R,
) -> R {
    let Some(cx) = epoch::current() else {
        return slot.update_committed(None, site, f);
    };
    let in_place = writes_in_place(cx, h)
        || (cx.loads_need_care() && {
            synchronize(cx, site);
            // Waiting for a delayed call publishes the epoch.
            cx.published()
        });
    let addr = slot as *const Slot<T> as usize;
    if in_place {
        cx.note(addr, false, site);
        cx.note(addr, true, site);
        return slot.update_committed(Some(&cx.access()), site, f);
    }
    let a = cx.begin_access();
    cx.note(addr, false, site);
    cx.note(addr, true, site);
    slot.update_spec(&a, site, f, || h.log(cx, &a, slot))
}
