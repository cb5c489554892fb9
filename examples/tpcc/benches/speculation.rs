//! New Order, Stock Level and the rest with and without speculation, alternated on one
//! database in one process: `cargo bench -p tpcc --bench speculation`.
//!
//! The machines this runs on are shared and their load changes by the second, so the
//! two modes are not run one after the other (as `tpcc compare` does, each in its own
//! process): the same engine switches between `sequential` and `tls` every
//! `BATCH` transactions, the order of the two swapped each round, and each mode's
//! latencies are pooled over all rounds. Printed: p50 per transaction type and mode,
//! and the ratio of each mode to the first (tls / sequential by default); then the
//! same for the transactions' loops alone (New Order's items, Delivery's districts,
//! Stock Level's items, timed from lending the transaction to the loop's threads to
//! getting it back), with each loop's share of its transaction's p50 in the first
//! mode: the part that more threads can shorten.
//! `MODES=sequential,tls,by-hand` alternates those modes (`by-hand`: the loops split
//! between threads by hand, the reference point for `tls`); `TLS_THREADS` sets the threads per
//! loop as everywhere; `ROUNDS` and `BATCH` the amount of work; `ONLY=sequential` or
//! `ONLY=tls` runs one mode alone (to profile it); `SECOND=sequential` runs sequential
//! against itself (the harness's own bias); `ITEMS` and `CUSTOMERS` shrink the
//! population.
//!
//! A mode may also be a step of the book's New Order journey, `tls:STEP`
//! (`MODES=sequential,tls:pages,tls:rows`; STEP as `TPCC_JOURNEY` takes it, with `+`
//! for `,`: `pages+checkpoint`), or `tls:in-order`, the shipped loops run in order
//! through their tracked rows (one thread). `REPORTS=DIR` then writes, per `tls` mode,
//! `DIR/<mode>.json`: New Order's loop reports summed over its committed orders, in
//! the form `TLS_REPORT` writes, for `tls-chart` (`--baseline DIR/tls:in-order.json`),
//! with one difference: the time epochs waited at synchronized loads (and at loads
//! after an `on_commit` call), which the
//! runtime counts in the epoch's own time (busy, or wasted if it later rolled back),
//! is moved to waiting (`wait_ns`; also on its own, `synchronized_ns`), so that the
//! chart shows it.
//!
//! Before and after each round the bench times a cache line passed back and forth
//! between two threads (the p50 of 1,000 round trips): on the 2-vCPU development
//! machine that is about 120 ns when the host runs the two vCPUs near each other and
//! about 410 ns when it does not, and the host changes that every few seconds. Loops
//! on one lent transaction pass lines between their threads all the time, so last
//! the bench prints the loops' ratios again for the rounds that had the two vCPUs
//! near (both timings under 250 ns) and far (both over). Not with `ONLY`, which runs one
//! mode (nothing to compare) and is how the bench is profiled.

use std::time::Instant;

