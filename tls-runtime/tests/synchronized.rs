//! Synchronized loads: a load that violates most epochs makes the site's epochs wait
//! there until homefree, and the report names it; results stay sequential.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use tls_runtime::{Control, Loop, LoopSite, Spec, SpecVec, inject_violations, last_report};

/// Violation injection is process-wide: the tests of this file take turns.
static TURN: Mutex<()> = Mutex::new(());

fn spin(n: u64) -> u64 {
    let mut x = n | 1;
    for i in 0..n * 60 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// Each iteration reads the running value first and writes it back last: every epoch
/// but the oldest reads too early. The read is learned as synchronized, after which
/// epochs wait there instead of rolling back.
#[test]
fn a_load_every_epoch_reads_too_early_is_synchronized_and_reported() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let mut want = 1u64;
    for i in 0..300u64 {
        want = want.wrapping_mul(31).wrapping_add(spin(i % 5 + 1) % 1000);
    }
    let mut seen = None;
    let mut dense_runs = 0;
    for run in 0..40 {
        let running = Spec::new(1u64);
        let load_line = AtomicU32::new(0);
        Loop::new()
            .threads(2)
            .chunk(1)
            .site(site)
            .run(0..300u64, |i| {
                // The load that violates, and its line.
                let (r, line) = (running.get(), line!());
                load_line.store(line, Ordering::Relaxed);
                let x = spin(i % 5 + 1) % 1000;
                running.set(r.wrapping_mul(31).wrapping_add(x));
                Control::<()>::Continue
            });
        assert_eq!(running.into_inner(), want, "run {run}");
        let report = last_report().expect("a report");
        // A run in which most epochs were violated must have learned the load.
        dense_runs += u64::from(2 * report.violations >= report.epochs);
        if let Some(s) = report.synchronized.first() {
            assert_eq!(
                s.load.0.line(),
                load_line.load(Ordering::Relaxed),
                "{report}"
            );
            assert!(s.waits > 0);
            // Each epoch reads what the one before stored: it waits until homefree.
            assert_eq!(s.behind, 1, "{report}");
            assert!(report.to_string().contains("synchronized load"), "{report}");
            assert!(report.to_string().contains("until homefree"), "{report}");
            seen = Some(report);
            break;
        }
    }
    // Speculation needs a second thread: on a machine too busy to give one, the loop
    // runs in order (or probes now and then), and too few violations come close
    // together to learn from. A run in which most epochs were violated has them.
    assert!(
        seen.is_some() || dense_runs == 0,
        "{dense_runs} runs with most epochs violated, and no load synchronized"
    );
}

/// Loads synchronized, waits given up and re-run, violations injected at random
/// accesses: the result is the sequential one at every thread count.
#[test]
fn synchronized_loads_keep_the_sequential_result() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    for threads in [2, 4, 8] {
        let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
        for round in 0..6 {
            if round >= 3 {
                inject_violations(100_000);
            }
            let total = Spec::new(0u64);
            let marks = SpecVec::from(vec![0u64; 200]);
            Loop::new()
                .threads(threads)
                .chunk(1)
                .site(site)
                .run(0..200usize, |i| {
                    let x = spin(i as u64 % 3 + 1) % 100;
                    marks.set(i, x + total.get());
                    total.update(|t| *t += x);
                    Control::<()>::Continue
                });
            inject_violations(0);
            let mut t = 0u64;
            let mut want = vec![0u64; 200];
            for (i, w) in want.iter_mut().enumerate() {
                let x = spin(i as u64 % 3 + 1) % 100;
                *w = x + t;
                t += x;
            }
            assert_eq!(total.into_inner(), t, "{threads} threads, round {round}");
            assert_eq!(marks.into_vec(), want, "{threads} threads, round {round}");
        }
    }
}

