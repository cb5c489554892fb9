//! Threads started by an iteration through `tls_runtime::scope` / `when_homefree`:
//! they read and write speculative data as the sequential loop's threads would.

use std::sync::atomic::{AtomicU64, Ordering};
use tls_runtime::{Control, Loop, Spec, SpecVec, inject_violations, when_homefree};

const THREADS: [usize; 4] = [1, 2, 4, 8];

/// An iteration's own work on the running value it read.
fn mix(running: u64, i: usize) -> u64 {
    let mut x = running ^ (i as u64);
    for _ in 0..200 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    x
}

/// Each iteration reads a running value early (speculatively, in parallel with the
/// iterations before it), then hands the update to a spawned thread. A thread of
/// iteration i - 1 changes the value after iteration i read it: the plain write must
/// violate that read, or the chain breaks.
fn chain_through_threads(threads: usize, n: usize) -> (u64, Vec<u64>) {
    let running = Spec::new(1u64);
    let seen = SpecVec::from(vec![0u64; n]);
    Loop::new().threads(threads).run(0..n, |i| {
        // Work of the iteration's own, before it leaves speculation.
        let x = mix(running.get(), i);
        seen.set(i, x % 1000);
        tls_runtime::scope(|s| {
            // The thread sees the iteration's own write, made before the scope.
            let own = s.spawn(|| seen.get(i));
            let next =
                s.spawn(|| running.update(|r| *r = r.wrapping_mul(31).wrapping_add(i as u64)));
            next.join().unwrap();
            assert_eq!(own.join().unwrap(), x % 1000);
        });
        Control::<()>::Continue
    });
    (running.into_inner(), seen.into_vec())
}

fn chain_sequentially(n: usize) -> (u64, Vec<u64>) {
    let mut running = 1u64;
    let mut seen = vec![0u64; n];
    for (i, s) in seen.iter_mut().enumerate() {
        *s = mix(running, i) % 1000;
        running = running.wrapping_mul(31).wrapping_add(i as u64);
    }
    (running, seen)
}

#[test]
fn threads_of_an_iteration_see_and_make_the_sequential_state() {
    let expected = chain_sequentially(300);
    for threads in THREADS {
        for round in 0..5 {
            assert_eq!(
                chain_through_threads(threads, 300),
                expected,
                "{threads} threads, round {round}"
            );
        }
    }
}

/// With violations injected at random accesses, iterations roll back before and
/// around the call; work done in the scope is never repeated or lost.
#[test]
fn rollbacks_before_the_scope_do_not_repeat_its_threads() {
    let expected = chain_sequentially(200);
    static SPAWNED: AtomicU64 = AtomicU64::new(0);
    for threads in THREADS {
        inject_violations(150_000);
        let running = Spec::new(1u64);
        let seen = SpecVec::from(vec![0u64; 200]);
        SPAWNED.store(0, Ordering::Relaxed);
        Loop::new().threads(threads).run(0..200usize, |i| {
            seen.set(i, mix(running.get(), i) % 1000);
            tls_runtime::scope(|s| {
                s.spawn(|| {
                    SPAWNED.fetch_add(1, Ordering::Relaxed);
                    running.update(|r| *r = r.wrapping_mul(31).wrapping_add(i as u64));
                });
            });
            Control::<()>::Continue
        });
        inject_violations(0);
        assert_eq!(
            (running.into_inner(), seen.into_vec()),
            expected,
            "{threads} threads"
        );
        // Each iteration's threads ran exactly once: the scope runs only where the
        // iteration can no longer roll back.
        assert_eq!(SPAWNED.load(Ordering::Relaxed), 200, "{threads} threads");
    }
}

