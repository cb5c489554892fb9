//! A `#[tls_loop]` function called from inside another loop's iteration: its loop runs
//! in order as part of the enclosing epoch, and its accumulations (`s += x`,
//! `out.push(x)`) update its own locals at once. (Deferred to the enclosing epoch's
//! commit, they once ran after the function had returned, on its dead stack frame:
//! wrong sums at 2 threads and more, hangs and invalid reads under valgrind.)

use tls_runtime::{Loop, Spec, SpecVec, tls_loop};

#[tls_loop]
fn row_sum(row: &[u64]) -> u64 {
    let mut s = 0;
    for &x in row {
        s += x;
    }
    s
}

#[tls_loop]
fn evens(row: &[u64]) -> Vec<u64> {
    let mut out = Vec::new();
    for &x in row {
        if x % 2 == 0 {
            out.push(x);
        }
    }
    out
}

#[tls_loop]
fn harmonic(n: u32) -> f64 {
    let mut h = 0.0;
    for i in 1..=n {
        h += 1.0 / f64::from(i);
    }
    h
}

#[test]
fn nested_loops_accumulate_into_their_own_locals() {
    let rows: Vec<Vec<u64>> = (0..24)
        .map(|r| (0..(r % 7 + 3)).map(|c| r * 10 + c).collect())
        .collect();
    let want_sums: Vec<u64> = rows.iter().map(|r| r.iter().sum()).collect();
    let want_lens: Vec<usize> = rows
        .iter()
        .map(|r| r.iter().filter(|&&x| x % 2 == 0).count())
        .collect();
    let want_carry = (0..rows.len()).fold(0.0, |c, r| {
        c + (1..=r as u32 + 1).fold(0.0, |h, i| h + 1.0 / f64::from(i))
    });
    for threads in [1, 2, 4, 8] {
        for round in 0..10 {
            let sums = SpecVec::from(vec![0u64; rows.len()]);
            let lens = SpecVec::from(vec![0usize; rows.len()]);
            let carry = Spec::new(0.0);
            Loop::new().threads(threads).run(0..1, |_| {
                // The marked function's own loop, nested in this one's epoch.
                per_row_on(threads, &rows, &sums, &lens, &carry);
                tls_runtime::Control::<()>::Continue
            });
            assert_eq!(
                sums.into_vec(),
                want_sums,
                "{threads} threads, round {round}"
            );
            assert_eq!(
                lens.into_vec(),
                want_lens,
                "{threads} threads, round {round}"
            );
            assert_eq!(
                carry.into_inner(),
                want_carry,
                "{threads} threads, round {round}"
            );
            // And as the outermost loop, whose epochs call the nested ones.
            let sums = SpecVec::from(vec![0u64; rows.len()]);
            let lens = SpecVec::from(vec![0usize; rows.len()]);
            let carry = Spec::new(0.0);
            per_row_on(threads, &rows, &sums, &lens, &carry);
            assert_eq!(
                sums.into_vec(),
                want_sums,
                "{threads} threads, round {round}"
            );
            assert_eq!(
                lens.into_vec(),
                want_lens,
                "{threads} threads, round {round}"
            );
            assert_eq!(
                carry.into_inner(),
                want_carry,
                "{threads} threads, round {round}"
            );
        }
    }
}

/// Each row's sum, its even values and a harmonic number, one row per epoch, on
/// `threads` threads; every iteration also reads what the one before wrote (`carry`),
/// so that epochs are violated and the nested loops run again.
#[tls_loop(threads = threads)]
fn per_row_on(
    threads: usize,
    rows: &[Vec<u64>],
    sums: &SpecVec<u64>,
    lens: &SpecVec<usize>,
    carry: &Spec<f64>,
) {
    for r in 0..rows.len() {
        let before = carry.get();
        sums.set(r, row_sum(&rows[r]));
        lens.set(r, evens(&rows[r]).len());
        carry.set(before + harmonic(r as u32 + 1));
    }
}

/// A loop nested in another's iteration is part of that iteration whatever the thread
/// count: no report of its own, no loop of its own. (On one thread, and in the
/// adaptive fallback's in-order stretches, it once ran as a top-level loop: a report
/// per run, and at 2 threads and more a speculative loop started from inside the
/// enclosing loop's iteration.)
#[test]
fn a_nested_loop_has_no_report_of_its_own_at_any_thread_count() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tls_runtime::{Control, LoopSite};
    for threads in [1, 2, 4] {
        let outer_site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
        let inner_reported = AtomicBool::new(false);
        let out = SpecVec::from(vec![0u64; 16]);
        Loop::new()
            .name("outer")
            .threads(threads)
            .site(outer_site)
            .run(0..16usize, |i| {
                let partial = Spec::new(0u64);
                Loop::new()
                    .name("inner")
                    .threads(threads)
                    .run(0..4u64, |j| {
                        partial.set(partial.get() + j * i as u64);
                        Control::<()>::Continue
                    });
                if tls_runtime::last_report().is_some_and(|r| r.name == "inner") {
                    inner_reported.store(true, Ordering::Relaxed);
                }
                out.set(i, partial.get());
                Control::<()>::Continue
            });
        assert_eq!(
            out.into_vec(),
            (0..16u64).map(|i| 6 * i).collect::<Vec<_>>(),
            "{threads} threads"
        );
        assert!(
            !inner_reported.load(Ordering::Relaxed),
            "{threads} threads: the nested loop reported a run of its own"
        );
        assert_eq!(tls_runtime::last_report().unwrap().name, "outer");
    }
}
