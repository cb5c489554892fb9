//! Validates the report's advice: for loops with one dependence each, the fix that
//! profile mode advises and the speedup it predicts on 2 cores once the fix is
//! applied, against the speedup measured with the fix applied, on 2 threads, in one
//! run. The profile runs in a child process (the mode is read once per process).
//!
//! `cargo bench -p tls-runtime --bench advice` (`ADVICE_DEBUG=1` also prints each fixed
//! loop's last report).

use std::hint::black_box;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tls_runtime::{Control, Loop, LoopSite, Spec, SpecVec, Step, on_commit, tls_loop};

mod common;
use common::{Log, append, median, work};

/// Steps of `work` in about 10 us (the parent's count, handed to the profiling child).
fn iters() -> u64 {
    static ITERS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ITERS.get_or_init(|| common::iters_for(Duration::from_micros(10), "ADVICE_ITERS"))
}

const EPOCHS: usize = 2000;

/// The loops as a user first writes them: each has one dependence the report names.
fn as_written(which: &str) {
    let out = SpecVec::from(vec![0u64; EPOCHS]);
    let shared = Spec::new(0u64);
    let lp = Loop::new().name(which.to_string());
    match which {
        // Reads, after its work, what the previous iteration stores last.
        "late load" => lp.run(0..EPOCHS, |i| {
            let x = work(iters(), i as u64);
            let before = shared.get();
            out.set(i, before ^ x);
            shared.set(x ^ i as u64);
            Control::<()>::Continue
        }),
        // Adds its result to a running total, last.
        "running total" => lp.run(0..EPOCHS, |i| {
            let x = work(iters(), i as u64);
            shared.update(|t| *t = t.wrapping_add(x));
            Control::<()>::Continue
        }),
        // Appends its result to a log, last, through the log's method (another file).
        "log append" => {
            let log = Log(Spec::new((0, 0)));
            lp.run(0..EPOCHS, |i| {
                log.record(work(iters(), i as u64));
                Control::<()>::Continue
            })
        }
        other => panic!("unknown loop {other}"),
    };
}

#[derive(Clone)]
enum Seg {
    Head(usize),
    Tail(usize, u64),
}

/// "late load" with the advised checkpoint before the load.
fn late_load_fixed(threads: usize, site: &'static LoopSite) -> u64 {
    let out = SpecVec::from(vec![0u64; EPOCHS]);
    let shared = Spec::new(0u64);
    let body = |s: Seg| match s {
        Seg::Head(i) => Step::Checkpoint(Seg::Tail(i, work(iters(), i as u64))),
        Seg::Tail(i, x) => {
            let before = shared.get();
            out.set(i, before ^ x);
            shared.set(x ^ i as u64);
            Step::Done(Control::<()>::Continue)
        }
    };
    if threads == 0 {
        for i in 0..EPOCHS {
            let mut s = Seg::Head(i);
            while let Step::Checkpoint(next) = body(s) {
                s = next;
            }
        }
    } else {
        Loop::new()
            .threads(threads)
            .site(site)
            .run_segments(0..EPOCHS, Seg::Head, body);
    }
    shared.get()
}

/// "log append" with the advised delay to commit (`threads == 0`: the plain loop).
fn log_append_fixed(threads: usize, site: &'static LoopSite) -> (u64, u64) {
    if threads == 0 {
        let mut tail = (0, 0);
        for i in 0..EPOCHS {
            append(&mut tail, work(iters(), i as u64));
        }
        return tail;
    }
    let log = Arc::new(Mutex::new((0u64, 0u64)));
    Loop::new().threads(threads).site(site).run(0..EPOCHS, |i| {
        let x = work(iters(), i as u64);
        let log = Arc::clone(&log);
        on_commit(move || append(&mut log.lock().unwrap(), x));
        Control::<()>::Continue
    });
    *log.lock().unwrap()
}

/// "running total" with the advised accumulation.
#[tls_loop(name = "running total, accumulated")]
fn running_total_fixed(n: usize) -> u64 {
    let mut total = 0u64;
    for i in 0..n {
        let x = work(iters(), i as u64);
        total += x;
    }
    total
}

fn running_total_plain(n: usize) -> u64 {
    let mut total = 0u64;
    for i in 0..n {
        total = total.wrapping_add(work(iters(), i as u64));
    }
    total
}

/// Plain and fixed run times, interleaved; returns plain / fixed at the medians.
fn measure(mut plain: impl FnMut(), mut fixed: impl FnMut()) -> f64 {
    fixed(); // warm up, and let the adaptive policy settle
    let (mut p, mut f) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        plain();
        p.push(t.elapsed());
        let t = Instant::now();
        fixed();
        f.push(t.elapsed());
    }
    median(p).as_secs_f64() / median(f).as_secs_f64()
}

const LOOPS: [&str; 3] = ["late load", "running total", "log append"];

fn main() {
    if std::env::var_os("ADVICE_CHILD").is_some() {
        for which in LOOPS {
            as_written(which);
        }
        return;
    }
    let report = std::env::temp_dir().join(format!("tls-advice-{}.json", std::process::id()));
    let status = Command::new(std::env::current_exe().unwrap())
        .env("ADVICE_CHILD", "1")
        .env("ADVICE_ITERS", iters().to_string())
        .env("TLS_MODE", "profile")
        .env("TLS_REPORT", &report)
        .status()
        .unwrap();
    assert!(status.success());
    let profiled: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    std::fs::remove_file(&report).ok();
    let advice = |name: &str| {
        profiled
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
            .map(|l| l["dependences"][0]["advice"].clone())
            .unwrap_or_default()
    };
    let threads = 2;
    println!(
        "{:<19} {:<18} {:>10} {:>16} {:>16} {:>8}",
        "loop (2000 x ~10us)", "advice", "now (2)", "after, predicted", "after, measured", "error"
    );
    for which in LOOPS {
        let a = advice(which);
        let kind = a["kind"].as_str().unwrap_or("none");
        let predicted = a["predicted_speedup_2"].as_f64().unwrap_or(f64::NAN);
        let now = profiled
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == which)
            .map_or(f64::NAN, |l| {
                l["predicted_speedup"]["2"].as_f64().unwrap_or(f64::NAN)
            });
        let measured = match which {
            "late load" => {
                let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
                measure(
                    || {
                        black_box(late_load_fixed(0, site));
                    },
                    || {
                        black_box(late_load_fixed(threads, site));
                    },
                )
            }
            "log append" => {
                let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
                assert_eq!(log_append_fixed(0, site), log_append_fixed(threads, site));
                measure(
                    || {
                        black_box(log_append_fixed(0, site));
                    },
                    || {
                        black_box(log_append_fixed(threads, site));
                    },
                )
            }
            _ => measure(
                || {
                    black_box(running_total_plain(EPOCHS));
                },
                || {
                    black_box(running_total_fixed(EPOCHS));
                },
            ),
        };
        if std::env::var_os("ADVICE_DEBUG").is_some() {
            eprintln!(
                "{}",
                tls_runtime::last_report()
                    .map(|r| r.to_string())
                    .unwrap_or_default()
            );
        }
        println!(
            "{which:<19} {kind:<18} {now:>9.2}x {predicted:>15.2}x {measured:>15.2}x {:>7.1}%",
            100.0 * (predicted - measured) / measured
        );
    }
}
