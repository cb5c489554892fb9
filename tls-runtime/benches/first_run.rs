//! The first run of a new loop site against its later runs: an independent loop of
//! [`EPOCHS`] iterations of about [`ITERATION`] each (a few milliseconds of work), the
//! shape of a batch job that runs its loop once.
//!
//! A new site can meet the process in these states, each measured on its own:
//!
//! - **Fresh process** (a child: this binary re-executed with `FIRST_RUN_CHILD` set),
//!   its speculative data made before the plain loop is timed, as a program makes its
//!   input before it loops over it. The worker threads do not exist before: the pool
//!   starts them when the program makes its first speculative container outside a
//!   loop, or at the first speculative loop if that comes first (`workers.rs`). So
//!   what starting them costs the program is in these figures, wherever it falls:
//!   here, mostly before the first run. Half of these children give the loop a
//!   `LoopSite` of its own (`Box::leak`), half use the default site of `Loop::new()`
//!   (looked up by source location and name).
//! - **Fresh process, data made right before the first loop** (`let v =
//!   SpecVec::from(..)` and the loop, timed together, in the first run as in the
//!   later ones): the workers start with the first run, and what starting them
//!   costs the program's thread is part of it (one thread start, and moving it off
//!   this thread's CPU: 0.1-0.2 ms on the 2-core development machine).
//! - **The same, `start_workers()` first**: the second case in a process that calls
//!   `tls_runtime::start_workers()` as it starts, before the plain loop.
//! - **Warm process**: in this process, after the workers have started (and parked,
//!   as they do after any pause), each repetition makes a new `LoopSite`. This
//!   isolates the site's starting policy from the process start.
//!
//! And, for scale, rayon in the shape of the second case: a fresh process whose
//! first `par_iter_mut` over data made right before it starts rayon's global pool
//! (`RAYON_NUM_THREADS` set to the same thread count), its first run against its
//! later ones. What a process's first thread start costs, any pool pays.
//!
//! Each speculative run, the first as the later ones, follows a plain run and a pause
//! longer than idle workers spin (`TLS_SPIN_US`, 1 ms by default), so the later runs
//! also wake parked workers: the first differs from them only in what is new. Per
//! new site it prints `first run / later runs` (against the later runs' median) and
//! what the reports say was held back (epochs run in order, and why); per case, the
//! median and the largest of those ratios, and the first runs against all later
//! runs at the median and the 75th percentile. On a shared machine one preempted
//! thread stalls a run by a scheduler tick (4 ms here), a later run as well as a
//! first one: the medians say what is systematic, the largest ratio what one unlucky
//! run can see.
//!
//! `cargo bench -p tls-runtime --bench first_run` (`-- --quick` for a short run);
//! `BENCH_THREADS=N` runs the loops on N threads instead of 2.

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};
use tls_runtime::{Control, Loop, LoopSite, SpecVec};

mod common;
use common::{bench_threads as threads, median, work};

/// Steps of `work` in [`ITERATION`], measured once by the parent and handed to the
/// children so that all run the same loop.
fn calibrate() -> u64 {
    common::iters_for(ITERATION, "FIRST_RUN_ITERS")
}

/// Iterations of the loop.
const EPOCHS: usize = 800;
/// Work per iteration.
const ITERATION: Duration = Duration::from_nanos(3600);
/// Runs after the first, per new site.
const LATER: usize = 7;
/// Longer than idle workers spin before they park.
const PAUSE: Duration = Duration::from_millis(3);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One new site's figures.
struct Sample {
    plain: Duration,
    first: Duration,
    /// Each later run.
    later: Vec<Duration>,
    /// Epochs the first run ran in order, and how many of them for want of a worker.
    first_in_order: u64,
    first_no_workers: u64,
    first_epochs: u64,
    /// Epochs the later runs ran in order, all together.
    later_in_order: u64,
}

impl Sample {
    /// The later runs' median.
    fn later(&self) -> Duration {
        median(self.later.clone())
    }

    fn ratio(&self) -> f64 {
        self.first.as_secs_f64() / self.later().as_secs_f64()
    }

    /// The figures as one line of numbers, for a child to hand to the parent.
    fn to_line(&self) -> String {
        let mut n = vec![
            self.plain.as_nanos() as u64,
            self.first.as_nanos() as u64,
            self.first_in_order,
            self.first_no_workers,
            self.first_epochs,
            self.later_in_order,
        ];
        n.extend(self.later.iter().map(|d| d.as_nanos() as u64));
        n.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
    }

