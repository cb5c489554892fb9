//! An epoch's logs at the end of its life: commit applies them, rollback undoes them.
//!
//! **Commit.** The epoch is homefree, so no epoch of its loop can violate it any more,
//! but plain code and other loops still can (see `live_loops`). The committer takes
//! the locks of every slot it wrote, in address order, and only then checks that the
//! epoch was not violated: a write from elsewhere to one of those slots either came
//! before (and the check sees its violation) or waits until the commit is done. That is
//! what keeps an update from being lost between loops. Reads the epoch made of slots
//! it did not write are validated up to that check: a change after it orders after the
//! epoch, as it would for plain code.
//!
//! The writes are then applied in the order they were made, and each commit-time
//! action runs between the writes that came before it and those that came after
//! (versions are split at each action, see `EpochCx::generation`), so an action sees
//! what the sequential program had at that point. An action that panics ends the
//! iteration there: the writes after it are discarded and the undo actions registered
//! after it run, as the sequential loop would never have made them.
//!
//! When writes follow an action, the committer keeps the locks while the actions run:
//! a write from elsewhere between the check and those writes would otherwise be lost
//! under them. The actions' own accesses to those slots go ahead under the commit's
//! hold (`commit_hold`), and a loop an action starts runs in order on this thread.
//! So a commit-time action must not wait (nor a value it drops, in its `Drop`) for
//! another thread that may be waiting for data the iteration wrote. An action that drops a container the iteration wrote (a
//! buffer it flushes) hands the container's memory to the commit, which skips its
//! records and frees it after unlocking. When no write follows an action, the locks
//! are released before the actions run.
//!
//! Taking the locks, the committer never waits for a busy one while holding another:
//! a busy one makes it release all and start over, so it cannot deadlock with code
//! that holds one slot and waits for another (nested accesses in a closure). Replaced
//! values are dropped at the very end, with no lock held.
//!
//! **Rollback** to segment `s`: the undo actions registered from `s` on run, newest
//! first; the commit-time actions from `s` on are dropped; the versions written from
//! `s` on are discarded (violating the epochs that read them), one discard per
//! location however many records it has: once a location holds no version of the
//! epoch, another thread may free it. Discarded values are dropped at the end, once
//! no record of the rollback points into them.

use super::commit_hold::CommitHold;
use crate::epoch::{
    ACTION_LISTS, Cause, CurrentGuard, Deferred, Drops, EpochCx, HELD_LISTS, NOT_VIOLATED,
    SLOT_LISTS, SlotPtr, WRITE_LOGS, WriteRecord,
};
use crate::sync::{Held, Ordering};
use smallvec::SmallVec;
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// How a commit went.
pub(crate) enum CommitOutcome {
    /// The epoch's effects are in place.
    Committed,
    /// Plain code or another loop changed data the epoch read: it rolls back to
    /// `target` and runs again.
    Violated { target: u32, cause: Option<Cause> },
    /// A commit-time action panicked: the iteration ends with that panic, its writes
    /// after the action discarded. Or the `Drop` of a value the commit replaced
    /// panicked (see `drop_each`).
    ActionPanicked(Box<dyn Any + Send>),
}

fn addr(p: SlotPtr) -> usize {
    p.cast::<()>() as usize
}

/// The slots `writes` name, each once, in address order (the order commits lock
/// them), and whether that is the log's own order (each slot written once, in
/// ascending order, as a loop over a vector does): then record `k` is slot `k`.
fn distinct_slots(writes: &[WriteRecord]) -> (Vec<SlotPtr>, bool) {
    let mut slots = SLOT_LISTS.take();
    slots.extend(writes.iter().map(|w| w.slot));
    if slots.windows(2).all(|p| addr(p[0]) < addr(p[1])) {
        return (slots, true);
    }
    slots.sort_unstable_by_key(|&p| addr(p));
    slots.dedup_by_key(|p| addr(*p));
    (slots, false)
}

