//! Speedup of speculative loops over the plain loop, side by side with rayon, and the
//! cost of speculative accesses. Prints ratios measured in one run (the machines are
//! shared and noisy: each figure is the median of interleaved repetitions).
//!
//! `cargo bench -p tls-runtime --bench speedup` (`-- --quick` for a short run; `-- 10%`
//! or another word for only the loops whose name has it: `no-conflict`, `1us`, `chain`,
//! `short chains`,
//! `conflict 10%`, `delayed call`, `tiny`, `accumulation`, `access`);
//! `BENCH_THREADS=N` runs the loops (ours and rayon's) on N threads instead of 2.

use rayon::prelude::*;
use std::hint::black_box;
use std::time::{Duration, Instant};
use tls_runtime::{Control, Loop, LoopSite, Spec, SpecVec};

mod common;
use common::{bench_threads as threads, median, work};

/// Iterations of `work` that take about `target`.
fn calibrate(target: Duration) -> u64 {
    let mut iters = 1000u64;
    loop {
        let t = Instant::now();
        for s in 0..50 {
            work(iters, s);
        }
        let per = t.elapsed() / 50;
        if per >= Duration::from_micros(200) || iters > 1 << 30 {
            return (iters as f64 * target.as_secs_f64() / per.as_secs_f64()).max(1.0) as u64;
        }
        iters *= 4;
    }
}

/// Times each variant `reps` times, interleaved, and returns the medians.
///
/// Each run starts after a pause longer than the time idle workers spin (ours and
/// rayon's), so that no variant runs beside the spinning threads of the one before.
fn measure(reps: usize, variants: &mut [&mut dyn FnMut()]) -> Vec<Duration> {
    let mut times = vec![Vec::new(); variants.len()];
    for v in variants.iter_mut() {
        v(); // warm up
    }
    for _ in 0..reps {
        for (i, v) in variants.iter_mut().enumerate() {
            std::thread::sleep(Duration::from_millis(3));
            let t = Instant::now();
            v();
            times[i].push(t.elapsed());
        }
    }
    times.into_iter().map(median).collect()
}

fn no_conflict(
    label: &str,
    per_epoch: Duration,
    epochs: usize,
    reps: usize,
    pool: &rayon::ThreadPool,
) {
    let iters = calibrate(per_epoch);
    let out = SpecVec::from(vec![0u64; epochs]);
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let t = measure(
        reps,
        &mut [
            &mut || {
                for i in 0..epochs {
                    out.set(i, work(iters, i as u64));
                }
            },
            &mut || {
                Loop::new()
                    .threads(threads())
                    .site(site)
                    .run(0..epochs, |i| {
                        out.set(i, work(iters, i as u64));
                        Control::<()>::Continue
                    });
            },
            &mut || {
                pool.install(|| {
                    (0..epochs)
                        .into_par_iter()
                        .for_each(|i| out.set(i, work(iters, i as u64)))
                })
            },
        ],
    );
    let tls = t[0].as_secs_f64() / t[1].as_secs_f64();
    let ray = t[0].as_secs_f64() / t[2].as_secs_f64();
    println!(
        "no-conflict, {label:>5} per iteration, {epochs} iterations: tls {tls:.2}x  rayon {ray:.2}x  (tls/rayon {:.2})",
        tls / ray
    );
}

