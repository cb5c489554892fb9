//! Reports and traces that outlive a loop: aggregated per loop name and written when
//! the process exits (`TLS_REPORT=stderr` prints a summary, `TLS_REPORT=<path>.json`
//! writes JSON), and the epoch timeline of `TLS_TRACE`.

use crate::advice::Advice;
use crate::config::{ReportSink, env};
use crate::json::json_str;
use crate::report::{LoopReport, RunMode, SourceLocation, SyncedLoad, keep_last};
use crate::sync::lock_std;
use crate::trace;
use std::fmt::Write as _;
use std::sync::{Mutex, Once};
use std::time::Duration;

/// The totals of every run of one loop (by name).
#[derive(Debug, Clone)]
struct Totals {
    name: String,
    location: SourceLocation,
    mode: RunMode,
    threads: usize,
    count: u64,
    epochs: u64,
    items: u64,
    violations: u64,
    rollbacks: u64,
    squashed: u64,
    in_order: u64,
    in_order_no_workers: u64,
    in_order_measuring: u64,
    /// Runs on several threads in which only the caller ran epochs.
    runs_alone: u64,
    stuck_zombies: u64,
    wall: Duration,
    busy: Duration,
    wasted: Duration,
    unwinding: Duration,
    unwinds: u64,
    wait: Duration,
    idle: Duration,
    deps: Vec<DepTotals>,
    /// Waits at synchronized loads: load, count, time.
    synced: Vec<SyncedLoad>,
    /// Waits at loads after an `on_commit` call: load, count, time.
    call_waits: Vec<SyncedLoad>,
    /// Profile mode: sequential time, and predicted time per core count.
    profiled: Option<(f64, Vec<(usize, f64)>)>,
}

#[derive(Debug, Clone)]
struct DepTotals {
    store: SourceLocation,
    load: SourceLocation,
    count: u64,
    wasted: Duration,
    segment: u32,
    load_access: u32,
    advice: Option<Advice>,
}

static TOTALS: Mutex<Vec<Totals>> = Mutex::new(Vec::new());

fn ensure_exit_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        unsafe extern "C" {
            fn atexit(f: extern "C" fn()) -> core::ffi::c_int;
        }
        // SAFETY: `atexit` is the C library's; `at_exit` is a plain `extern "C" fn`
        // that catches every panic, so nothing unwinds into C.
        unsafe {
            atexit(at_exit);
        }
    });
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(flush);
}

/// A loop's report is out: sends it where `TLS_REPORT` says, and keeps it as this
/// thread's last report ([`crate::last_report`]).
pub(crate) fn set_last(report: LoopReport) {
    match &env().report {
        ReportSink::None => {}
        ReportSink::Stderr => {
            say_raw!("{report}");
            record(&report);
        }
        ReportSink::Json(_) => record(&report),
    }
    keep_last(report);
}

