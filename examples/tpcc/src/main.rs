//! `tpcc`: load, run, check and compare TPC-C databases.

use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use tpcc::driver::{self, AckLog, Limit, RunOptions};
use tpcc::engine::{self, Mode, Sync};
use tpcc::schema::Scale;

/// mimalloc rather than the system allocator, for every engine alike: with several
/// threads, glibc's allocator makes a thread that frees memory another thread
/// allocated (rows and commit actions a speculative epoch made, freed by the thread
/// that commits it) contend for that thread's arena, and it is slower on one thread
/// too. SQLite keeps its own allocator either way.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// TPC-C on our B-tree database and on SQLite.
#[derive(Parser, Debug)]
#[command(name = "tpcc", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a database and load the initial population.
    Load {
        /// Database file to create.
        #[arg(long)]
        db: PathBuf,
        /// Number of warehouses.
        #[arg(long, default_value_t = 1, value_parser = at_least_one::<u16>)]
        warehouses: u16,
        /// Engine to create the database for.
        #[arg(long, value_enum, default_value_t = Mode::Sequential)]
        mode: Mode,
        #[command(flatten)]
        scale: ScaleArgs,
        /// Seed of the population.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Run the standard transaction mix on a loaded database.
    Run {
        /// Loaded database.
        #[arg(long)]
        db: PathBuf,
        /// Engine (default: whatever the file is).
        #[arg(long, value_enum)]
        mode: Option<Mode>,
        /// Stop after this many transactions.
        #[arg(
            long,
            required_unless_present = "duration",
            conflicts_with = "duration",
            value_parser = at_least_one::<u64>
        )]
        transactions: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
        /// Commit durability.
        #[arg(long, value_enum, default_value_t = Sync::Normal)]
        sync: Sync,
        /// After each New Order commits, append `w d o_id` to this file and flush it.
        #[arg(long)]
        ack_log: Option<PathBuf>,
        /// Seed of the transaction sequence (default: from the clock); terminal `t`
        /// (from 0) runs the sequence of seed + t.
        #[arg(long)]
        seed: Option<u64>,
        /// Terminals running at once, one thread each, on the one database (modes
        /// sequential, tls and by-hand). A transaction limit is shared among them. With more
        /// than one, terminal `t` (from 0) has home warehouse t mod W + 1; a single
        /// terminal draws each transaction's home warehouse at random.
        #[arg(long, default_value_t = 1)]
        terminals: usize,
    },
    /// Check consistency conditions 1-4 (after crash recovery) and expected orders.
    Check {
        /// Loaded database.
        #[arg(long)]
        db: PathBuf,
        /// Engine (default: whatever the file is).
        #[arg(long, value_enum)]
        mode: Option<Mode>,
        /// File of `w d o_id` lines (an ack log): each order must exist.
        #[arg(long)]
        expect_orders: Option<PathBuf>,
    },
    /// Load a fresh database per mode and run the same seeded sequence on each, the
    /// modes of our engine taking turns every 50 transactions.
    Compare {
        /// Number of warehouses.
        #[arg(long, default_value_t = 1, value_parser = at_least_one::<u16>)]
        warehouses: u16,
        /// Transactions per mode.
        #[arg(long, default_value_t = 2000, value_parser = at_least_one::<u64>)]
        transactions: u64,
        /// Comma-separated modes.
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "sequential,tls,sqlite"
        )]
        modes: Vec<Mode>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Commit durability (`off` measures the transactions' work, in core).
        #[arg(long, value_enum, default_value_t = Sync::Off)]
        sync: Sync,
        #[command(flatten)]
        scale: ScaleArgs,
        /// Seed of the population and of the sequence.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// One mode of `compare`, reporting JSON on stdout (internal).
    #[command(name = "__compare-one", hide = true)]
    CompareOne(CompareOne),
}

/// What `compare` runs in a child process: the modes of one engine family (ours,
/// `sequential` and `tls`, taking turns in one process; SQLite in another), so that no
/// family inherits the heap and file-system aftermath of the one measured before it.
#[derive(Args, Debug)]
struct CompareOne {
    #[arg(long, value_enum, value_delimiter = ',')]
    modes: Vec<Mode>,
    #[arg(long)]
    warehouses: u16,
    #[arg(long)]
    transactions: u64,
    #[arg(long, value_enum)]
    sync: Sync,
    #[command(flatten)]
    scale: ScaleArgs,
    #[arg(long)]
    seed: u64,
}

/// Population size; the defaults are the spec's.
#[derive(Args, Debug)]
struct ScaleArgs {
    /// Items (and stock rows per warehouse).
    #[arg(long, default_value_t = Scale::SPEC.items)]
    items: u32,
    /// Customers (and initial orders) per district.
    #[arg(long, default_value_t = Scale::SPEC.customers)]
    customers: u32,
}

impl ScaleArgs {
    fn scale(&self) -> Result<Scale> {
        let s = Scale {
            items: self.items,
            customers: self.customers,
        };
        s.validate().map_err(anyhow::Error::msg)?;
        Ok(s)
    }
}