/// Many short runs of one loop, as a transaction's loop of a few items runs once per
/// transaction: `runs` runs of `items` iterations each, back to back. What counts here
/// is how evenly a run's few epochs fall on the threads, and what starting and ending
/// a run costs.
fn short_runs(
    per_item: Duration,
    items: usize,
    runs: usize,
    reps: usize,
    pool: &rayon::ThreadPool,
) {
    let iters = calibrate(per_item);
    let out = SpecVec::from(vec![0u64; items]);
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let t = measure(
        reps,
        &mut [
            &mut || {
                for r in 0..runs {
                    for i in 0..items {
                        out.set(i, work(iters, (r + i) as u64));
                    }
                }
            },
            &mut || {
                for r in 0..runs {
                    Loop::new()
                        .threads(threads())
                        .site(site)
                        .run(0..items, |i| {
                            out.set(i, work(iters, (r + i) as u64));
                            Control::<()>::Continue
                        });
                }
            },
            &mut || {
                pool.install(|| {
                    for r in 0..runs {
                        (0..items)
                            .into_par_iter()
                            .for_each(|i| out.set(i, work(iters, (r + i) as u64)))
                    }
                })
            },
        ],
    );
    let tls = t[0].as_secs_f64() / t[1].as_secs_f64();
    let ray = t[0].as_secs_f64() / t[2].as_secs_f64();
    println!(
        "short runs, {items} iterations of {:.1}us, {runs} runs: tls {tls:.2}x  rayon {ray:.2}x  (tls/rayon {:.2})",
        per_item.as_secs_f64() * 1e6,
        tls / ray
    );
}

/// Short runs of a few iterations of about `per_item`, each updating a row of a
/// small table picked by a hash, where the first runs of each repetition update one
/// row (a chain): the site learns to synchronize the load and keeps it synchronized
/// after the chain has gone. An outside probe's shape: with more threads than cores
/// (`BENCH_THREADS=4` on 2), the runs took 35-40 times as long as the plain loop
/// while idle threads spun past the ones the waits were for.
fn short_chains(per_item: Duration, runs: u64, reps: usize) {
    let iters = calibrate(per_item);
    let mix = |mut x: u64| {
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^ (x >> 27)
    };
    let len = |r: u64| 3 + (mix(r) % 10) as usize;
    let row = |r: u64, i: usize| {
        if r < 20 {
            0
        } else {
            (mix(r * 31 + i as u64) % 64) as usize
        }
    };
    let table = SpecVec::from(vec![1u64; 64]);
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let t = measure(
        reps,
        &mut [
            &mut || {
                for r in 0..runs {
                    for i in 0..len(r) {
                        let have = table.get(row(r, i));
                        table.set(row(r, i), work(iters, have ^ r));
                    }
                }
            },
            &mut || {
                for r in 0..runs {
                    Loop::new()
                        .threads(threads())
                        .site(site)
                        .run(0..len(r), |i| {
                            let have = table.get(row(r, i));
                            table.set(row(r, i), work(iters, have ^ r));
                            Control::<()>::Continue
                        });
                }
            },
        ],
    );
    println!(
        "short chains, 3-12 iterations of {:.1}us, {runs} runs, the first 20 a chain: tls {:.2}x",
        per_item.as_secs_f64() * 1e6,
        t[0].as_secs_f64() / t[1].as_secs_f64()
    );
}

fn chain(per_epoch: Duration, epochs: usize, reps: usize) {
    let iters = calibrate(per_epoch);
    let acc = Spec::new(1u64);
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let t = measure(
        reps,
        &mut [
            &mut || {
                for i in 0..epochs {
                    let a = acc.get();
                    acc.set(work(iters, a ^ i as u64));
                }
            },
            &mut || {
                Loop::new()
                    .threads(threads())
                    .site(site)
                    .run(0..epochs, |i| {
                        let a = acc.get();
                        acc.set(work(iters, a ^ i as u64));
                        Control::<()>::Continue
                    });
            },
        ],
    );
    println!(
        "full dependence chain, {:?} per iteration, {epochs} iterations: tls {:.3}x of the plain loop",
        per_epoch,
        t[0].as_secs_f64() / t[1].as_secs_f64()
    );
}