/// Adds one loop run to the totals.
fn record(r: &LoopReport) {
    ensure_exit_hook();
    let mut all = lock_std(&TOTALS);
    let t = match all.iter_mut().position(|t| t.name == r.name) {
        Some(i) => &mut all[i],
        None => {
            all.push(Totals {
                name: r.name.clone(),
                location: r.location,
                mode: r.mode,
                threads: r.threads,
                count: 0,
                epochs: 0,
                items: 0,
                violations: 0,
                rollbacks: 0,
                squashed: 0,
                in_order: 0,
                in_order_no_workers: 0,
                in_order_measuring: 0,
                runs_alone: 0,
                stuck_zombies: 0,
                wall: Duration::ZERO,
                busy: Duration::ZERO,
                wasted: Duration::ZERO,
                unwinding: Duration::ZERO,
                unwinds: 0,
                wait: Duration::ZERO,
                idle: Duration::ZERO,
                deps: Vec::new(),
                synced: Vec::new(),
                call_waits: Vec::new(),
                profiled: None,
            });
            all.last_mut().expect("just pushed")
        }
    };
    t.count += 1;
    if let Some(p) = &r.predicted_speedup {
        let seq = r.busy.as_nanos() as f64;
        let (total, per) = t
            .profiled
            .get_or_insert_with(|| (0.0, p.iter().map(|&(c, _)| (c, 0.0)).collect()));
        *total += seq;
        for ((_, time), &(_, s)) in per.iter_mut().zip(p) {
            *time += seq / s.max(1e-9);
        }
    }
    t.epochs += r.epochs;
    t.items += r.items;
    t.violations += r.violations;
    t.rollbacks += r.rollbacks;
    t.squashed += r.squashed;
    t.in_order += r.in_order_epochs;
    t.in_order_no_workers += r.in_order_no_workers;
    t.in_order_measuring += r.in_order_measuring;
    t.runs_alone += u64::from(r.mode == RunMode::Parallel && r.threads > 1 && r.threads_ran == 1);
    t.stuck_zombies += r.stuck_zombies;
    t.wall += r.wall;
    t.busy += r.busy;
    t.wasted += r.wasted;
    t.unwinding += r.unwinding;
    t.unwinds += r.unwinds;
    t.wait += r.wait;
    t.idle += r.idle;
    for d in &r.dependences {
        match t
            .deps
            .iter_mut()
            .find(|x| x.store == d.store && x.load == d.load)
        {
            Some(x) => {
                let n = x.count + d.count;
                x.load_access = ((u64::from(x.load_access) * x.count
                    + u64::from(d.load_access) * d.count)
                    / n.max(1)) as u32;
                x.count = n;
                x.wasted += d.wasted;
                x.segment = x.segment.min(d.segment);
                if d.advice.is_some() {
                    x.advice.clone_from(&d.advice);
                }
            }
            None => t.deps.push(DepTotals {
                store: d.store,
                load: d.load,
                count: d.count,
                wasted: d.wasted,
                segment: d.segment,
                load_access: d.load_access,
                advice: d.advice.clone(),
            }),
        }
    }
    t.deps
        .sort_by(|a, b| b.wasted.cmp(&a.wasted).then(b.count.cmp(&a.count)));
    for (totals, waits) in [
        (&mut t.synced, &r.synchronized),
        (&mut t.call_waits, &r.waits_after_on_commit),
    ] {
        for s in waits {
            match totals.iter_mut().find(|x| x.load == s.load) {
                Some(x) => x.add(s),
                None => totals.push(*s),
            }
        }
        totals.sort_by_key(|s| std::cmp::Reverse(s.waited));
    }
}

/// Makes sure reports and traces are written when the process exits.
pub(crate) fn ensure_written_at_exit() {
    ensure_exit_hook();
}

/// Writes what the settings ask for; called at exit.
pub(crate) fn flush() {
    if let Some(path) = &env().trace {
        trace::flush_thread();
        if let Err(e) = std::fs::write(path, trace::to_json()) {
            say!(
                "tls-runtime: cannot write the trace to {}: {e}",
                path.display()
            );
        }
    }
    let all = lock_std(&TOTALS).clone();
    match &env().report {
        ReportSink::None => {}
        ReportSink::Stderr => say_raw!("{}", summary(&all)),
        ReportSink::Json(path) => {
            if let Err(e) = std::fs::write(path, json(&all)) {
                say!(
                    "tls-runtime: cannot write the loop report to {}: {e}",
                    path.display()
                );
            }
        }
    }
}

fn summary(all: &[Totals]) -> String {
    let mut out = String::from("tls-runtime: loop summary\n");
    for t in all {
        let _ = writeln!(
            out,
            "  {} ({}): {} runs, {} iterations, {} violations, {:.3?} wasted of {:.3?} busy",
            crate::report::printable(&t.name),
            t.location,
            t.count,
            t.items,
            t.violations,
            t.wasted,
            t.busy
        );
        if t.in_order > 0 {
            let _ = writeln!(
                out,
                "    held back: {} epochs in order because speculation did not pay, {} because \
                 no worker thread was free{}",
                t.in_order - t.in_order_no_workers - t.in_order_measuring,
                t.in_order_no_workers,
                crate::report::measuring_note(t.in_order_measuring)
            );
        }
        if t.runs_alone > 0 {
            let _ = writeln!(
                out,
                "    {} of its runs ran on the calling thread alone: no worker joined in time \
                 (starting, waking, or busy with other loops)",
                t.runs_alone
            );
        }
        if t.stuck_zombies > 0 {
            let _ = writeln!(
                out,
                "    stuck zombies: {} violated epochs reached no tracked access, checkpoint or \
                 poll for a long while",
                t.stuck_zombies
            );
        }
        for (what, waits) in [
            ("synchronized load", &t.synced),
            ("load after an on_commit call", &t.call_waits),
        ] {
            for s in waits {
                let _ = writeln!(
                    out,
                    "    {what} {}: {} epochs waited there {} ({:.3?}){}",
                    s.load,
                    s.waits,
                    s.until(),
                    s.waited,
                    crate::report::gave_up(s.gave_up)
                );
            }
        }
        if let Some(d) = t.deps.first() {
            let predicted = t.mode.violations_are();
            let _ = writeln!(
                out,
                "    top dependence: store {} -> load {} ({predicted}{} violations, {:.3?})",
                d.store, d.load, d.count, d.wasted
            );
            if let Some(a) = &d.advice {
                // A loop run many times: the advice's prediction is of one run, the
                // latest that showed the dependence, not of the loop's runs together
                // (read beside the loop's own, it looked as if the fix slowed it).
                let of_what = if t.count > 1 {
                    " for the latest run that showed it"
                } else {
                    ""
                };
                let _ = write!(out, "    advice ({}): ", a.kind.name());
                let _ = a.write_predicted(&mut out, of_what);
                out.push('\n');
            } else if crate::inject::is_injected(d.store) {
                let _ = writeln!(out, "    {}", crate::inject::INJECTED);
            }
        }
    }
    out
}