/// Commits the epoch of `cx` (homefree, current on this thread): see the module docs.
/// On success its logs are empty.
pub(crate) fn commit_epoch(cx: &EpochCx) -> CommitOutcome {
    let a = cx.access();
    let writes = cx.writes.take();
    let (order, in_log_order) = distinct_slots(&writes);
    let held = lock_all(&order);
    // A published epoch has nothing left to check: it runs as plain code now.
    if !cx.published() && cx.ring().slot(cx.index).pending(Ordering::Acquire) != NOT_VIOLATED {
        unlock_all(&order, &held);
        SLOT_LISTS.give(order);
        HELD_LISTS.give(held);
        *cx.writes.borrow_mut() = writes;
        let (target, cause) = cx.ring().slot(cx.index).take_violation();
        return CommitOutcome::Violated { target, cause };
    }
    let mut drops = Drops::new();
    // Applies the records `ws`, skipping those of containers an action dropped under
    // `hold` (their values are gone; see `commit_hold`).
    let apply = |ws: core::ops::Range<usize>, drops: &mut Drops, hold: Option<&CommitHold<'_>>| {
        for k in ws {
            let w = &writes[k];
            if hold.is_some_and(|h| h.is_retired(addr(w.slot))) {
                continue;
            }
            let i = if in_log_order {
                k
            } else {
                order
                    .binary_search_by_key(&addr(w.slot), |&p| addr(p))
                    .expect("every logged slot is locked")
            };
            // SAFETY: we hold the slot's lock (`held[i]`); logged slots outlive the
            // records (see `memory::erase`) or, dropped by an action, are skipped.
            unsafe { (*w.slot).apply(held[i], &a, (a.tag, w.segment, w.generation), drops) };
        }
    };
    let actions = cx.commits.take();
    cx.recount_delayed_calls();
    let first = actions.first().map_or(writes.len(), |d| d.writes_before);
    apply(0..first, &mut drops, None);
    let mut outcome = CommitOutcome::Committed;
    if first == writes.len() {
        // No write after an action: release the locks before running user code.
        unlock_all(&order, &held);
        if let Some((k, p)) = run_actions(actions, &mut drops, |_, _| {}) {
            run_undo(cx, |u| u.after_actions > k);
            outcome = CommitOutcome::ActionPanicked(p);
        }
    } else {
        // Writes after an action: the locks stay held until they are applied, so that
        // nothing changes what they were computed from while the actions run; the
        // actions' own accesses to these slots go ahead under the commit's hold.
        let addrs: SmallVec<[usize; 16]> = order.iter().map(|&p| addr(p)).collect();
        let hold = CommitHold::new(&addrs, a.tag);
        let mut done = first;
        let panicked = hold.run(|| {
            run_actions(actions, &mut drops, |d, drops| {
                let upto = d.max(done);
                apply(done..upto, drops, Some(&hold));
                done = upto;
            })
        });
        match panicked {
            Some((k, p)) => {
                // The iteration ends at the action: nothing it did after happened.
                hold.run(|| {
                    let (rest, _) = distinct_slots(&writes[done..]);
                    for &slot in &rest {
                        if !hold.is_retired(addr(slot)) {
                            // SAFETY: logged slots outlive the records, or were
                            // dropped by an action and are skipped.
                            unsafe { &*slot }.discard(&a, 0, &mut drops);
                        }
                    }
                    SLOT_LISTS.give(rest);
                });
                unlock_all(&order, &held);
                hold.release_retired();
                run_undo(cx, |u| u.after_actions > k);
                outcome = CommitOutcome::ActionPanicked(p);
            }
            None => {
                apply(done..writes.len(), &mut drops, Some(&hold));
                unlock_all(&order, &held);
                hold.release_retired();
            }
        }
    }
    drop(cx.undo.take());
    WRITE_LOGS.give(writes);
    SLOT_LISTS.give(order);
    HELD_LISTS.give(held);
    if let Some(p) = drop_each(drops)
        && matches!(outcome, CommitOutcome::Committed)
    {
        outcome = CommitOutcome::ActionPanicked(p);
    }
    outcome
}

/// Drops the values a commit replaced, each on its own; returns the first panic of a
/// `Drop`. The sequential loop would have panicked at the write that replaced the
/// value, so the loop ends with that panic; unwinding out of the commit instead left
/// the epoch half committed and the loop's threads waiting for it for ever. (The
/// writes the epoch made after the replacing one are kept: the commit cannot tell
/// which value a `Drop` will panic on before it drops it.)
fn drop_each(drops: Drops) -> Option<Box<dyn Any + Send>> {
    let mut first = None;
    for value in drops {
        if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
            first.get_or_insert(p);
        }
    }
    first
}

