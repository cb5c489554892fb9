//! The speculative scheduler: claiming epochs, running them, publishing finished ones,
//! committing in order, re-running violated ones, ending the loop early.
//!
//! Every participating thread (the caller and the workers that join) loops:
//!
//! 1. *Commit what it can*: if the epoch at the commit watermark (the homefree epoch)
//!    has finished, take it, re-run it if it was violated while it waited (it is
//!    homefree now, so the re-run cannot be violated again), commit it, and go on with
//!    the next one (the *commit chain*).
//! 2. *Claim* the next epoch (pull its items from the loop's iterator), as long as the
//!    window of epochs in flight (`ring.len()`, four per thread) has room.
//! 3. *Run* it. A violation noticed while running rolls it back, to the segment of the
//!    violated load, and re-runs it at once. When the body finishes, the epoch's logs
//!    and state are *published* in its done slot and the thread goes on to claim
//!    another epoch: it does not wait for the epoch to become homefree.
//!
//! A finished epoch may still be violated by an earlier one; whoever commits it re-runs
//! it first. A panic or a failed escape argument check in a speculative epoch is
//! published as it is: by the time the epoch is homefree, either it was violated (the
//! panic was a zombie's; re-run) or the panic is real (the loop ends with it).
//!
//! Memory ordering: the committer's `Release` store of `watermark` publishes the
//! committed values, commit-time actions and violations of the epoch; epochs load it
//! with `Acquire` before acting as homefree. A finished epoch is handed over through its
//! done slot's mutex: the publisher stores it and then reads the watermark; the
//! committer advances the watermark and then looks in the slot; the mutex orders the
//! two critical sections, so one of them always sees the other. `stop` is stored before
//! later epochs are squashed and read with `Acquire`.

use crate::adapt::{LoopSite, Window};
use crate::control::{Control, Step, run_iteration};
use crate::epoch::{
    AwaitHomefreeSignal, Cause, CurrentGuard, EpochCx, EpochRing, Logs, NOT_VIOLATED,
    RollbackSignal, make_tag,
};
use crate::live_loops::LiveLoop;
use crate::memory::{CommitOutcome, commit_epoch, undo_to};
use crate::report::ThreadStats;
use crate::sync::AtomicU64;
use crate::trace::{self, Kind};
use crate::workers::{self, Job, backoff};
use crossbeam_utils::CachePadded;
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) type Payload = Box<dyn Any + Send>;

/// Epochs in flight per thread.
const EPOCHS_PER_THREAD: usize = 4;

const NO_STOP: u64 = u64::MAX;

