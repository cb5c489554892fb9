//! One speculative location: a committed value plus the uncommitted versions and the
//! reader records of the epochs now in flight.
//!
//! This is the heart of violation detection. Every speculative read and write of the
//! location happens under the slot's [`RawLock`], so a read by a later epoch and a racing
//! write by an earlier one are totally ordered: either the read comes first and the
//! write finds its reader record (and violates the reader), or the write comes first and
//! the read sees the written version (forwarding). There is no window in which both miss
//! each other; `src/loom_tests.rs` checks this.
//!
//! Versioning is lazy: a speculative write adds a version tagged with (epoch, segment,
//! generation) and leaves the committed value alone; commit moves each logged version
//! into the committed value in the order it was written, rollback drops the versions
//! of the rolled-back segments.
//!
//! A read records `(reader epoch, reader segment, version seen)`. A write by epoch `i`
//! violates every recorded reader `j > i` of its loop that saw a version older than or
//! equal to `i` (it should have seen `i`'s new value), rolling `j` back to the segment
//! of that read. A change of the committed value (a commit, or a write from plain
//! code) violates the live readers of every *other* loop: they read a value that is
//! no longer current (data shared between loops stays consistent, see `live_loops`).
//! Records of committed epochs and of loops that ended are dead and pruned as they are
//! met; a record left behind by a rolled-back attempt can at worst cause one needless
//! rollback, never a missed one.
//!
//! No user code runs under a slot's lock except the closure of the access itself (see
//! `nesting` for what a closure may touch) and the commit-time actions of a commit
//! that keeps its write set locked (see `memory::log`): values a write replaces, a
//! commit overwrites or a rollback discards are dropped after the lock is released,
//! since dropping them may drop speculative containers that take locks of their own.

mod state;

use crate::epoch::{
    self, Access, AwaitHomefreeSignal, Dropped, Drops, LoggedSlot, RollbackSignal, Tag,
};
use crate::memory::{commit_hold, nesting};
use crate::sync::{Held, RaceCell, RawLock};
use core::panic::Location;
use smallvec::SmallVec;
pub(crate) use state::SpecState;
use state::{
    Own, WriterRead, insert_version, own_version, record_reader, take_version, violate_other_loops,
    violate_readers, visible,
};

/// Give-ways of one epoch after which it waits to be homefree instead.
const GIVE_WAYS_BEFORE_WAITING: u32 = 2;

/// A speculative location holding a `T`.
///
/// Aligned to a cache line: neighbouring elements of a `SpecVec` written by epochs on
/// different threads must not share a line. For `u64` elements a slot takes two lines
/// (lock and value, the first reader record, the first version inline): memory traded
/// for writes that allocate nothing and reads that follow no pointer.
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Slot<T> {
    lock: RawLock,
    value: RaceCell<T>,
    spec: RaceCell<SpecState<T>>,
}

// SAFETY: all access to `value` and `spec` happens under `lock` (see every `with_mut`
// below), so a `Slot` hands a `T` between threads exactly like `Mutex<T>` does: it is
// `Sync` and `Send` when `T: Send`.
unsafe impl<T: Send> Sync for Slot<T> {}
// SAFETY: as above; the slot owns its `T`s.
unsafe impl<T: Send> Send for Slot<T> {}

impl<T> Slot<T> {
    pub(crate) fn new(value: T) -> Self {
        Slot {
            lock: RawLock::new(),
            value: RaceCell::new(value),
            spec: RaceCell::new(SpecState::new()),
        }
    }

    /// Takes the lock, following the rules of `nesting` when it is busy; `None` when
    /// this thread's commit already holds it (the access goes ahead under that hold).
    #[inline]
    fn acquire(&self) -> Option<Held> {
        match self.lock.try_lock() {
            Some(held) => Some(held),
            None => self.acquire_contended(),
        }
    }

