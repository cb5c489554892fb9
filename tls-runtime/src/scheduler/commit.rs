//! Committing, in epoch order: a finished epoch is *published* in its done slot, and
//! whoever finds the epoch at the commit watermark finished takes it (the *commit
//! chain*), *settles* it (re-runs it first if it was violated while it waited; it is
//! homefree now, so the re-run cannot be violated again) and *commits* it: its versions
//! become committed values and its commit-time actions run.

use super::attempt::Attempt;
use super::rollback::describe_violation;
use super::work::{Done, EpochEnd, Work};
use super::{LoopEnding, NO_STOP, Shared};
use crate::adapt::{Committed, Votes};
use crate::control::{Control, Step};
use crate::epoch::{AwaitHomefreeSignal, Cause, CurrentGuard, EpochCx, NOT_VIOLATED, make_tag};
use crate::memory::{CommitOutcome, commit_epoch};
use crate::report::ThreadStats;
use crate::sync::lock;
use crate::trace::{self, SpanKind};
use std::sync::atomic::Ordering;
use std::time::Instant;

impl<It, S, R, St, Sp> Shared<'_, It, S, R, St, Sp>
where
    It: Iterator + Send,
    It::Item: Clone + Send,
    S: Clone + Send,
    R: Send,
    St: Fn(It::Item) -> S + Sync,
    Sp: Fn(S) -> Step<S, R> + Sync,
{
    /// Hands a finished epoch over for commit.
    pub(super) fn publish(&self, done: Box<Done<It::Item, S, R>>, ts: &mut ThreadStats) {
        let index = done.work.index;
        let slot = &self.done[self.ring.position(index)];
        *lock(slot) = Some(done);
        if self.stop.load(Ordering::SeqCst) < index {
            // The loop ended while this epoch ran: squash it, unless `end_loop` did.
            let taken = {
                let mut g = lock(slot);
                match g.as_ref() {
                    Some(d) if d.work.index == index => g.take(),
                    _ => None,
                }
            };
            if let Some(d) = taken {
                self.squash_done(*d, ts);
            }
        }
    }

    /// Commits epochs from the watermark on for as long as they have finished.
    pub(super) fn commit_chain(&self, ts: &mut ThreadStats, votes: &mut Votes) {
        loop {
            // After an epoch that violated another commits, a zombie can hold up
            // the loop: have the watchdog running by then.
            super::watch_if_violated();
            if self.stop.load(Ordering::Acquire) != NO_STOP {
                return;
            }
            let w = self.watermark.load(Ordering::Acquire);
            let taken = {
                let mut g = lock(&self.done[self.ring.position(w)]);
                match g.as_ref() {
                    Some(d) if d.work.index == w => g.take(),
                    _ => None,
                }
            };
            let Some(done) = taken else { return };
            self.settle(*done, ts, votes);
        }
    }

    /// Commits the homefree epoch `done`, re-running it first if it was violated after
    /// it finished (or must re-run an escaped call unchecked), and again for as long as
    /// its commit finds it violated by plain code or another loop.
    pub(super) fn settle(
        &self,
        done: Done<It::Item, S, R>,
        ts: &mut ThreadStats,
        votes: &mut Votes,
    ) {
        let Done {
            mut work,
            segment,
            logs,
            mut end,
        } = done;
        let index = work.index;
        let cx = EpochCx::new(make_tag(self.serial, index), &self.ring, &self.watermark);
        cx.put_logs(logs);
        cx.segment.set(segment);
        cx.set_homefree();
        let _current = CurrentGuard::set(Some(&cx));
        let (mut target, mut cause) = match end {
            EpochEnd::Violated(t, c) => (t, c),
            // It ran as plain code after publishing: nothing may re-run it.
            _ if cx.published() => (NOT_VIOLATED, None),
            _ => self.ring.slot(index).take_violation(),
        };
        loop {
            let rerun_from = match end {
                // Nothing ran that could be re-run (the iterator, or the item's first
                // state, panicked).
                EpochEnd::IterPanic(_) => None,
                _ if work.snaps.is_empty() => None,
                // From its current segment, or from an earlier one that a violation
                // names (NOT_VIOLATED is the largest segment number).
                EpochEnd::RerunHomefree(_) => Some(segment.min(target)),
                _ if target != NOT_VIOLATED => Some(target),
                _ => None,
            };
            if let Some(target) = rerun_from {
                let why = match end {
                    EpochEnd::RerunHomefree(why) => Some(why),
                    _ => None,
                };
                end = self.rerun(&cx, &mut work, target, cause, why, ts);
            }
            let ending = match end {
                EpochEnd::Control(Control::Continue) => None,
                EpochEnd::Control(Control::Break) => Some(LoopEnding::Break),
                EpochEnd::Control(Control::Return(r)) => Some(LoopEnding::Return(r)),
                EpochEnd::Panic(p) => Some(LoopEnding::Panic(p)),
                EpochEnd::IterPanic(p) => {
                    if let Some(msg) = cx.held_panic.borrow_mut().take() {
                        // The items iterator's panic, held back when it was taken
                        // ahead: the loop got this far, so it is real.
                        say!("{msg}");
                    }
                    self.end_loop(index, LoopEnding::Panic(p), None);
                    return;
                }
                EpochEnd::RerunHomefree(_) | EpochEnd::Violated(..) => {
                    unreachable!("re-run above")
                }
            };
            let panicked = matches!(ending, Some(LoopEnding::Panic(_)));
            match self.commit_and_count(&cx, &work, ending, ts, votes) {
                Ok(()) => {
                    if panicked && let Some(msg) = cx.held_panic.borrow_mut().take() {
                        // A real panic, held back while the epoch was speculative.
                        say!("{msg}");
                    }
                    return;
                }
                Err((t, c)) => {
                    (target, cause) = (t, c);
                    end = EpochEnd::Violated(t, c);
                }
            }
        }
    }

    /// Re-runs the homefree epoch from segment `target` until an attempt finishes.
    fn rerun(
        &self,
        cx: &EpochCx,
        work: &mut Work<It::Item, S>,
        target: u32,
        cause: Option<Cause>,
        why: Option<AwaitHomefreeSignal>,
        ts: &mut ThreadStats,
    ) -> EpochEnd<R> {
        let index = work.index;
        let t0 = self.stamp();
        let began = Instant::now();
        // For the trace: the violation if there was one (it names the earlier
        // segment), else why the epoch stopped speculating.
        let detail = t0.and_then(|_| match (cause, why) {
            (Some(c), _) => Some(describe_violation(c)),
            (None, Some(why)) => Some(why.describe()),
            (None, None) => None,
        });
        // Re-run once homefree (not after a violation): what the attempt reported
        // before it stopped is replayed, not reported again.
        self.roll_back_replaying(
            cx,
            work,
            target,
            cause,
            why.is_some() && cause.is_none(),
            ts,
        );
        let end = loop {
            match self.attempt(cx, work) {
                Attempt::Finished(control) => break EpochEnd::Control(control),
                Attempt::Panicked(p) => break EpochEnd::Panic(p),
                attempt @ (Attempt::Rollback | Attempt::AwaitHomefree(_)) => {
                    // A write from plain code or another loop, a lock given way to,
                    // or a stale violation record: run again.
                    let (t, c) = self.ring.slot(index).take_violation();
                    let replay = t == NOT_VIOLATED && matches!(attempt, Attempt::AwaitHomefree(_));
                    let t = if t == NOT_VIOLATED {
                        cx.segment.get()
                    } else {
                        t
                    };
                    self.roll_back_replaying(cx, work, t, c, replay, ts);
                }
            }
        };
        work.ran += began.elapsed();
        if let (Some(name), Some(t0)) = (&self.trace, t0) {
            trace::span(SpanKind::Rerun, name, index, t0, Instant::now(), detail);
        }
        end
    }

    /// Commits the homefree epoch of `work` (its context `cx` current on this thread)
    /// and counts it for the report and the adaptive policy; fails as `commit` does.
    pub(super) fn commit_and_count(
        &self,
        cx: &EpochCx,
        work: &Work<It::Item, S>,
        ending: Option<LoopEnding<R>>,
        ts: &mut ThreadStats,
        votes: &mut Votes,
    ) -> Result<(), (u32, Option<Cause>)> {
        let t1 = self.stamp();
        self.commit(cx, work.index, ending)?;
        if let (Some(name), Some(t1)) = (&self.trace, t1) {
            trace::span(SpanKind::Commit, name, work.index, t1, Instant::now(), None);
        }
        ts.epochs += 1;
        ts.items += work.items_ran() as u64;
        ts.accesses += u64::from(cx.accesses());
        let committed = Committed {
            rolled_back: work.rolled_back,
            items: work.items.len(),
            useful: work.useful(),
            accesses: cx.accesses(),
        };
        votes.epoch(committed, self.site, &self.window, ts);
        Ok(())
    }

    /// Commits a homefree epoch: its versions become committed values and its
    /// commit-time actions run, in the order the iteration made them (see
    /// `memory::commit_epoch`). Then the next epoch becomes homefree, or, if this one
    /// ends the loop, later ones are squashed. Fails, changing nothing, if plain code
    /// or another loop changed data the epoch read: it must roll back and run again.
    fn commit(
        &self,
        cx: &EpochCx,
        index: u64,
        ending: Option<LoopEnding<R>>,
    ) -> Result<(), (u32, Option<Cause>)> {
        let mut ending = ending;
        match commit_epoch(cx) {
            CommitOutcome::Committed => {}
            CommitOutcome::Violated { target, cause } => return Err((target, cause)),
            // A commit-time action panicked: that is this iteration's real panic.
            CommitOutcome::ActionPanicked(p) => ending = Some(LoopEnding::Panic(p)),
        }
        match ending {
            None => self.watermark.store(index + 1, Ordering::Release),
            Some(e) => self.end_loop(index, e, None),
        }
        Ok(())
    }
}