/// How a loop ended early.
pub(crate) enum Ending<R> {
    Break,
    Return(R),
    Panic(Payload),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a loop speculatively on `threads` threads (the caller included); returns how
/// it ended early, if it did, and what the threads saw.
pub(crate) fn run<It, S, R, St, Sp>(
    iter: It,
    threads: usize,
    chunk: Option<usize>,
    site: &'static LoopSite,
    trace: Option<Arc<str>>,
    start: &St,
    step: &Sp,
) -> (Option<Ending<R>>, ThreadStats)
where
    It: Iterator + Send,
    It::Item: Clone + Send,
    S: Clone + Send,
    R: Send,
    St: Fn(It::Item) -> S + Sync,
    Sp: Fn(S) -> Step<S, R> + Sync,
{
    let window = threads * EPOCHS_PER_THREAD;
    let ring = EpochRing::new(window);
    let live = LiveLoop::start();
    let done = (0..ring.len())
        .map(|_| CachePadded::new(Mutex::new(None)))
        .collect();
    let shared = Shared {
        serial: live.serial(),
        workers_wanted: threads - 1,
        chunk,
        site,
        window: Window::new(threads),
        watermark: CachePadded::new(AtomicU64::new(0)),
        stop: CachePadded::new(AtomicU64::new(NO_STOP)),
        ring,
        done,
        claim: CachePadded::new(Mutex::new(Claim {
            iter,
            next: 0,
            done: false,
            iter_panic: None,
        })),
        ending: Mutex::new(None),
        stats: Mutex::new(ThreadStats::default()),
        inside: AtomicUsize::new(0),
        claimable: AtomicBool::new(true),
        trace,
        start,
        step,
    };
    live.attach(&shared.ring);
    {
        let _published = workers::publish(&shared);
        shared.participate(true);
    }
    let stats = core::mem::take(&mut *lock(&shared.stats));
    let ending = lock(&shared.ending).take();
    // Before the ring goes away; then free what only this loop's logs could reach.
    drop(live);
    crate::memory::sweep_graves();
    (ending, stats)
}

struct Claim<It> {
    iter: It,
    next: u64,
    done: bool,
    /// The iterator panicked producing the item of epoch `next`.
    iter_panic: Option<Payload>,
}

enum Claimed<T, S> {
    Epoch(Work<T, S>),
    /// Epochs ran in order on this thread (adaptive fallback).
    RanInOrder,
    /// The window of epochs in flight is full.
    WindowFull,
    /// In-order mode and another thread's epoch is still in flight.
    NotMyTurn,
    Finished,
}

/// An epoch's work: its items and, per segment, the position and state it starts
/// from and when it started.
struct Work<T, S> {
    index: u64,
    items: Vec<T>,
    snaps: Vec<(usize, S, Instant)>,
    /// A rollback threw away at least a quarter of the epoch's work so far.
    rolled_back: bool,
    /// When its last attempt finished, while it waits (published) for commit: a
    /// violation found then loses the work up to this moment, not the wait.
    finished: Option<Instant>,
}

/// How a finished epoch ended.
enum End<R> {
    Control(Control<R>),
    /// A panic; real if the epoch turns out homefree without a violation.
    Panic(Payload),
    /// An escaped call's argument check failed: re-run once homefree.
    RerunHomefree,
    /// The loop's iterator panicked producing this epoch's item.
    IterPanic(Payload),
    /// Its commit found it violated (by plain code or another loop): re-run from the
    /// segment, for the cause.
    Violated(u32, Option<Cause>),
}

/// A finished epoch waiting to be committed.
struct Done<T, S, R> {
    work: Work<T, S>,
    segment: u32,
    logs: Logs,
    end: End<R>,
}

/// A participant's tally of the epochs it committed, for the adaptive policy, handed
/// to the site a window at a time so that commits do not all write one shared line.
struct Votes {
    epochs: u32,
    rolled_back: u32,
    items: u64,
    /// When the window started, and the thread's blocked and wasted time then.
    since: Instant,
    blocked_before: Duration,
    wasted_before: Duration,
    tune_chunk: bool,
    /// A worker, not the loop's caller.
    helper: bool,
    /// The window generation this tally belongs to.
    generation: u32,
}

impl Votes {
    fn new(tune_chunk: bool, helper: bool) -> Self {
        Votes {
            epochs: 0,
            rolled_back: 0,
            items: 0,
            since: Instant::now(),
            blocked_before: Duration::ZERO,
            wasted_before: Duration::ZERO,
            tune_chunk,
            helper,
            generation: 0,
        }
    }

    fn epoch(
        &mut self,
        rolled_back: bool,
        items: usize,
        site: &LoopSite,
        window: &Window,
        ts: &ThreadStats,
    ) {
        let generation = window.generation();
        if generation != self.generation {
            // A new window opened since this tally started: start over, counting
            // from this epoch on (its start may predate the window by one epoch).
            self.generation = generation;
            self.epochs = 0;
            self.rolled_back = 0;
            self.items = 0;
            self.since = Instant::now();
            self.blocked_before = ts.wait + ts.idle;
            self.wasted_before = ts.wasted;
        }
        self.epochs += 1;
        self.rolled_back += u32::from(rolled_back);
        self.items += items as u64;
        if self.epochs >= crate::adapt::WINDOW {
            self.flush(site, window, ts);
        }
    }

