//! `compare`: a fresh database per mode, the same seeded sequence on each with the
//! modes taking turns, and the side-by-side table and JSON of what they measured.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::placement::Placement;
use super::{Limit, RunReport, Runner, load, progress_bar};
use crate::engine::{self, Engine, Mode, Sync};
use crate::schema::Scale;
use crate::workload::TxnKind;

/// What `compare` measured for one mode.
#[derive(Clone, Debug)]
pub struct CompareResult {
    /// The run.
    pub report: RunReport,
    /// [`Summary::digest`](crate::check::Summary::digest) of the database after the run.
    pub summary_digest: u64,
    /// Orders in the database after the run.
    pub total_orders: u64,
    /// How fast two CPUs passed a cache line before and after the run (the same for
    /// every mode of one `compare` process); `None` on one CPU.
    pub placement: Option<Placement>,
}

impl CompareResult {
    /// Everything measured, as JSON (how a `compare` child process reports back).
    pub fn to_json(&self) -> serde_json::Value {
        let r = &self.report;
        serde_json::json!({
            "mode": r.mode.name(),
            "latencies_ns": r.latencies.to_vec(),
            "rolled_back": r.rolled_back,
            "busy_ns": r.busy.as_nanos() as u64,
            "digest": r.digest,
            "load_ns": r.load_time.map(|t| t.as_nanos() as u64),
            "summary_digest": self.summary_digest,
            "total_orders": self.total_orders,
            "placement": self.placement.map(|p| p.to_json()),
        })
    }

    /// Reads back [`CompareResult::to_json`].
    pub fn from_json(v: &serde_json::Value) -> Result<Self> {
        let bad = || anyhow::anyhow!("malformed compare result: {v}");
        let u = |key: &str| v[key].as_u64().ok_or_else(bad);
        let mode: Mode = v["mode"].as_str().ok_or_else(bad)?.parse()?;
        let mut latencies: [Vec<u64>; 5] = Default::default();
        let lists = v["latencies_ns"].as_array().ok_or_else(bad)?;
        if lists.len() != latencies.len() {
            return Err(bad());
        }
        for (out, list) in latencies.iter_mut().zip(lists) {
            for x in list.as_array().ok_or_else(bad)? {
                out.push(x.as_u64().ok_or_else(bad)?);
            }
        }
        Ok(Self {
            report: RunReport {
                mode,
                latencies,
                rolled_back: u("rolled_back")?,
                retried: 0,
                busy: Duration::from_nanos(u("busy_ns")?),
                digest: u("digest")?,
                load_time: v["load_ns"].as_u64().map(Duration::from_nanos),
            },
            summary_digest: u("summary_digest")?,
            total_orders: u("total_orders")?,
            placement: match &v["placement"] {
                serde_json::Value::Null => None,
                p => Some(Placement {
                    before_ns: p["before_ns"].as_u64().ok_or_else(bad)?,
                    after_ns: p["after_ns"].as_u64().ok_or_else(bad)?,
                }),
            },
        })
    }
}

/// Transactions each engine runs before `compare` moves to the next one.
const SLICE: u64 = 50;

/// Loads a fresh database per mode in a temporary directory and runs the same seeded
/// sequence on each, the modes taking turns every `SLICE` (50) transactions (the order
/// of the turns rotating), so that a change in the machine's load, which on a shared
/// machine comes and goes within seconds, falls on every mode alike.
pub fn compare(
    modes: &[Mode],
    warehouses: u16,
    scale: Scale,
    transactions: u64,
    sync: Sync,
    seed: u64,
    show: bool,
) -> Result<Vec<CompareResult>> {
    struct Contender {
        engine: Box<dyn Engine>,
        runner: Runner,
        load_time: Duration,
        _dir: tempfile::TempDir,
    }
    let mut all = Vec::with_capacity(modes.len());
    for &mode in modes {
        let dir = tempfile::tempdir().context("creating a temporary directory")?;
        let path = dir.path().join("tpcc.db");
        let mut engine = engine::create(&path, mode, sync, warehouses, scale)?;
        let t0 = Instant::now();
        let meta = load(engine.as_mut(), warehouses, scale, seed, show)
            .with_context(|| format!("loading the {mode} database"))?;
        let load_time = t0.elapsed();
        if show {
            eprintln!("{mode}: loaded in {:.1} s", load_time.as_secs_f64());
        }
        stop_if_interrupted()?;
        let mut runner = Runner::new(mode, meta, seed.wrapping_add(1));
        runner.reserve(transactions);
        all.push(Contender {
            engine,
            runner,
            load_time,
            _dir: dir,
        });
    }
    let bar = progress_bar(show, Limit::Transactions(transactions * modes.len() as u64));
    // Timed right before and after the turns (not around the loads, which take
    // seconds, in which the host may place the CPUs otherwise).
    let (turns, placement) = Placement::around(|| -> Result<()> {
        let mut turn = 0;
        while all.iter().any(|c| c.runner.done < transactions) {
            stop_if_interrupted()?;
            let n = all.len();
            for k in 0..n {
                let c = &mut all[(k + turn) % n];
                let mode = c.engine.mode();
                for _ in 0..SLICE.min(transactions - c.runner.done) {
                    c.runner
                        .step(c.engine.as_mut(), &mut |_, _, _| Ok(()))
                        .with_context(|| format!("running the mix on {mode}"))?;
                }
            }
            turn += 1;
            bar.set_position(all.iter().map(|c| c.runner.done).sum());
        }
        Ok(())
    });
    turns?;
    bar.finish_and_clear();
    let mut results = Vec::with_capacity(all.len());
    for mut c in all {
        let mode = c.engine.mode();
        let mut report = c.runner.finish();
        report.load_time = Some(c.load_time);
        let summary = c.engine.summary()?;
        summary
            .check()
            .map_err(|e| anyhow::anyhow!("{mode}: consistency check failed after the run:\n{e}"))?;
        results.push(CompareResult {
            report,
            summary_digest: summary.digest(),
            total_orders: summary.total_orders(),
            placement,
        });
    }
    Ok(results)
}

