//! A loop body that catches panics of its own code with `catch_unwind` (a batch job
//! that must not stop at one bad item) also catches the unwinding a rollback uses:
//! the runtime re-runs such an attempt once homefree instead of keeping what it did.
//! Kept, the attempt lost its writes after the caught rollback, and a `Drop` run by
//! it skipped its work (10 runs in 60 of a test whose body caught its own panic).

use std::panic::{AssertUnwindSafe, catch_unwind};
use tls_runtime::{Control, Loop, Spec, SpecVec, inject_violations, when_homefree};

mod common;
use common::spin;

/// Every iteration reads the running total and writes it back, inside `catch_unwind`,
/// with violations injected at one access in four, and notes what it saw through
/// `when_homefree` (which unwinds to re-run the iteration once homefree, the signal a
/// give-up at a synchronized load or a failed argument check also uses, and which no
/// violation record backs); iterations divisible by 9 fail and are skipped, as the
/// plain loop skips them.
#[test]
fn a_body_catching_panics_keeps_the_sequential_result() {
    common::quiet_panics_marked("bad item");
    const N: usize = 120;
    let run = |threads: Option<usize>| {
        let total = Spec::new(0u64);
        let seen = SpecVec::from(vec![0u64; N]);
        let body = |i: usize| {
            let _ = catch_unwind(AssertUnwindSafe(|| {
                let t = total.get();
                spin(1);
                assert!(!i.is_multiple_of(9), "bad item {i}");
                total.set(t + i as u64);
                when_homefree(|| seen.set(i, t));
            }));
        };
        match threads {
            None => (0..N).for_each(body),
            Some(t) => {
                Loop::new().threads(t).chunk(1).run(0..N, |i| {
                    body(i);
                    Control::<()>::Continue
                });
            }
        }
        (total.into_inner(), seen.into_vec())
    };
    let want = run(None);
    for threads in [2, 4] {
        for round in 0..20 {
            inject_violations(250_000);
            let got = run(Some(threads));
            inject_violations(0);
            assert_eq!(got, want, "{threads} threads, round {round}");
        }
    }
}
