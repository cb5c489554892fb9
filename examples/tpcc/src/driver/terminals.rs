//! Several terminals at once: one thread per engine, all on one database, each
//! running its own seeded sequence of the mix.
//!
//! The terminals' transactions interleave as the database's locks let them, so a run's
//! answers depend on timing: what several terminals must keep is the database's
//! consistency (conditions 1-4, `tpcc check`) and every acknowledged order. A
//! transaction that loses a lock conflict is aborted by the database and runs again
//! (counted in [`RunReport::retried`]).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Result, anyhow};

use super::{Limit, RunOptions, RunReport, Runner, progress_bar, show_progress};
use crate::engine::Engine;
use crate::schema::Meta;

/// Runs the mix on every engine at once, one thread each; terminal `t` runs the
/// sequence seeded with `opts.seed + t`, with home warehouse `t mod W + 1` (`W`
/// warehouses), as the specification's terminals each keep one (a single terminal
/// draws each transaction's home at random, standing for all of them). A
/// transaction limit is shared out among the terminals; a duration applies to each.
/// `on_new_order` acknowledges committed New Orders from every terminal (one at a
/// time). The report pools the terminals'
/// latencies; its `busy` is the run's wall time (so throughput is the terminals'
/// together) and its digest combines theirs in terminal order.
pub fn run_terminals(
    engines: &mut [Box<dyn Engine + Send>],
    meta: Meta,
    opts: &RunOptions,
    on_new_order: &mut (dyn FnMut(u16, u8, u32) -> Result<()> + Send),
) -> Result<RunReport> {
    let n = engines.len() as u64;
    let Some(mode) = engines.first().map(|e| e.mode()) else {
        return Err(anyhow!("no terminal to run"));
    };
    let bar = progress_bar(opts.progress, opts.limit);
    let done = AtomicU64::new(0);
    let ack = Mutex::new(on_new_order);
    let started = Instant::now();
    let reports: Vec<Result<RunReport>> = std::thread::scope(|s| {
        let handles: Vec<_> = engines
            .iter_mut()
            .enumerate()
            .map(|(t, engine)| {
                let t = t as u64;
                let (bar, done, ack) = (&bar, &done, &ack);
                s.spawn(move || -> Result<RunReport> {
                    let mut runner = Runner::new(engine.mode(), meta, opts.seed.wrapping_add(t));
                    if n > 1 {
                        runner.bind_home((t % u64::from(meta.warehouses)) as u16 + 1);
                    }
                    let share = match opts.limit {
                        Limit::Transactions(total) => total / n + u64::from(t < total % n),
                        Limit::Duration(_) => u64::MAX,
                    };
                    runner.reserve(share.min(1 << 20));
                    let mut acknowledge = |w, d, o| {
                        let mut f = ack.lock().unwrap_or_else(|e| e.into_inner());
                        (*f)(w, d, o)
                    };
                    while runner.done < share {
                        if let Limit::Duration(d) = opts.limit
                            && started.elapsed() >= d
                        {
                            break;
                        }
                        if super::interrupted() {
                            break;
                        }
                        runner
                            .step(engine.as_mut(), &mut acknowledge)
                            .map_err(|e| e.context(format!("terminal {}", t + 1)))?;
                        let all = done.fetch_add(1, Ordering::Relaxed) + 1;
                        show_progress(bar, opts.limit, all, started);
                    }
                    Ok(runner.finish())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    bar.finish_and_clear();
    let mut pooled = RunReport::new(mode);
    let mut hasher = DefaultHasher::new();
    for report in reports {
        let report = report?;
        for (all, mine) in pooled.latencies.iter_mut().zip(report.latencies) {
            all.extend(mine);
        }
        pooled.rolled_back += report.rolled_back;
        pooled.retried += report.retried;
        report.digest.hash(&mut hasher);
    }
    pooled.busy = started.elapsed();
    pooled.digest = hasher.finish();
    Ok(pooled)
}