/// An error once Ctrl-C asked the comparison to stop: returned, it drops the
/// contenders and with them their temporary databases.
fn stop_if_interrupted() -> Result<()> {
    if super::interrupted() {
        anyhow::bail!("interrupted (Ctrl-C)");
    }
    Ok(())
}

/// The side-by-side table of a comparison.
pub fn format_table(results: &[CompareResult], warehouses: u16, sync: Sync) -> String {
    let mut s = String::new();
    let Some(first) = results.first() else {
        return s;
    };
    let _ = writeln!(
        s,
        "TPC-C: {warehouses} warehouse(s), {} transactions per mode, sync {}",
        first.report.count(),
        sync.name()
    );
    let _ = write!(s, "{:<14}", "");
    for r in results {
        let _ = write!(s, " | {:^33}", r.report.mode.name());
    }
    let _ = writeln!(s);
    let _ = write!(s, "{:<14}", "transaction");
    for _ in results {
        let _ = write!(
            s,
            " | {:>6} {:>8} {:>8} {:>8}",
            "count", "p50 us", "p95 us", "tx/s"
        );
    }
    let _ = writeln!(s);
    for kind in TxnKind::ALL {
        let _ = write!(s, "{:<14}", kind.name());
        for r in results {
            let p = |q| {
                r.report
                    .percentile_us(kind, q)
                    .map_or("-".to_string(), |v| format!("{v:.1}"))
            };
            let _ = write!(
                s,
                " | {:>6} {:>8} {:>8} {:>8.0}",
                r.report.count_of(kind),
                p(50.0),
                p(95.0),
                r.report.throughput_of(kind)
            );
        }
        let _ = writeln!(s);
    }
    let _ = write!(s, "{:<14}", "all (tx/s)");
    for r in results {
        let _ = write!(s, " | {:>33.0}", r.report.throughput());
    }
    let _ = writeln!(s);
    let _ = write!(s, "{:<14}", "load (s)");
    for r in results {
        let t = r.report.load_time.map_or(0.0, |t| t.as_secs_f64());
        let _ = write!(s, " | {t:>33.2}");
    }
    let _ = writeln!(s);
    if results.len() > 1 {
        let (same_out, same_db) = agreement(results);
        let _ = writeln!(
            s,
            "same answers on every mode: {}; same final database totals: {}",
            if same_out { "yes" } else { "NO" },
            if same_db { "yes" } else { "NO" }
        );
    } else {
        // `--modes tls` (or a mode named twice, run once): no agreement to report,
        // and saying nothing read as a missing line.
        let _ = writeln!(
            s,
            "one mode ran ({}): no other mode to compare its answers with",
            first.report.mode.name()
        );
    }
    let _ = writeln!(
        s,
        "rolled-back New Orders: {}; orders in the database: {}",
        first.report.rolled_back, first.total_orders
    );
    if let Some(p) = placement(results) {
        let _ = writeln!(s, "{}", p.describe());
    }
    s
}

/// The placement timed around our engine's modes (SQLite runs in a process of its
/// own, on one thread, where it does not matter).
fn placement(results: &[CompareResult]) -> Option<Placement> {
    results
        .iter()
        .filter(|r| r.report.mode != Mode::Sqlite)
        .find_map(|r| r.placement)
}

