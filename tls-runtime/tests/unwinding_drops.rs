//! A `Drop` of the body's that reads or writes speculative data while its iteration's
//! panic unwinds, in an epoch that an earlier one has violated: the runtime must not
//! unwind again there (that aborts the process), and the loop still ends as the plain
//! loop does. Without that, both shapes here aborted the process ("panic in a
//! destructor during cleanup") in most runs at 2 to 8 threads.

use std::panic::{AssertUnwindSafe, catch_unwind};
use tls_runtime::{Loop, Spec, SpecVec};

mod common;
use common::spin;

/// Counts the iterations of its bucket when dropped, as an exit guard would.
struct CountOnExit<'a>(&'a SpecVec<u64>, usize);

impl Drop for CountOnExit<'_> {
    fn drop(&mut self) {
        self.0.update(self.1, |x| *x += 1);
    }
}

/// Every seventh iteration checks the running total against the sum of the items
/// before it: the plain loop never panics, an iteration that read a stale total does
/// (a panic of stale data, never seen), and its guard writes while that unwinds.
#[test]
fn a_panic_of_stale_data_with_a_guard_writing_is_never_seen() {
    common::quiet_panics_marked("stale total");
    const N: usize = 300;
    let sevenths = (0..N as u64).filter(|k| k % 7 == 0).sum::<u64>();
    for threads in [2, 4, 8] {
        for round in 0..8 {
            let counts = SpecVec::from(vec![0u64; 4]);
            let total = Spec::new(0u64);
            Loop::new().threads(threads).run(0..N, |i| {
                let _exit = CountOnExit(&counts, i % 4);
                spin(2);
                if i % 7 == 0 {
                    let t = total.get();
                    let want = (0..i as u64).filter(|k| k % 7 == 0).sum::<u64>();
                    assert_eq!(t, want, "stale total at {i}");
                    total.set(t + i as u64);
                }
                tls_runtime::Control::<()>::Continue
            });
            assert_eq!(
                (counts.into_vec(), total.into_inner()),
                (vec![(N / 4) as u64; 4], sevenths),
                "{threads} threads, round {round}"
            );
        }
    }
}

/// A real panic at iteration `bad`, caught by the caller, with guards that write: the
/// panic reaches the caller with the plain loop's message, the guards' counts made up
/// to and including that iteration.
#[test]
fn a_real_panic_with_guards_writing_ends_the_loop_as_the_plain_loop_does() {
    common::quiet_panics_marked("boom at");
    for threads in [2, 4, 8] {
        for round in 0..8 {
            let bad = 60 + round * 17;
            let counts = SpecVec::from(vec![0u64; 4]);
            let sum = Spec::new(0u64);
            let r = catch_unwind(AssertUnwindSafe(|| {
                Loop::new().threads(threads).run(0..300usize, |i| {
                    let _exit = CountOnExit(&counts, i % 4);
                    let t = sum.get();
                    spin(2);
                    sum.set(t + i as u64);
                    assert!(i != bad, "boom at {i}");
                    tls_runtime::Control::<()>::Continue
                })
            }));
            let message = r.err().and_then(|p| p.downcast_ref::<String>().cloned());
            let mut want = vec![0u64; 4];
            for i in 0..=bad {
                want[i % 4] += 1;
            }
            assert_eq!(
                (message, counts.into_vec(), sum.into_inner()),
                (
                    Some(format!("boom at {bad}")),
                    want,
                    (0..=bad as u64).sum::<u64>()
                ),
                "{threads} threads, round {round}"
            );
        }
    }
}
