//! What a loop's report counts when the loop ends early: the iterations that ran
//! (not the rest of the epoch that ended it, nor squashed epochs), and work thrown
//! away that fits in the threads' time.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;
use tls_runtime::{Control, Loop, LoopSite, SpecVec, last_report};

fn work(x: u64) -> u64 {
    let mut h = x;
    for k in 0..20_000 {
        h = std::hint::black_box(h.wrapping_mul(31).wrapping_add(k));
    }
    h
}

/// Runs 200 iterations in epochs of 8 on `threads` threads, ending at iteration 37
/// by `end`; returns the report.
fn ended_at_37(threads: usize, end: fn(usize) -> Control<()>) -> tls_runtime::LoopReport {
    let out = SpecVec::from(vec![0u64; 200]);
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    let _ = catch_unwind(AssertUnwindSafe(|| {
        Loop::new()
            .threads(threads)
            .chunk(8)
            .site(site)
            .run(0..200usize, |i| {
                out.set(i, work(i as u64));
                if i == 37 { end(i) } else { Control::Continue }
            })
    }));
    last_report().expect("a report")
}

#[test]
fn a_loop_ended_early_counts_the_iterations_that_ran() {
    for threads in [1, 2, 4] {
        for round in 0..5 {
            let r = ended_at_37(threads, |_| Control::Break);
            assert_eq!(r.items, 38, "break, {threads} threads, round {round}: {r}");
            let r = ended_at_37(threads, |i| panic!("at {i}"));
            assert_eq!(r.items, 38, "panic, {threads} threads, round {round}: {r}");
        }
    }
}

#[test]
fn work_thrown_away_fits_in_the_threads_time() {
    for round in 0..5 {
        // The iteration that ends the loop takes 20 ms first (as a panic that
        // captures a backtrace can): later epochs finish and wait to be squashed.
        let r = ended_at_37(2, |i| {
            std::thread::sleep(Duration::from_millis(20));
            panic!("at {i}")
        });
        assert!(
            r.wasted <= r.wall * r.threads as u32,
            "round {round}: {:?} wasted in {:?} on {} threads: {r}",
            r.wasted,
            r.wall,
            r.threads
        );
    }
}