/// The rest of the iteration after `when_homefree` is plain code: what it does to
/// untracked state (here a `Mutex<Vec>`) happens once per iteration, in loop order,
/// after the iteration's speculative writes before the call are committed.
#[test]
fn the_iteration_runs_in_order_after_when_homefree() {
    for threads in THREADS {
        inject_violations(100_000);
        let order = std::sync::Mutex::new(Vec::new());
        let marks = SpecVec::from(vec![0u64; 300]);
        Loop::new().threads(threads).run(0..300usize, |i| {
            marks.set(i, i as u64 + 1);
            when_homefree(|| ());
            // Every earlier iteration has committed: its mark is visible.
            let earlier = if i > 0 { marks.get(i - 1) } else { 0 };
            order.lock().unwrap().push((i, earlier));
            Control::<()>::Continue
        });
        inject_violations(0);
        let want: Vec<(usize, u64)> = (0..300).map(|i| (i, i as u64)).collect();
        assert_eq!(order.into_inner().unwrap(), want, "{threads} threads");
    }
}

#[test]
fn when_homefree_outside_a_loop_just_runs() {
    assert_eq!(when_homefree(|| 7), 7);
    assert_eq!(tls_runtime::scope(|s| s.spawn(|| 8).join().unwrap()), 8);
}

#[test]
fn when_homefree_inside_an_update_closure_panics_with_what_to_do() {
    let v = SpecVec::from(vec![0u64; 4]);
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Loop::new().threads(2).run(0..4usize, |i| {
            v.update(i, |x| *x = when_homefree(|| 1));
            Control::<()>::Continue
        });
    }))
    .expect_err("the call inside the closure panics");
    let msg = err
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        msg.contains("inside an `update` or `with` closure"),
        "{msg}"
    );
}

/// A guard the body owns, whose `Drop` starts a thread through `tls_runtime::scope`.
struct Flush<'a> {
    out: &'a SpecVec<u64>,
    runs: &'a [AtomicU64],
    i: usize,
}

impl Drop for Flush<'_> {
    fn drop(&mut self) {
        let (out, runs, i) = (self.out, self.runs, self.i);
        tls_runtime::scope(|s| {
            s.spawn(move || {
                runs[i].fetch_add(1, Ordering::Relaxed);
                out.update(i % 8, |x| *x = x.wrapping_mul(3).wrapping_add(i as u64));
            });
        });
    }
}

/// The guard's thread runs once per iteration, at the iteration's end, whatever
/// rollbacks unwind the iteration before (the call is skipped in a destructor run by
/// a rollback, and made again by the re-run); and when an iteration panics, the
/// guards of the iterations up to it run, those after it never do.
#[test]
fn a_guard_that_starts_threads_in_its_drop_runs_once_per_iteration() {
    const N: usize = 120;
    let sequential = |stop: Option<usize>| {
        let mut out = vec![0u64; 8];
        for i in 0..=stop.unwrap_or(N - 1) {
            let x = out[(i * 3) % 8].wrapping_add(1);
            out[(i + 5) % 8] = x;
            // The guard's thread, at the iteration's end (its panic included).
            out[i % 8] = out[i % 8].wrapping_mul(3).wrapping_add(i as u64);
        }
        out
    };
    for threads in THREADS {
        for (round, stop) in [(0, None), (1, Some(70)), (2, None), (3, Some(33))] {
            if round >= 2 {
                inject_violations(150_000);
            }
            let out = SpecVec::from(vec![0u64; 8]);
            let runs: Vec<AtomicU64> = (0..N).map(|_| AtomicU64::new(0)).collect();
            let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Loop::new().threads(threads).run(0..N, |i| {
                    let _flush = Flush {
                        out: &out,
                        runs: &runs,
                        i,
                    };
                    let x = out.get((i * 3) % 8).wrapping_add(1);
                    out.set((i + 5) % 8, x);
                    if stop == Some(i) {
                        panic!("stop at {i}");
                    }
                    Control::<()>::Continue
                });
            }));
            inject_violations(0);
            assert_eq!(
                ended.is_err(),
                stop.is_some(),
                "{threads} threads, round {round}"
            );
            let last = stop.unwrap_or(N - 1);
            let counts: Vec<u64> = runs.iter().map(|r| r.load(Ordering::Relaxed)).collect();
            let want: Vec<u64> = (0..N).map(|i| u64::from(i <= last)).collect();
            assert_eq!(counts, want, "{threads} threads, round {round}");
            assert_eq!(
                out.into_vec(),
                sequential(stop),
                "{threads} threads, round {round}"
            );
        }
    }
}
