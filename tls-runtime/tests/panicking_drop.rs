//! A value whose `Drop` panics when a loop overwrites it: the loop ends with that
//! panic, as the sequential loop does, whichever thread's commit drops the value.
//! Each loop runs on a thread of its own with a deadline, so that a hang fails the
//! test instead of stopping it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::time::Duration;
use tls_runtime::{Control, Loop, SpecVec};

#[derive(Clone)]
struct Bomb(u64);

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.0 == 50 && !std::thread::panicking() {
            panic!("Bomb(50) dropped");
        }
    }
}

/// The loop over `v` as a program writes it: iteration `i` overwrites slot `i % 4`.
/// Whether it panicked, and the slots after it.
fn run(threads: usize, chunk: Option<usize>, inject: u32) -> (bool, Vec<u64>) {
    let v = SpecVec::from((0..4).map(|i| Bomb(i + 1000)).collect::<Vec<_>>());
    if inject > 0 {
        tls_runtime::inject_violations(inject);
    }
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        let lp = Loop::new().threads(threads);
        let lp = match chunk {
            Some(c) => lp.chunk(c),
            None => lp,
        };
        lp.run(0..200u64, |i| {
            // Some work, so that epochs overlap.
            let mut h = i;
            for _ in 0..3000 {
                h = std::hint::black_box(h.wrapping_mul(31));
            }
            std::hint::black_box(h);
            v.set((i % 4) as usize, Bomb(i));
            Control::<()>::Continue
        })
    }))
    .is_err();
    tls_runtime::inject_violations(0);
    let slots = (0..4).map(|k| v.with(k, |b| b.0)).collect();
    // Dropping the rest is the sequential program's business, not the loop's.
    std::mem::forget(v);
    (panicked, slots)
}

/// The commit that overwrote `Bomb(50)` dropped it last, the panic unwound out of
/// the commit, and the loop waited for ever for the epoch it left half committed (3
/// runs in 6 at 4 threads; more with violations injected). With one iteration per
/// epoch the state is the sequential loop's; with several, the iterations of the
/// overwriting one's epoch that came after it are kept too (the guarantees chapter
/// says so), but the loop still ends with the panic, the overwrite made.
#[test]
fn a_drop_that_panics_at_commit_ends_the_loop_with_its_panic() {
    // The sequential loop: iteration 54 overwrites Bomb(50), whose Drop panics.
    let want = (true, vec![52, 53, 54, 51]);
    for threads in [1, 2, 4] {
        for chunk in [Some(1), None] {
            for inject in [0, 300_000] {
                for round in 0..8 {
                    let (tx, rx) = mpsc::channel();
                    std::thread::spawn(move || {
                        let _ = tx.send(run(threads, chunk, inject));
                    });
                    let case = format!(
                        "{threads} threads, chunk {chunk:?}, inject {inject}, round {round}"
                    );
                    let got = rx
                        .recv_timeout(Duration::from_secs(20))
                        .unwrap_or_else(|_| panic!("{case}: the loop hung"));
                    if chunk.is_some() {
                        assert_eq!(got, want, "{case}");
                    } else {
                        // The state after iterations 0..=j for some j from 54 on.
                        let after =
                            |j: u64| (0..4).map(|k| j - (j + 4 - k) % 4).collect::<Vec<u64>>();
                        assert!(
                            got.0 && (54..200).any(|j| got.1 == after(j)),
                            "{case}: {got:?}"
                        );
                    }
                }
            }
        }
    }
}