/// A dependence's advice as JSON (`null` without one).
fn advice_json(a: Option<&Advice>) -> String {
    match a {
        None => "null".to_string(),
        Some(a) => format!(
            "{{\"kind\": {}, \"text\": {}, \"predicted_speedup_2\": {}}}",
            json_str(a.kind.name()),
            json_str(&a.text),
            a.predicted_speedup_2
                .map_or("null".to_string(), |s| format!("{s:.3}"))
        ),
    }
}

fn json(all: &[Totals]) -> String {
    let ns = |d: Duration| d.as_nanos();
    let mut out = String::from("[\n");
    for (i, t) in all.iter().enumerate() {
        let _ = write!(
            out,
            "  {{\"name\": {}, \"location\": {}, \"mode\": \"{}\", \"threads\": {}, \
             \"count\": {}, \"epochs\": {}, \"items\": {}, \
             \"violations\": {}, \"rollbacks\": {}, \"squashed\": {}, \"in_order\": {}, \
             \"in_order_no_workers\": {}, \"in_order_measuring\": {}, \"runs_alone\": {}, \
             \"stuck_zombies\": {}, \"wall_ns\": {}, \
             \"busy_ns\": {}, \"wasted_ns\": {}, \"unwinding_ns\": {}, \"unwinds\": {}, \
             \"wait_ns\": {}, \"idle_ns\": {}, \"dependences\": [",
            json_str(&t.name),
            json_str(&t.location.to_string()),
            match t.mode {
                RunMode::Parallel => "parallel",
                RunMode::Sequential => "sequential",
                RunMode::Profile => "profile",
            },
            t.threads,
            t.count,
            t.epochs,
            t.items,
            t.violations,
            t.rollbacks,
            t.squashed,
            t.in_order,
            t.in_order_no_workers,
            t.in_order_measuring,
            t.runs_alone,
            t.stuck_zombies,
            ns(t.wall),
            ns(t.busy),
            ns(t.wasted),
            ns(t.unwinding),
            t.unwinds,
            ns(t.wait),
            ns(t.idle)
        );
        for (j, d) in t.deps.iter().enumerate() {
            let _ = write!(
                out,
                "{}{{\"store\": {}, \"load\": {}, \"count\": {}, \"wasted_ns\": {}, \
                 \"segment\": {}, \"load_access\": {}, \"advice\": {}}}",
                if j > 0 { ", " } else { "" },
                json_str(&d.store.to_string()),
                json_str(&d.load.to_string()),
                d.count,
                ns(d.wasted),
                d.segment,
                d.load_access,
                advice_json(d.advice.as_ref())
            );
        }
        out.push(']');
        for (key, waits) in [
            ("synchronized", &t.synced),
            ("waits_after_on_commit", &t.call_waits),
        ] {
            let _ = write!(out, ", \"{key}\": [");
            for (j, s) in waits.iter().enumerate() {
                let _ = write!(
                    out,
                    "{}{{\"load\": {}, \"waits\": {}, \"wait_ns\": {}, \"gave_up\": {}, \
                     \"behind\": {}}}",
                    if j > 0 { ", " } else { "" },
                    json_str(&s.load.to_string()),
                    s.waits,
                    ns(s.waited),
                    s.gave_up,
                    s.behind
                );
            }
            out.push(']');
        }
        if let Some((total, per)) = &t.profiled {
            out.push_str(", \"predicted_speedup\": {");
            for (k, (cores, time)) in per.iter().enumerate() {
                let s = if *time > 0.0 { total / time } else { 1.0 };
                let _ = write!(out, "{}\"{cores}\": {s:.3}", if k > 0 { ", " } else { "" });
            }
            out.push('}');
        }
        out.push('}');
        out.push_str(if i + 1 < all.len() { ",\n" } else { "\n" });
    }
    out.push_str("]\n");
    out
}
