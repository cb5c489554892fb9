//! Settings read once from the environment: when the process makes its first
//! speculative container outside a loop (which starts the workers) or runs its first
//! loop, whichever comes first. A variable set later (`std::env::set_var`) is not seen.
//!
//! - `TLS_THREADS`: threads per loop, the caller included (default: all cores; at most
//!   [`MAX_THREADS`]).
//! - `TLS_MODE`: `parallel` (default), `sequential` (every loop runs in order on the
//!   calling thread, with no speculation: the baseline to compare against), or
//!   `profile` (in order, recording each epoch to predict the speedup on 1 to 64
//!   cores; see `profile/`).
//! - `TLS_REPORT=stderr`: print each loop's report to stderr when it ends, and a summary
//!   per loop name when the process exits; `TLS_REPORT=<path>.json`: write the reports,
//!   aggregated per loop name, to that file as JSON when the process exits.
//! - `TLS_TRACE=<path>.json`: write a timeline of every epoch attempt in Chrome trace
//!   event format (open it in Perfetto or chrome://tracing) when the process exits; a
//!   loop run in order (one thread, `TLS_MODE=sequential` or `profile`) shows as one
//!   in-order span per run.
//! - `TLS_SPIN_US`: how long idle workers spin, looking for work, before they park
//!   (default 1000 microseconds).
//! - `TLS_MOVE_WORKERS`: `on` (default) or `off`. On Linux the runtime moves a
//!   worker that has just been started or woken, and has not run yet, off the CPU
//!   of the thread that started or woke it, by narrowing the worker's CPU set for
//!   a moment (see `workers.rs`). It leaves alone a worker whose set is not the one
//!   it started with (a program that pins its threads itself), but a program that
//!   changes its threads' CPU sets while loops start can, rarely, see a change
//!   made in that moment undone; `off` never touches a CPU set.
//! - `TLS_ZOMBIE_WARN_MS`: how long a loop waits on a violated epoch that reaches no
//!   tracked access, checkpoint or poll before it says so on stderr (default 2000
//!   milliseconds; see `LoopReport::stuck_zombies`).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How loops run, from `TLS_MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Speculative epochs on several threads.
    Parallel,
    /// In order on the calling thread.
    Sequential,
    /// In order on the calling thread, recording every epoch's reads and writes to
    /// predict the speedup on more cores (`LoopReport::predicted_speedup`).
    Profile,
}

/// Where loop reports go, from `TLS_REPORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReportSink {
    None,
    Stderr,
    Json(std::path::PathBuf),
}

#[derive(Debug)]
pub(crate) struct Env {
    /// `TLS_THREADS`, when set (else [`default_threads`] is the core count).
    pub(crate) threads: Option<usize>,
    pub(crate) mode: Mode,
    pub(crate) report: ReportSink,
    pub(crate) trace: Option<std::path::PathBuf>,
    pub(crate) spin_after: Duration,
    pub(crate) move_workers: bool,
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) zombie_warn: Duration,
}

/// The settings, read from the environment on first use.
pub(crate) fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(read_env)
}

