//! Running a loop: [`Loop::run`], [`Loop::run_segments`] and [`for_each`] choose how.
//! Speculatively on several threads (`parallel.rs`, with the scheduler in
//! `scheduler/`), or in order on the calling thread: recorded in `TLS_MODE=profile`
//! (`profile/`), or plainly (`run_sequentially`) with one thread, in
//! `TLS_MODE=sequential`, and for loops nested inside an epoch.

use crate::config::{Mode, env};
use crate::control::{Control, LoopOutcome, Step, run_iteration};
use crate::loop_builder::Loop;
use crate::profile;
use crate::report::{RunMode, ThreadStats};
use crate::sink::{self, set_last};
use crate::trace::{self, SpanKind};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Loop {
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
        S: Clone + Send,
        R: Send,
        St: Fn(I::Item) -> S + Sync,
        Sp: Fn(S) -> Step<S, R> + Sync,
    {
        let threads = self.threads.unwrap_or_else(crate::config::default_threads);
        if crate::epoch::current().is_some()
            || crate::escape::inside_escape()
            || inside_in_order_body()
        {
            // Nested inside an epoch: run in order, as part of the enclosing epoch.
            // Inside an escaped call: in order too, since the escape's lock is held
            // by this thread and epochs on workers calling the same escaped function
            // would wait for it. Inside an iteration that an enclosing loop runs in
            // order (on one thread, or in an in-order stretch): the same as inside
            // its epoch, so that a nested loop is part of its iteration whatever
            // the thread count (no report of its own, no loop of its own).
            return run_sequentially(items, &start, &step, &Cell::new(0));
        }
        // A top-level loop: its items iterator must not touch speculative data.
        let items = crate::epoch::MarkedItems(items.into_iter());
        if trace::enabled() {
            // The timeline's zero, before this run's first span begins.
            trace::base();
        }
        if env().mode == Mode::Profile {
            // The first loop of a process calibrates the model: not its time.
            profile::calibrate();
            let t0 = Instant::now();
            let (ended, profiles) = profile::run_profiled(items, &start, &step);
            let wall = t0.elapsed();
            self.trace_in_order(t0, wall, profiles.len() as u64, "recorded in profile mode");
            let (sequential, predicted) = profile::speedups(&profiles, self.chunk);
            let stats = ThreadStats {
                epochs: profiles.len() as u64,
                items: profiles.len() as u64,
                busy: sequential,
                present: sequential,
                ..ThreadStats::default()
            };
            let mut report = stats.into_report(
                self.display_name(),
                self.location,
                RunMode::Profile,
                1,
                wall,
            );
            report.predicted_speedup = Some(predicted);
            report.dependences =
                profile::predicted_dependences(&profiles, self.chunk, self.location);
            set_last(report);
            // A panic ends the loop where the sequential loop ends: reported first,
            // with the iterations that ran, then resumed.
            return ended.unwrap_or_else(|p| resume_unwind(p));
        }
        if threads <= 1 || env().mode == Mode::Sequential {
            let t0 = Instant::now();
            let ran = Cell::new(0);
            let ended = catch_unwind(AssertUnwindSafe(|| {
                in_order_body(|| run_sequentially(items, &start, &step, &ran))
            }));
            let (wall, epochs) = (t0.elapsed(), ran.get());
            self.trace_in_order(t0, wall, epochs, "on one thread");
            let stats = ThreadStats {
                epochs,
                items: epochs,
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
            return ended.unwrap_or_else(|p| resume_unwind(p));
        }
        self.run_parallel(items, threads, &start, &step)
    }

    /// With `TLS_TRACE`, shows a run made in order on this thread (`how`) as one
    /// in-order span, so that the timeline has every run of the loop (and is written
    /// at exit even when no report is asked for).
    fn trace_in_order(&self, t0: Instant, wall: Duration, iterations: u64, how: &str) {
        if !trace::enabled() {
            return;
        }
        let name: Arc<str> = self.display_name().into();
        let detail = format!("{iterations} iterations from epoch 0, {how}");
        trace::span(SpanKind::InOrder, &name, 0, t0, t0 + wall, Some(detail));
        trace::flush_thread();
        sink::ensure_written_at_exit();
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

thread_local! {
    /// Loop iterations this thread is running in order outside any epoch: a loop run
    /// on one thread, or an in-order stretch of the adaptive fallback.
    static IN_ORDER_BODY: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread is inside an iteration that a loop runs in order, outside any
/// epoch (a loop started there is part of that iteration).
fn inside_in_order_body() -> bool {
    IN_ORDER_BODY.with(Cell::get) > 0
}

/// Runs `f`, iterations of a loop run in order outside any epoch, marked as such (see
/// [`inside_in_order_body`]); the mark goes when `f` returns or unwinds.
pub(crate) fn in_order_body<R>(f: impl FnOnce() -> R) -> R {
    crate::escape::with_raised(&IN_ORDER_BODY, f)
}

/// Runs the loop in order on this thread, counting in `ran` the iterations started
/// (the count stays right when one panics).
fn run_sequentially<I, S, R, St, Sp>(
    items: I,
    start: &St,
    step: &Sp,
    ran: &Cell<u64>,
) -> LoopOutcome<R>
where
    I: IntoIterator,
    St: Fn(I::Item) -> S,
    Sp: Fn(S) -> Step<S, R>,
{
    for item in items {
        ran.set(ran.get() + 1);
        match run_iteration(start(item), step) {
            Control::Continue => {}
            Control::Break => return LoopOutcome::Broke,
            Control::Return(r) => return LoopOutcome::Returned(r),
        }
    }
    LoopOutcome::Completed
}