/// `println!` that fails the command with an error, instead of panicking, when
/// stdout cannot be written (a full disk under `compare --json > out.json`: the
/// work is done, and the exit status says the output was lost).
macro_rules! out {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout().lock(), $($arg)*).context("writing to stdout")?
    };
}

/// A count that must be at least 1, said so when it is not (clap's range check
/// printed "0 is not in 1..18446744073709551615", which reads as if the largest value
/// were refused too).
fn at_least_one<T>(s: &str) -> std::result::Result<T, String>
where
    T: std::str::FromStr + PartialEq + From<u8>,
    T::Err: std::fmt::Display,
{
    let n: T = s.trim().parse().map_err(|e| format!("{e}"))?;
    if n == T::from(0) {
        return Err("must be at least 1".to_string());
    }
    Ok(n)
}

fn main() -> ExitCode {
    // Output piped into a reader that stops early (`tpcc run | head -1`) ends this
    // process as it ends other Unix tools, quietly, instead of a failed write
    // (Rust ignores SIGPIPE, so the write fails instead).
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any other thread exists; it only
    // restores the default action of one signal.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // Not `eprintln!`: with stderr unwritable too, that would panic.
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            if driver::interrupted() {
                ExitCode::from(130)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let show = std::io::stderr().is_terminal();
    match cli.command {
        Command::Load {
            db,
            warehouses,
            mode,
            scale,
            seed,
        } => {
            let scale = scale.scale()?;
            let mut engine = engine::create(&db, mode, Sync::Normal, warehouses, scale)?;
            let t0 = std::time::Instant::now();
            driver::load(engine.as_mut(), warehouses, scale, seed, show)
                .with_context(|| format!("loading {}", db.display()))?;
            out!(
                "loaded {warehouses} warehouse(s) into {} ({mode}) in {:.1} s",
                db.display(),
                t0.elapsed().as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            db,
            mode,
            transactions,
            duration,
            sync,
            ack_log,
            seed,
            terminals,
        } => {
            let limit = match (transactions, duration) {
                (Some(n), _) => Limit::Transactions(n),
                (None, Some(s)) => match Duration::try_from_secs_f64(s) {
                    Ok(d) if d.is_zero() => bail!("--duration must be more than 0 seconds"),
                    Ok(d) => Limit::Duration(d),
                    Err(_) if s.is_finite() && s > 0.0 => {
                        bail!("--duration {s:e} is more seconds than a run can last")
                    }
                    Err(_) => bail!("--duration must be a number of seconds, got {s}"),
                },
                (None, None) => bail!("give --transactions N or --duration SECS"),
            };
            let mut engines = engine::open_terminals(&db, mode, sync, terminals)?;
            let meta = engines[0]
                .meta()
                .with_context(|| format!("reading {}", db.display()))?;
            if let Some(ack) = &ack_log {
                driver::refuse_ack_log_on_database(ack, &db)?;
            }
            let mut ack = ack_log.as_deref().map(AckLog::open).transpose()?;
            #[cfg(unix)]
            driver::stop_runs_on_interrupt();
            let opts = RunOptions {
                limit,
                seed: seed.unwrap_or_else(|| driver::now_micros() as u64),
                progress: show,
            };
            let mut acknowledge = |w, d, o| match &mut ack {
                Some(log) => log.ack(w, d, o),
                None => Ok(()),
            };
            let report = if engines.len() == 1 {
                driver::run(engines[0].as_mut(), meta, &opts, &mut acknowledge)?
            } else {
                driver::run_terminals(&mut engines, meta, &opts, &mut acknowledge)?
            };
            out!(
                "{} transactions in {:.2} s ({:.0} tx/s) on {} terminal(s), {} New Orders \
                 rolled back, {} run again after losing a lock conflict; seed {} \
                 (--seed repeats the run)",
                report.count(),
                report.busy.as_secs_f64(),
                report.throughput(),
                engines.len(),
                report.rolled_back,
                report.retried,
                opts.seed
            );
            for kind in tpcc::workload::TxnKind::ALL {
                if let (Some(p50), Some(p95)) = (
                    report.percentile_us(kind, 50.0),
                    report.percentile_us(kind, 95.0),
                ) {
                    out!(
                        "  {:<13} {:>7}  p50 {:>8.1} us  p95 {:>8.1} us",
                        kind.name(),
                        report.count_of(kind),
                        p50,
                        p95
                    );
                }
            }
            if driver::interrupted() {
                out!("interrupted (Ctrl-C): the figures above are of the transactions that ran");
                return Ok(ExitCode::from(130));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Check {
            db,
            mode,
            expect_orders,
        } => check(&db, mode, expect_orders.as_deref()),
        Command::CompareOne(c) => {
            // Ctrl-C reaches the whole process group: stop at the next turn, and
            // remove the temporary databases (killed at once, they stayed).
            #[cfg(unix)]
            driver::stop_runs_on_interrupt();
            let results = driver::compare(
                &c.modes,
                c.warehouses,
                c.scale.scale()?,
                c.transactions,
                c.sync,
                c.seed,
                show,
            )?;
            for r in &results {
                out!("{}", r.to_json());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare {
            warehouses,
            transactions,
            modes,
            json,
            sync,
            scale,
            seed,
        } => {
            let mut modes = modes;
            // A mode named twice would report under the same JSON keys.
            let mut seen = Vec::new();
            modes.retain(|m| {
                let first = !seen.contains(m);
                seen.push(*m);
                first
            });
            if modes.is_empty() {
                bail!("--modes needs at least one mode");
            }
            let scale = scale.scale()?;
            // Our engine's modes take turns in one process; SQLite runs in its own.
            let (ours, sqlite): (Vec<Mode>, Vec<Mode>) =
                modes.iter().partition(|m| **m != Mode::Sqlite);
            // Ctrl-C: the children stop and clean up; this process waits for them.
            #[cfg(unix)]
            driver::stop_runs_on_interrupt();
            let mut results = Vec::with_capacity(modes.len());
            for group in [ours, sqlite] {
                if driver::interrupted() {
                    break;
                }
                if !group.is_empty() {
                    match compare_in_child(&group, warehouses, transactions, sync, scale, seed) {
                        // The child stopped for the same Ctrl-C: said once, below.
                        Err(_) if driver::interrupted() => break,
                        r => results.extend(r?),
                    }
                }
            }
            if driver::interrupted() {
                bail!("interrupted (Ctrl-C); the temporary databases are removed");
            }
            // In the order asked for.
            results.sort_by_key(|r| modes.iter().position(|m| *m == r.report.mode));
            if json {
                out!(
                    "{}",
                    serde_json::to_string_pretty(&driver::format_json(&results, warehouses, sync))?
                );
            } else {
                out!(
                    "{}",
                    driver::format_table(&results, warehouses, sync).trim_end_matches('\n')
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Runs `modes` of `compare` in a fresh process of this same program.
fn compare_in_child(
    modes: &[Mode],
    warehouses: u16,
    transactions: u64,
    sync: Sync,
    scale: Scale,
    seed: u64,
) -> Result<Vec<driver::CompareResult>> {
    let exe = std::env::current_exe().context("finding the tpcc executable")?;
    let out = std::process::Command::new(exe)
        .arg("__compare-one")
        .arg("--modes")
        .arg(modes.iter().map(|m| m.name()).collect::<Vec<_>>().join(","))
        .args(["--sync", sync.name()])
        .args(["--warehouses", &warehouses.to_string()])
        .args(["--transactions", &transactions.to_string()])
        .args(["--items", &scale.items.to_string()])
        .args(["--customers", &scale.customers.to_string()])
        .args(["--seed", &seed.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("starting a compare run")?;
    let names = modes
        .iter()
        .map(|m| m.name())
        .collect::<Vec<_>>()
        .join(", ");
    if !out.status.success() {
        // The child has printed its error on our stderr.
        bail!("the {names} run failed ({})", out.status);
    }
    let text = String::from_utf8(out.stdout).context("reading the compare run's result")?;
    let results = text
        .lines()
        .map(|line| {
            let v: serde_json::Value =
                serde_json::from_str(line).context("reading the compare run's result")?;
            driver::CompareResult::from_json(&v)
        })
        .collect::<Result<Vec<_>>>()?;
    if results.len() != modes.len() {
        bail!("the {names} run reported {} results", results.len());
    }
    Ok(results)
}

fn check(
    db: &std::path::Path,
    mode: Option<Mode>,
    expect: Option<&std::path::Path>,
) -> Result<ExitCode> {
    let expected = expect.map(driver::read_ack_log).transpose()?;
    let mut engine = engine::open(db, mode, Sync::Normal)?;
    let meta = engine
        .meta()
        .with_context(|| format!("reading {}", db.display()))?;
    let summary = engine.summary()?;
    let mut failed = false;
    match summary.check() {
        Ok(()) => out!(
            "consistency conditions 1-4 hold ({} warehouse(s), {} orders)",
            meta.warehouses,
            summary.total_orders()
        ),
        Err(problems) => {
            failed = true;
            eprint!("consistency check FAILED:\n{problems}");
        }
    }
    if let Some(expected) = expected {
        let mut missing = Vec::new();
        for &(w, d, o) in &expected {
            if !engine.order_exists(w, d, o)? {
                missing.push((w, d, o));
            }
        }
        if missing.is_empty() {
            out!("all {} expected orders are present", expected.len());
        } else {
            failed = true;
            eprintln!(
                "{} of {} expected orders are MISSING, for example:",
                missing.len(),
                expected.len()
            );
            for (w, d, o) in missing.iter().take(10) {
                eprintln!("  order (w {w}, d {d}, o_id {o})");
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