/// The comparison as JSON: an object keyed by transaction type, each with
/// `<mode>_p50_us` and `<mode>_p95_us` (plus `<mode>_count`, and `<mode>_tps`: that
/// type's transactions per second of the time spent in them), and the booleans
/// `same_answers` and `same_totals` (every mode answered alike, and ended with the
/// same database totals; `null` with one mode, when nothing was compared), and,
/// where two CPUs could be timed, `cache_line_round_trip` (`before_ns`, `after_ns`,
/// `placement`: see [`Placement`]); and what the table's last lines say: `all`
/// (`<mode>_tps` of every transaction), `load_s` per mode, `rolled_back_new_orders`,
/// `orders_in_database`, and the run's `warehouses`, `transactions` (per mode) and
/// `sync`.
pub fn format_json(results: &[CompareResult], warehouses: u16, sync: Sync) -> serde_json::Value {
    let mut root = serde_json::Map::new();
    let mut all = serde_json::Map::new();
    let mut load = serde_json::Map::new();
    for r in results {
        let m = r.report.mode.name();
        all.insert(format!("{m}_tps"), round1(r.report.throughput()).into());
        let t = r.report.load_time.map_or(0.0, |t| t.as_secs_f64());
        load.insert(m.to_string(), ((t * 100.0).round() / 100.0).into());
    }
    root.insert("all".into(), all.into());
    root.insert("load_s".into(), load.into());
    if let Some(first) = results.first() {
        root.insert(
            "rolled_back_new_orders".into(),
            first.report.rolled_back.into(),
        );
        root.insert("orders_in_database".into(), first.total_orders.into());
        root.insert("transactions".into(), first.report.count().into());
    }
    root.insert("warehouses".into(), warehouses.into());
    root.insert("sync".into(), sync.name().into());
    for kind in TxnKind::ALL {
        let mut o = serde_json::Map::new();
        for r in results {
            let m = r.report.mode.name();
            let num = |v: Option<f64>| v.map_or(serde_json::Value::Null, |v| round1(v).into());
            o.insert(
                format!("{m}_p50_us"),
                num(r.report.percentile_us(kind, 50.0)),
            );
            o.insert(
                format!("{m}_p95_us"),
                num(r.report.percentile_us(kind, 95.0)),
            );
            o.insert(format!("{m}_count"), r.report.count_of(kind).into());
            o.insert(
                format!("{m}_tps"),
                round1(r.report.throughput_of(kind)).into(),
            );
        }
        root.insert(kind.name().to_string(), o.into());
    }
    // With one mode nothing was compared: `null`, not a `true` a script would read
    // as "compared and equal" (the table says "no other mode to compare with").
    let (same_answers, same_totals) = agreement(results);
    let compared = |same: bool| {
        if results.len() > 1 {
            same.into()
        } else {
            serde_json::Value::Null
        }
    };
    root.insert("same_answers".into(), compared(same_answers));
    root.insert("same_totals".into(), compared(same_totals));
    if let Some(p) = placement(results) {
        root.insert("cache_line_round_trip".into(), p.to_json());
    }
    root.into()
}

/// Whether every mode gave the same answers, and ended with the same database totals.
fn agreement(results: &[CompareResult]) -> (bool, bool) {
    let Some(first) = results.first() else {
        return (true, true);
    };
    (
        results
            .iter()
            .all(|r| r.report.digest == first.report.digest),
        results
            .iter()
            .all(|r| r.summary_digest == first.summary_digest),
    )
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

#[cfg(test)]
mod json_tests {
    use super::*;

    #[test]
    fn compare_results_survive_the_trip_through_json() {
        let mut report = RunReport::new(Mode::Sequential);
        report.latencies[0] = vec![1, 2, u64::MAX];
        report.latencies[4] = vec![7];
        report.rolled_back = 3;
        report.busy = Duration::from_nanos(123_456_789);
        report.digest = u64::MAX - 1;
        report.load_time = Some(Duration::from_millis(1500));
        let mut r = CompareResult {
            report,
            summary_digest: 42,
            total_orders: 30_885,
            placement: Some(Placement {
                before_ns: 120,
                after_ns: 410,
            }),
        };
        let back = CompareResult::from_json(&r.to_json()).unwrap();
        assert_eq!(back.placement, r.placement);
        r.placement = None;
        assert_eq!(
            CompareResult::from_json(&r.to_json()).unwrap().placement,
            None
        );
        assert_eq!(back.report.mode, Mode::Sequential);
        assert_eq!(back.report.latencies, r.report.latencies);
        assert_eq!(back.report.rolled_back, 3);
        assert_eq!(back.report.busy, r.report.busy);
        assert_eq!(back.report.digest, r.report.digest);
        assert_eq!(back.report.load_time, r.report.load_time);
        assert_eq!((back.summary_digest, back.total_orders), (42, 30_885));
        assert!(CompareResult::from_json(&serde_json::json!({"mode": "sqlite"})).is_err());
    }
}
