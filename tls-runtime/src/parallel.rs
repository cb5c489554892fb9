//! Running a loop speculatively on several threads: the worker pool, the loop's site
//! and trace are made ready, the scheduler (`scheduler/`) runs the epochs, and what
//! the threads saw becomes the loop's report.

use crate::adapt::site_for;
use crate::control::{Control, LoopOutcome, Step};
use crate::loop_builder::Loop;
use crate::report::RunMode;
use crate::report::keep_last;
use crate::scheduler::{self, LoopEnding};
use crate::sink::{self, set_last};
use crate::{panic_hook, trace, workers};
use std::panic::resume_unwind;
use std::time::Instant;

impl Loop {
    pub(crate) fn run_parallel<It, S, R, St, Sp>(
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
        panic_hook::install();
        workers::ensure_workers(threads - 1);
        let name = self.display_name();
        let site = self.site.unwrap_or_else(|| site_for(self.location, &name));
        let t0 = Instant::now();
        let trace = (trace::enabled() && !self.internal).then(|| {
            sink::ensure_written_at_exit();
            trace::base();
            std::sync::Arc::<str>::from(name.as_str())
        });
        let label = scheduler::Label {
            name: &name,
            location: self.location,
        };
        let (ending, stats) =
            scheduler::run(iter, threads, self.chunk, site, label, trace, start, step);
        let wall = t0.elapsed();
        let report = stats.into_report(name, self.location, RunMode::Parallel, threads, wall);
        if self.internal {
            keep_last(report);
        } else {
            set_last(report);
        }
        match ending {
            None => LoopOutcome::Completed,
            Some(LoopEnding::Break) => LoopOutcome::Broke,
            Some(LoopEnding::Return(r)) => LoopOutcome::Returned(r),
            Some(LoopEnding::Panic(p)) => resume_unwind(p),
        }
    }

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
