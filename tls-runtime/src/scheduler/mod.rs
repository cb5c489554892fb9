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
//!    window of epochs in flight (`ring.len()`, [`EPOCHS_PER_THREAD`] per thread) has
//!    room.
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
//!
//! The files, in the order an epoch meets them:
//!
//! - this one: the loop's shared state (`Shared`) and each thread's participation;
//! - `work.rs`: an epoch as the scheduler carries it (`Work`, its checkpoint
//!   `Snapshot`s; once finished, `Done`);
//! - `claim.rs`: claiming an epoch's items (`Claim`);
//! - `in_order.rs`: the adaptive fallback's in-order stretch;
//! - `attempt.rs`: running an epoch, its attempts and checkpoint snapshots;
//! - `commit.rs`: publishing a finished epoch, the commit chain, settling and
//!   committing the homefree epoch;
//! - `rollback.rs`: rolling an epoch back to a segment, squashing, ending the loop.

mod attempt;
mod claim;
mod commit;
mod in_order;
mod rollback;
mod work;
mod zombie;

use crate::adapt::{LoopSite, Votes, Window};
use crate::control::Step;
use crate::epoch::EpochRing;
use crate::live_loops::LiveLoop;
use crate::report::ThreadStats;
use crate::rules::EPOCHS_PER_THREAD;
use crate::sync::{AtomicU64, Mutex, lock};
use crate::trace::{self, SpanKind};
use crate::workers::{self, Job, Occupancy, backoff};
use claim::{Claim, Claimed};
use crossbeam_utils::CachePadded;
use std::any::Any;
use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use work::DoneSlot;
pub(crate) use zombie::{Board, note_violation, watch_if_violated};

pub(crate) type Payload = Box<dyn Any + Send>;

/// `stop` while no epoch has ended the loop.
const NO_STOP: u64 = u64::MAX;

/// How a loop ended early.
pub(crate) enum LoopEnding<R> {
    Break,
    Return(R),
    Panic(Payload),
}

/// A loop's name and place, for messages about it.
#[derive(Clone, Copy)]
pub(crate) struct Label<'a> {
    pub(crate) name: &'a str,
    pub(crate) location: &'static Location<'static>,
}

/// Runs a loop speculatively on `threads` threads (the caller included); returns how
/// it ended early, if it did, and what the threads saw.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<It, S, R, St, Sp>(
    iter: It,
    threads: usize,
    chunk: Option<usize>,
    site: &'static LoopSite,
    label: Label<'_>,
    trace: Option<Arc<str>>,
    start: &St,
    step: &Sp,
) -> (Option<LoopEnding<R>>, ThreadStats)
where
    It: Iterator + Send,
    It::Item: Clone + Send,
    S: Clone + Send,
    R: Send,
    St: Fn(It::Item) -> S + Sync,
    Sp: Fn(S) -> Step<S, R> + Sync,
{
    let window = threads * EPOCHS_PER_THREAD;
    let ring = EpochRing::new(window).synchronizing(&site.synced);
    let sized_items = iter.size_hint().0;
    site.run_starts();
    let run_items = site.run_length(sized_items);
    let live = LiveLoop::start();
    let done = (0..ring.len())
        .map(|_| CachePadded::new(Mutex::new(None)))
        .collect();
    let shared = Shared {
        serial: live.serial(),
        workers_wanted: threads - 1,
        chunk,
        run_items,
        sized_items,
        site,
        chunked_through: AtomicU64::new(0),
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
        inside: Occupancy::new(),
        claimable: AtomicBool::new(true),
        trace,
        start,
        step,
    };
    shared.window.resume_from(site);
    live.attach(&shared.ring);
    let board = Board::new(&shared.watermark, &shared.ring, label.name, label.location);
    let watching = live.watch(&board);
    {
        let _published = workers::publish(&shared);
        shared.participate(true);
    }
    shared.window.carry_to(site);
    drop(watching);
    let mut stats = core::mem::take(&mut *lock(&shared.stats));
    stats.stuck_zombies += board.stuck();
    if shared.chunk.is_none() {
        site.ran_items(stats.items);
    }
    site.synced.run_ended(stats.epochs);
    let ending = lock(&shared.ending).take();
    // Before the ring goes away; then free what only this loop's logs could reach.
    drop(live);
    crate::memory::sweep_graves();
    (ending, stats)
}

/// The state of one speculative loop run, shared by its participants.
struct Shared<'a, It: Iterator, S, R, St, Sp> {
    serial: u32,
    workers_wanted: usize,
    /// Iterations per epoch set by the loop; `None`: the site chooses.
    chunk: Option<usize>,
    /// The run's length as automatic chunking assumes it (`LoopSite::run_length`;
    /// 0: unknown).
    run_items: usize,
    /// The run's length as its iterator gives it (its lower size bound; 0: unknown),
    /// which automatic chunking evens its epochs out over (`rules::planned_chunk`).
    sized_items: usize,
    site: &'static LoopSite,
    /// One past the last epoch claimed with more than one iteration (0: none yet):
    /// epochs from there on hold one iteration each, so that their distances in
    /// epochs are distances in iterations (`rollback.rs`).
    chunked_through: AtomicU64,
    window: Window,
    watermark: CachePadded<AtomicU64>,
    stop: CachePadded<AtomicU64>,
    ring: EpochRing,
    done: Box<[DoneSlot<It::Item, S, R>]>,
    claim: CachePadded<Mutex<Claim<It>>>,
    ending: Mutex<Option<LoopEnding<R>>>,
    stats: Mutex<ThreadStats>,
    inside: Occupancy,
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
        if !self.claimable.load(Ordering::Relaxed) {
            return false;
        }
        if self.inside.inside() >= self.workers_wanted {
            return false;
        }
        if self.site.in_order() {
            // The first worker this run has room for: a stretch held back for want
            // of one ends (see `LoopSite::worker_arrived`). Not once a worker has
            // been in: then the stretch began while one was there, but did not get
            // to commit, and cutting it would only repeat the window that did not
            // pay.
            if !self.window.joined() {
                self.site.worker_arrived();
            }
            return false;
        }
        if !self.inside.try_enter(self.workers_wanted) {
            return false;
        }
        self.window.helper_joined();
        true
    }

    fn work(&self) {
        self.participate(false);
    }

    fn leave(&self) {
        self.window.helper_left();
        self.inside.leave();
    }

    fn inside(&self) -> usize {
        self.inside.inside()
    }

    fn seats(&self) -> usize {
        self.workers_wanted.saturating_sub(self.inside.inside())
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
        let mut ts = ThreadStats::of_this_thread();
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
                        let kind = if full {
                            SpanKind::Waiting
                        } else {
                            SpanKind::Idle
                        };
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

    /// The time now, when a trace is being written (clock reads cost tens of
    /// nanoseconds each in these VMs; an epoch should not pay for spans nobody asked
    /// for).
    #[inline]
    fn stamp(&self) -> Option<Instant> {
        self.trace.as_ref().map(|_| Instant::now())
    }
}