/// Independent iterations too short for speculation to pay (tracking a write costs
/// more than a second thread gains): each only writes a `SpecVec` element. The
/// adaptive policy measures the plain loop's cost and runs them in order, so what
/// shows is the in-order path's own cost. The plain loop writes the same `SpecVec`
/// (outside any loop, as plain code).
fn tiny_writes(epochs: usize, reps: usize) {
    let out = SpecVec::from(vec![0u64; epochs]);
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let value = |i: usize| (i as u64).wrapping_mul(0x9e37_79b9) >> 7;
    let t = measure(
        reps,
        &mut [
            &mut || {
                for i in 0..epochs {
                    out.set(i, value(i));
                }
            },
            &mut || {
                Loop::new()
                    .threads(threads())
                    .site(site)
                    .run(0..epochs, |i| {
                        out.set(i, value(i));
                        Control::<()>::Continue
                    });
            },
        ],
    );
    println!(
        "independent, each iteration only writing a SpecVec element, {epochs} iterations: \
         tls {:.2}x of the plain loop",
        t[0].as_secs_f64() / t[1].as_secs_f64()
    );
}

fn conflict_10pct(per_epoch: Duration, epochs: usize, reps: usize) {
    let iters = calibrate(per_epoch);
    let out = SpecVec::from(vec![0u64; epochs]);
    let shared = Spec::new(0u64);
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let body = |i: usize| {
        let s = if i.is_multiple_of(10) {
            shared.get()
        } else {
            0
        };
        let x = work(iters, i as u64 ^ s);
        out.set(i, x);
        if i.is_multiple_of(10) {
            shared.set(s.wrapping_add(x));
        }
    };
    println!(
        "10% of iterations conflict, {:?} per iteration: tls {:.2}x of the plain loop",
        per_epoch,
        plain_over_tls(reps, epochs, || site, body)
    );
}

/// Plain-loop time over speculative-loop time for `body` over `0..epochs`, the loop
/// run at the site `site()` gives each time.
fn plain_over_tls(
    reps: usize,
    epochs: usize,
    site: impl Fn() -> &'static LoopSite,
    body: impl Fn(usize) + Sync,
) -> f64 {
    let t = measure(
        reps,
        &mut [&mut || (0..epochs).for_each(&body), &mut || {
            Loop::new()
                .threads(threads())
                .site(site())
                .run(0..epochs, |i| {
                    body(i);
                    Control::<()>::Continue
                });
        }],
    );
    t[0].as_secs_f64() / t[1].as_secs_f64()
}

/// Every iteration reads shared data and ends with an `on_commit` call that changes
/// speculative data (a running count): a later iteration's read in the same epoch
/// waits for the call (`on_commit`'s contract), so automatic chunking must choose
/// between one iteration an epoch and chunks whose later iterations run as plain code.
fn delayed_calls(per_epoch: Duration, epochs: usize, reps: usize) {
    let iters = calibrate(per_epoch);
    let table = SpecVec::from((0..1024u64).collect::<Vec<_>>());
    let out = SpecVec::from(vec![0u64; epochs]);
    let count = std::sync::Arc::new(Spec::new(0u64));
    let body = |i: usize| {
        out.set(i, work(iters, table.get(i % 1024)));
        let count = count.clone();
        tls_runtime::on_commit(move || count.update(|c| *c += 1));
    };
    // A new site each time: the first run is the one that chose badly.
    let new_site = || -> &'static LoopSite { Box::leak(Box::new(LoopSite::new())) };
    println!(
        "an on_commit call changing shared data in every iteration, {:?} per iteration, a site's first run: tls {:.2}x of the plain loop",
        per_epoch,
        plain_over_tls(reps, epochs, new_site, body)
    );
}

