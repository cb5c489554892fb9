//! Running a loop: the [`Loop`] builder, the in-order path, and the speculative
//! scheduler (claiming epochs, running attempts, waiting to become homefree,
//! committing in order, rolling back, ending the loop early).
//!
//! Each participating thread repeatedly claims the next epoch (pulling its items from
//! the loop's iterator), runs it, waits until it is homefree, commits it, and claims
//! again, so at most one epoch per thread is in flight. The commit watermark
//! (`watermark`, the index of the homefree epoch) is the only word every epoch reads;
//! the committer writes it once per epoch.
//!
//! Memory ordering: the committer's `Release` store of `watermark` publishes the
//! epoch's committed values, its commit-time actions and every violation it raised;
//! epochs load it with `Acquire` before acting as homefree. `stop` is written (with
//! `Release`) before later epochs are squashed and read with `Acquire`.

use crate::adapt::{LoopSite, site_for};
use crate::config::{Mode, env};
use crate::control::{Control, LoopOutcome, Step};
use crate::epoch::{
    AwaitHomefreeSignal, Cause, CurrentGuard, EpochCx, EpochRing, NOT_VIOLATED, RollbackSignal,
    make_tag,
};
use crate::report::{RunMode, ThreadStats, set_last};
use crate::sync::AtomicU64;
use crate::workers::{self, Job, backoff};
use core::panic::Location;
use crossbeam_utils::CachePadded;
use std::any::Any;
use std::borrow::Cow;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

type Payload = Box<dyn Any + Send>;

/// A speculative loop, configured: name, threads, chunking.
///
/// ```
/// use tls_runtime::{Control, Loop, LoopOutcome, SpecVec};
/// let v = SpecVec::from(vec![1u32, 2, 3, 4, 5]);
/// let outcome = Loop::new().name("find").threads(2).run(0..v.len(), |i| {
///     if v.get(i) == 4 { Control::Return(i) } else { Control::Continue }
/// });
/// assert_eq!(outcome, LoopOutcome::Returned(3));
/// ```
#[derive(Debug, Clone)]
pub struct Loop {
    name: Option<Cow<'static, str>>,
    threads: Option<usize>,
    chunk: usize,
    location: &'static Location<'static>,
    site: Option<&'static LoopSite>,
}

impl Default for Loop {
    #[track_caller]
    fn default() -> Self {
        Loop::new()
    }
}

impl Loop {
    /// A loop located at the caller, with the default settings.
    #[track_caller]
    pub fn new() -> Self {
        Loop {
            name: None,
            threads: None,
            chunk: 1,
            location: Location::caller(),
            site: None,
        }
    }