/// A wait at a synchronized load gives up after 2 ms (the epoch re-runs once
/// homefree) and the report counts it: here the oldest iteration sleeps 10 ms while
/// the next one waits at the load.
#[test]
fn a_wait_that_gives_up_is_counted() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let mut waited_runs = 0;
    for _ in 0..20 {
        let running = Spec::new(1u64);
        // Learn the load: every epoch reads it first and writes it last.
        for _ in 0..3 {
            Loop::new()
                .threads(2)
                .chunk(1)
                .site(site)
                .run(0..200u64, |i| {
                    let r = running.get();
                    running.set(r.wrapping_add(spin(i % 3 + 1) % 7));
                    Control::<()>::Continue
                });
        }
        Loop::new()
            .threads(2)
            .chunk(1)
            .site(site)
            .run(0..8u64, |i| {
                if i == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                let r = running.get();
                running.set(r.wrapping_add(spin(i % 3 + 1) % 7));
                Control::<()>::Continue
            });
        let report = last_report().expect("a report");
        if let Some(s) = report.synchronized.first() {
            // Waits of no length are made by epochs already homefree (a run the
            // caller ran alone): only a long one says a worker waited.
            if s.waited >= std::time::Duration::from_millis(2) {
                waited_runs += 1;
            }
            if s.gave_up > 0 {
                assert!(
                    report.to_string().contains("gave up after 2 ms"),
                    "{report}"
                );
                return;
            }
        }
    }
    // A second thread is needed to wait at all: a run with waits but no give-up
    // means the wait did not stop at 2 ms while the oldest epoch slept 10.
    assert_eq!(waited_runs, 0, "waits of 2 ms and more, but none gave up");
}

/// Reads the running value first in each iteration and, if `write`, writes it back
/// last: with `write`, every epoch but the oldest reads too early.
#[tls_runtime::tls_loop(threads = 2, chunk = 1, site = site)]
fn running_value(site: &'static LoopSite, running: &Spec<u64>, write: bool) {
    for i in 0..300u64 {
        let r = running.get();
        let x = spin(i % 5 + 1) % 1000;
        if write {
            running.set(r.wrapping_mul(31).wrapping_add(x));
        }
    }
}

/// Synchronized waits of `running_value(site, .., write)`, up to `runs` runs, stopping
/// at the first run that waited.
fn waits_on(site: &'static LoopSite, write: bool, runs: usize) -> u64 {
    for _ in 0..runs {
        running_value(site, &Spec::new(1), write);
        let report = last_report().expect("a report");
        let waits: u64 = report.synchronized.iter().map(|s| s.waits).sum();
        if waits > 0 {
            return waits;
        }
    }
    0
}

/// `#[tls_loop(site = ...)]`: what one caller's runs teach the loop (here, a load to
/// synchronize) stays on that caller's site; another site's runs, free of the
/// dependence, never wait.
#[test]
fn a_site_per_caller_keeps_what_each_learned_apart() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let learner: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let other: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    // The learner's site learns the load (on a machine too busy to run a second
    // thread it may not: then there is nothing to keep apart).
    if waits_on(learner, true, 40) == 0 {
        return;
    }
    // Without the dependence, the learner's site still waits at the load (when a
    // second thread runs), and the other site never does: with one site for both
    // callers it would wait as the learner's does.
    let learned = waits_on(learner, false, 5);
    assert_eq!(waits_on(other, false, 5), 0, "the other site waited");
    eprintln!("the learner's site waited {learned} times without the dependence");
}

