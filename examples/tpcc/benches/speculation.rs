//! New Order, Stock Level and the rest with and without speculation, alternated on one
//! database in one process: `cargo bench -p tpcc --bench speculation`.
//!
//! The machines this runs on are shared and their load changes by the second, so the
//! two modes are not run one after the other (as `tpcc compare` does, each in its own
//! process): the same engine switches between `sequential` and `tls` every
//! `BATCH` transactions, the order of the two swapped each round, and each mode's
//! latencies are pooled over all rounds. Printed: p50 per transaction type and mode,
//! and the ratio of each mode to the first (tls / sequential by default).
//! `MODES=sequential,tls,by-hand` alternates those modes (`by-hand`: the loops split
//! between threads by hand, the reference point for `tls`); `TLS_THREADS` sets the threads per
//! loop as everywhere; `ROUNDS` and `BATCH` the amount of work; `ONLY=sequential` or
//! `ONLY=tls` runs one mode alone (to profile it); `SECOND=sequential` runs sequential
//! against itself (the harness's own bias); `ITEMS` and `CUSTOMERS` shrink the
//! population.

use std::time::Instant;

/// The allocator the `tpcc` binary uses (see `src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Result;
use tpcc::driver::{Limit, RunOptions, RunReport, load, run};
use tpcc::engine::{Mode, Sync, sequential};
use tpcc::schema::Scale;
use tpcc::workload::TxnKind;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn p50_us(l: &mut [u64]) -> f64 {
    if l.is_empty() {
        return f64::NAN;
    }
    l.sort_unstable();
    l[(l.len() - 1) / 2] as f64 / 1e3
}

fn main() -> Result<()> {
    let rounds = env_or("ROUNDS", 12);
    let batch = env_or("BATCH", 500);
    let dir = tempfile::tempdir()?;
    let mut engine =
        sequential::create(&dir.path().join("tpcc.db"), Sync::Off, 1, Mode::Sequential)?;
    let t0 = Instant::now();
    // `ITEMS` and `CUSTOMERS` shrink the population (to run under valgrind).
    let scale = Scale {
        items: env_or("ITEMS", u64::from(Scale::SPEC.items)) as u32,
        customers: env_or("CUSTOMERS", u64::from(Scale::SPEC.customers)) as u32,
    };
    let meta = load(&mut engine, 1, scale, 1, false)?;
    eprintln!("loaded 1 warehouse in {:.1} s", t0.elapsed().as_secs_f64());
    // `MODES` names the modes to alternate; the first is the one the others are
    // compared with. `SECOND=sequential` runs sequential against itself (the
    // bench's own bias).
    let modes: Vec<Mode> = match (std::env::var("MODES"), std::env::var("SECOND")) {
        (Ok(list), _) => list.split(',').map(str::parse).collect::<Result<_>>()?,
        (Err(_), Ok(second)) => vec![Mode::Sequential, second.parse()?],
        (Err(_), Err(_)) => vec![Mode::Sequential, Mode::Tls],
    };
    let only: Option<Mode> = std::env::var("ONLY").ok().map(|m| m.parse()).transpose()?;
    let mut pooled: Vec<[Vec<u64>; 5]> = modes.iter().map(|_| Default::default()).collect();
    for round in 0..rounds {
        for k in 0..modes.len() {
            // The order of the modes rotates from round to round.
            let m = (k + round as usize) % modes.len();
            if only.is_some_and(|o| o != modes[m]) {
                continue;
            }
            engine.set_mode(modes[m])?;
            let opts = RunOptions {
                limit: Limit::Transactions(batch),
                seed: 1000 + round,
                progress: false,
            };
            let r: RunReport = run(&mut engine, meta, &opts, &mut |_, _, _| Ok(()))?;
            for (all, these) in pooled[m].iter_mut().zip(r.latencies) {
                all.extend(these);
            }
        }
    }
    println!(
        "TPC-C, 1 warehouse, {rounds} rounds of {batch} transactions per mode, alternated; \
         TLS_THREADS={}",
        tls_runtime::default_threads()
    );
    let base = modes[0];
    let mut header = format!("{:<14} {:>8}", "transaction", "count");
    for m in &modes {
        header += &format!(" {:>14}", format!("{m} p50 us"));
    }
    for m in &modes[1..] {
        header += &format!(" {:>16}", format!("{m}/{base}"));
    }
    println!("{header}");
    for kind in TxnKind::ALL {
        let i = kind.index();
        let n = pooled.iter().map(|p| p[i].len()).max().unwrap_or(0);
        let p50: Vec<f64> = pooled.iter_mut().map(|p| p50_us(&mut p[i])).collect();
        let mut line = format!("{:<14} {n:>8}", kind.name());
        for t in &p50 {
            line += &format!(" {t:>14.1}");
        }
        for t in &p50[1..] {
            line += &format!(" {:>16.2}", t / p50[0]);
        }
        println!("{line}");
    }
    Ok(())
}