    fn flush(&mut self, site: &LoopSite, window: &Window, ts: &ThreadStats) {
        if self.epochs > 0 {
            let time = self.since.elapsed();
            let blocked = (ts.wait + ts.idle).saturating_sub(self.blocked_before);
            let wasted = ts.wasted.saturating_sub(self.wasted_before);
            let busy = time.saturating_sub(blocked);
            let useful = busy.saturating_sub(wasted);
            window.vote(site, self.epochs, self.rolled_back, useful, self.helper);
            if self.tune_chunk {
                site.tune_chunk(self.epochs, self.items, self.rolled_back, busy);
            }
            self.blocked_before = ts.wait + ts.idle;
            self.wasted_before = ts.wasted;
            self.epochs = 0;
            self.rolled_back = 0;
            self.items = 0;
            self.since = Instant::now();
        }
    }
}

/// What one attempt at running an epoch came to.
enum Attempt<R> {
    Finished(Control<R>),
    Rollback,
    AwaitHomefree,
    Panicked(Payload),
}

type DoneSlot<T, S, R> = CachePadded<Mutex<Option<Box<Done<T, S, R>>>>>;

/// The state of one speculative loop run, shared by its participants.
struct Shared<'a, It: Iterator, S, R, St, Sp> {
    serial: u32,
    workers_wanted: usize,
    /// Iterations per epoch set by the loop; `None`: the site chooses.
    chunk: Option<usize>,
    site: &'static LoopSite,
    window: Window,
    watermark: CachePadded<AtomicU64>,
    stop: CachePadded<AtomicU64>,
    ring: EpochRing,
    done: Box<[DoneSlot<It::Item, S, R>]>,
    claim: CachePadded<Mutex<Claim<It>>>,
    ending: Mutex<Option<Ending<R>>>,
    stats: Mutex<ThreadStats>,
    inside: AtomicUsize,
    claimable: AtomicBool,
    /// The loop's name, when `TLS_TRACE` records a timeline.
    trace: Option<Arc<str>>,
    start: &'a St,
    step: &'a Sp,
}

impl<It, S, R, St, Sp> Job for Shared<'_, It, S, R, St, Sp>
where
    It: Iterator + Send,
    It::Item: Clone + Send,
    S: Clone + Send,
    R: Send,
    St: Fn(It::Item) -> S + Sync,
    Sp: Fn(S) -> Step<S, R> + Sync,
{
    fn enter(&self) -> bool {
        if !self.claimable.load(Ordering::Relaxed) || self.site.in_order() {
            return false;
        }
        let inside = self.inside.load(Ordering::Relaxed);
        if inside >= self.workers_wanted {
            return false;
        }
        self.inside.store(inside + 1, Ordering::Relaxed);
        true
    }

    fn work(&self) {
        self.participate(false);
    }

    fn leave(&self) {
        self.inside.fetch_sub(1, Ordering::Release);
    }

    fn inside(&self) -> usize {
        self.inside.load(Ordering::Acquire)
    }
}