fn read_env() -> Env {
    // The core count is not read here: `available_parallelism` reads the
    // process's cgroup files, 0.15-0.2 ms on the 2-core development machine, and
    // this runs on the thread that makes the first speculative container, right
    // before its first loop. The first worker reads it instead ([`cores`]).
    let threads = match std::env::var("TLS_THREADS") {
        Ok(s) => match s.trim().parse::<usize>() {
            Ok(n) if n > MAX_THREADS => {
                say!(
                    "tls-runtime: TLS_THREADS={n} is more than a loop may use; using {MAX_THREADS}"
                );
                Some(MAX_THREADS)
            }
            Ok(n) if n >= 1 => Some(n),
            _ => {
                say!("tls-runtime: TLS_THREADS={s:?} is not a positive integer; using all cores");
                None
            }
        },
        Err(_) => None,
    };
    // Trimmed and in any case, as `TLS_THREADS` is trimmed: `TLS_MODE=" profile"`
    // from a script, or `PROFILE`, mean what they say.
    let mode_var = std::env::var("TLS_MODE").map(|m| m.trim().to_ascii_lowercase());
    let mode = match mode_var.as_deref() {
        Err(_) | Ok("parallel") | Ok("") => Mode::Parallel,
        Ok("sequential") => Mode::Sequential,
        Ok("profile") => Mode::Profile,
        Ok(other) => {
            say!(
                "tls-runtime: unknown TLS_MODE={other:?} (expected `parallel`, \
                 `sequential` or `profile`); using parallel"
            );
            Mode::Parallel
        }
    };
    let report = match std::env::var("TLS_REPORT") {
        Err(_) => ReportSink::None,
        Ok(s) if s.is_empty() => ReportSink::None,
        Ok(s) if s == "stderr" => ReportSink::Stderr,
        Ok(s) => {
            if !s.ends_with(".json") {
                say!(
                    "tls-runtime: TLS_REPORT={s:?} is neither `stderr` nor a `.json` path; \
                     writing JSON there anyway"
                );
            }
            ReportSink::Json(s.into())
        }
    };
    if let ReportSink::Json(path) = &report {
        check_output("TLS_REPORT", path, "the reports");
    }
    let trace = std::env::var_os("TLS_TRACE")
        .filter(|s| !s.is_empty())
        .map(std::path::PathBuf::from);
    if let Some(path) = &trace {
        check_output("TLS_TRACE", path, "the timeline");
    }
    if let Some(path) = &trace
        && path.extension().is_none_or(|e| e != "json")
    {
        say!(
            "tls-runtime: TLS_TRACE={:?} is not a `.json` path (the timeline is a file, \
             not a stream); writing it there anyway",
            path.display().to_string()
        );
    }
    let spin_after = Duration::from_micros(whole_number("TLS_SPIN_US", 1000, "microseconds"));
    let move_workers = match std::env::var("TLS_MOVE_WORKERS").as_deref() {
        Err(_) | Ok("") | Ok("on") => true,
        Ok("off") => false,
        Ok(other) => {
            say!("tls-runtime: TLS_MOVE_WORKERS={other:?} is neither `on` nor `off`; using on");
            true
        }
    };
    let zombie_warn =
        Duration::from_millis(whole_number("TLS_ZOMBIE_WARN_MS", 2000, "milliseconds"));
    Env {
        threads,
        mode,
        report,
        trace,
        spin_after,
        move_workers,
        zombie_warn,
    }
}

/// Says at once, rather than at exit after the whole run, when the file `var`
/// names cannot be written: its directory is missing, or it is a directory.
fn check_output(var: &str, path: &std::path::Path, what: &str) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let problem = if path.is_dir() {
        Some("it is a directory".to_string())
    } else if !dir.is_dir() {
        Some(format!("{} is not a directory", dir.display()))
    } else {
        None
    };
    if let Some(problem) = problem {
        say!(
            "tls-runtime: {var}={:?}: {problem}; {what} will not be written there",
            path.display().to_string()
        );
    }
}

/// The whole number the environment variable `name` holds (trimmed), else `default`;
/// a value that is not one says so and counts as `default`.
fn whole_number(name: &str, default: u64, unit: &str) -> u64 {
    match std::env::var(name) {
        Err(_) => default,
        Ok(s) => s.trim().parse::<u64>().unwrap_or_else(|_| {
            say!("tls-runtime: {name}={s:?} is not a whole number of {unit}; using {default}");
            default
        }),
    }
}

/// The mode loops run in (`TLS_MODE`).
pub fn mode() -> Mode {
    env().mode
}

/// The most threads one loop runs on, the caller included: `TLS_THREADS` and
/// `Loop::threads` above it are cut to it (a count the ring of epochs in flight and
/// the worker pool could not hold panicked inside the runtime).
pub const MAX_THREADS: usize = 1024;

/// The default number of threads per loop, the caller included: `TLS_THREADS`, else
/// the number of cores the process may use.
pub fn default_threads() -> usize {
    env().threads.unwrap_or_else(cores)
}

/// [`cores`], once read (0 before).
static CORES: AtomicUsize = AtomicUsize::new(0);

/// [`cores`] if it has been read, without reading it (0 if not).
#[inline]
pub(crate) fn cores_if_read() -> usize {
    CORES.load(Ordering::Relaxed)
}

/// The number of cores the process may use (its CPU set, and its cgroup's CPU
/// quota), read once and kept (read again while a worker's set may have been
/// narrowed for a moment as it read it, `workers::read_unnudged`).
///
/// Not a `OnceLock`: the pool's first worker reads it in the background, and a
/// thread that needs it meanwhile reads it too rather than waiting for that worker
/// (a child forked while the worker was inside a `OnceLock`'s initializer waited
/// for ever: the worker does not exist in the child).
pub(crate) fn cores() -> usize {
    match CORES.load(Ordering::Relaxed) {
        0 => {
            let (n, kept) = crate::workers::read_unnudged(|| {
                std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS))
            });
            if kept {
                CORES.store(n, Ordering::Relaxed);
            }
            n
        }
        n => n,
    }
}