    fn from_line(text: &str) -> Sample {
        let n: Vec<u64> = text
            .split_whitespace()
            .map(|w| w.parse().expect("a child's figures"))
            .collect();
        assert_eq!(n.len(), 6 + LATER, "a child printed {text:?}");
        let ns = Duration::from_nanos;
        Sample {
            plain: ns(n[0]),
            first: ns(n[1]),
            first_in_order: n[2],
            first_no_workers: n[3],
            first_epochs: n[4],
            later_in_order: n[5],
            later: n[6..].iter().map(|&x| ns(x)).collect(),
        }
    }

    fn print(&self, label: &str) {
        let mut held = String::new();
        if self.first_in_order > 0 {
            held += &format!(
                "; first run held back {} of {} epochs ({} for want of a worker)",
                self.first_in_order, self.first_epochs, self.first_no_workers
            );
        }
        if self.later_in_order > 0 {
            held += &format!("; later runs held back {}", self.later_in_order);
        }
        println!(
            "  {label}first run / later runs: {:.2} (first {:.2} ms, later {:.2} ms, plain {:.2} ms){held}",
            self.ratio(),
            ms(self.first),
            ms(self.later()),
            ms(self.plain)
        );
    }
}

/// The speculative loop, on `site` or (with `None`) on the default site of its
/// source location.
fn run_loop(out: &SpecVec<u64>, iters: u64, site: Option<&'static LoopSite>) {
    let lp = Loop::new().threads(threads());
    let lp = match site {
        Some(s) => lp.site(s),
        None => lp,
    };
    lp.run(0..EPOCHS, |i| {
        out.set(i, work(iters, i as u64));
        Control::<()>::Continue
    });
}

fn timed(f: &mut dyn FnMut()) -> Duration {
    std::thread::sleep(PAUSE);
    let t = Instant::now();
    f();
    t.elapsed()
}

/// rayon's run of the loop over `out`, the same work per item (grains of 8 items,
/// about the runtime's chunks here, so that neither pays for finer splitting).
fn run_rayon(out: &mut [u64], iters: u64) {
    use rayon::prelude::*;
    out.par_iter_mut()
        .enumerate()
        .with_min_len(8)
        .for_each(|(i, x)| *x = work(iters, i as u64));
    black_box(out);
}

/// rayon's first run in this process against its later runs, each timed with its
/// data made in it, after a plain run and a pause, as [`sample`] times ours.
fn sample_rayon(iters: u64) -> Sample {
    let mut plain_out = vec![0u64; EPOCHS];
    let mut plain_loop = || {
        for (i, x) in plain_out.iter_mut().enumerate() {
            *x = work(iters, i as u64);
        }
        black_box(&plain_out);
    };
    timed(&mut plain_loop);
    let mut plain = vec![timed(&mut plain_loop)];
    let mut rayon_run = || run_rayon(&mut vec![0u64; EPOCHS], iters);
    let first = timed(&mut rayon_run);
    let mut later = Vec::new();
    for _ in 0..LATER {
        plain.push(timed(&mut plain_loop));
        later.push(timed(&mut rayon_run));
    }
    Sample {
        plain: median(plain),
        first,
        later,
        first_in_order: 0,
        first_no_workers: 0,
        first_epochs: 0,
        later_in_order: 0,
    }
}

/// One new site: the plain loop, the site's first run, its later runs, each
/// speculative run after a plain one. `data_first`: the speculative data is made
/// before the plain loop runs (else right before the first speculative loop, in
/// its timing).
fn sample(iters: u64, site: Option<&'static LoopSite>, data_first: bool) -> Sample {
    let mut plain_out = vec![0u64; EPOCHS];
    let mut plain_loop = || {
        for (i, x) in plain_out.iter_mut().enumerate() {
            *x = work(iters, i as u64);
        }
        black_box(&plain_out);
    };
    let early = data_first.then(|| SpecVec::from(vec![0u64; EPOCHS]));
    timed(&mut plain_loop); // warms the code and the data
    let mut plain = vec![timed(&mut plain_loop)];
    let mut made = early;
    // Without data made before, the first run makes it, as `let v =
    // SpecVec::from(..)` right before a loop does (0.06-0.08 ms here: its page
    // faults), and so does each later run.
    let first = timed(&mut || {
        let out = made.get_or_insert_with(|| SpecVec::from(vec![0u64; EPOCHS]));
        run_loop(out, iters, site)
    });
    let out = made.expect("made by now");
    let report = tls_runtime::last_report().expect("the loop left a report");
    let (mut later, mut later_in_order) = (Vec::new(), 0);
    for _ in 0..LATER {
        plain.push(timed(&mut plain_loop));
        later.push(timed(&mut || {
            if data_first {
                run_loop(&out, iters, site)
            } else {
                // Made in the timing as for the first run, so that the two differ
                // only in what is new (the first container starting the workers).
                run_loop(&SpecVec::from(vec![0u64; EPOCHS]), iters, site)
            }
        }));
        later_in_order += tls_runtime::last_report().map_or(0, |r| r.in_order_epochs);
    }
    Sample {
        plain: median(plain),
        first,
        later,
        first_in_order: report.in_order_epochs,
        first_no_workers: report.in_order_no_workers,
        first_epochs: report.epochs,
        later_in_order,
    }
}