// SAFETY: `Shared` is used from several threads only through `&self`. The iterator is
// behind a mutex (`It: Send`); items, epoch states and finished epochs move between
// threads (`Item: Send`, `S: Send`; write records are `Send`); the ending value
// crosses to the caller (`R: Send`); the closures are `Sync`.
unsafe impl<It, S, R, St, Sp> Sync for Shared<'_, It, S, R, St, Sp>
where
    It: Iterator + Send,
    It::Item: Send,
    S: Send,
    R: Send,
    St: Sync,
    Sp: Sync,
{
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
    fn participate(&self, is_caller: bool) {
        let entered = Instant::now();
        let mut ts = ThreadStats::default();
        let mut votes = Votes::new(self.chunk.is_none(), !is_caller);
        let mut spins = 0u32;
        let mut waiting: Option<(Instant, bool)> = None;
        loop {
            self.commit_chain(&mut ts, &mut votes);
            // A wait ends when the claim starts: an in-order stretch runs inside it.
            let claim_started = waiting.map(|_| Instant::now());
            let claimed = self.claim(&mut ts);
            let blocked = match claimed {
                Claimed::WindowFull => Some(true),
                Claimed::NotMyTurn | Claimed::Finished => Some(false),
                _ => None,
            };
            match (waiting, blocked) {
                (Some((since, full)), None) => {
                    let end = claim_started.unwrap_or_else(Instant::now);
                    *if full { &mut ts.wait } else { &mut ts.idle } +=
                        end.saturating_duration_since(since);
                    waiting = None;
                    if let Some(name) = &self.trace {
                        let kind = if full { Kind::Waiting } else { Kind::Idle };
                        trace::span(kind, name, 0, since, end, None);
                    }
                }
                (None, Some(full)) => waiting = Some((Instant::now(), full)),
                _ => {}
            }
            match claimed {
                Claimed::Epoch(work) => {
                    spins = 0;
                    self.run_epoch(work, &mut ts, &mut votes);
                }
                Claimed::RanInOrder => spins = 0,
                Claimed::WindowFull => backoff(&mut spins),
                Claimed::NotMyTurn if is_caller => backoff(&mut spins),
                Claimed::Finished if is_caller && !self.settled() => backoff(&mut spins),
                Claimed::NotMyTurn | Claimed::Finished => break,
            }
        }
        if let Some((since, full)) = waiting {
            *if full { &mut ts.wait } else { &mut ts.idle } += since.elapsed();
        }
        votes.flush(self.site, &self.window, &ts);
        trace::flush_thread();
        ts.present = entered.elapsed();
        ts.busy = ts.present.saturating_sub(ts.wasted + ts.wait + ts.idle);
        lock(&self.stats).merge(ts);
    }

    /// Whether every claimed epoch has been committed or squashed (the caller leaves
    /// only then; workers may leave earlier, their finished epochs are published).
    fn settled(&self) -> bool {
        if self.stop.load(Ordering::Acquire) != NO_STOP {
            return true;
        }
        let c = lock(&self.claim);
        c.done && c.iter_panic.is_none() && self.watermark.load(Ordering::Acquire) == c.next
    }

    fn claim(&self, ts: &mut ThreadStats) -> Claimed<It::Item, S> {
        if self.stop.load(Ordering::Acquire) != NO_STOP {
            return Claimed::Finished;
        }
        let mut c = lock(&self.claim);
        let w = self.watermark.load(Ordering::Acquire);
        if c.next >= w + self.ring.len() {
            return Claimed::WindowFull;
        }
        if let Some(p) = c.iter_panic.take() {
            // Sequentially the iterator's panic comes once every earlier iteration is
            // done: publish it as an epoch that ends the loop with it.
            let index = c.next;
            c.next += 1;
            drop(c);
            self.ring.slot(index).reset(make_tag(self.serial, index));
            let done = Done {
                work: Work {
                    index,
                    items: Vec::new(),
                    snaps: Vec::new(),
                    rolled_back: false,
                    finished: None,
                },
                segment: 0,
                logs: Logs::default(),
                end: End::IterPanic(p),
            };
            self.publish(Box::new(done), ts);
            return Claimed::NotMyTurn;
        }
        if c.done {
            return Claimed::Finished;
        }
        if self.site.in_order() {
            if c.next != w {
                return Claimed::NotMyTurn;
            }
            self.run_in_order(&mut c, ts);
            return Claimed::RanInOrder;
        }
        let chunk = self.chunk.unwrap_or_else(|| self.site.chunk());
        let mut items = Vec::with_capacity(chunk);
        while items.len() < chunk {
            match catch_unwind(AssertUnwindSafe(|| c.iter.next())) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => {
                    c.done = true;
                    self.claimable.store(false, Ordering::Relaxed);
                    break;
                }
                Err(p) => {
                    c.done = true;
                    self.claimable.store(false, Ordering::Relaxed);
                    c.iter_panic = Some(p);
                    break;
                }
            }
        }
        if items.is_empty() {
            return Claimed::NotMyTurn;
        }
        let index = c.next;
        assert!(
            index < u64::from(u32::MAX),
            "a loop ran more than 2^32 epochs"
        );
        c.next += 1;
        Claimed::Epoch(Work {
            index,
            items,
            snaps: Vec::new(),
            rolled_back: false,
            finished: None,
        })
    }

    /// Adaptive fallback: speculation does not pay for this loop site and no epoch is
    /// in flight, so run epochs right here, in order, like the plain loop (no tracking,
    /// no per-epoch bookkeeping), until the site wants to probe speculation again.
    /// Holds the claim lock, so no other thread starts an epoch meanwhile.
    fn run_in_order(&self, c: &mut Claim<It>, ts: &mut ThreadStats) {
        let t0 = Instant::now();
        let first = c.next;
        // Only this thread runs epochs now (it holds the claim lock): take the whole
        // in-order stretch at once and touch the shared words (site, watermark) only
        // at its end, not once per iteration.
        let budget = self.site.in_order_budget();
        let mut n = 0;
        let mut ended = false;
        while n < budget {
            let item = match catch_unwind(AssertUnwindSafe(|| c.iter.next())) {
                Ok(Some(item)) => item,
                Ok(None) => {
                    c.done = true;
                    self.claimable.store(false, Ordering::Relaxed);
                    break;
                }
                Err(p) => {
                    let index = c.next;
                    c.next += 1;
                    self.end_loop(index, Ending::Panic(p), Some(c));
                    ended = true;
                    break;
                }
            };
            let index = c.next;
            c.next += 1;
            n += 1;
            let run = catch_unwind(AssertUnwindSafe(|| {
                run_iteration((self.start)(item), self.step)
            }));
            let ending = match run {
                Ok(Control::Continue) => None,
                Ok(Control::Break) => Some(Ending::Break),
                Ok(Control::Return(r)) => Some(Ending::Return(r)),
                Err(p) => Some(Ending::Panic(p)),
            };
            if let Some(e) = ending {
                self.end_loop(index, e, Some(c));
                ended = true;
                break;
            }
        }
        if !ended {
            self.watermark.store(c.next, Ordering::Release);
        }
        if self.site.ran_in_order(n) {
            // Speculation resumes: a new window, and the workers back.
            self.window.open();
            workers::wake();
        }
        ts.epochs += n;
        ts.items += n;
        ts.in_order_epochs += n;
        if let Some(name) = &self.trace {
            let detail = format!("{n} iterations from epoch {first}");
            trace::span(Kind::InOrder, name, first, t0, Instant::now(), Some(detail));
        }
    }

    /// Runs a freshly claimed epoch speculatively until it finishes, then publishes it.
    fn run_epoch(&self, mut work: Work<It::Item, S>, ts: &mut ThreadStats, votes: &mut Votes) {
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
                Ok(first) => work.snaps.push((0, first, Instant::now())),
                Err(p) => {
                    drop(_current);
                    let done = Done {
                        segment: 0,
                        logs: cx.take_logs(),
                        work,
                        end: End::Panic(p),
                    };
                    self.publish(Box::new(done), ts);
                    self.commit_chain(ts, votes);
                    return;
                }
            }
            loop {
                let t0 = self.stamp();
                let attempt = self.attempt(&cx, &mut work);
                if let (Some(name), Some(t0)) = (&self.trace, t0)
                    && !matches!(attempt, Attempt::Rollback)
                {
                    trace::span(Kind::Ran, name, index, t0, Instant::now(), None);
                }
                match attempt {
                    Attempt::Rollback => {
                        let (target, cause) = self.ring.slot(index).take_violation();
                        if let (Some(name), Some(t0)) = (&self.trace, t0) {
                            let detail = cause.map(describe);
                            trace::span(Kind::Violated, name, index, t0, Instant::now(), detail);
                        }
                        if self.stop.load(Ordering::Acquire) < index {
                            self.squash(&cx, &mut work, ts);
                            return;
                        }
                        self.roll_back(&cx, &mut work, target, cause, ts);
                    }
                    Attempt::Finished(control) => break End::Control(control),
                    Attempt::Panicked(p) => break End::Panic(p),
                    Attempt::AwaitHomefree => break End::RerunHomefree,
                }
            }
        };
        if matches!(end, End::Control(Control::Continue))
            && self.watermark.load(Ordering::Acquire) == index
            && self.ring.slot(index).pending(Ordering::Acquire) == NOT_VIOLATED
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
                    end: End::Violated(target, cause),
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
    fn attempt(&self, cx: &EpochCx, work: &mut Work<It::Item, S>) -> Attempt<R> {
        let seg = cx.segment.get() as usize;
        let Work { items, snaps, .. } = work;
        let (pos, state) = (snaps[seg].0, snaps[seg].1.clone());
        let r = catch_unwind(AssertUnwindSafe(|| {
            self.run_from(cx, items, pos, state, snaps)
        }));
        cx.raising.set(false);
        match r {
            Ok(control) => Attempt::Finished(control),
            Err(p) if p.is::<RollbackSignal>() => Attempt::Rollback,
            Err(p) if p.is::<AwaitHomefreeSignal>() => Attempt::AwaitHomefree,
            Err(p) => Attempt::Panicked(p),
        }
    }

    /// Runs segments from `pos`/`state` to the end of the epoch's items.
    fn run_from(
        &self,
        cx: &EpochCx,
        items: &[It::Item],
        mut pos: usize,
        mut state: S,
        snaps: &mut Vec<(usize, S, Instant)>,
    ) -> Control<R> {
        loop {
            match (self.step)(state) {
                Step::Checkpoint(next) => {
                    checkpoint(cx, pos, &next, snaps);
                    state = next;
                }
                Step::Done(Control::Continue) => {
                    pos += 1;
                    if pos == items.len() {
                        return Control::Continue;
                    }
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

    /// The time now, when a trace is being written (clock reads cost tens of
    /// nanoseconds each in these VMs; an epoch should not pay for spans nobody asked
    /// for).
    #[inline]
    fn stamp(&self) -> Option<Instant> {
        self.trace.as_ref().map(|_| Instant::now())
    }

    /// Hands a finished epoch over for commit.
    fn publish(&self, done: Box<Done<It::Item, S, R>>, ts: &mut ThreadStats) {
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
    fn commit_chain(&self, ts: &mut ThreadStats, votes: &mut Votes) {
        loop {
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
    fn settle(&self, done: Done<It::Item, S, R>, ts: &mut ThreadStats, votes: &mut Votes) {
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
            End::Violated(t, c) => (t, c),
            _ => self.ring.slot(index).take_violation(),
        };
        loop {
            let rerun_from = match end {
                // Nothing ran that could be re-run (the iterator, or the item's first
                // state, panicked).
                End::IterPanic(_) => None,
                _ if work.snaps.is_empty() => None,
                End::RerunHomefree => Some(segment),
                _ if target != NOT_VIOLATED => Some(target),
                _ => None,
            };
            if let Some(target) = rerun_from {
                end = self.rerun(&cx, &mut work, target, cause, ts);
            }
            let ending = match end {
                End::Control(Control::Continue) => None,
                End::Control(Control::Break) => Some(Ending::Break),
                End::Control(Control::Return(r)) => Some(Ending::Return(r)),
                End::Panic(p) => Some(Ending::Panic(p)),
                End::IterPanic(p) => {
                    self.end_loop(index, Ending::Panic(p), None);
                    return;
                }
                End::RerunHomefree | End::Violated(..) => unreachable!("re-run above"),
            };
            let panicked = matches!(ending, Some(Ending::Panic(_)));
            match self.commit_and_count(&cx, &work, ending, ts, votes) {
                Ok(()) => {
                    if panicked && let Some(msg) = cx.held_panic.borrow_mut().take() {
                        // A real panic, held back while the epoch was speculative.
                        eprintln!("{msg}");
                    }
                    return;
                }
                Err((t, c)) => {
                    (target, cause) = (t, c);
                    end = End::Violated(t, c);
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
        ts: &mut ThreadStats,
    ) -> End<R> {
        let index = work.index;
        let t0 = self.stamp();
        let detail = cause.map(describe);
        self.roll_back(cx, work, target, cause, ts);
        let end = loop {
            match self.attempt(cx, work) {
                Attempt::Finished(control) => break End::Control(control),
                Attempt::Panicked(p) => break End::Panic(p),
                Attempt::Rollback | Attempt::AwaitHomefree => {
                    // A write from plain code or another loop, a lock given way to,
                    // or a stale violation record: run again.
                    let (t, c) = self.ring.slot(index).take_violation();
                    let t = if t == NOT_VIOLATED {
                        cx.segment.get()
                    } else {
                        t
                    };
                    self.roll_back(cx, work, t, c, ts);
                }
            }
        };
        if let (Some(name), Some(t0)) = (&self.trace, t0) {
            trace::span(Kind::Rerun, name, index, t0, Instant::now(), detail);
        }
        end
    }

    /// Commits the homefree epoch of `work` (its context `cx` current on this thread)
    /// and counts it for the report and the adaptive policy; fails as `commit` does.
    fn commit_and_count(
        &self,
        cx: &EpochCx,
        work: &Work<It::Item, S>,
        ending: Option<Ending<R>>,
        ts: &mut ThreadStats,
        votes: &mut Votes,
    ) -> Result<(), (u32, Option<Cause>)> {
        let t1 = self.stamp();
        self.commit(cx, work.index, ending)?;
        if let (Some(name), Some(t1)) = (&self.trace, t1) {
            trace::span(Kind::Commit, name, work.index, t1, Instant::now(), None);
        }
        ts.epochs += 1;
        ts.items += work.items.len() as u64;
        votes.epoch(
            work.rolled_back,
            work.items.len(),
            self.site,
            &self.window,
            ts,
        );
        Ok(())
    }

    /// Rolls the epoch back to the start of segment `target`: runs the undo actions
    /// registered since (newest first), drops its later commit-time actions, discards
    /// the versions it wrote since (violating the epochs that read them), and counts
    /// the work lost.
    fn roll_back(
        &self,
        cx: &EpochCx,
        work: &mut Work<It::Item, S>,
        target: u32,
        cause: Option<Cause>,
        ts: &mut ThreadStats,
    ) {
        let target = target.min(cx.segment.get());
        // The work lost ends where the last attempt ended: an epoch violated while it
        // waited for commit lost its run, not its wait.
        let end = work.finished.take().unwrap_or_else(Instant::now);
        let lost = end.saturating_duration_since(work.snaps[target as usize].2);
        ts.wasted += lost;
        ts.rollbacks += 1;
        // For the adaptive policy an epoch counts as rolled back when the rollback
        // threw away a good part of it; going back to a late checkpoint costs little
        // and is what checkpoints are for.
        let so_far = end.saturating_duration_since(work.snaps[0].2);
        if lost * 4 >= so_far {
            work.rolled_back = true;
        }
        if let Some(c) = cause {
            ts.violation(c.store, c.load, target, c.load_ordinal, lost);
        }
        undo_to(cx, target);
        work.snaps.truncate(target as usize + 1);
        work.snaps[target as usize].2 = Instant::now();
        *cx.held_panic.borrow_mut() = None;
    }

    /// Rolls a squashed epoch all the way back; it is never re-run.
    fn squash(&self, cx: &EpochCx, work: &mut Work<It::Item, S>, ts: &mut ThreadStats) {
        if let Some(first) = work.snaps.first() {
            ts.wasted += first.2.elapsed();
            if let Some(name) = &self.trace {
                trace::span(
                    Kind::Squashed,
                    name,
                    work.index,
                    first.2,
                    Instant::now(),
                    None,
                );
            }
        }
        ts.squashed += 1;
        undo_to(cx, 0);
    }

    fn squash_done(&self, done: Done<It::Item, S, R>, ts: &mut ThreadStats) {
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

    /// Commits a homefree epoch: its versions become committed values and its
    /// commit-time actions run, in the order the iteration made them (see
    /// `memory::commit_epoch`). Then the next epoch becomes homefree, or, if this one
    /// ends the loop, later ones are squashed. Fails, changing nothing, if plain code
    /// or another loop changed data the epoch read: it must roll back and run again.
    fn commit(
        &self,
        cx: &EpochCx,
        index: u64,
        ending: Option<Ending<R>>,
    ) -> Result<(), (u32, Option<Cause>)> {
        let mut ending = ending;
        match commit_epoch(cx) {
            CommitOutcome::Committed => {}
            CommitOutcome::Violated { target, cause } => return Err((target, cause)),
            // A commit-time action panicked: that is this iteration's real panic.
            CommitOutcome::ActionPanicked(p) => ending = Some(Ending::Panic(p)),
        }
        match ending {
            None => self.watermark.store(index + 1, Ordering::Release),
            Some(e) => self.end_loop(index, e, None),
        }
        Ok(())
    }

    /// Epoch `index` (homefree, committed) ends the loop: record how, stop claiming,
    /// squash every later epoch, running or finished. `claim` is the claim state if
    /// the caller holds its lock.
    fn end_loop(&self, index: u64, ending: Ending<R>, claim: Option<&mut Claim<It>>) {
        *lock(&self.ending) = Some(ending);
        self.stop.store(index, Ordering::SeqCst);
        self.claimable.store(false, Ordering::Relaxed);
        match claim {
            Some(c) => c.done = true,
            None => lock(&self.claim).done = true,
        }
        self.ring.squash_after(self.serial, index);
        let mut ts = ThreadStats::default();
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
fn describe(c: Cause) -> String {
    format!(
        "store {} -> load {}",
        crate::report::SourceLocation(c.store),
        crate::report::SourceLocation(c.load)
    )
}

fn checkpoint<S: Clone>(cx: &EpochCx, pos: usize, next: &S, snaps: &mut Vec<(usize, S, Instant)>) {
    cx.check_violation();
    let seg = cx.segment.get() + 1;
    cx.segment.set(seg);
    snaps.truncate(seg as usize);
    snaps.push((pos, next.clone(), Instant::now()));
}