    #[cold]
    fn acquire_contended(&self) -> Option<Held> {
        // First: a closure of this thread holding this very location is re-entered,
        // also under a commit's hold (going ahead would alias the closure's `&mut`).
        if nesting::holds(&self.lock) {
            nesting::reentered();
        }
        if commit_hold::commit_holds(self as *const Self as usize) {
            return None;
        }
        if nesting::nested()
            && let Some(cx) = epoch::current()
            && !cx.homefree()
            && !cx.raising.get()
            // Nor while a panic unwinds (a `Drop` of the body's): unwinding again
            // would abort the process; the access waits for the holder instead.
            && !std::thread::panicking()
        {
            // A speculative epoch waiting here holds another location's lock: give way
            // after a short while rather than risk waiting on a thread that waits on
            // us (an ordinary holder is done within a few hundred nanoseconds). The
            // further an epoch is from homefree, the sooner it gives way, so that of
            // two epochs waiting on each other the younger yields first.
            let budget = (1u32 << 11) >> cx.distance_from_homefree().min(11);
            for spin in 0..budget.max(1) {
                if let Some(held) = self.lock.try_lock() {
                    return Some(held);
                }
                if spin.is_multiple_of(128) {
                    std::thread::yield_now();
                }
                crate::sync::spin_hint();
            }
            // Re-running at once would most likely meet the same holder again (with
            // more threads than cores, it may not even have run meanwhile): the
            // second time, stop speculating and re-run when homefree, where the
            // epoch waits instead of giving way, and its thread takes other work.
            let n = cx.gave_way.get() + 1;
            cx.gave_way.set(n);
            if n >= GIVE_WAYS_BEFORE_WAITING {
                cx.raise(AwaitHomefreeSignal::GaveWay);
            }
            cx.raise(RollbackSignal);
        }
        Some(self.lock.lock_contended())
    }

    /// Runs `f` on the committed value and speculative state, under the lock. `f` is
    /// runtime code: it must not run user code (see [`Slot::locked_user`]).
    #[inline]
    fn locked<R>(&self, f: impl FnOnce(&mut T, &mut SpecState<T>) -> R) -> R {
        let held = self.acquire();
        let _unlock = Unlock(&self.lock, held);
        // SAFETY: we hold `self.lock` (or this thread's commit does, and we run inside
        // it), which guards both cells.
        unsafe { self.value.with_mut(|v| self.spec.with_mut(|m| f(v, m))) }
    }

    /// Like [`Slot::locked`], for an `f` that runs a user closure: the lock is noted as
    /// held by a closure, for the rules of `nesting`.
    #[inline]
    fn locked_user<R>(&self, f: impl FnOnce(&mut T, &mut SpecState<T>) -> R) -> R {
        let held = self.acquire();
        let _unlock = Unlock(&self.lock, held);
        // SAFETY: as in `locked`.
        nesting::in_closure(&self.lock, || unsafe {
            self.value.with_mut(|v| self.spec.with_mut(|m| f(v, m)))
        })
    }

