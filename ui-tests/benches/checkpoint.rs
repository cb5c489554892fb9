//! Sub-thread checkpoints: epochs with a long private phase and a short conflicting
//! tail (every epoch adds to one `Spec` counter at its end). Without a checkpoint a
//! violation in the tail re-runs the whole epoch; with `checkpoint!()` before the tail
//! it re-runs only the tail.
//!
//! `cargo bench -p ui-tests --bench checkpoint` prints the times and the ratios of one
//! run (best of several repetitions each).

use std::hint::black_box;
use std::time::{Duration, Instant};
use tls_runtime::{Spec, checkpoint, last_report, tls_loop};

const EPOCHS: u64 = 4000;
const REPS: usize = 15;

/// The private phase: tens of microseconds of work touching no shared data. Its length
/// varies from epoch to epoch (as transactions do), so a later epoch often reaches the
/// shared tail before an earlier one has written it: a violation.
fn private(x: u64) -> u64 {
    let mut h = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let rounds = 4_000 + (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) % 36_000;
    for _ in 0..rounds {
        h = h
            .wrapping_mul(0x5851_f42d_4c95_7f2d)
            .wrapping_add(1_442_695_040_888_963_407)
            ^ (h >> 31);
    }
    h % 1000
}

fn plain(counter: &Spec<u64>) {
    for i in 0..EPOCHS {
        let v = private(black_box(i));
        let c = counter.get();
        counter.set(c + v);
    }
}

#[tls_loop(threads = 2, name = "bench.without_checkpoint")]
fn without_checkpoint(counter: &Spec<u64>) {
    for i in 0..EPOCHS {
        let v = private(black_box(i));
        let c = counter.get();
        counter.set(c + v);
    }
}

#[tls_loop(threads = 2, name = "bench.with_checkpoint")]
fn with_checkpoint(counter: &Spec<u64>) {
    for i in 0..EPOCHS {
        let v = private(black_box(i));
        checkpoint!();
        let c = counter.get();
        counter.set(c + v);
    }
}

/// `without_checkpoint` written against the runtime directly, to show what the macro
/// adds (nothing measurable).
fn runtime_api(counter: &Spec<u64>) {
    tls_runtime::Loop::new()
        .name("bench.runtime_api")
        .threads(2)
        .run(0..EPOCHS, |i| {
            let v = private(black_box(i));
            let c = counter.get();
            counter.set(c + v);
            tls_runtime::Control::<()>::Continue
        });
}

/// `with_checkpoint` written against the runtime directly.
fn runtime_api_checkpoint(counter: &Spec<u64>) {
    tls_runtime::Loop::new()
        .name("bench.runtime_api_checkpoint")
        .threads(2)
        .run_segments(
            0..EPOCHS,
            |i| (i, None),
            |(i, v): (u64, Option<u64>)| match v {
                None => tls_runtime::Step::Checkpoint((i, Some(private(black_box(i))))),
                Some(v) => {
                    let c = counter.get();
                    counter.set(c + v);
                    tls_runtime::Step::Done(tls_runtime::Control::<()>::Continue)
                }
            },
        );
}

fn time(f: fn(&Spec<u64>), expected: u64) -> Duration {
    let counter = Spec::new(0);
    let t0 = Instant::now();
    f(&counter);
    let t = t0.elapsed();
    assert_eq!(
        counter.into_inner(),
        expected,
        "speculation changed the result"
    );
    t
}

/// The machine's load average and cores, for the reader of the ratios: they mean
/// something only when the two threads get two cores.
fn load() -> String {
    let avg = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(String::from))
        .unwrap_or_else(|| "?".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("load average {avg} on {cores} cores")
}

fn main() {
    let expected = {
        let c = Spec::new(0);
        plain(&c);
        c.into_inner()
    };
    println!("before: {}", load());
    // Interleaved, so that other work on the machine slows all three alike; the best
    // of each is kept.
    let (mut t_plain, mut t_without, mut t_with) = (Duration::MAX, Duration::MAX, Duration::MAX);
    let (mut t_api, mut t_api_checkpoint) = (Duration::MAX, Duration::MAX);
    let (mut report_without, mut report_with) = (None, None);
    for _ in 0..REPS {
        t_plain = t_plain.min(time(plain, expected));
        t_api = t_api.min(time(runtime_api, expected));
        t_api_checkpoint = t_api_checkpoint.min(time(runtime_api_checkpoint, expected));
        let t = time(without_checkpoint, expected);
        if t < t_without {
            t_without = t;
            report_without = last_report();
        }
        let t = time(with_checkpoint, expected);
        if t < t_with {
            t_with = t;
            report_with = last_report();
        }
    }
    println!("after:  {}", load());
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("{EPOCHS} epochs, 2 threads, best of {REPS}");
    println!("  plain loop                     {:8.2} ms", ms(t_plain));
    println!("  #[tls_loop] without checkpoint {:8.2} ms", ms(t_without));
    println!("  #[tls_loop] with checkpoint!() {:8.2} ms", ms(t_with));
    println!("  Loop::run, same loop, no macro {:8.2} ms", ms(t_api));
    println!(
        "  Loop::run_segments, checkpoint {:8.2} ms",
        ms(t_api_checkpoint)
    );
    // The reports of the best runs.
    for (what, r) in [("without", report_without), ("with", report_with)] {
        if let Some(r) = r {
            println!(
                "  {what:7} checkpoint: {} violations, {} rollbacks, {} epochs in order; \
                 busy {:.2} ms, wasted {:.2} ms, waiting {:.2} ms, idle {:.2} ms",
                r.violations,
                r.rollbacks,
                r.in_order_epochs,
                ms(r.busy),
                ms(r.wasted),
                ms(r.wait),
                ms(r.idle)
            );
        }
    }
    println!(
        "speedup with checkpoint over plain:             {:.2}x",
        t_plain.as_secs_f64() / t_with.as_secs_f64()
    );
    println!(
        "speedup with checkpoint over without checkpoint: {:.2}x",
        t_without.as_secs_f64() / t_with.as_secs_f64()
    );
    println!(
        "speedup without checkpoint over plain:          {:.2}x",
        t_plain.as_secs_f64() / t_without.as_secs_f64()
    );
}