/// Every iteration adds its result to a total outside the loop (an accumulation,
/// applied at commit) or writes it to a tracked vector, side by side: what an
/// accumulation costs against a tracked write.
fn accumulations(per_epoch: Duration, epochs: usize, reps: usize) {
    let iters = calibrate(per_epoch);
    let out = SpecVec::from(vec![0u64; epochs]);
    let site = || -> &'static LoopSite { Box::leak(Box::new(LoopSite::new())) };
    let (accumulating, writing) = (site(), site());
    let t = measure(
        reps,
        &mut [
            &mut || {
                let mut total = 0u64;
                for i in 0..epochs {
                    total += work(iters, i as u64) % 1000;
                }
                black_box(total);
            },
            &mut || {
                let mut total = 0u64;
                {
                    // SAFETY: the accumulator is dropped before `total` is read,
                    // after the loop.
                    let acc = unsafe { tls_runtime::Accumulator::new(&mut total) };
                    Loop::new()
                        .threads(threads())
                        .site(accumulating)
                        .run(0..epochs, |i| {
                            let w = work(iters, i as u64) % 1000;
                            acc.record(move |t| *t += w);
                            Control::<()>::Continue
                        });
                }
                black_box(total);
            },
            &mut || {
                Loop::new()
                    .threads(threads())
                    .site(writing)
                    .run(0..epochs, |i| {
                        out.set(i, work(iters, i as u64) % 1000);
                        Control::<()>::Continue
                    });
            },
        ],
    );
    println!(
        "one result per iteration, {:?} per iteration: accumulated (`total += x`) tls {:.2}x, \
         written to a SpecVec tls {:.2}x of the plain loop",
        per_epoch,
        t[0].as_secs_f64() / t[1].as_secs_f64(),
        t[0].as_secs_f64() / t[2].as_secs_f64()
    );
}

#[inline(never)]
fn read_cell(cell: &Spec<u64>, n: usize) -> u64 {
    let mut s = 0u64;
    for _ in 0..n {
        s = s.wrapping_add(black_box(cell).get());
    }
    s
}

#[inline(never)]
fn read_vec(v: &SpecVec<u64>) -> u64 {
    let mut s = 0u64;
    for i in 0..v.len() {
        s = s.wrapping_add(black_box(v).get(i));
    }
    s
}