    /// Names the loop in reports.
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Threads that may run this loop's epochs, the caller included (default:
    /// `TLS_THREADS`, else all cores). `1` runs the loop in order.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads.max(1));
        self
    }

    /// Iterations per epoch (default 1): larger chunks amortize the per-epoch cost of
    /// very short iterations.
    pub fn chunk(mut self, chunk: usize) -> Self {
        self.chunk = chunk.max(1);
        self
    }

    /// Sets the source location reported for the loop.
    pub fn at(mut self, location: &'static Location<'static>) -> Self {
        self.location = location;
        self
    }

    /// Uses `site` to keep the loop's adaptive state (the macro gives each loop a
    /// `static` one; without it the state is looked up by location and name).
    pub fn site(mut self, site: &'static LoopSite) -> Self {
        self.site = Some(site);
        self
    }

    fn display_name(&self) -> String {
        match &self.name {
            Some(n) => n.to_string(),
            None => format!(
                "{}:{}:{}",
                self.location.file(),
                self.location.line(),
                self.location.column()
            ),
        }
    }

    /// Runs `body` for each item as an ordered speculative epoch; returns how the loop
    /// ended. The result, the state of speculative data, and the order of commit-time
    /// actions are those of running the loop sequentially.
    ///
    /// Items must be `Clone`: an epoch rolled back to its start re-runs with a copy of
    /// its item.
    pub fn run<I, R, F>(&self, items: I, body: F) -> LoopOutcome<R>
    where
        I: IntoIterator,
        I::IntoIter: Send,
        I::Item: Clone + Send,
        R: Send,
        F: Fn(I::Item) -> Control<R> + Sync,
    {
        self.run_segments(items, |item| item, |item| Step::Done(body(item)))
    }

    /// Runs a body split into sub-thread segments: `start` turns an item into the state
    /// of the first segment; `step` runs one segment and either reaches a checkpoint
    /// (returning the next segment's state, which the runtime keeps a clone of) or ends
    /// the iteration. A violation re-runs the epoch from the start of the segment in
    /// which the violated load happened.
    pub fn run_segments<I, S, R, St, Sp>(&self, items: I, start: St, step: Sp) -> LoopOutcome<R>
    where
        I: IntoIterator,
        I::IntoIter: Send,
        I::Item: Clone + Send,
        S: Clone,
        R: Send,
        St: Fn(I::Item) -> S + Sync,
        Sp: Fn(S) -> Step<S, R> + Sync,
    {
        let threads = self.threads.unwrap_or_else(|| env().threads);
        if crate::epoch::current().is_some() {
            // Nested inside an epoch: run in order, as part of the enclosing epoch.
            return run_in_order(items, &start, &step).0;
        }
        if threads <= 1 || env().mode == Mode::Sequential {
            let t0 = Instant::now();
            let (outcome, epochs) = run_in_order(items, &start, &step);
            let wall = t0.elapsed();
            let stats = ThreadStats {
                epochs,
                busy: wall,
                present: wall,
                ..ThreadStats::default()
            };
            set_last(stats.into_report(
                self.display_name(),
                self.location,
                RunMode::Sequential,
                1,
                wall,
            ));
            return outcome;
        }
        self.run_parallel(items.into_iter(), threads, &start, &step)
    }

    fn run_parallel<It, S, R, St, Sp>(
        &self,
        iter: It,
        threads: usize,
        start: &St,
        step: &Sp,
    ) -> LoopOutcome<R>
    where
        It: Iterator + Send,
        It::Item: Clone + Send,
        S: Clone,
        R: Send,
        St: Fn(It::Item) -> S + Sync,
        Sp: Fn(S) -> Step<S, R> + Sync,
    {
        crate::panic_hook::install();
        workers::ensure_workers(threads - 1);
        let name = self.display_name();
        let site = self.site.unwrap_or_else(|| site_for(self.location, &name));
        let t0 = Instant::now();
        let shared = Shared {
            serial: next_serial(),
            workers_wanted: threads - 1,
            chunk: self.chunk,
            site,
            watermark: CachePadded::new(AtomicU64::new(0)),
            stop: CachePadded::new(AtomicU64::new(NO_STOP)),
            ring: EpochRing::new(threads * 2),
            claim: CachePadded::new(Mutex::new(Claim {
                iter,
                next: 0,
                done: false,
                iter_panic: None,
            })),
            ending: Mutex::new(None),
            stats: Mutex::new(ThreadStats::default()),
            inside: AtomicUsize::new(0),
            start,
            step,
            claimable: AtomicBool::new(true),
            _state: core::marker::PhantomData,
        };
        {
            let _published = workers::publish(&shared);
            shared.participate(true);
        }
        let wall = t0.elapsed();
        let stats = core::mem::take(&mut *lock(&shared.stats));
        set_last(stats.into_report(name, self.location, RunMode::Parallel, threads, wall));
        match lock(&shared.ending).take() {
            None => LoopOutcome::Completed,
            Some(Ending::Break) => LoopOutcome::Broke,
            Some(Ending::Return(r)) => LoopOutcome::Returned(r),
            Some(Ending::Panic(p)) => resume_unwind(p),
        }
    }
}