/// The allocator the `tpcc` binary uses (see `src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{Context, Result};
use tpcc::driver::placement::{NEAR_NS, Placement, cache_line_round_trip_ns};
use tpcc::driver::{Limit, RunOptions, RunReport, load, run};
use tpcc::engine::kv::journey::Journey;
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
    // `ITEMS` and `CUSTOMERS` shrink the population (to run under valgrind).
    let scale = Scale {
        items: env_or("ITEMS", u64::from(Scale::SPEC.items)) as u32,
        customers: env_or("CUSTOMERS", u64::from(Scale::SPEC.customers)) as u32,
    };
    let mut engine = sequential::create(
        &dir.path().join("tpcc.db"),
        Sync::Off,
        1,
        scale,
        Mode::Sequential,
    )?;
    let t0 = Instant::now();
    let meta = load(&mut engine, 1, scale, 1, false)?;
    eprintln!("loaded 1 warehouse in {:.1} s", t0.elapsed().as_secs_f64());
    // `MODES` names the modes to alternate; the first is the one the others are
    // compared with. `SECOND=sequential` runs sequential against itself (the
    // bench's own bias).
    let modes: Vec<Entry> = match (std::env::var("MODES"), std::env::var("SECOND")) {
        (Ok(list), _) => list.split(',').map(Entry::parse).collect::<Result<_>>()?,
        (Err(_), Ok(second)) => vec![Entry::parse("sequential")?, Entry::parse(&second)?],
        (Err(_), Err(_)) => vec![Entry::parse("sequential")?, Entry::parse("tls")?],
    };
    let only = std::env::var("ONLY").ok();
    let reports = std::env::var_os("REPORTS").map(std::path::PathBuf::from);
    let mut pooled: Vec<[Vec<u64>; 5]> = modes.iter().map(|_| Default::default()).collect();
    // Per mode and transaction kind: the wall time of the transaction's loop.
    let mut loop_ns: Vec<[Vec<u64>; 5]> = modes.iter().map(|_| Default::default()).collect();
    engine.record_loop_times(true);
    let mut loops: Vec<LoopSum> = modes.iter().map(|_| LoopSum::default()).collect();
    // Per placement (near, far), mode and transaction kind: the loops' wall times.
    let mut by_placement: [Vec<[Vec<u64>; 5]>; 2] =
        std::array::from_fn(|_| modes.iter().map(|_| Default::default()).collect());
    let mut placements = [0u32; 3];
    // Not with `ONLY` (one mode, no ratios to split: a profiling run, often under
    // valgrind, where the spinning round trips took half a minute), nor on one CPU
    // (two spinning threads would take a time slice per round trip).
    let probe = only.is_none() && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    for round in 0..rounds {
        let before = if probe { settled_round_trip_ns() } else { None };
        let mut this_round: Vec<[Vec<u64>; 5]> = modes.iter().map(|_| Default::default()).collect();
        for k in 0..modes.len() {
            // The order of the modes rotates from round to round.
            let m = (k + round as usize) % modes.len();
            if only.as_ref().is_some_and(|o| *o != modes[m].label) {
                continue;
            }
            engine.set_mode(modes[m].mode)?;
            engine.set_journey(modes[m].journey);
            engine.set_threads(modes[m].threads);
            let opts = RunOptions {
                limit: Limit::Transactions(batch),
                seed: 1000 + round,
                progress: false,
            };
            let tls = modes[m].mode == Mode::Tls;
            let sum = &mut loops[m];
            let r: RunReport = run(&mut engine, meta, &opts, &mut |_, _, _| {
                if tls && let Some(r) = tls_runtime::last_report() {
                    sum.add(&r);
                }
                Ok(())
            })?;
            for (all, these) in pooled[m].iter_mut().zip(r.latencies) {
                all.extend(these);
            }
            for (kind, ns) in engine.take_loop_times() {
                loop_ns[m][kind.index()].push(ns);
                this_round[m][kind.index()].push(ns);
            }
        }
        let Some((before_ns, after_ns)) = before.zip(settled_round_trip_ns()) else {
            continue;
        };
        let place = match (Placement {
            before_ns,
            after_ns,
        })
        .verdict()
        {
            "near" => 0,
            "far" => 1,
            _ => 2,
        };
        placements[place] += 1;
        if let Some(p) = by_placement.get_mut(place) {
            for (all, these) in p.iter_mut().zip(this_round) {
                for (a, t) in all.iter_mut().zip(these) {
                    a.extend(t);
                }
            }
        }
    }
    println!(
        "TPC-C, 1 warehouse, {rounds} rounds of {batch} transactions per mode, alternated; \
         TLS_THREADS={}",
        tls_runtime::default_threads()
    );
    if let Some(dir) = &reports {
        std::fs::create_dir_all(dir)?;
        for (e, sum) in modes.iter().zip(&loops) {
            if e.mode == Mode::Tls {
                std::fs::write(dir.join(format!("{}.json", e.label)), sum.json())?;
            }
        }
    }
    let labels: Vec<&str> = modes.iter().map(|m| m.label.as_str()).collect();
    let table = Table { labels: &labels };
    table.header("transaction", "count");
    for kind in TxnKind::ALL {
        let i = kind.index();
        let n = pooled.iter().map(|p| p[i].len()).max().unwrap_or(0);
        let p50: Vec<f64> = pooled.iter_mut().map(|p| p50_us(&mut p[i])).collect();
        table.row(kind, &format!("{n:>8}"), &p50);
    }
    // The loops alone: what a thread count can shorten, and (loop / transaction in
    // the first mode) how much of the transaction that is.
    table.header("loop", "share");
    for kind in TxnKind::ALL {
        let i = kind.index();
        if loop_ns.iter().all(|l| l[i].is_empty()) {
            continue;
        }
        let p50: Vec<f64> = loop_ns.iter_mut().map(|l| p50_us(&mut l[i])).collect();
        let share = p50[0] / p50_us(&mut pooled[0][i]);
        table.row(kind, &format!("{share:>8.2}"), &p50);
    }
    if !probe {
        return Ok(());
    }
    println!(
        "rounds with the two vCPUs near (cache-line round trip under {NEAR_NS} ns before and \
         after): {}, far: {}, changed during the round: {}",
        placements[0], placements[1], placements[2]
    );
    for (name, p) in ["loop, near", "loop, far"].iter().zip(&mut by_placement) {
        if p.iter().all(|m| m.iter().all(Vec::is_empty)) {
            continue;
        }
        table.header(name, "");
        for kind in TxnKind::ALL {
            let i = kind.index();
            if p.iter().all(|l| l[i].is_empty()) {
                continue;
            }
            let p50: Vec<f64> = p.iter_mut().map(|l| p50_us(&mut l[i])).collect();
            table.row(kind, &format!("{:>8}", ""), &p50);
        }
    }
    Ok(())
}

