//! Rolling back: a violated epoch goes back to the start of the segment of the violated
//! load (undo actions run newest first, its later writes and commit-time actions are
//! discarded); a squashed epoch goes all the way back and never re-runs; an epoch that
//! ends the loop squashes every later one.

use super::claim::Claim;
use super::work::{Done, Work};
use super::{LoopEnding, Shared};
use crate::control::Step;
use crate::epoch::{Cause, CurrentGuard, EpochCx, NOT_VIOLATED, make_tag};
use crate::memory::undo_to;
use crate::report::{SourceLocation, ThreadStats};
use crate::rules::lost_enough;
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
    /// Rolls the epoch back to the start of segment `target`: runs the undo actions
    /// registered since (newest first), drops its later commit-time actions, discards
    /// the versions it wrote since (violating the epochs that read them), and counts
    /// the work lost.
    pub(super) fn roll_back(
        &self,
        cx: &EpochCx,
        work: &mut Work<It::Item, S>,
        target: u32,
        cause: Option<Cause>,
        ts: &mut ThreadStats,
    ) {
        self.roll_back_replaying(cx, work, target, cause, false, ts);
    }

    /// [`Shared::roll_back`]; `replay`: the re-run is one once homefree of an attempt
    /// that read nothing stale, so the panics it reported are replayed, not reported
    /// again (see `EpochCx::replay_reports_from`).
    pub(super) fn roll_back_replaying(
        &self,
        cx: &EpochCx,
        work: &mut Work<It::Item, S>,
        target: u32,
        cause: Option<Cause>,
        replay: bool,
        ts: &mut ThreadStats,
    ) {
        let target = target.min(cx.segment.get());
        cx.replay_reports_from(target, replay);
        // The work lost ends where the last attempt ended: an epoch violated while it
        // waited for commit lost its run, not its wait.
        let end = work.finished.take().unwrap_or_else(Instant::now);
        let lost = end.saturating_duration_since(work.snaps[target as usize].started);
        ts.wasted += lost;
        work.lost += lost;
        ts.unwound(cx.take_unwinding());
        ts.rollbacks += 1;
        self.site.note_rollback();
        // For the adaptive policy an epoch counts as rolled back when the rollback
        // threw away a good part of it; going back to a late checkpoint costs little
        // and is what checkpoints are for.
        let so_far = end.saturating_duration_since(work.snaps[0].started);
        if lost_enough(lost, so_far) {
            work.rolled_back = true;
        }
        if let Some(c) = cause {
            let in_segment = c
                .load_ordinal
                .saturating_sub(work.snaps[target as usize].accesses);
            ts.violation(&c, target, in_segment, lost);
            // With automatic chunking, a violation among epochs of several
            // iterations shows where the chunk cut the loop, not how far apart the
            // dependent iterations are (iteration i reading what i - 3 wrote
            // violates every epoch of four, by the epoch just before it): the chunk
            // halves on such violations first (`adapt/chunk.rs`), and only a
            // violation whose storing epoch and every epoch after it hold one
            // iteration teaches the site to synchronize the load and how far back
            // its stores come from. (Counted at any chunk, an outside probe's loop
            // with a dependence at distance 3 was synchronized at homefree while
            // chunked and then ran in order, 0.99 times the plain loop's speed,
            // against 1.6 to 1.9 times with one iteration an epoch; counted for any
            // violated epoch of one iteration, a store from a chunked epoch still
            // measured the distance short, and 4 runs in 10 ran in order.)
            let storer = work.index.saturating_sub(c.distance.max(1));
            let in_iterations = storer >= self.chunked_through.load(Ordering::Relaxed);
            if c.real && (self.chunk.is_some() || in_iterations) {
                self.site
                    .synced
                    .note_violation(c.load, self.serial, work.index, c.distance);
            }
        }
        undo_to(cx, target);
        work.snaps.truncate(target as usize + 1);
        let snap = &mut work.snaps[target as usize];
        snap.started = Instant::now();
        snap.accesses = cx.accesses();
        *cx.held_panic.borrow_mut() = None;
    }

    /// Rolls a squashed epoch all the way back; it is never re-run.
    pub(super) fn squash(&self, cx: &EpochCx, work: &mut Work<It::Item, S>, ts: &mut ThreadStats) {
        if let Some(first) = work.snaps.first() {
            // The work thrown away ends where the epoch finished, if it had: a
            // finished epoch may wait long for its commit (behind an earlier epoch
            // whose panic took a backtrace, 50 ms), and the wait was no work. (Counted
            // to now, a panicking loop's report showed more time wasted than its
            // threads had.)
            let end = work.finished.unwrap_or_else(Instant::now);
            ts.wasted += end.saturating_duration_since(first.started);
            if let Some(name) = &self.trace {
                trace::span(
                    SpanKind::Squashed,
                    name,
                    work.index,
                    first.started,
                    end,
                    None,
                );
            }
        }
        ts.unwound(cx.take_unwinding());
        ts.squashed += 1;
        undo_to(cx, 0);
    }

    /// Squashes a finished epoch taken from its done slot.
    pub(super) fn squash_done(&self, done: Done<It::Item, S, R>, ts: &mut ThreadStats) {
        let Done {
            mut work,
            segment,
            logs,
            ..
        } = done;
        let cx = EpochCx::new(
            make_tag(self.serial, work.index),
            &self.ring,
            &self.watermark,
        );
        cx.put_logs(logs);
        cx.segment.set(segment);
        let _current = CurrentGuard::set(Some(&cx));
        self.squash(&cx, &mut work, ts);
    }

    /// Epoch `index` (homefree, committed) ends the loop: record how, stop claiming,
    /// squash every later epoch, running or finished. `claim` is the claim state if
    /// the caller holds its lock.
    pub(super) fn end_loop(
        &self,
        index: u64,
        ending: LoopEnding<R>,
        claim: Option<&mut Claim<It>>,
    ) {
        *lock(&self.ending) = Some(ending);
        self.stop.store(index, Ordering::SeqCst);
        self.claimable.store(false, Ordering::Relaxed);
        match claim {
            Some(c) => c.done = true,
            None => lock(&self.claim).done = true,
        }
        self.ring.squash_after(self.serial, index);
        let mut ts = ThreadStats::of_this_thread();
        for slot in self.done.iter() {
            let taken = {
                let mut g = lock(slot);
                match g.as_ref() {
                    Some(d) if d.work.index > index => g.take(),
                    _ => None,
                }
            };
            if let Some(d) = taken {
                self.squash_done(*d, &mut ts);
            }
        }
        lock(&self.stats).merge(ts);
    }
}

/// "store file:line:col -> load file:line:col", for traces.
/// Why an attempt rolled back to `target`, for its span in `TLS_TRACE`: the
/// violation, or (none recorded) the epoch's own decision.
pub(super) fn describe_rollback(target: u32, cause: Option<Cause>) -> String {
    match cause {
        Some(c) => describe_violation(c),
        // Nothing asked it to roll back: it gave way to another thread holding a
        // location it needed, while it held one itself (`memory/slot`).
        None if target == NOT_VIOLATED => {
            "no violation: gave way to a thread holding a location it needed".into()
        }
        None => "asked to roll back with no cause recorded (plain code or another loop)".into(),
    }
}

pub(super) fn describe_violation(c: Cause) -> String {
    format!(
        "store {} -> load {}",
        SourceLocation(c.store),
        SourceLocation(c.load)
    )
}