/// Publishes what the homefree epoch of `cx` did so far (a commit of its logs so far,
/// validated like any commit), so that from here on it runs as plain code does:
/// writes in place, commit-time actions at once, no rollback. Called at its first
/// write once homefree, when it holds no lock in a closure. If plain code or another
/// loop invalidated it, it rolls back instead (this unwinds); if a commit-time action
/// panics, the iteration ends with that panic.
pub(crate) fn publish_prefix(cx: &EpochCx) {
    match commit_epoch(cx) {
        CommitOutcome::Committed => cx.set_published(),
        CommitOutcome::Violated { target, cause } => {
            cx.ring().rearm(cx.tag, target, cause);
            if std::thread::panicking() {
                // A `Drop` of the body's while the iteration's panic unwinds
                // (`when_homefree`): unwinding again would abort the process. The
                // epoch stays unpublished and violated; its runner re-runs it.
                return;
            }
            cx.raise(crate::epoch::RollbackSignal)
        }
        CommitOutcome::ActionPanicked(p) => {
            cx.set_published();
            std::panic::resume_unwind(p)
        }
    }
}

/// Runs commit-time actions in order, outside speculation, calling
/// `before(writes_before, drops)` ahead of each; stops at the first that panics and
/// returns its index and payload.
fn run_actions(
    mut actions: Vec<Deferred>,
    drops: &mut Drops,
    mut before: impl FnMut(usize, &mut Drops),
) -> Option<(usize, Box<dyn Any + Send>)> {
    let mut panicked = None;
    {
        // Once for the whole list, not per action (an accumulation in every
        // iteration makes one action per iteration): outside speculation, and
        // counted as inside an escaped call. `before` applies the epoch's writes
        // with the locks it holds, which neither setting changes.
        let _plain = CurrentGuard::set(None);
        crate::escape::escaped(|| {
            // Drained, so that the list's memory goes back to this thread's spare.
            let mut actions = actions.drain(..).enumerate();
            for (k, d) in &mut actions {
                before(d.writes_before, drops);
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| d.run.call())) {
                    panicked = Some((k, p));
                    break;
                }
            }
            // The actions after one that panicked, never run.
            crate::panic_hook::discard(actions.map(|(_, d)| d));
        });
    }
    ACTION_LISTS.give(actions);
    panicked
}

/// Takes the locks of `order` (sorted by address), never waiting for one while
/// holding another.
fn lock_all(order: &[SlotPtr]) -> Vec<Held> {
    let mut held = HELD_LISTS.take();
    let mut spins = 0u32;
    'retry: loop {
        held.clear();
        for (k, &s) in order.iter().enumerate() {
            // SAFETY: logged slots outlive the records (see `memory::erase`).
            let s = unsafe { &*s };
            let h = if k == 0 {
                s.lock()
            } else {
                match s.try_lock() {
                    Some(h) => h,
                    None => {
                        unlock_all(&order[..k], &held);
                        crate::workers::backoff(&mut spins);
                        continue 'retry;
                    }
                }
            };
            held.push(h);
        }
        return held;
    }
}

fn unlock_all(order: &[SlotPtr], held: &[Held]) {
    for (&s, &h) in order.iter().zip(held).rev() {
        // SAFETY: logged slots outlive the records; `h` is the hold we took.
        unsafe { &*s }.unlock(h);
    }
}

/// Runs, newest first and outside speculation, the undo actions for which `which`
/// holds, removing them.
fn run_undo(cx: &EpochCx, which: impl Fn(&crate::epoch::Undo) -> bool) {
    loop {
        let undo = {
            let mut u = cx.undo.borrow_mut();
            match u.last() {
                Some(last) if which(last) => u.pop(),
                _ => None,
            }
        };
        let Some(u) = undo else { break };
        let _plain = CurrentGuard::set(None);
        if catch_unwind(AssertUnwindSafe(|| u.run.call())).is_err() {
            say!("tls-runtime: an undo action panicked; continuing the rollback");
        }
    }
}