    /// Non-speculative look at the committed value.
    ///
    /// For small values without drop glue this takes no lock: `f` runs on a copy
    /// validated by the lock's count (see [`Slot::snapshot`]); otherwise, or when a
    /// lock holder got in the way, `f` runs under the lock.
    #[inline(always)]
    pub(crate) fn read_committed<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        #[cfg(not(loom))]
        if let Some(copy) = self.snapshot() {
            return f(&copy);
        }
        self.locked_user(|v, _| f(v))
    }

    /// A copy of the committed value taken without the lock, when that is sound and
    /// no lock holder ran during the copy.
    ///
    /// Sound for types without drop glue: overwriting such a value frees nothing and
    /// runs no code, so a validated bitwise copy is exactly a value the location held
    /// at the moment of validation, and whatever `f` then does with it (clone it, look
    /// into it) it could have done to that value under the lock. The one difference,
    /// interior mutability inside the value (a `Cell`), is outside the tracking
    /// contract anyway: speculative containers track their own reads and writes only.
    /// Limited to a cache line, the most a speculative location usually holds (a
    /// `SpecMemory` line), so the copy stays a handful of loads.
    #[cfg(not(loom))]
    #[inline(always)]
    fn snapshot(&self) -> Option<core::mem::ManuallyDrop<T>> {
        if core::mem::needs_drop::<T>() || core::mem::size_of::<T>() > 64 {
            return None;
        }
        let count = self.lock.read_begin()?;
        // SAFETY: `copy_racy`'s contract: the copy is used only once validated below,
        // and then only as a bitwise copy of a value without drop glue.
        let copy = unsafe { self.value.copy_racy() };
        if !self.lock.read_validate(count) {
            return None;
        }
        // SAFETY: no lock holder ran between `read_begin` and `read_validate`, and only
        // lock holders write the value, so the bits are those the last holder left: a
        // valid `T`. `ManuallyDrop` keeps the copy from being dropped as a second owner
        // (a no-op for these types, stated for the reader).
        Some(core::mem::ManuallyDrop::new(unsafe { copy.assume_init() }))
    }

    /// A write of the committed value from plain code (or from the epoch that owns the
    /// container, `by`): violates the readers it makes stale. Returns the old value, to
    /// be dropped by the caller once no lock is held.
    #[inline]
    pub(crate) fn write_committed(
        &self,
        by: Option<&Access<'_>>,
        store: &'static Location<'static>,
        value: T,
    ) -> T {
        self.locked(|v, st| {
            stale_after_direct_write(st, by, store);
            core::mem::replace(v, value)
        })
    }

    /// A read-modify-write of the committed value from plain code (or from the epoch
    /// that owns the container, `by`), as one atomic access.
    #[inline]
    pub(crate) fn update_committed<R>(
        &self,
        by: Option<&Access<'_>>,
        site: &'static Location<'static>,
        f: impl FnOnce(&mut T) -> R,
    ) -> R {
        self.locked_user(|v, st| {
            stale_after_direct_write(st, by, site);
            f(v)
        })
    }

    /// Consumes the slot, returning the committed value.
    pub(crate) fn into_committed(self) -> T {
        self.value.into_inner()
    }

    /// A speculative read by the epoch `a`: `f` sees the value visible to `a`.
    ///
    /// A small value without drop glue is copied out and `f` runs on the copy with no
    /// lock held, as a read outside any loop does (`Slot::snapshot`): a closure that
    /// reads the location and writes it (`s.with(|v| s.set(v + 1))`) then behaves the
    /// same in both, and nested accesses cannot wait on each other.
    #[inline]
    pub(crate) fn read_spec<R>(
        &self,
        a: &Access<'_>,
        load: &'static Location<'static>,
        f: impl FnOnce(&T) -> R,
    ) -> R {
        if !core::mem::needs_drop::<T>() && core::mem::size_of::<T>() <= 64 {
            let copy = self.locked(|committed, st| {
                let (value, seen) = visible(committed, &st.versions, a);
                // SAFETY: a bitwise copy of a value without drop glue is that value;
                // `ManuallyDrop` keeps it from being dropped as a second owner.
                let copy = core::mem::ManuallyDrop::new(unsafe { core::ptr::read(value) });
                if seen.tag != a.tag {
                    record_reader(st, a, seen, load);
                }
                copy
            });
            return f(&copy);
        }
        self.locked_user(|committed, st| {
            // The record comes first: if `f` panics on a stale value, the epoch must
            // still learn that it was stale.
            let seen = visible(committed, &st.versions, a).1;
            if seen.tag != a.tag {
                record_reader(st, a, seen, load);
            }
            f(visible(committed, &st.versions, a).0)
        })
    }

    /// A speculative write of `value` by the epoch `a`. `log` runs if the write created
    /// a version (the epoch must then log the location for commit and rollback).
    /// Returns the value the write replaced in the epoch's own version, if any, to be
    /// dropped by the caller once no lock is held.
    #[inline]
    pub(crate) fn write_spec(
        &self,
        a: &Access<'_>,
        store: &'static Location<'static>,
        value: T,
        log: impl FnOnce(),
    ) -> Option<T> {
        self.locked(|_, st| {
            violate_readers(st, a, store, WriterRead::Recorded, |seen| seen.tag <= a.tag);
            match own_version(&st.versions, a) {
                Own::Current(i) => {
                    let v = &mut st.versions[i];
                    v.store = store;
                    Some(core::mem::replace(&mut v.value, value))
                }
                Own::None | Own::Earlier => {
                    insert_version(&mut st.versions, a, store, value);
                    log();
                    None
                }
            }
        })
    }

    /// A speculative read-modify-write by the epoch `a`: a read of the visible value
    /// followed by a write of the updated one, under one lock hold. The version exists
    /// (and `log` has run) before `f` runs, so a panicking `f` keeps what it changed,
    /// as it would in the sequential loop.
    #[inline]
    pub(crate) fn update_spec<R>(
        &self,
        a: &Access<'_>,
        site: &'static Location<'static>,
        f: impl FnOnce(&mut T) -> R,
        log: impl FnOnce(),
    ) -> R
    where
        T: Clone,
    {
        self.locked_user(|committed, st| {
            let seen = visible(committed, &st.versions, a).1;
            if seen.tag != a.tag {
                record_reader(st, a, seen, site);
            }
            violate_readers(st, a, site, WriterRead::Recorded, |seen| seen.tag <= a.tag);
            let i = match own_version(&st.versions, a) {
                Own::Current(i) => i,
                Own::None | Own::Earlier => {
                    let value = visible(committed, &st.versions, a).0.clone();
                    insert_version(&mut st.versions, a, site, value);
                    log();
                    own_current(&st.versions, a)
                }
            };
            let v = &mut st.versions[i];
            v.store = site;
            f(&mut v.value)
        })
    }

    /// Discards the versions the epoch `a.tag` wrote in segments `>= from_segment`, and
    /// violates the later readers that saw them (they read a value that never was).
    /// Returns the discarded values, to be dropped once no lock is held.
    pub(crate) fn discard(&self, a: &Access<'_>, from_segment: u32) -> SmallVec<[T; 1]> {
        self.locked(|_, st| {
            let mut dropped: SmallVec<[T; 1]> = SmallVec::new();
            let mut store = None;
            let mut i = 0;
            while i < st.versions.len() {
                let v = &st.versions[i];
                if v.tag == a.tag && v.segment >= from_segment {
                    store.get_or_insert(v.store);
                    dropped.push(st.versions.remove(i).value);
                } else {
                    i += 1;
                }
            }
            if let Some(store) = store {
                violate_readers(st, a, store, WriterRead::Unknown, |seen| {
                    seen.tag == a.tag && seen.segment >= from_segment
                });
            }
            dropped
        })
    }

    /// Under the lock held as `_held`: makes the version `key` of epoch `a` the
    /// committed value and violates the readers of other loops. Returns the value it
    /// replaced, to be dropped once no lock is held.
    ///
    /// # Safety
    /// The caller holds `self`'s lock (`_held` came from [`Slot::lock_for_commit`]).
    unsafe fn apply_locked(&self, _held: Held, a: &Access<'_>, key: (Tag, u32, u32)) -> Option<T> {
        // SAFETY: the caller holds the lock guarding both cells.
        unsafe {
            self.value.with_mut(|committed| {
                self.spec.with_mut(|st| {
                    let v = take_version(&mut st.versions, key)?;
                    violate_other_loops(st, Some(a), v.store);
                    Some(core::mem::replace(committed, v.value))
                })
            })
        }
    }

    /// Takes the lock for a commit (the committer holds several in address order and
    /// never waits on a busy one while holding another; see `memory::log`).
    pub(crate) fn lock_for_commit(&self) -> Held {
        self.lock.lock()
    }

    /// Takes the lock for a commit if it is free.
    pub(crate) fn try_lock_for_commit(&self) -> Option<Held> {
        self.lock.try_lock()
    }

    /// Releases a lock taken for a commit.
    pub(crate) fn unlock_after_commit(&self, held: Held) {
        self.lock.unlock(held)
    }

    /// Removes every version of an epoch not in `keep` and violates those epochs (a
    /// container is being dropped or consumed: no other epoch may keep a version of
    /// it, and an epoch that wrote it was running on a path the dropping epoch
    /// changed). `keep` holds the dropping epoch and the epoch whose commit is
    /// dropping it, if any. Returns the removed values, to be dropped once no lock is
    /// held, and the serial numbers of the loops they belonged to.
    pub(crate) fn evict_others(&self, keep: &[Tag]) -> (SmallVec<[T; 1]>, SmallVec<[u32; 1]>) {
        self.locked(|_, st| {
            let mut values = SmallVec::new();
            let mut loops = SmallVec::new();
            let mut i = 0;
            while i < st.versions.len() {
                if keep.contains(&st.versions[i].tag) {
                    i += 1;
                    continue;
                }
                let v = st.versions.remove(i);
                let serial = epoch::serial_of(v.tag);
                if !loops.contains(&serial) {
                    loops.push(serial);
                }
                crate::live_loops::violate(
                    v.tag,
                    v.segment,
                    epoch::Cause {
                        store: v.store,
                        load: v.store,
                        load_ordinal: 0,
                        real: false,
                        rewrite: None,
                        distance: 0,
                    },
                );
                values.push(v.value);
            }
            (values, loops)
        })
    }

    /// Moves everything out of a slot that is going away: the value `owner` sees (its
    /// newest version, else the committed value), the committed value if that was not
    /// it, and the speculative state. Versions of other epochs must have been evicted.
    ///
    /// # Safety
    /// The slot's committed value is moved out: the caller must free the slot's memory
    /// without dropping it as a slot, nor reading its value (what is left, a lock and
    /// an empty state, owns no memory).
    pub(crate) unsafe fn take_out(&self, owner: Option<Tag>) -> (T, Option<T>, SpecState<T>) {
        self.locked(|committed, st| {
            let own = st
                .versions
                .iter()
                .rposition(|v| Some(v.tag) == owner)
                .map(|i| st.versions.remove(i).value);
            let state = core::mem::replace(st, SpecState::new());
            // SAFETY: the caller's contract: the committed value is never read or
            // dropped through the slot again.
            let committed = unsafe { core::ptr::read(committed) };
            match own {
                Some(v) => (v, Some(committed), state),
                None => (committed, None, state),
            }
        })
    }
}

