//! Runs the mix against an engine and measures it: per-type latency percentiles,
//! throughput, acknowledged orders; `compare.rs` holds the side-by-side `compare`
//! run and its report.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::engine::{self, Engine, Mode};
use crate::load;
use crate::schema::{Meta, Scale};
use crate::workload::{Terminal, TxnInput, TxnKind, TxnOutput};

mod ack_log;
mod compare;
pub mod placement;
mod terminals;

pub use ack_log::{AckLog, read_ack_log, refuse_ack_log_on_database};
pub use compare::{CompareResult, compare, format_json, format_table};
pub use terminals::run_terminals;

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
    /// Transactions run again after losing a lock conflict to another terminal.
    pub retried: u64,
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
            retried: 0,
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

/// Set when Ctrl-C (SIGINT) asked a run to stop ([`stop_runs_on_interrupt`]).
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether Ctrl-C asked the run to stop: runs end after the transaction in hand.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Makes Ctrl-C (SIGINT) end runs after the transactions in hand, so that the
/// summary of what ran is printed (killed at once, a long `--duration` run lost it
/// all); a second Ctrl-C ends the process at once.
#[cfg(unix)]
pub fn stop_runs_on_interrupt() {
    extern "C" fn on_interrupt(_: libc::c_int) {
        // Only async-signal-safe work here: an atomic swap, and `_exit`.
        if INTERRUPTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: `_exit` is async-signal-safe and ends the process.
            unsafe { libc::_exit(130) };
        }
    }
    // SAFETY: the handler does only async-signal-safe work (above); installing it
    // replaces the default action of one signal.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
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
            _ if interrupted() => break,
            _ => {}
        }
        runner.step(engine, on_new_order)?;
        show_progress(&bar, opts.limit, runner.done, started);
    }
    bar.finish_and_clear();
    Ok(runner.finish())
}

/// How many times a transaction that lost a lock conflict runs again before the run
/// fails.
const MAX_RETRIES: u32 = 50;

/// After this many lost lock conflicts in a row, a transaction runs again with its
/// loops in order ([`Engine::loops_in_order`]), taking and holding its locks as the
/// sequential program does.
const IN_ORDER_AFTER: u32 = 3;

/// Runs `input` on `engine`, again while it loses lock conflicts (up to
/// [`MAX_RETRIES`] times, with its loops in order after [`IN_ORDER_AFTER`]); the
/// output and how many times it ran again.
fn execute_with_retries(engine: &mut dyn Engine, input: &TxnInput) -> (Result<TxnOutput>, u32) {
    let mut tries = 0;
    let out = loop {
        match engine::execute(engine, input) {
            // Another terminal's transaction won a lock conflict: this one was
            // aborted, and runs again, as a TPC-C terminal resubmits it.
            Err(e) if tries < MAX_RETRIES && lost_a_lock_conflict(&e) => {
                tries += 1;
                if tries == IN_ORDER_AFTER {
                    engine.loops_in_order(true);
                }
                std::thread::sleep(Duration::from_micros(50 << tries.min(6)));
            }
            out => break out,
        }
    };
    if tries >= IN_ORDER_AFTER {
        engine.loops_in_order(false);
    }
    (out, tries)
}

