//! `start_workers()` starts the pool's workers ahead of any container or loop, once.
//!
//! Its own test binary, with one test: it counts the process's threads by name, and
//! no other test may start workers first.

use std::time::{Duration, Instant};
use tls_runtime::{Control, Loop, Mode, SpecVec};

mod common;
use common::threads_named;

#[test]
fn start_workers_starts_the_default_count_once() {
    if !cfg!(target_os = "linux") || tls_runtime::mode() != Mode::Parallel {
        return;
    }
    assert_eq!(threads_named("tls-worker"), 0, "workers before any call");
    let workers = tls_runtime::default_threads() - 1;
    tls_runtime::start_workers();
    let t = Instant::now();
    while threads_named("tls-worker") != workers {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "never: {workers} workers started ({} now)",
            threads_named("tls-worker")
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Again, and a container and a loop at the default count: no more.
    tls_runtime::start_workers();
    let data = SpecVec::from(vec![0u64; 64]);
    Loop::new().run(0..64, |i| {
        data.set(i, i as u64);
        Control::<()>::Continue
    });
    assert_eq!(data.get(63), 63);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(threads_named("tls-worker"), workers);
}
