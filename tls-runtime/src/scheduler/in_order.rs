//! The adaptive fallback's in-order stretch: while speculation does not pay for a loop
//! site, the thread whose turn it is runs the following iterations itself, in order,
//! like the plain loop.

use super::claim::Claim;
use super::{LoopEnding, Shared};
use crate::adapt::{BLOCK, HeldBack, MEASURE_FOR, StretchCost, now_ns};
use crate::control::{Control, Step, run_iteration};
use crate::cpu_clock::{cpu_clock_cost, thread_cpu_ns};
use crate::report::ThreadStats;
use crate::run::in_order_body;
use crate::trace::{self, SpanKind};
use crate::workers::{self, Job};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl<It, S, R, St, Sp> Shared<'_, It, S, R, St, Sp>
where
    It: Iterator + Send,
    It::Item: Clone + Send,
    S: Clone + Send,
    R: Send,
    St: Fn(It::Item) -> S + Sync,
    Sp: Fn(S) -> Step<S, R> + Sync,
{
    /// Adaptive fallback: speculation does not pay for this loop site and no epoch is
    /// in flight, so run epochs right here, in order, like the plain loop (no tracking,
    /// no per-epoch bookkeeping), until the site wants to probe speculation again.
    /// Holds the claim lock, so no other thread starts an epoch meanwhile.
    pub(super) fn run_stretch_in_order(&self, c: &mut Claim<It>, ts: &mut ThreadStats) {
        let t0 = Instant::now();
        let first = c.next;
        // Only this thread runs epochs now (it holds the claim lock): take the whole
        // in-order stretch at once and touch the shared words (site, watermark) only
        // at its end, not once per iteration.
        let budget = self.site.in_order_budget();
        // A stretch held back for want of a worker ends early when one arrives; one
        // that measures the plain loop's cost ends after `MEASURE_FOR`.
        let began_as = self.site.held_back();
        let watch = began_as == HeldBack::NoWorkers;
        let measuring = began_as == HeldBack::Measuring;
        // A measuring stretch is timed by this thread's CPU clock: the cost it
        // measures is what every later window is judged against, and one taken
        // while the OS ran something else on this CPU (a machine kept busy by other
        // processes) read 8 us an iteration of a loop whose iterations took 1.7;
        // the site then judged a chain of them, each epoch waiting for the one
        // before, 2.3 to 4.9 times faster than in order, and kept speculating.
        // And from the end of its first iteration: the first in order after
        // speculation finds the lines the epochs wrote (their reader records) in
        // the other core's cache. A loop of 20 us iterations making 1,000 tracked
        // reads of a shared table measured 79 us an iteration that way, judged its
        // epochs 1.3 times faster than in order, and speculated for good at 0.39 of
        // the plain loop's speed, in one process in four.
        let mut warm: Option<(Instant, Option<f64>)> = None;
        let mut n = 0;
        let mut cost = StretchCost::new(now_ns(), self.site.in_order_ps());
        let mut dearer = false;
        // Whether the items iterator was running (else the body): says, if the
        // stretch panics, which of the two did.
        let mut in_items = false;
        // One mark and one `catch_unwind` for the whole stretch, not one each per
        // iteration: for iterations of a few nanoseconds they were most of the
        // stretch's own cost. The items iterator runs inside the mark too, as on one
        // thread (a loop it started would refuse it anyway: it runs with the items
        // iterator's mark).
        let run = catch_unwind(AssertUnwindSafe(|| {
            in_order_body(|| {
                while n < budget
                    && !(watch && self.site.stretch_cut_short())
                    // The clock read after iterations 1, 2, 4, 8, ...: read after
                    // each, it doubled what a stretch of 10 ns iterations measured.
                    && !(measuring
                        && n > 1
                        && (n - 1).is_power_of_two()
                        && warm.is_some_and(|(t, _)| t.elapsed() >= MEASURE_FOR))
                    // A clock read every `BLOCK` iterations, not each: the stretch
                    // ends when it has lasted its longest, or when its iterations
                    // came to cost far more than when it began.
                    && !(n % BLOCK == BLOCK - 1 && {
                        let now = now_ns();
                        dearer = cost.dearer_at(now, n);
                        dearer || self.site.stretch_expired_at(now)
                    })
                {
                    in_items = true;
                    let Some(item) = c.iter.next() else {
                        c.done = true;
                        self.claimable.store(false, Ordering::Relaxed);
                        return None;
                    };
                    in_items = false;
                    let index = c.next;
                    c.next += 1;
                    n += 1;
                    let control = run_iteration((self.start)(item), self.step);
                    if measuring && n == 1 {
                        warm = Some((Instant::now(), thread_cpu_ns()));
                    }
                    match control {
                        Control::Continue => {}
                        Control::Break => return Some((index, LoopEnding::Break)),
                        Control::Return(r) => return Some((index, LoopEnding::Return(r))),
                    }
                }
                None
            })
        }));
        let ending = match run {
            Ok(ending) => ending,
            // The iterator panicked producing the item of epoch `c.next`.
            Err(p) if in_items => {
                c.next += 1;
                Some((c.next - 1, LoopEnding::Panic(p)))
            }
            Err(p) => Some((c.next - 1, LoopEnding::Panic(p))),
        };
        let ended = ending.is_some();
        if let Some((index, e)) = ending {
            self.end_loop(index, e, Some(c));
        }
        if !ended {
            self.watermark.store(c.next, Ordering::Release);
        }
        if measuring {
            // A stretch that ran one iteration (the run ended) measured nothing: the
            // site asks again.
            if let Some((t, cpu)) = warm
                && n > 1
            {
                let spent = match (cpu, thread_cpu_ns()) {
                    (Some(a), Some(b)) if b > a => {
                        Duration::from_nanos((b - a - cpu_clock_cost()).max(0.0) as u64)
                    }
                    _ => t.elapsed(),
                };
                self.site.note_measured(spent, n - 1);
            }
        } else if dearer {
            self.site.iterations_got_dearer(cost.last_ps());
        } else {
            self.site.note_in_order(t0.elapsed(), n);
        }
        let cause = self.site.held_back();
        if self.site.ran_in_order(n) {
            // Speculation resumes: a new window, and the workers back.
            self.window.open();
            workers::wake(Job::seats(self));
        }
        ts.epochs += n;
        ts.items += n;
        ts.in_order_epochs += n;
        match cause {
            HeldBack::NoWorkers => ts.in_order_no_workers += n,
            HeldBack::Measuring => ts.in_order_measuring += n,
            HeldBack::DidNotPay => {}
        }
        if let Some(name) = &self.trace {
            let detail = format!("{n} iterations from epoch {first}");
            trace::span(
                SpanKind::InOrder,
                name,
                first,
                t0,
                Instant::now(),
                Some(detail),
            );
        }
    }
}