/// The value at fraction `q` of the sorted `v`.
fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Per site, the ratio of its first run to its later runs' median; over all sites,
/// the first runs against every later run, at the median and at the 75th
/// percentile (a single first run meets the machine's noise as a single later run
/// does, not as a median of seven).
fn summary(samples: &[Sample]) {
    let ratios: Vec<f64> = samples.iter().map(Sample::ratio).collect();
    let largest = ratios.iter().copied().fold(0.0, f64::max);
    let first: Vec<f64> = samples.iter().map(|s| ms(s.first)).collect();
    let later: Vec<f64> = samples
        .iter()
        .flat_map(|s| s.later.iter().map(|&d| ms(d)))
        .collect();
    let plain = quantile(samples.iter().map(|s| ms(s.plain)).collect(), 0.5);
    let at = |q| (quantile(first.clone(), q), quantile(later.clone(), q));
    let ((f50, l50), (f75, l75)) = (at(0.5), at(0.75));
    println!(
        "  => first run / later runs: per site median {:.2}, largest {largest:.2}; all runs: \
         median {f50:.2} / {l50:.2} ms = {:.2}, 75th percentile {f75:.2} / {l75:.2} ms = {:.2}; \
         plain {plain:.2} ms (speedup at the median: first {:.2}x, later {:.2}x)",
        quantile(ratios, 0.5),
        f50 / l50,
        f75 / l75,
        plain / f50,
        plain / l50
    );
}

/// The kinds of child process: (name, own site, data made before the plain loop);
/// the last is rayon's.
const KINDS: [(&str, bool, bool); 5] = [
    ("site", true, true),
    ("default", false, true),
    ("cold", true, false),
    ("early", true, false),
    ("rayon", false, false),
];

/// In a child process: one sample of `kind`, printed as one line for the parent.
fn child(kind: &str) {
    if kind == "rayon" {
        println!("{}", sample_rayon(calibrate()).to_line());
        return;
    }
    let &(_, own, data_first) = KINDS.iter().find(|k| k.0 == kind).expect("a kind");
    if kind == "early" {
        tls_runtime::start_workers();
    }
    let site = own.then(|| &*Box::leak(Box::new(LoopSite::new())));
    println!("{}", sample(calibrate(), site, data_first).to_line());
}

fn from_child(iters: u64, kind: &str) -> Sample {
    let out = Command::new(std::env::current_exe().unwrap())
        .env("FIRST_RUN_CHILD", kind)
        .env("FIRST_RUN_ITERS", iters.to_string())
        .env("RAYON_NUM_THREADS", threads().to_string())
        .output()
        .expect("run the bench as a child");
    Sample::from_line(&String::from_utf8_lossy(&out.stdout))
}

fn main() {
    if let Ok(kind) = std::env::var("FIRST_RUN_CHILD") {
        child(&kind);
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 3 } else { 10 };
    let iters = calibrate();
    println!(
        "threads: {}; {EPOCHS} independent iterations of about {ITERATION:?}; one line per new site",
        threads()
    );
    // The kinds interleaved, so that a noisy stretch of the machine hits all alike.
    let mut by_kind: Vec<Vec<Sample>> = KINDS.iter().map(|_| Vec::new()).collect();
    println!("fresh process:");
    for _ in 0..reps {
        for (k, samples) in KINDS.iter().zip(&mut by_kind) {
            let s = from_child(iters, k.0);
            s.print(&format!("[{:>7}] ", k.0));
            samples.push(s);
        }
    }
    let titles = [
        "a LoopSite of its own, data made before the plain loop",
        "the default site of Loop::new(), data made before the plain loop",
        "a LoopSite of its own, data made right before the first loop (the workers start with it)",
        "the same, with tls_runtime::start_workers() first thing in the process",
        "rayon, the same, its global pool started by its first loop",
    ];
    for (title, samples) in titles.iter().zip(&by_kind) {
        println!(" {title}:");
        summary(samples);
    }
    println!("warm process (workers started and parked), a new LoopSite each time:");
    // Start the workers with a loop of another site.
    run_loop(&SpecVec::from(vec![0u64; EPOCHS]), iters, None);
    let warm: Vec<Sample> = (0..reps)
        .map(|_| {
            let s = sample(iters, Some(Box::leak(Box::new(LoopSite::new()))), true);
            s.print("");
            s
        })
        .collect();
    summary(&warm);
}