/// Rolls the epoch of `cx` back to the start of segment `target`: see the module docs.
pub(crate) fn undo_to(cx: &EpochCx, target: u32) {
    run_undo(cx, |u| u.segment >= target);
    // Dropped once the log is no longer borrowed: an action may own a container the
    // epoch wrote, whose drop removes its records (`EpochCx::forget_writes_in`).
    let dropped_actions = {
        let mut commits = cx.commits.borrow_mut();
        let keep = commits.partition_point(|d| d.segment < target);
        commits.split_off(keep)
    };
    cx.recount_delayed_calls();
    crate::panic_hook::discard(dropped_actions);
    let discarded: Vec<_> = {
        let mut writes = cx.writes.borrow_mut();
        let keep = writes.partition_point(|w| w.segment < target);
        writes.split_off(keep)
    };
    let a = cx.access();
    let mut drops = Drops::new();
    // One discard per slot: it removes every version the epoch wrote there from
    // `target` on, and releases the lock. A second record of the same slot (a write
    // in a later segment) must not touch it again: once its versions are gone,
    // another thread may drop the container and free the slot at once (nothing left
    // to evict, so nothing is buried), and a second discard would lock freed memory.
    // Found as heap corruption, about 1 process in 400 of the equivalence test.
    let (slots, _) = distinct_slots(&discarded);
    for &slot in &slots {
        // SAFETY: logged slots outlive the records (see `memory::erase`), and this is
        // the rollback's only touch of this slot (see above).
        unsafe { &*slot }.discard(&a, target, &mut drops);
    }
    // Emptied: nothing reads these pointers again.
    SLOT_LISTS.give(slots);
    cx.segment.set(target);
    drop(discarded);
    // Values the attempt wrote and throws away: the sequential program never drops
    // them here (the re-run writes them again), so a `Drop` that panics on one is not
    // the loop's panic; unwinding out of the rollback would leave the loop's threads
    // waiting for the epoch for ever.
    let _ = drop_each(drops);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::epoch::{Access, Action, EpochRing, LoggedSlot, Tag, make_tag};
    use crate::sync::AtomicU64;
    use core::cell::Cell;

    /// A location that counts the discards it gets.
    struct Counting(Cell<u32>);

    impl LoggedSlot for Counting {
        fn lock(&self) -> crate::sync::Held {
            unreachable!("a rollback takes no lock of its own")
        }
        fn try_lock(&self) -> Option<crate::sync::Held> {
            unreachable!()
        }
        fn unlock(&self, _: crate::sync::Held) {
            unreachable!()
        }
        unsafe fn apply(
            &self,
            _: crate::sync::Held,
            _: &Access<'_>,
            _: (Tag, u32, u32),
            _: &mut Drops,
        ) {
            unreachable!()
        }
        fn discard(&self, _: &Access<'_>, _: u32, _: &mut Drops) {
            self.0.set(self.0.get() + 1);
        }
    }

    /// A location whose lock hands out its own number, and that checks every record
    /// is applied, and every lock released, with its own lock's token.
    struct Numbered {
        n: u64,
        applied: Cell<u32>,
        locked: Cell<bool>,
    }

    impl Numbered {
        fn new(n: u64) -> Self {
            Numbered {
                n,
                applied: Cell::new(0),
                locked: Cell::new(false),
            }
        }
    }

    impl LoggedSlot for Numbered {
        fn lock(&self) -> crate::sync::Held {
            assert!(!self.locked.replace(true));
            crate::sync::Held::for_test(self.n)
        }
        fn try_lock(&self) -> Option<crate::sync::Held> {
            Some(self.lock())
        }
        fn unlock(&self, h: crate::sync::Held) {
            assert_eq!(h.test_value(), self.n, "unlocked with another slot's token");
            assert!(self.locked.replace(false));
        }
        unsafe fn apply(
            &self,
            h: crate::sync::Held,
            _: &Access<'_>,
            _: (Tag, u32, u32),
            _: &mut Drops,
        ) {
            assert_eq!(h.test_value(), self.n, "applied under another slot's lock");
            assert!(self.locked.get());
            self.applied.set(self.applied.get() + 1);
        }
        fn discard(&self, _: &Access<'_>, _: u32, _: &mut Drops) {
            unreachable!()
        }
    }

    /// A commit applies each record under its own slot's lock, whether the log
    /// names each slot once in address order (record k under lock k, no search),
    /// in another order, or twice; with a commit-time action between the writes
    /// (the locks then stay held while it runs) and without.
    #[test]
    fn a_commit_applies_each_record_under_its_own_lock() {
        let slots: Vec<Numbered> = (0..6).map(Numbered::new).collect();
        let ascending: Vec<usize> = (0..6).collect();
        let orders: [&[usize]; 4] = [&ascending, &[5, 4, 3, 2, 1, 0], &[0, 2, 2, 4, 1], &[3]];
        for order in orders {
            for action_at in [None, Some(order.len() / 2)] {
                with_epoch(|cx| {
                    cx.set_homefree();
                    for (k, &i) in order.iter().enumerate() {
                        if action_at == Some(k) {
                            cx.defer(Action::new(|| {}), false);
                        }
                        log(cx, &slots[i], 0);
                    }
                    assert!(matches!(commit_epoch(cx), CommitOutcome::Committed));
                });
                for (i, s) in slots.iter().enumerate() {
                    let times = order.iter().filter(|&&j| j == i).count() as u32;
                    assert_eq!(s.applied.replace(0), times, "slot {i} of {order:?}");
                    assert!(!s.locked.get());
                }
            }
        }
    }

    /// Logs a record of `slot` written in `segment` into `cx`.
    fn log(cx: &EpochCx, slot: &dyn LoggedSlot, segment: u32) {
        let slot: *const (dyn LoggedSlot + '_) = slot;
        // SAFETY: only the lifetime bound changes; the locations outlive `cx`'s use.
        let slot = unsafe {
            core::mem::transmute::<*const (dyn LoggedSlot + '_), *const dyn LoggedSlot>(slot)
        };
        cx.writes.borrow_mut().push(WriteRecord {
            slot,
            segment,
            generation: 0,
        });
    }

    /// Runs `f` with the context of a running epoch (epoch 0 of loop 1).
    fn with_epoch(f: impl FnOnce(&EpochCx)) {
        let ring = EpochRing::new(2);
        let tag = make_tag(1, 0);
        ring.slot(0).reset(tag);
        let watermark = AtomicU64::new(0);
        f(&EpochCx::new(tag, &ring, &watermark));
    }

    /// A container's records leave the middle of the log (it was dropped): each
    /// commit-time action still comes after the same writes.
    #[test]
    fn forgetting_records_keeps_actions_between_the_same_writes() {
        with_epoch(|cx| {
            let slots = [Counting(Cell::new(0)), Counting(Cell::new(0))];
            let (gone, kept) = (&slots[0], &slots[1]);
            cx.defer(Action::new(|| {}), false); // before everything: stays at 0
            log(cx, gone, 0);
            log(cx, kept, 0);
            cx.defer(Action::new(|| {}), false); // after `gone`, `kept`: 1
            log(cx, gone, 0);
            log(cx, gone, 0);
            cx.defer(Action::new(|| {}), false); // after all four: 1
            log(cx, kept, 0);
            let addr = gone as *const Counting as usize;
            cx.forget_writes_in(addr, addr + core::mem::size_of::<Counting>());
            let positions: Vec<usize> = cx
                .commits
                .borrow()
                .iter()
                .map(|d| d.writes_before)
                .collect();
            assert_eq!(positions, [0, 1, 1]);
            assert_eq!(cx.writes.borrow().len(), 2);
        });
    }

    /// Two records of one location (written in two segments) and one of another, all
    /// rolled back: each location is discarded once. A second discard of the first
    /// could touch it after another thread freed it (its versions were already gone).
    #[test]
    fn a_rollback_discards_each_location_once() {
        with_epoch(|cx| {
            let twice = Counting(Cell::new(0));
            let once = Counting(Cell::new(0));
            log(cx, &twice, 1);
            log(cx, &once, 1);
            log(cx, &twice, 2);
            undo_to(cx, 1);
            assert_eq!((twice.0.get(), once.0.get()), (1, 1));
            assert!(cx.writes.borrow().is_empty());
        });
    }
}
