//! Which threads the runtime starts, and when: the workers in the background as the
//! program makes its first speculative container (the thread that makes it starts
//! one, which starts the others), and the zombie watchdog only once an epoch has been
//! violated (a process whose loops never are has no use for it, and starting it cost
//! the first loop of every process a thread start).
//!
//! Its own test binary, with one test: it counts the process's threads by name.

use std::time::{Duration, Instant};
use tls_runtime::{Control, Loop, Mode, Spec, SpecVec};

mod common;
use common::threads_named;

/// Waits (at most 30 s) until `f` holds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(30), "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn workers_start_with_the_first_container_and_the_watchdog_after_a_violation() {
    if !cfg!(target_os = "linux") || tls_runtime::mode() != Mode::Parallel {
        return;
    }
    let workers = tls_runtime::default_threads() - 1;
    let data = SpecVec::from(vec![0u64; 256]);
    eventually("the default thread count's workers started", || {
        threads_named("tls-worker") == workers
    });

    // Independent loops, at the default thread count and at two threads more
    // (the caller is one of a loop's threads): two more workers start for the
    // second (in the background, as its first epochs run), and no watchdog.
    for threads in [None, Some(workers + 3)] {
        let lp = threads.map_or_else(Loop::new, |n| Loop::new().threads(n));
        lp.run(0..256, |i| {
            data.set(i, i as u64 * 3);
            Control::<()>::Continue
        });
        assert_eq!(data.get(255), 255 * 3);
    }
    eventually("two more workers started", || {
        threads_named("tls-worker") == workers + 2
    });
    assert_eq!(
        threads_named("tls-zombie"),
        0,
        "the watchdog started in a process whose loops were never violated"
    );

    // Violations (injected, so that every run has some): the watchdog starts.
    let total = Spec::new(0u64);
    tls_runtime::inject_violations(200_000);
    for _ in 0..20 {
        total.set(0);
        Loop::new().threads(2).run(0..256u64, |i| {
            data.set(i as usize, i);
            total.update(|t| *t += i);
            Control::<()>::Continue
        });
        assert_eq!(total.get(), 255 * 256 / 2);
        if tls_runtime::last_report().is_some_and(|r| r.rollbacks > 0) {
            break;
        }
    }
    tls_runtime::inject_violations(0);
    if tls_runtime::last_report().is_some_and(|r| r.rollbacks > 0) {
        eventually("the watchdog started after a violation", || {
            threads_named("tls-zombie") == 1
        });
    }
    // More loops start nothing more.
    Loop::new().run(0..256, |i| {
        data.set(i, 0);
        Control::<()>::Continue
    });
    assert_eq!(threads_named("tls-worker"), workers + 2);
    assert!(threads_named("tls-zombie") <= 1);
}
