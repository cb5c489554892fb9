//! What the runtime's benches share: the unit of work, its calibration, the thread
//! count. Each bench uses part of it.
#![allow(dead_code)]

use std::hint::black_box;
use std::time::{Duration, Instant};

/// `iters` steps of a dependent multiply-add chain (about 1 ns each). Never inlined,
/// so that the plain and the speculative loops run the same machine code for it.
#[inline(never)]
pub(crate) fn work(iters: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    for i in 0..iters {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    black_box(x)
}

/// Steps of [`work`] that take about `target`, from the fastest of 20 timings (the one
/// the machine's other tenants disturbed least); `env`, when set, gives the count
/// instead (a parent hands its count to the child processes it starts, so that all
/// run the same loops).
pub(crate) fn iters_for(target: Duration, env: &str) -> u64 {
    if let Some(n) = std::env::var(env).ok().and_then(|s| s.parse().ok()) {
        return n;
    }
    let n = 100_000u64;
    let best = (0..20)
        .map(|s| {
            let t = Instant::now();
            work(n, s);
            t.elapsed()
        })
        .min()
        .unwrap();
    (n as f64 * target.as_secs_f64() / best.as_secs_f64()).max(1.0) as u64
}

/// Threads per loop: `BENCH_THREADS`, else 2.
pub(crate) fn bench_threads() -> usize {
    std::env::var("BENCH_THREADS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(2)
}

/// The median of `v`.
pub(crate) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The tail of a log that a loop body appends to through a method, in this file, not
/// the body's: `(entries, order-dependent checksum)`. The advice bench's loop whose
/// dependence is in code the loop calls.
pub(crate) fn append(tail: &mut (u64, u64), x: u64) {
    tail.1 = (tail.1 ^ x).rotate_left(7).wrapping_add(tail.0);
    tail.0 += 1;
}

/// A log as a speculative loop shares it: [`append`] on a speculative value.
pub(crate) struct Log(pub(crate) tls_runtime::Spec<(u64, u64)>);

impl Log {
    pub(crate) fn record(&self, x: u64) {
        self.0.update(|tail| append(tail, x));
    }
}