/// Whether `e` says the transaction lost a lock conflict (a deadlock victim, or a lock
/// wait that timed out): it was aborted and can run again.
fn lost_a_lock_conflict(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<btree_db::Error>(),
            Some(btree_db::Error::Deadlock | btree_db::Error::LockTimeout)
        )
    })
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

    /// Gives the run's terminal home warehouse `w` (see [`Terminal::bind_home`]).
    pub fn bind_home(&mut self, w: u16) {
        self.terminal.bind_home(w);
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
        let (output, tries) = execute_with_retries(engine, &input);
        self.report.retried += u64::from(tries);
        let output = output.with_context(|| format!("{} failed", input.brief()))?;
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

/// Moves the bar every 256 transactions: to `done` transactions, or to the seconds
/// since `started` for a run by duration.
fn show_progress(bar: &ProgressBar, limit: Limit, done: u64, started: Instant) {
    if done.is_multiple_of(256) {
        match limit {
            Limit::Transactions(_) => bar.set_position(done),
            Limit::Duration(_) => bar.set_position(started.elapsed().as_secs()),
        }
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
            // A bar of 30: the line fits an 80-column terminal (at 40 it wrapped).
            ProgressStyle::with_template(
                "{msg} [{bar:30}] {pos}/{len} ({elapsed}, eta {eta})",
            )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine whose Delivery loses a lock conflict every time while its loops are
    /// not in order; it records the order of `loops_in_order` calls.
    struct LosesUnlessInOrder {
        in_order: bool,
        asked: Vec<bool>,
        runs: u32,
    }

    impl load::LoadSink for LosesUnlessInOrder {
        fn insert_item(&mut self, _: &crate::schema::Item) -> Result<()> {
            unreachable!()
        }
        fn insert_warehouse(&mut self, _: &crate::schema::Warehouse) -> Result<()> {
            unreachable!()
        }
        fn insert_stock(&mut self, _: &crate::schema::Stock) -> Result<()> {
            unreachable!()
        }
        fn insert_district(&mut self, _: &crate::schema::District) -> Result<()> {
            unreachable!()
        }
        fn insert_customer(&mut self, _: &crate::schema::Customer) -> Result<()> {
            unreachable!()
        }
        fn insert_history(&mut self, _: &crate::schema::History) -> Result<()> {
            unreachable!()
        }
        fn insert_order(&mut self, _: &crate::schema::Order) -> Result<()> {
            unreachable!()
        }
        fn insert_order_line(&mut self, _: &crate::schema::OrderLine) -> Result<()> {
            unreachable!()
        }
        fn insert_new_order(&mut self, _: &crate::schema::NewOrder) -> Result<()> {
            unreachable!()
        }
        fn batch_boundary(&mut self) -> Result<()> {
            unreachable!()
        }
        fn finish(&mut self, _: &Meta) -> Result<()> {
            unreachable!()
        }
    }

    impl Engine for LosesUnlessInOrder {
        fn mode(&self) -> Mode {
            Mode::Tls
        }
        fn meta(&mut self) -> Result<Meta> {
            unreachable!()
        }
        fn new_order(
            &mut self,
            _: &crate::workload::NewOrderInput,
        ) -> Result<crate::workload::NewOrderOutput> {
            unreachable!()
        }
        fn payment(
            &mut self,
            _: &crate::workload::PaymentInput,
        ) -> Result<crate::workload::PaymentOutput> {
            unreachable!()
        }
        fn order_status(
            &mut self,
            _: &crate::workload::OrderStatusInput,
        ) -> Result<crate::workload::OrderStatusOutput> {
            unreachable!()
        }
        fn delivery(
            &mut self,
            _: &crate::workload::DeliveryInput,
        ) -> Result<crate::workload::DeliveryOutput> {
            self.runs += 1;
            if self.in_order {
                Ok(crate::workload::DeliveryOutput { delivered: 10 })
            } else {
                Err(anyhow::Error::new(btree_db::Error::Deadlock).context("applying a write"))
            }
        }
        fn stock_level(
            &mut self,
            _: &crate::workload::StockLevelInput,
        ) -> Result<crate::workload::StockLevelOutput> {
            unreachable!()
        }
        fn summary(&mut self) -> Result<engine::Summary> {
            unreachable!()
        }
        fn order_exists(&mut self, _: u16, _: u8, _: u32) -> Result<bool> {
            unreachable!()
        }
        fn loops_in_order(&mut self, in_order: bool) {
            self.in_order = in_order;
            self.asked.push(in_order);
        }
    }

    /// A transaction that keeps losing runs again with its loops in order after
    /// `IN_ORDER_AFTER` losses, and the engine's loops go back to its mode after it.
    #[test]
    fn a_transaction_that_keeps_losing_lock_conflicts_runs_its_loops_in_order() {
        let mut e = LosesUnlessInOrder {
            in_order: false,
            asked: Vec::new(),
            runs: 0,
        };
        let input = TxnInput::Delivery(crate::workload::DeliveryInput {
            w_id: 1,
            carrier_id: 3,
            delivery_d: 0,
        });
        let (out, tries) = execute_with_retries(&mut e, &input);
        assert!(matches!(out, Ok(TxnOutput::Delivery(d)) if d.delivered == 10));
        assert_eq!((tries, e.runs), (IN_ORDER_AFTER, IN_ORDER_AFTER + 1));
        assert_eq!(e.asked, [true, false]);
        assert!(!e.in_order);
    }

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
}