/// Releases a slot's lock when dropped (also while unwinding out of a user closure).
struct Unlock<'a>(&'a RawLock, Option<Held>);

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        if let Some(held) = self.1 {
            self.0.unlock(held);
        }
    }
}

/// The committed value is about to change outside any commit: readers of other loops
/// are stale, and so are the readers of `by`'s loop after `by` that did not see a
/// version of their own loop newer than `by` (a direct write by the epoch that owns a
/// container orders like a write of that epoch).
fn stale_after_direct_write<T>(
    st: &mut SpecState<T>,
    by: Option<&Access<'_>>,
    store: &'static Location<'static>,
) {
    if let Some(a) = by {
        violate_readers(st, a, store, WriterRead::IfRecorded, |seen| {
            seen.tag <= a.tag
        });
    }
    violate_other_loops(st, by, store);
}

fn own_current<T>(versions: &[state::Version<T>], a: &Access<'_>) -> usize {
    match own_version(versions, a) {
        Own::Current(i) => i,
        _ => unreachable!("the version was just inserted"),
    }
}

impl<T> LoggedSlot for Slot<T> {
    fn lock(&self) -> Held {
        self.lock_for_commit()
    }
    fn try_lock(&self) -> Option<Held> {
        self.try_lock_for_commit()
    }
    fn unlock(&self, held: Held) {
        self.unlock_after_commit(held)
    }
    unsafe fn apply(&self, held: Held, a: &Access<'_>, key: (Tag, u32, u32), drops: &mut Drops) {
        // SAFETY: the caller holds the lock (this method's contract).
        let old = unsafe { self.apply_locked(held, a, key) };
        if let Some(old) = old {
            drop_later(old, drops);
        }
    }
    fn discard(&self, a: &Access<'_>, from_segment: u32, drops: &mut Drops) {
        for v in Slot::discard(self, a, from_segment) {
            drop_later(v, drops);
        }
    }
}

/// Puts `value` in `drops` (values without drop glue are simply forgotten).
fn drop_later<'a, T: 'a>(value: T, drops: &mut Drops) {
    if core::mem::needs_drop::<T>() {
        let value: Box<dyn Dropped + 'a> = Box::new(value);
        // SAFETY: only the lifetime bound is erased: `drops` is dropped before the
        // commit or rollback that filled it returns, while the container (and what
        // its values borrow) is still alive (it outlives the loop).
        drops.push(unsafe {
            core::mem::transmute::<Box<dyn Dropped + 'a>, Box<dyn Dropped>>(value)
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