/// Runs `body` for each item as a speculative epoch: the plain-function form of
/// `#[tls_loop]` for a loop body without early exits.
///
/// ```
/// use tls_runtime::SpecVec;
/// let squares = SpecVec::from(vec![0u64; 100]);
/// tls_runtime::for_each(0..100usize, |i| squares.set(i, (i * i) as u64));
/// assert_eq!(squares.get(9), 81);
/// ```
#[track_caller]
pub fn for_each<I, F>(items: I, body: F)
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Clone + Send,
    F: Fn(I::Item) + Sync,
{
    Loop::new().run(items, |item| {
        body(item);
        Control::<()>::Continue
    });
}

/// Polls for a pending violation: the `#[tls_loop]` macro calls this on the back-edge
/// of loops inside an epoch body, so an epoch spinning on stale data is rolled back.
#[inline]
pub fn poll() {
    if let Some(cx) = crate::epoch::current() {
        cx.check_violation();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn next_serial() -> u32 {
    static SERIAL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    loop {
        let s = SERIAL.fetch_add(1, Ordering::Relaxed);
        if s != 0 {
            return s;
        }
    }
}

/// Runs the loop in order on this thread; returns the outcome and the iterations run.
fn run_in_order<I, S, R, St, Sp>(items: I, start: &St, step: &Sp) -> (LoopOutcome<R>, u64)
where
    I: IntoIterator,
    St: Fn(I::Item) -> S,
    Sp: Fn(S) -> Step<S, R>,
{
    let mut n = 0;
    for item in items {
        n += 1;
        let mut state = start(item);
        loop {
            match step(state) {
                Step::Checkpoint(next) => state = next,
                Step::Done(Control::Continue) => break,
                Step::Done(Control::Break) => return (LoopOutcome::Broke, n),
                Step::Done(Control::Return(r)) => return (LoopOutcome::Returned(r), n),
            }
        }
    }
    (LoopOutcome::Completed, n)
}

const NO_STOP: u64 = u64::MAX;

/// How the loop ended early.
enum Ending<R> {
    Break,
    Return(R),
    Panic(Payload),
}

struct Claim<It> {
    iter: It,
    next: u64,
    done: bool,
    /// The iterator panicked producing the item of epoch `next`.
    iter_panic: Option<Payload>,
}

enum Claimed {
    /// Run epoch `index`, whose items are in the participant's scratch buffer.
    Epoch(u64),
    IterPanic(u64, Payload),
    /// Epochs ran in order on this thread (adaptive fallback).
    RanInOrder,
    Wait,
    Finished,
}

/// A participant's buffers, reused from epoch to epoch.
struct Scratch<T, S> {
    items: Vec<T>,
    snaps: Vec<(usize, S)>,
    seg_start: Vec<Instant>,
}

/// A participant's tally of its speculative commits for the adaptive policy, handed to
/// the site a window at a time so that commits do not all write one shared line.
#[derive(Default)]
struct Votes {
    epochs: u32,
    rolled_back: u32,
}

impl Votes {
    fn epoch(&mut self, rolled_back: bool, site: &LoopSite) {
        self.epochs += 1;
        self.rolled_back += u32::from(rolled_back);
        if self.epochs >= crate::adapt::WINDOW {
            self.flush(site);
        }
    }

    fn flush(&mut self, site: &LoopSite) {
        if self.epochs > 0 {
            site.vote(self.epochs, self.rolled_back);
            *self = Votes::default();
        }
    }
}

/// The state of one speculative loop run, shared by its participants.
struct Shared<'a, It: Iterator, S, R, St, Sp> {
    serial: u32,
    workers_wanted: usize,
    chunk: usize,
    site: &'static LoopSite,
    watermark: CachePadded<AtomicU64>,
    stop: CachePadded<AtomicU64>,
    ring: EpochRing,
    claim: CachePadded<Mutex<Claim<It>>>,
    ending: Mutex<Option<Ending<R>>>,
    stats: Mutex<ThreadStats>,
    inside: AtomicUsize,
    start: &'a St,
    step: &'a Sp,
    claimable: AtomicBool,
    _state: core::marker::PhantomData<fn() -> S>,
}

/// Where an attempt of an epoch ended.
enum Attempt<R> {
    Finished(Control<R>),
    Rollback,
    AwaitHomefree,
    Panicked(Payload),
}

/// What waiting to become homefree found.
enum Wait {
    Homefree,
    Violated(u32, Option<Cause>),
    Squashed,
}

impl<It, S, R, St, Sp> Job for Shared<'_, It, S, R, St, Sp>
where
    It: Iterator + Send,
    It::Item: Clone + Send,
    S: Clone,
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

// SAFETY: `Shared` is used from several threads only through `&self`. Its iterator sits
// behind a mutex (`It: Send`), items move between threads (`Item: Send`), the ending value
// crosses to the caller (`R: Send`), the closures are `Sync`. The epoch states `S` never
// leave the thread that runs the epoch (each epoch stays on the thread that claimed it).
unsafe impl<It, S, R, St, Sp> Sync for Shared<'_, It, S, R, St, Sp>
where
    It: Iterator + Send,
    It::Item: Send,
    R: Send,
    St: Sync,
    Sp: Sync,
{
}

impl<It, S, R, St, Sp> Shared<'_, It, S, R, St, Sp>
where
    It: Iterator + Send,
    It::Item: Clone + Send,
    S: Clone,
    R: Send,
    St: Fn(It::Item) -> S + Sync,
    Sp: Fn(S) -> Step<S, R> + Sync,
{
    fn participate(&self, is_caller: bool) {
        let entered = Instant::now();
        let mut ts = ThreadStats::default();
        let mut scratch = Scratch {
            items: Vec::with_capacity(self.chunk),
            snaps: Vec::new(),
            seg_start: Vec::new(),
        };
        let mut votes = Votes::default();
        let mut spins = 0u32;
        let mut idle_since: Option<Instant> = None;
        loop {
            let claimed = self.claim(&mut scratch.items, &mut ts);
            if !matches!(claimed, Claimed::Wait) {
                if let Some(t) = idle_since.take() {
                    ts.idle += t.elapsed();
                }
            }
            match claimed {
                Claimed::Epoch(index) => {
                    spins = 0;
                    self.run_epoch(index, &mut scratch, &mut ts, &mut votes);
                }
                Claimed::IterPanic(index, p) => self.run_iter_panic(index, p),
                Claimed::RanInOrder => spins = 0,
                Claimed::Wait if is_caller => {
                    idle_since.get_or_insert_with(Instant::now);
                    backoff(&mut spins)
                }
                Claimed::Wait | Claimed::Finished => break,
            }
        }
        votes.flush(self.site);
        ts.present = entered.elapsed();
        ts.busy = ts.present.saturating_sub(ts.wasted + ts.wait + ts.idle);
        lock(&self.stats).merge(ts);
    }

    fn claim(&self, items: &mut Vec<It::Item>, ts: &mut ThreadStats) -> Claimed {
        if self.stop.load(Ordering::Acquire) != NO_STOP {
            return Claimed::Finished;
        }
        let mut c = lock(&self.claim);
        if let Some(p) = c.iter_panic.take() {
            let index = c.next;
            c.next += 1;
            return Claimed::IterPanic(index, p);
        }
        if c.done {
            return Claimed::Finished;
        }
        let w = self.watermark.load(Ordering::Acquire);
        if self.site.in_order() {
            if c.next != w {
                return Claimed::Wait;
            }
            self.run_in_order(&mut c, ts);
            return Claimed::RanInOrder;
        }
        if c.next >= w + self.ring.len() {
            return Claimed::Wait;
        }
        items.clear();
        while items.len() < self.chunk {
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
                    if items.is_empty() {
                        let index = c.next;
                        c.next += 1;
                        return Claimed::IterPanic(index, p);
                    }
                    c.iter_panic = Some(p);
                    break;
                }
            }
        }
        if items.is_empty() {
            return Claimed::Finished;
        }
        let index = c.next;
        assert!(
            index < u64::from(u32::MAX),
            "a loop ran more than 2^32 epochs"
        );
        c.next += 1;
        Claimed::Epoch(index)
    }

    /// Adaptive fallback: speculation does not pay for this loop site, and no epoch is
    /// in flight, so run epochs right here, in order, like the plain loop (no tracking,
    /// no per-epoch bookkeeping), until the site wants to probe speculation again.
    /// Holds the claim lock, so no other thread starts an epoch meanwhile.
    fn run_in_order(&self, c: &mut Claim<It>, ts: &mut ThreadStats) {
        let t0 = Instant::now();
        let mut n = 0;
        while self.site.in_order() {
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
                    self.end_loop(index, Ending::Panic(p), c);
                    break;
                }
            };
            let index = c.next;
            c.next += 1;
            n += 1;
            let run = catch_unwind(AssertUnwindSafe(|| {
                let mut state = (self.start)(item);
                loop {
                    match (self.step)(state) {
                        Step::Checkpoint(next) => state = next,
                        Step::Done(control) => return control,
                    }
                }
            }));
            match run {
                Ok(Control::Continue) => {
                    self.watermark.store(index + 1, Ordering::Release);
                    self.site.ran_in_order();
                }
                Ok(Control::Break) => {
                    self.end_loop(index, Ending::Break, c);
                    break;
                }
                Ok(Control::Return(r)) => {
                    self.end_loop(index, Ending::Return(r), c);
                    break;
                }
                Err(p) => {
                    self.end_loop(index, Ending::Panic(p), c);
                    break;
                }
            }
        }
        ts.epochs += n;
        ts.in_order_epochs += n;
        let _ = t0;
    }

    /// The iterator panicked producing epoch `index`'s item: sequentially the panic
    /// happens once every earlier iteration is done, so wait until homefree.
    fn run_iter_panic(&self, index: u64, p: Payload) {
        let tag = make_tag(self.serial, index);
        let slot = self.ring.slot(index);
        slot.reset(tag);
        let cx = EpochCx::new(tag, &self.ring, &self.watermark);
        loop {
            let mut waited = Duration::ZERO;
            match self.await_homefree(&cx, &mut waited) {
                Wait::Homefree => {
                    self.end_loop(index, Ending::Panic(p), &mut lock(&self.claim));
                    return;
                }
                Wait::Squashed => return,
                Wait::Violated(..) => {}
            }
        }
    }

    fn run_epoch(
        &self,
        index: u64,
        scratch: &mut Scratch<It::Item, S>,
        ts: &mut ThreadStats,
        votes: &mut Votes,
    ) {
        let Scratch {
            items,
            snaps,
            seg_start,
        } = scratch;
        let tag = make_tag(self.serial, index);
        self.ring.slot(index).reset(tag);
        let cx = EpochCx::new(tag, &self.ring, &self.watermark);
        let _current = CurrentGuard::set(Some(&cx));
        let t_start = Instant::now();
        // snaps[s] = (item position, state) at the start of segment s.
        snaps.clear();
        snaps.push((0, (self.start)(items[0].clone())));
        seg_start.clear();
        seg_start.push(t_start);
        let mut rolled_back = false;
        loop {
            let seg = cx.segment.get() as usize;
            let (pos, state) = snaps[seg].clone();
            let attempt = match catch_unwind(AssertUnwindSafe(|| {
                self.run_from(&cx, items, pos, state, snaps, seg_start)
            })) {
                Ok(control) => Attempt::Finished(control),
                Err(p) if p.is::<RollbackSignal>() => Attempt::Rollback,
                Err(p) if p.is::<AwaitHomefreeSignal>() => Attempt::AwaitHomefree,
                Err(p) => Attempt::Panicked(p),
            };
            cx.raising.set(false);
            let wait = match attempt {
                Attempt::Rollback => {
                    let (target, cause) = self.ring.slot(index).take_violation();
                    Wait::Violated(target, cause)
                }
                _ => self.await_homefree(&cx, &mut ts.wait),
            };
            match (wait, attempt) {
                (Wait::Squashed, attempt) => {
                    drop(attempt);
                    self.rollback(&cx, 0, snaps, seg_start);
                    ts.squashed += 1;
                    ts.wasted += t_start.elapsed();
                    return;
                }
                (Wait::Violated(target, cause), attempt) => {
                    drop(attempt);
                    if self.stop.load(Ordering::Acquire) < index {
                        self.rollback(&cx, 0, snaps, seg_start);
                        ts.squashed += 1;
                        ts.wasted += t_start.elapsed();
                        return;
                    }
                    let target = if target == NOT_VIOLATED {
                        cx.segment.get()
                    } else {
                        target.min(cx.segment.get())
                    };
                    let lost = seg_start[target as usize].elapsed();
                    ts.wasted += lost;
                    ts.rollbacks += 1;
                    rolled_back = true;
                    if let Some(c) = cause {
                        ts.violation(c.store, c.load, target, c.load_ordinal, lost);
                    }
                    self.rollback(&cx, target, snaps, seg_start);
                }
                (Wait::Homefree, Attempt::AwaitHomefree) => {
                    // The argument check failed on data that turned out current: re-run
                    // the segment as homefree, where the call is made unchecked.
                    let seg = cx.segment.get();
                    ts.wasted += seg_start[seg as usize].elapsed();
                    ts.rollbacks += 1;
                    self.rollback(&cx, seg, snaps, seg_start);
                }
                (Wait::Homefree, Attempt::Rollback) => unreachable!("rollback never waits"),
                (Wait::Homefree, Attempt::Finished(control)) => {
                    let ending = match control {
                        Control::Continue => None,
                        Control::Break => Some(Ending::Break),
                        Control::Return(r) => Some(Ending::Return(r)),
                    };
                    self.commit(&cx, index, ending);
                    ts.epochs += 1;
                    votes.epoch(rolled_back, self.site);
                    return;
                }
                (Wait::Homefree, Attempt::Panicked(p)) => {
                    // Homefree with no violation: the panic is what the sequential
                    // program does. Speculative data keeps this iteration's writes up to
                    // the panic, as it would sequentially.
                    if let Some(msg) = cx.held_panic.borrow_mut().take() {
                        eprintln!("{msg}");
                    }
                    self.commit(&cx, index, Some(Ending::Panic(p)));
                    ts.epochs += 1;
                    return;
                }
            }
        }
    }

    /// Runs segments from `pos`/`state` to the end of the epoch's items.
    fn run_from(
        &self,
        cx: &EpochCx,
        items: &[It::Item],
        mut pos: usize,
        mut state: S,
        snaps: &mut Vec<(usize, S)>,
        seg_start: &mut Vec<Instant>,
    ) -> Control<R> {
        loop {
            match (self.step)(state) {
                Step::Checkpoint(next) => {
                    self.checkpoint(cx, pos, &next, snaps, seg_start);
                    state = next;
                }
                Step::Done(Control::Continue) => {
                    pos += 1;
                    if pos == items.len() {
                        return Control::Continue;
                    }
                    // An item boundary inside a chunk is a checkpoint too.
                    let next = (self.start)(items[pos].clone());
                    self.checkpoint(cx, pos, &next, snaps, seg_start);
                    state = next;
                }
                Step::Done(other) => return other,
            }
        }
    }

    fn checkpoint(
        &self,
        cx: &EpochCx,
        pos: usize,
        next: &S,
        snaps: &mut Vec<(usize, S)>,
        seg_start: &mut Vec<Instant>,
    ) {
        cx.check_violation();
        let seg = cx.segment.get() + 1;
        cx.segment.set(seg);
        snaps.truncate(seg as usize);
        snaps.push((pos, next.clone()));
        seg_start.truncate(seg as usize);
        seg_start.push(Instant::now());
    }

    /// Waits until the epoch is homefree, violated or squashed; adds the time spent
    /// waiting (if any) to `waited`.
    fn await_homefree(&self, cx: &EpochCx, waited: &mut Duration) -> Wait {
        let slot = self.ring.slot(cx.index);
        let mut spins = 0u32;
        let mut since: Option<Instant> = None;
        let result = loop {
            if self.stop.load(Ordering::Acquire) < cx.index {
                break Wait::Squashed;
            }
            // Watermark first: once it shows us homefree, the violation check after it
            // sees every violation raised by the epochs before us.
            let w = cx.load_watermark();
            if slot.pending(Ordering::Acquire) != NOT_VIOLATED {
                if self.stop.load(Ordering::Acquire) < cx.index {
                    break Wait::Squashed;
                }
                let (target, cause) = slot.take_violation();
                break Wait::Violated(target, cause);
            }
            if w == cx.index {
                cx.set_homefree();
                break Wait::Homefree;
            }
            since.get_or_insert_with(Instant::now);
            backoff(&mut spins);
        };
        if let Some(t) = since {
            *waited += t.elapsed();
        }
        result
    }

    /// Rolls the epoch back to the start of segment `target`: runs the undo actions
    /// registered since (newest first), drops its later commit-time actions, discards
    /// the versions it wrote since (violating the epochs that read them).
    fn rollback(
        &self,
        cx: &EpochCx,
        target: u32,
        snaps: &mut Vec<(usize, S)>,
        seg_start: &mut Vec<Instant>,
    ) {
        loop {
            let undo = {
                let mut u = cx.undo.borrow_mut();
                match u.last() {
                    Some((s, _)) if *s >= target => u.pop(),
                    _ => None,
                }
            };
            let Some((_, f)) = undo else { break };
            let _nonspec = CurrentGuard::set(None);
            if catch_unwind(AssertUnwindSafe(f)).is_err() {
                eprintln!("tls-runtime: an undo action panicked; continuing the rollback");
            }
        }
        {
            let mut commits = cx.commits.borrow_mut();
            let keep = commits.partition_point(|(s, _)| *s < target);
            commits.truncate(keep);
        }
        let discarded: Vec<_> = {
            let mut writes = cx.writes.borrow_mut();
            let keep = writes.partition_point(|w| w.segment < target);
            writes.split_off(keep)
        };
        let a = cx.access();
        for w in discarded.iter().rev() {
            // SAFETY: logged containers outlive the epoch (see `memory::erase`).
            unsafe { &*w.target }.discard_key(w.key, &a, target);
        }
        cx.segment.set(target);
        snaps.truncate(target as usize + 1);
        seg_start.truncate(target as usize + 1);
        seg_start[target as usize] = Instant::now();
    }

    /// Commits a homefree epoch: its versions become committed values (in write order),
    /// its commit-time actions run in order, its undo actions are dropped. Then the
    /// next epoch becomes homefree, or, if this one ends the loop, later ones are
    /// squashed.
    fn commit(&self, cx: &EpochCx, index: u64, ending: Option<Ending<R>>) {
        for w in cx.writes.take() {
            // SAFETY: logged containers outlive the epoch (see `memory::erase`).
            unsafe { &*w.target }.commit_key(w.key, cx.tag);
        }
        let mut ending = ending;
        let actions = cx.commits.take();
        if !actions.is_empty() {
            let run = catch_unwind(AssertUnwindSafe(|| {
                for (_, f) in actions {
                    f();
                }
            }));
            if let Err(p) = run {
                // A commit-time action panicked: that is this iteration's real panic.
                ending = Some(Ending::Panic(p));
            }
        }
        drop(cx.undo.take());
        match ending {
            None => self.watermark.store(index + 1, Ordering::Release),
            Some(e) => self.end_loop(index, e, &mut lock(&self.claim)),
        }
    }

    /// Epoch `index` (homefree, committed) ends the loop: record how, stop claiming,
    /// squash every later epoch. `claim` is the locked claim state.
    fn end_loop(&self, index: u64, ending: Ending<R>, claim: &mut Claim<It>) {
        *lock(&self.ending) = Some(ending);
        self.stop.store(index, Ordering::Release);
        self.claimable.store(false, Ordering::Relaxed);
        claim.done = true;
        self.ring.squash_after(self.serial, index);
    }
}