/// [`cache_line_round_trip_ns`] once the runtime's idle workers have parked (they spin
/// for `TLS_SPIN_US`, 1 ms by default, after a loop), so that the two threads have a
/// CPU each.
fn settled_round_trip_ns() -> Option<u64> {
    std::thread::sleep(std::time::Duration::from_millis(5));
    cache_line_round_trip_ns()
}

/// The printed tables: per transaction kind, a p50 per mode, and each mode's ratio to
/// the first.
struct Table<'a> {
    labels: &'a [&'a str],
}

impl Table<'_> {
    fn header(&self, first: &str, second: &str) {
        let mut header = format!("{first:<14} {second:>8}");
        for m in self.labels {
            header += &format!(" {:>14}", format!("{m} p50 us"));
        }
        for m in &self.labels[1..] {
            header += &format!(" {:>16}", format!("{m}/{}", self.labels[0]));
        }
        println!("{header}");
    }

    fn row(&self, kind: TxnKind, second: &str, p50: &[f64]) {
        let mut line = format!("{:<14} {second}", kind.name());
        for t in p50 {
            line += &format!(" {t:>14.1}");
        }
        for t in &p50[1..] {
            line += &format!(" {:>16.2}", t / p50[0]);
        }
        println!("{line}");
    }
}

/// One mode the bench alternates: an engine mode, and for `tls` a journey step or
/// the in-order run.
struct Entry {
    label: String,
    mode: Mode,
    journey: Journey,
    /// Threads per loop (`None`: `TLS_THREADS`).
    threads: Option<usize>,
}

impl Entry {
    fn parse(text: &str) -> Result<Entry> {
        let hint = || {
            format!(
                "MODES entry {text:?}: a mode, `tls:in-order`, or `tls:STEP` with a step of \
                 the journey as TPCC_JOURNEY takes it, `+` for its commas \
                 (`tls:pages+checkpoint`)"
            )
        };
        let (mode, step) = match text.split_once(':') {
            Some((m, s)) => (m.parse::<Mode>().with_context(hint)?, Some(s)),
            None => (text.parse::<Mode>().with_context(hint)?, None),
        };
        let mut e = Entry {
            label: text.to_string(),
            mode,
            journey: Journey::default(),
            threads: None,
        };
        match step {
            None => {}
            Some(_) if mode != Mode::Tls => {
                anyhow::bail!("{text:?}: only mode tls takes a step (tls:STEP)")
            }
            Some("in-order") => e.threads = Some(1),
            Some(s) => e.journey = Journey::parse(&s.replace('+', ","))?,
        }
        Ok(e)
    }
}

/// New Order's loop reports, summed.
#[derive(Default)]
struct LoopSum {
    name: String,
    threads: usize,
    runs: u64,
    wall: u128,
    busy: u128,
    wasted: u128,
    wait: u128,
    idle: u128,
    violations: u64,
    synchronized_waits: u64,
    synchronized: u128,
}

impl LoopSum {
    fn add(&mut self, r: &tls_runtime::LoopReport) {
        self.name.clone_from(&r.name);
        self.threads = self.threads.max(r.threads);
        self.runs += 1;
        self.wall += r.wall.as_nanos();
        self.busy += r.busy.as_nanos();
        self.wasted += r.wasted.as_nanos();
        self.wait += r.wait.as_nanos();
        self.idle += r.idle.as_nanos();
        self.violations += r.violations;
        // Waits after an `on_commit` call are waits until homefree too.
        let waits = || r.synchronized.iter().chain(&r.waits_after_on_commit);
        self.synchronized_waits += waits().map(|s| s.waits).sum::<u64>();
        self.synchronized += waits().map(|s| s.waited.as_nanos()).sum::<u128>();
    }

    /// The sums as a `TLS_REPORT` JSON file of one loop (the fields `tls-chart`
    /// reads, and the counts).
    fn json(&self) -> String {
        format!(
            "[{{\"name\": \"{}\", \"threads\": {}, \"count\": {}, \"wall_ns\": {}, \
             \"busy_ns\": {}, \"wasted_ns\": {}, \"wait_ns\": {}, \"idle_ns\": {}, \
             \"violations\": {}, \"synchronized_waits\": {}, \"synchronized_ns\": {}}}]\n",
            self.name,
            self.threads,
            self.runs,
            self.wall,
            self.busy.saturating_sub(self.synchronized),
            self.wasted,
            self.wait + self.synchronized,
            self.idle,
            self.violations,
            self.synchronized_waits,
            self.synchronized
        )
    }
}
