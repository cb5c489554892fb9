//! Running a loop: the [`Loop`] builder, [`for_each`], and the in-order path used with
//! one thread, in `TLS_MODE=sequential`, and for loops nested inside an epoch. The
//! speculative scheduler is in `schedule.rs`.

use crate::adapt::{LoopSite, site_for};
use crate::config::{Mode, env};
use crate::control::{Control, LoopOutcome, Step, run_iteration};
use crate::report::{RunMode, ThreadStats, set_last};
use crate::schedule::Ending;
use core::panic::Location;
use std::borrow::Cow;
use std::panic::resume_unwind;
use std::time::Instant;

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
    chunk: Option<usize>,
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
            chunk: None,
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

    /// Iterations per epoch. By default the runtime chooses: one, or more when
    /// iterations are so short that the per-epoch cost would show.
    pub fn chunk(mut self, chunk: usize) -> Self {
        self.chunk = Some(chunk.max(1));
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
        S: Clone + Send,
        R: Send,
        St: Fn(I::Item) -> S + Sync,
        Sp: Fn(S) -> Step<S, R> + Sync,
    {
        let threads = self.threads.unwrap_or_else(|| env().threads);
        if crate::epoch::current().is_some() || crate::escape::inside_escape() {
            // Nested inside an epoch: run in order, as part of the enclosing epoch.
            // Inside an escaped call: in order too, since the escape's lock is held
            // by this thread and epochs on workers calling the same escaped function
            // would wait for it.
            return run_in_order(items, &start, &step).0;
        }
        if env().mode == Mode::Profile {
            let t0 = Instant::now();
            let (outcome, profiles) = crate::profile::run_profiled(items, &start, &step);
            let wall = t0.elapsed();
            let (sequential, predicted) = crate::profile::speedups(&profiles, self.chunk);
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
            set_last(report);
            return outcome;
        }
        if threads <= 1 || env().mode == Mode::Sequential {
            let t0 = Instant::now();
            let (outcome, epochs) = run_in_order(items, &start, &step);
            let wall = t0.elapsed();
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
        S: Clone + Send,
        R: Send,
        St: Fn(It::Item) -> S + Sync,
        Sp: Fn(S) -> Step<S, R> + Sync,
    {
        crate::panic_hook::install();
        crate::workers::ensure_workers(threads - 1);
        let name = self.display_name();
        let site = self.site.unwrap_or_else(|| site_for(self.location, &name));
        let t0 = Instant::now();
        let trace = crate::trace::enabled().then(|| {
            crate::sink::ensure_written_at_exit();
            crate::trace::base();
            std::sync::Arc::<str>::from(name.as_str())
        });
        let (ending, stats) =
            crate::schedule::run(iter, threads, self.chunk, site, trace, start, step);
        let wall = t0.elapsed();
        set_last(stats.into_report(name, self.location, RunMode::Parallel, threads, wall));
        match ending {
            None => LoopOutcome::Completed,
            Some(Ending::Break) => LoopOutcome::Broke,
            Some(Ending::Return(r)) => LoopOutcome::Returned(r),
            Some(Ending::Panic(p)) => resume_unwind(p),
        }
    }
}

impl Loop {
    /// A speculative loop running `body` for each item, whatever `TLS_MODE` says
    /// (profile mode's calibration measures the runtime's own costs with it).
    pub(crate) fn run_uncalibrated(
        &self,
        items: core::ops::Range<u64>,
        body: &(dyn Fn(u64) + Sync),
    ) {
        let _ = self.run_parallel(items, self.threads.unwrap_or(2).max(2), &|i| i, &|i| {
            body(i);
            Step::Done(Control::<()>::Continue)
        });
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
        match run_iteration(start(item), step) {
            Control::Continue => {}
            Control::Break => return (LoopOutcome::Broke, n),
            Control::Return(r) => return (LoopOutcome::Returned(r), n),
        }
    }
    (LoopOutcome::Completed, n)
}
