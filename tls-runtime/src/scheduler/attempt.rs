//! Running a claimed epoch: its attempts (one run of the body from the start of its
//! current segment), the checkpoint snapshots a rollback goes back to, and the commit
//! on its own thread of an epoch that is homefree and unviolated when it ends.

use super::rollback::describe_rollback;
use super::work::{Done, EpochEnd, Snapshot, Work};
use super::{NO_STOP, Payload, Shared};
use crate::adapt::Votes;
use crate::control::{Control, Step};
use crate::epoch::{
    AwaitHomefreeSignal, CurrentGuard, EpochCx, NOT_VIOLATED, RollbackSignal, make_tag,
};
use crate::report::ThreadStats;
use crate::trace::{self, SpanKind};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What one attempt at running an epoch came to.
pub(super) enum Attempt<R> {
    Finished(Control<R>),
    Rollback,
    AwaitHomefree(AwaitHomefreeSignal),
    Panicked(Payload),
}

impl<It, S, R, St, Sp> Shared<'_, It, S, R, St, Sp>
where
    It: Iterator + Send,
    It::Item: Clone + Send,
    S: Clone + Send,
    R: Send,
    St: Fn(It::Item) -> S + Sync,
    Sp: Fn(S) -> Step<S, R> + Sync,
{
    /// Runs a freshly claimed epoch speculatively until it finishes, then publishes it.
    pub(super) fn run_epoch(
        &self,
        mut work: Work<It::Item, S>,
        ts: &mut ThreadStats,
        votes: &mut Votes,
    ) {
        let index = work.index;
        let tag = make_tag(self.serial, index);
        self.ring.slot(index).reset(tag);
        let cx = EpochCx::new(tag, &self.ring, &self.watermark);
        let end = {
            let _current = CurrentGuard::set(Some(&cx));
            // The item's clone and the first state are user code too: a panic there
            // ends the epoch like one in its body.
            let first = catch_unwind(AssertUnwindSafe(|| (self.start)(work.items[0].clone())));
            match first {
                Ok(first) => work.snaps.push(Snapshot {
                    item: 0,
                    state: first,
                    started: Instant::now(),
                    accesses: cx.accesses(),
                }),
                Err(p) => {
                    drop(_current);
                    let done = Done {
                        segment: 0,
                        logs: cx.take_logs(),
                        work,
                        end: EpochEnd::Panic(p),
                    };
                    self.publish(Box::new(done), ts);
                    self.commit_chain(ts, votes);
                    return;
                }
            }
            let began = Instant::now();
            let end = loop {
                let t0 = self.stamp();
                let attempt = self.attempt(&cx, &mut work);
                if let (Some(name), Some(t0)) = (&self.trace, t0)
                    && !matches!(attempt, Attempt::Rollback)
                {
                    trace::span(SpanKind::Ran, name, index, t0, Instant::now(), None);
                }
                match attempt {
                    Attempt::Rollback => {
                        let (target, cause) = self.ring.slot(index).take_violation();
                        if self.stop.load(Ordering::Acquire) < index {
                            // An earlier epoch ended the loop: the squash is the
                            // span (a "violated" one would name no violation).
                            self.squash(&cx, &mut work, ts);
                            return;
                        }
                        if let (Some(name), Some(t0)) = (&self.trace, t0) {
                            trace::span(
                                SpanKind::Violated,
                                name,
                                index,
                                t0,
                                Instant::now(),
                                Some(describe_rollback(target, cause)),
                            );
                        }
                        self.roll_back(&cx, &mut work, target, cause, ts);
                    }
                    Attempt::Finished(control) => break EpochEnd::Control(control),
                    Attempt::Panicked(p) => break EpochEnd::Panic(p),
                    Attempt::AwaitHomefree(why) => break EpochEnd::RerunHomefree(why),
                }
            };
            work.ran += began.elapsed();
            for w in cx.synced_waits.take() {
                let waited = w.waited;
                ts.synced_wait(w);
                // Waiting at a synchronized load is not the epoch's work: counted
                // as work, a full dependence chain whose every epoch waits would
                // look as if both threads did useful work, and the adaptive policy
                // would keep it speculating (each epoch paying its fixed cost) rather
                // than run it in order.
                work.ran = work.ran.saturating_sub(waited);
            }
            end
        };
        if matches!(end, EpochEnd::Control(Control::Continue))
            && self.watermark.load(Ordering::Acquire) == index
            && (cx.published() || self.ring.slot(index).pending(Ordering::Acquire) == NOT_VIOLATED)
            && self.stop.load(Ordering::Acquire) == NO_STOP
        {
            // Homefree already and never violated: nothing can violate it any more
            // (every earlier epoch has committed), so commit it right here rather
            // than publish it for a commit that would be this thread's next step
            // anyway (no hand-off, no second context).
            cx.set_homefree();
            let committed = {
                let _current = CurrentGuard::set(Some(&cx));
                self.commit_and_count(&cx, &work, None, ts, votes)
            };
            if let Err((target, cause)) = committed {
                // Plain code or another loop changed what it read: re-run it here.
                let done = Done {
                    segment: cx.segment.get(),
                    logs: cx.take_logs(),
                    work,
                    end: EpochEnd::Violated(target, cause),
                };
                drop(cx);
                self.settle(done, ts, votes);
            }
            self.commit_chain(ts, votes);
            return;
        }
        work.finished = Some(Instant::now());
        let done = Done {
            segment: cx.segment.get(),
            logs: cx.take_logs(),
            work,
            end,
        };
        self.publish(Box::new(done), ts);
        self.commit_chain(ts, votes);
    }

    /// One run of the epoch's body from the start of its current segment.
    pub(super) fn attempt(&self, cx: &EpochCx, work: &mut Work<It::Item, S>) -> Attempt<R> {
        let seg = cx.segment.get() as usize;
        let Work {
            items,
            snaps,
            reached,
            ..
        } = work;
        let (pos, state) = (snaps[seg].item, snaps[seg].state.clone());
        // Where the attempt is, kept outside the body's frames so that a panic
        // leaves it too.
        let at = Cell::new(pos);
        cx.unwound_past_call.set(None);
        // Homefree from the start, the attempt runs each delayed call where it is
        // made (unless inside an access's closure: a corner left as it is).
        let homefree = cx.homefree();
        let r = catch_unwind(AssertUnwindSafe(|| {
            self.run_from(cx, items, &at, state, snaps)
        }));
        *reached = at.get();
        // A signal the runtime raised that did not reach here: the body caught it
        // (`catch_unwind` around its own code) and went on, with the accesses after
        // it unchecked (and a `Drop` it ran skipping its work, as for a rollback).
        // Nothing of the attempt can be kept; re-run it homefree, where no earlier
        // epoch can violate it.
        let swallowed = cx.raising.get()
            && !matches!(&r, Err(p) if p.is::<RollbackSignal>() || p.is::<AwaitHomefreeSignal>());
        cx.caught();
        if swallowed {
            drop(r);
            return Attempt::AwaitHomefree(AwaitHomefreeSignal::CaughtByBody);
        }
        if let Some(load) = cx.unwound_past_call.take()
            && !homefree
            && !matches!(&r, Err(p) if p.is::<RollbackSignal>())
        {
            // A destructor read speculative data while a panic unwound, after a
            // delayed call it could not wait for: what the attempt did may rest on
            // a stale value. Re-run it homefree (the call then runs where it is
            // made), whether the panic ended the body or the body caught it.
            drop(r);
            return Attempt::AwaitHomefree(AwaitHomefreeSignal::DelayedCall(load));
        }
        match r {
            Ok(control) => Attempt::Finished(control),
            Err(p) if p.is::<RollbackSignal>() => Attempt::Rollback,
            Err(p) => match p.downcast::<AwaitHomefreeSignal>() {
                Ok(why) => Attempt::AwaitHomefree(*why),
                Err(p) => Attempt::Panicked(p),
            },
        }
    }

    /// Runs segments from `pos`/`state` to the end of the epoch's items.
    fn run_from(
        &self,
        cx: &EpochCx,
        items: &[It::Item],
        at: &Cell<usize>,
        mut state: S,
        snaps: &mut Vec<Snapshot<S>>,
    ) -> Control<R> {
        let mut pos = at.get();
        loop {
            match (self.step)(state) {
                Step::Checkpoint(next) => {
                    checkpoint(cx, pos, &next, snaps);
                    state = next;
                }
                Step::Done(Control::Continue) => {
                    if pos + 1 == items.len() {
                        return Control::Continue;
                    }
                    pos += 1;
                    at.set(pos);
                    // The next item of a chunk. Not a checkpoint: chunks exist because
                    // iterations are short, and a snapshot per iteration would cost as
                    // much as the iteration; a rollback goes back to the chunk's start
                    // (or to an explicit checkpoint).
                    state = (self.start)(items[pos].clone());
                }
                Step::Done(other) => return other,
            }
        }
    }
}

/// A checkpoint reached at item `pos`: starts the next segment, keeping a snapshot of
/// the state `next` it starts from.
fn checkpoint<S: Clone>(cx: &EpochCx, pos: usize, next: &S, snaps: &mut Vec<Snapshot<S>>) {
    cx.check_violation();
    let seg = cx.segment.get() + 1;
    cx.segment.set(seg);
    snaps.truncate(seg as usize);
    snaps.push(Snapshot {
        item: pos,
        state: next.clone(),
        started: Instant::now(),
        accesses: cx.accesses(),
    });
}