/// A histogram counted in a `SpecVec`: neighbouring epochs often bump the same
/// bucket, so the load is synchronized, after which few epochs are violated there.
/// Those that waited count with the violations, and the advice is an accumulation
/// (it said "a true dependence ... no annotation removes it", counting only the few
/// violations left once the epochs waited).
#[test]
fn a_synchronized_histogram_is_advised_an_accumulation() {
    use tls_runtime::AdviceKind;
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let mut checked = 0;
    for run in 0..30 {
        let counts = SpecVec::from(vec![0u64; 4]);
        let line = AtomicU32::new(0);
        Loop::new()
            .threads(2)
            .chunk(2)
            .site(site)
            .run(0..400u64, |i| {
                let bucket = (spin(i % 4 + 2) % 4) as usize;
                let (_, l) = (counts.update(bucket, |c| *c += 1), line!());
                line.store(l, Ordering::Relaxed);
                Control::<()>::Continue
            });
        assert_eq!(counts.into_vec().iter().sum::<u64>(), 400, "run {run}");
        let report = last_report().expect("a report");
        let at = line.load(Ordering::Relaxed);
        let waits = report
            .synchronized
            .iter()
            .find(|s| s.load.0.line() == at)
            .map_or(0, |s| s.waits);
        let speculative = report.epochs - report.in_order_epochs;
        // The runs where waits make the difference: violations alone under fewer
        // than one speculative epoch in five, with the waits under more.
        if let Some(d) = report.dependences.iter().find(|d| d.load.0.line() == at)
            && d.count * 5 < speculative
            && (d.count + waits) * 5 >= speculative
        {
            let kind = d.advice.as_ref().map(|a| a.kind);
            assert_eq!(kind, Some(AdviceKind::Accumulate), "run {run}: {report}");
            checked += 1;
        }
    }
    // On a machine too busy to give the loop a second thread, nothing speculates and
    // nothing is learned: the check above then had nothing to look at.
    eprintln!("{checked} runs with the histogram's load synchronized and few violations");
}

/// A load after an `on_commit` call of the same epoch waits until homefree for the
/// call: the report lists those waits apart, not as synchronized loads (which say
/// that a load violated most epochs: here nothing depends on anything).
#[test]
fn a_wait_after_an_on_commit_call_is_not_a_synchronized_load() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let config = Spec::new(3u64);
    let out = SpecVec::from(vec![0u64; 400]);
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut waited = 0;
    let load_line = AtomicU32::new(0);
    for _ in 0..20 {
        Loop::new().threads(2).chunk(1).run(0..400usize, |i| {
            let x = spin(3);
            tls_runtime::on_commit(|| {
                CALLS.fetch_add(1, Ordering::Relaxed);
            });
            // Waits until homefree: the call may write what it reads.
            let (c, line) = (config.get(), line!());
            load_line.store(line, Ordering::Relaxed);
            out.set(i, c * i as u64 + x % 2);
            Control::<()>::Continue
        });
        let report = last_report().expect("a report");
        assert!(report.synchronized.is_empty(), "{report}");
        assert_eq!(report.violations, 0, "{report}");
        if let Some(w) = report.waits_after_on_commit.first() {
            assert_eq!(w.load.0.line(), load_line.load(Ordering::Relaxed));
            let text = report.to_string();
            assert!(text.contains("load after an on_commit call"), "{text}");
            assert!(!text.contains("synchronized load"), "{text}");
            waited += w.waits;
        }
    }
    assert_eq!(CALLS.load(Ordering::Relaxed), 20 * 400);
    // Epochs that were not homefree when they reached the load waited there: on two
    // threads, nearly every other one.
    assert!(
        waited > 0,
        "no epoch waited after its on_commit call in 20 runs"
    );
}

/// Injected violations are reported as such, with no advice: their store is the
/// runtime's own line, and telling the user to escape it would send them to fix a
/// dependence their loop does not have.
#[test]
fn injected_violations_get_no_advice() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let v = SpecVec::from(vec![0u64; 600]);
    let mut seen = false;
    for _ in 0..20 {
        inject_violations(100_000);
        Loop::new().threads(2).chunk(1).run(0..600usize, |i| {
            v.set(i, spin(2) % 7 + i as u64);
            Control::<()>::Continue
        });
        inject_violations(0);
        let report = last_report().expect("a report");
        for d in &report.dependences {
            assert!(d.store.0.file().ends_with("inject.rs"), "{report}");
            assert!(d.advice.is_none(), "{report}");
            let text = report.to_string();
            assert!(text.contains("injected by inject_violations"), "{text}");
            seen = true;
        }
        if seen {
            break;
        }
    }
    assert!(seen, "no injected violation in 20 runs");
    let want: Vec<u64> = (0..600).map(|i| spin(2) % 7 + i as u64).collect();
    assert_eq!(v.into_vec(), want);
}
