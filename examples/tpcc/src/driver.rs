//! Runs the mix against an engine and measures it: per-type latency percentiles,
//! throughput, acknowledged orders, and the side-by-side `compare` report.

use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::engine::{self, Engine, Mode, Sync};
use crate::load;
use crate::schema::{Meta, Scale};
use crate::workload::{Terminal, TxnInput, TxnKind, TxnOutput};

/// Microseconds since the Unix epoch: the spec's "current date/time".
pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// When a run stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// After this many transactions.
    Transactions(u64),
    /// After this much time.
    Duration(Duration),
}

/// How to run the mix.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// When to stop.
    pub limit: Limit,
    /// The terminal's seed.
    pub seed: u64,
    /// Show a progress bar.
    pub progress: bool,
}

/// Latencies and counts of one run.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The engine.
    pub mode: Mode,
    /// Latency of each transaction, in nanoseconds, per [`TxnKind::index`].
    pub latencies: [Vec<u64>; 5],
    /// New Orders that rolled back on the unused item.
    pub rolled_back: u64,
    /// Wall time of the run, transactions only.
    pub busy: Duration,
    /// A hash of every transaction's output, in order: equal digests mean two engines
    /// answered the whole sequence identically.
    pub digest: u64,
    /// Time to load the database, when the run loaded it.
    pub load_time: Option<Duration>,
}

impl RunReport {
    fn new(mode: Mode) -> Self {
        Self {
            mode,
            latencies: Default::default(),
            rolled_back: 0,
            busy: Duration::ZERO,
            digest: 0,
            load_time: None,
        }
    }

    /// Transactions run.
    pub fn count(&self) -> u64 {
        self.latencies.iter().map(|l| l.len() as u64).sum()
    }

    /// Transactions of `kind` run.
    pub fn count_of(&self, kind: TxnKind) -> u64 {
        self.latencies[kind.index()].len() as u64
    }

    /// The `p`-th percentile (0 to 100) latency of `kind` in microseconds; `None` if
    /// no transaction of that kind ran.
    pub fn percentile_us(&self, kind: TxnKind, p: f64) -> Option<f64> {
        let v = &self.latencies[kind.index()];
        if v.is_empty() {
            return None;
        }
        let mut sorted = v.clone();
        sorted.sort_unstable();
        // Nearest rank.
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        let i = rank.clamp(1, sorted.len()) - 1;
        Some(sorted[i] as f64 / 1000.0)
    }

    /// Transactions per second of busy time.
    pub fn throughput(&self) -> f64 {
        let s = self.busy.as_secs_f64();
        if s == 0.0 {
            0.0
        } else {
            self.count() as f64 / s
        }
    }

    /// Transactions of `kind` per second of the time spent in them.
    pub fn throughput_of(&self, kind: TxnKind) -> f64 {
        let v = &self.latencies[kind.index()];
        let ns: u64 = v.iter().sum();
        if ns == 0 {
            0.0
        } else {
            v.len() as f64 * 1e9 / ns as f64
        }
    }
}

/// Runs the standard mix on `engine`. `on_new_order` is called after each committed
/// New Order returns, with `(w_id, d_id, o_id)`: the acknowledgement.
pub fn run(
    engine: &mut dyn Engine,
    meta: Meta,
    opts: &RunOptions,
    on_new_order: &mut dyn FnMut(u16, u8, u32) -> Result<()>,
) -> Result<RunReport> {
    let mut runner = Runner::new(engine.mode(), meta, opts.seed);
    if let Limit::Transactions(n) = opts.limit {
        runner.reserve(n);
    }
    let bar = progress_bar(opts.progress, opts.limit);
    let started = Instant::now();
    loop {
        match opts.limit {
            Limit::Transactions(n) if runner.done >= n => break,
            Limit::Duration(d) if started.elapsed() >= d => break,
            _ => {}
        }
        runner.step(engine, on_new_order)?;
        if runner.done.is_multiple_of(256) {
            match opts.limit {
                Limit::Transactions(_) => bar.set_position(runner.done),
                Limit::Duration(_) => bar.set_position(started.elapsed().as_secs()),
            }
        }
    }
    bar.finish_and_clear();
    Ok(runner.finish())
}