/// Nanoseconds per access: outside any loop, and inside a speculative (not homefree)
/// epoch, timed from inside the epoch while the epoch before it is held back.
fn access_costs(n: usize) {
    let v = SpecVec::from(vec![1u64; n]);
    let cell = Spec::new(3u64);
    // Outside any loop: the fastest of five passes (a pass is a few milliseconds; the
    // fastest is the one the machine's other tenants disturbed least).
    let best = |f: &mut dyn FnMut() -> u64, accesses: usize| {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                black_box(f());
                t.elapsed().as_nanos() as f64 / accesses as f64
            })
            .fold(f64::INFINITY, f64::min)
    };
    let outside_read = best(&mut || read_cell(&cell, 10 * n), 10 * n);
    let outside_vec_read = best(&mut || read_vec(&v), n);
    let small = SpecVec::from(vec![1u64; 1000]);
    let outside_small_read = best(&mut || (0..100).map(|_| read_vec(&small)).sum(), 100 * 1000);
    let outside_write = best(
        &mut || {
            for i in 0..n {
                v.set(i, i as u64);
            }
            0
        },
        n,
    );

    let results = std::sync::Mutex::new(Vec::new());
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    // Six passes: the first meets every location (and this thread's allocator) cold;
    // the others are the steady state of a loop that runs again, of which the fastest
    // is reported (as outside the loop: the pass the machine disturbed least).
    for _ in 0..6 {
        let release = std::sync::atomic::AtomicBool::new(false);
        Loop::new()
            .threads(threads())
            .site(site)
            .run(0..2usize, |e| {
                if e == 0 {
                    // Hold epoch 1 speculative until it has measured.
                    while !release.load(std::sync::atomic::Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                    return Control::<()>::Continue;
                }
                if tls_runtime::is_speculative() {
                    let t = Instant::now();
                    let mut s = 0u64;
                    for i in 0..n {
                        s = s.wrapping_add(v.get(i));
                    }
                    let first = t.elapsed().as_nanos() as f64 / n as f64;
                    let t = Instant::now();
                    for i in 0..n {
                        s = s.wrapping_add(v.get(i));
                    }
                    let again = t.elapsed().as_nanos() as f64 / n as f64;
                    let t = Instant::now();
                    for _ in 0..n {
                        s = s.wrapping_add(cell.get());
                    }
                    let same = t.elapsed().as_nanos() as f64 / n as f64;
                    let t = Instant::now();
                    for i in 0..n {
                        v.set(i, s ^ i as u64);
                    }
                    let write = t.elapsed().as_nanos() as f64 / n as f64;
                    results.lock().unwrap().push((first, again, same, write));
                }
                release.store(true, std::sync::atomic::Ordering::Release);
                Control::Continue
            });
    }
    println!(
        "access cost outside any loop: Spec::get {outside_read:.1} ns, SpecVec::get {outside_small_read:.1} ns \
         (1000 elements; over {n}: {outside_vec_read:.1} ns), SpecVec::set {outside_write:.1} ns"
    );
    let results = results.into_inner().unwrap();
    let fastest = |pick: fn(&(f64, f64, f64, f64)) -> f64| {
        results[1..].iter().map(pick).fold(f64::INFINITY, f64::min)
    };
    match results.len() {
        6 => {
            let cold = results[0].3;
            let (first, again) = (fastest(|r| r.0), fastest(|r| r.1));
            let (same, write) = (fastest(|r| r.2), fastest(|r| r.3));
            println!(
                "access cost in a speculative epoch: read (first touch) {first:.1} ns, read again {again:.1} ns, \
             same cell {same:.1} ns, write (new version) {write:.1} ns (first ever: {cold:.1} ns)"
            )
        }
        _ => println!("access cost in a speculative epoch: (epoch 1 ran homefree; rerun)"),
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 3 } else { 9 };
    let scale = if quick { 4 } else { 1 };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads())
        .build()
        .unwrap();
    let helpers = match threads() - 1 {
        1 => "one worker".to_string(),
        n => format!("{n} workers"),
    };
    println!(
        "threads: {} (the caller and {helpers}); ratios are plain-loop time / variant time",
        threads()
    );
    // `-- WORD`: only the loops whose name contains WORD.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|w| name.contains(w.as_str()));
    if wanted("no-conflict 20us") {
        no_conflict("20us", Duration::from_micros(20), 2000 / scale, reps, &pool);
    }
    if wanted("no-conflict 5us") {
        no_conflict("5us", Duration::from_micros(5), 8000 / scale, reps, &pool);
    }
    if wanted("no-conflict 1us") {
        no_conflict("1us", Duration::from_micros(1), 20000 / scale, reps, &pool);
    }
    if wanted("short runs") {
        short_runs(Duration::from_nanos(2500), 10, 2000 / scale, reps, &pool);
    }
    if wanted("short chains") {
        short_chains(Duration::from_micros(4), 600 / scale as u64, reps);
    }
    if wanted("chain 1us") {
        chain(Duration::from_micros(1), 20000 / scale, reps);
    }
    if wanted("chain 20ns") {
        // Iterations far shorter than a speculative epoch's own cost: the adaptive
        // policy must find that in-order execution is faster.
        chain(Duration::from_nanos(20), 50000 / scale, reps);
    }
    if wanted("chain 20us") {
        chain(Duration::from_micros(20), 1000 / scale, reps);
    }
    if wanted("conflict 10%") {
        conflict_10pct(Duration::from_micros(5), 8000 / scale, reps);
    }
    if wanted("delayed call 50ns") {
        delayed_calls(Duration::from_nanos(50), 50000 / scale, reps);
    }
    if wanted("delayed call 2us") {
        delayed_calls(Duration::from_micros(2), 10000 / scale, reps);
    }
    if wanted("tiny writes") {
        tiny_writes(200_000 / scale, reps);
    }
    if wanted("accumulation 300ns") {
        accumulations(Duration::from_nanos(300), 40000 / scale, reps);
    }
    if wanted("accumulation 2us") {
        accumulations(Duration::from_micros(2), 10000 / scale, reps);
    }
    if wanted("access costs") {
        access_costs(100_000);
    }
}