/// One terminal's run in progress: the seeded sequence, and what was measured so far.
/// [`run`] drives one to the end; `compare` interleaves several, one per engine.
pub struct Runner {
    terminal: Terminal,
    report: RunReport,
    hasher: DefaultHasher,
    /// Transactions run so far.
    pub done: u64,
}

impl Runner {
    /// A run of the sequence seeded with `seed` on an engine of `mode`.
    pub fn new(mode: Mode, meta: Meta, seed: u64) -> Runner {
        Runner {
            terminal: Terminal::new(meta, seed),
            report: RunReport::new(mode),
            hasher: DefaultHasher::new(),
            done: 0,
        }
    }

    /// Makes room for `n` transactions' latencies, so recording them does not allocate.
    pub fn reserve(&mut self, n: u64) {
        for l in &mut self.report.latencies {
            l.reserve(n as usize / 2);
        }
    }

    /// Runs the next transaction of the sequence on `engine` and measures it.
    pub fn step(
        &mut self,
        engine: &mut dyn Engine,
        on_new_order: &mut dyn FnMut(u16, u8, u32) -> Result<()>,
    ) -> Result<()> {
        let input = self.terminal.next(now_micros());
        let t0 = Instant::now();
        let output = engine::execute(engine, &input)
            .with_context(|| format!("{} failed (input {input:?})", input.kind().name()))?;
        let dt = t0.elapsed();
        let report = &mut self.report;
        report.busy += dt;
        report.latencies[input.kind().index()].push(dt.as_nanos() as u64);
        output.hash(&mut self.hasher);
        if let (TxnInput::NewOrder(no), TxnOutput::NewOrder(out)) = (&input, &output) {
            if out.rolled_back {
                report.rolled_back += 1;
            } else {
                on_new_order(no.w_id, no.d_id, out.o_id)?;
            }
        }
        self.done += 1;
        Ok(())
    }

    /// The report of the transactions run.
    pub fn finish(mut self) -> RunReport {
        self.report.digest = self.hasher.finish();
        self.report
    }
}

fn progress_bar(show: bool, limit: Limit) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let (len, unit) = match limit {
        Limit::Transactions(n) => (n, "txns"),
        Limit::Duration(d) => (d.as_secs().max(1), "s"),
    };
    let bar = ProgressBar::new(len);
    let template = format!("{{msg}} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{elapsed}})");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message("running");
    bar
}

/// Loads `warehouses` warehouses into a fresh `engine`, with a progress bar if `show`.
pub fn load(
    engine: &mut dyn Engine,
    warehouses: u16,
    scale: Scale,
    seed: u64,
    show: bool,
) -> Result<Meta> {
    let bar = if show {
        let bar = ProgressBar::new(load::load_units(warehouses));
        if let Ok(style) =
            ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({elapsed}, eta {eta})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(format!("loading {warehouses} warehouse(s)"));
        bar
    } else {
        ProgressBar::hidden()
    };
    let meta = load::populate(engine, warehouses, scale, seed, now_micros(), &mut |n| {
        bar.inc(n)
    })?;
    bar.finish_and_clear();
    Ok(meta)
}

/// Appends acknowledged New Orders to a file, one `w d o_id` line each, handed to the
/// operating system before the next transaction starts: enough to survive the process
/// being killed, which is what the crash tests do (not a power failure).
pub struct AckLog {
    file: std::fs::File,
}

impl AckLog {
    /// Opens (appending to) `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening ack log {}", path.display()))?;
        Ok(Self { file })
    }

    /// Records one order. The line goes out in a single `write`, so a kill leaves
    /// either the whole line or none of it.
    pub fn ack(&mut self, w: u16, d: u8, o: u32) -> Result<()> {
        let mut line = [0u8; 32];
        let mut cursor = std::io::Cursor::new(&mut line[..]);
        writeln!(cursor, "{w} {d} {o}")?;
        let n = cursor.position() as usize;
        self.file.write_all(&line[..n])?;
        self.file.flush()?;
        Ok(())
    }
}

/// Parses an ack log: `(w_id, d_id, o_id)` per complete line. A last line without a
/// newline was cut by a crash before it was acknowledged, and is ignored.
pub fn read_ack_log(path: &Path) -> Result<Vec<(u16, u8, u32)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading expected orders from {}", path.display()))?;
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let mut orders = Vec::new();
    for (n, line) in complete.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = || {
            anyhow::anyhow!(
                "{}:{}: expected `w_id d_id o_id`, found {line:?}",
                path.display(),
                n + 1
            )
        };
        let mut it = line.split_whitespace();
        let w = it.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let d = it.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let o = it.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        if it.next().is_some() {
            return Err(bad());
        }
        orders.push((w, d, o));
    }
    Ok(orders)
}

/// What `compare` measured for one mode.
#[derive(Clone, Debug)]
pub struct CompareResult {
    /// The run.
    pub report: RunReport,
    /// [`Summary::digest`](crate::check::Summary::digest) of the database after the run.
    pub summary_digest: u64,
    /// Orders in the database after the run.
    pub total_orders: u64,
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
                busy: Duration::from_nanos(u("busy_ns")?),
                digest: u("digest")?,
                load_time: v["load_ns"].as_u64().map(Duration::from_nanos),
            },
            summary_digest: u("summary_digest")?,
            total_orders: u("total_orders")?,
        })
    }
}

/// Transactions each engine runs before `compare` moves to the next one.
const SLICE: u64 = 50;

/// Loads a fresh database per mode in a temporary directory and runs the same seeded
/// sequence on each, the modes taking turns every [`SLICE`] transactions (the order
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
        let mut engine = engine::create(&path, mode, sync, warehouses)?;
        let t0 = Instant::now();
        let meta = load(engine.as_mut(), warehouses, scale, seed, show)
            .with_context(|| format!("loading the {mode} database"))?;
        let load_time = t0.elapsed();
        if show {
            eprintln!("{mode}: loaded in {:.1} s", load_time.as_secs_f64());
        }
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
    let mut turn = 0;
    while all.iter().any(|c| c.runner.done < transactions) {
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
        });
    }
    Ok(results)
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
    }
    let _ = writeln!(
        s,
        "rolled-back New Orders: {}; orders in the database: {}",
        first.report.rolled_back, first.total_orders
    );
    s
}

/// The comparison as JSON: an object keyed by transaction type, each with
/// `<mode>_p50_us` and `<mode>_p95_us` (plus `<mode>_count`, and `<mode>_tps`: that
/// type's transactions per second of the time spent in them), and the booleans
/// `same_answers` and `same_totals` (every mode answered alike, and ended with the
/// same database totals).
pub fn format_json(results: &[CompareResult]) -> serde_json::Value {
    let mut root = serde_json::Map::new();
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
    let (same_answers, same_totals) = agreement(results);
    root.insert("same_answers".into(), same_answers.into());
    root.insert("same_totals".into(), same_totals.into());
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
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let mut r = RunReport::new(Mode::Sqlite);
        // 1 us .. 100 us
        r.latencies[TxnKind::Payment.index()] = (1..=100).rev().map(|us| us * 1000).collect();
        assert_eq!(r.percentile_us(TxnKind::Payment, 50.0), Some(50.0));
        assert_eq!(r.percentile_us(TxnKind::Payment, 95.0), Some(95.0));
        assert_eq!(r.percentile_us(TxnKind::Payment, 100.0), Some(100.0));
        assert_eq!(r.percentile_us(TxnKind::NewOrder, 50.0), None);
        assert_eq!(r.count(), 100);
    }

    #[test]
    fn ack_log_round_trips_and_ignores_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        let mut log = AckLog::open(&path).unwrap();
        log.ack(1, 2, 3001).unwrap();
        log.ack(65535, 10, u32::MAX).unwrap();
        drop(log);
        assert_eq!(
            read_ack_log(&path).unwrap(),
            [(1, 2, 3001), (65535, 10, u32::MAX)]
        );
        // A line cut by a crash has no newline yet: it was never acknowledged.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("1 3 30");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_ack_log(&path).unwrap().len(), 2);
        std::fs::write(&path, "1 2\n").unwrap();
        assert!(read_ack_log(&path).is_err());
        std::fs::write(&path, "1 2 3 4\n").unwrap();
        assert!(read_ack_log(&path).is_err());
        assert!(read_ack_log(&dir.path().join("missing")).is_err());
    }
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
        let r = CompareResult {
            report,
            summary_digest: 42,
            total_orders: 30_885,
        };
        let back = CompareResult::from_json(&r.to_json()).unwrap();
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
