//! Behaviour of speculative loops at several thread counts, compared with what the
//! sequential loop does.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use tls_runtime::{
    Control, EscapeLock, Loop, LoopOutcome, Spec, SpecMap, SpecMemory, SpecVec, Step, escape,
    escape_checked, on_commit, on_violation,
};

mod common;
use common::spin;

const THREADS: [usize; 3] = [1, 2, 4];

#[test]
fn dependence_chain_gives_the_sequential_result() {
    for threads in THREADS {
        let acc = Spec::new(1u64);
        let trace = SpecVec::from(vec![0u64; 300]);
        Loop::new().threads(threads).run(0..300usize, |i| {
            spin(i as u64 % 7);
            let v = acc.get();
            let next = v.wrapping_mul(31).wrapping_add(i as u64);
            acc.set(next);
            trace.set(i, next);
            Control::<()>::Continue
        });
        let mut want = 1u64;
        let mut want_trace = vec![0; 300];
        for (i, slot) in want_trace.iter_mut().enumerate() {
            want = want.wrapping_mul(31).wrapping_add(i as u64);
            *slot = want;
        }
        assert_eq!(acc.into_inner(), want, "threads={threads}");
        assert_eq!(trace.into_vec(), want_trace, "threads={threads}");
    }
}

#[test]
fn occasional_conflicts_are_rolled_back_and_reported() {
    let v = SpecVec::from(vec![0u64; 64]);
    let hits = Spec::new(0u64);
    Loop::new().threads(2).run(0..2000usize, |i| {
        spin(3);
        v.update(i % 64, |x| *x += i as u64);
        if i % 10 == 0 {
            let h = hits.get();
            spin(2);
            hits.set(h + 1);
        }
        Control::<()>::Continue
    });
    let mut want = vec![0u64; 64];
    for i in 0..2000usize {
        want[i % 64] += i as u64;
    }
    assert_eq!(v.into_vec(), want);
    assert_eq!(hits.into_inner(), 200);
    let r = tls_runtime::last_report().unwrap();
    assert_eq!(r.items, 2000);
    for d in &r.dependences {
        assert!(d.load.file().ends_with("semantics.rs"), "{d:?}");
        assert!(d.count > 0);
    }
}

#[test]
fn planted_dependence_is_reported_with_its_lines() {
    // The other tests of this binary run loops at the same time and may hold the
    // worker: run until one run had a second thread, hence violations.
    let mut seen_violations = false;
    for _ in 0..20 {
        let cell = Spec::new(0u64);
        let other = SpecVec::from(vec![0u64; 40]);
        let load_line = line!() + 9;
        let store_line = line!() + 9;
        Loop::new()
            .threads(2)
            .site(Box::leak(Box::new(tls_runtime::LoopSite::new())))
            .run(0..40u64, |i| {
                if i % 2 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(500));
                }
                let v = cell.get();
                cell.set(v + 1);
                other.set(i as usize, v);
                Control::<()>::Continue
            });
        assert_eq!(cell.get(), 40);
        assert_eq!(other.into_vec(), (0..40).collect::<Vec<_>>());
        let r = tls_runtime::last_report().unwrap();
        if r.violations == 0 {
            assert!(r.dependences.is_empty(), "{r}");
            continue;
        }
        seen_violations = true;
        assert_eq!(r.dependences.len(), 1, "{r}");
        let top = &r.dependences[0];
        assert_eq!(top.load.line(), load_line, "{r}");
        assert_eq!(top.store.line(), store_line, "{r}");
        assert!(top.load.file().ends_with("semantics.rs"));
        assert_eq!(top.count, r.violations);
        assert!(top.wasted > std::time::Duration::ZERO);
        break;
    }
    assert!(seen_violations, "no run detected the planted dependence");
}

#[test]
fn a_running_epoch_violated_unwinds_and_the_report_counts_it() {
    // Odd epochs read the cell at once and reach their next access 2 ms later; the
    // even epoch before writes the cell after 1 ms: the odd one finds the violation
    // at that access, still running, and unwinds from there.
    let mut seen = false;
    for _ in 0..10 {
        let cell = Spec::new(0u64);
        let other = SpecVec::from(vec![0u64; 8]);
        Loop::new()
            .threads(2)
            .chunk(1)
            .site(Box::leak(Box::new(tls_runtime::LoopSite::new())))
            .run(0..8usize, |i| {
                if i % 2 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    cell.update(|c| *c += 1);
                } else {
                    let v = cell.get();
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    other.set(i, v);
                }
                Control::<()>::Continue
            });
        assert_eq!(other.into_vec(), vec![0, 1, 0, 2, 0, 3, 0, 4]);
        let r = tls_runtime::last_report().unwrap();
        assert!(r.unwinds <= r.rollbacks, "{r}");
        assert!(r.unwinding <= r.wasted, "{r}");
        assert_eq!(r.unwinds == 0, r.unwinding.is_zero(), "{r}");
        if r.unwinds > 0 {
            seen = true;
            break;
        }
    }
    assert!(seen, "no run unwound a violated epoch");
}

#[test]
fn a_container_made_before_an_action_that_panics_keeps_no_later_change() {
    // Iterations in one epoch (chunks of 2): iteration 2k links a new node, 2k + 1
    // registers a commit-time action and then adds to that node. At 41 the action
    // panics: the loop ends there, as the sequential one does, without 41's addition
    // (made in place on the epoch's own node, it used to survive).
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::Arc;
    let h = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let want = h(40);
    for _ in 0..20 {
        let nodes: SpecVec<Option<Arc<Spec<u64>>>> = SpecVec::from(vec![None; 1]);
        let r = catch_unwind(AssertUnwindSafe(|| {
            Loop::new()
                .threads(2)
                .chunk(2)
                .site(Box::leak(Box::new(tls_runtime::LoopSite::new())))
                .run(0..58u64, |i| {
                    if i % 2 == 0 {
                        let node = Arc::new(Spec::new(0u64));
                        node.set(h(i));
                        nodes.set(0, Some(node));
                    } else {
                        tls_runtime::on_commit(move || {
                            if i == 41 {
                                std::panic::panic_any(i);
                            }
                        });
                        if let Some(n) = nodes.get(0) {
                            n.update(|v| *v = v.wrapping_add(h(i)));
                        }
                    }
                    Control::<()>::Continue
                })
        }));
        assert_eq!(
            r.err().and_then(|p| p.downcast::<u64>().ok()),
            Some(Box::new(41))
        );
        let node = nodes.into_vec().remove(0).map(|n| n.get());
        assert_eq!(node, Some(want));
    }
}

#[test]
fn independent_epochs_report_no_dependence() {
    let v = SpecVec::from(vec![0u64; 200]);
    Loop::new().threads(2).run(0..200usize, |i| {
        let x = v.get(i);
        spin(5);
        v.set(i, x + i as u64);
        Control::<()>::Continue
    });
    let r = tls_runtime::last_report().unwrap();
    assert_eq!(r.violations, 0, "{r}");
    assert!(r.dependences.is_empty(), "{r}");
    assert_eq!(v.into_vec(), (0..200).collect::<Vec<_>>());
}

#[test]
fn break_and_return_squash_later_epochs() {
    for threads in THREADS {
        let written = SpecVec::from(vec![0u32; 100]);
        let out = Loop::new().threads(threads).run(0..100usize, |i| {
            spin(2);
            written.set(i, 1);
            if i == 37 {
                return Control::Break;
            }
            Control::<()>::Continue
        });
        assert_eq!(out, LoopOutcome::Broke);
        let w = written.into_vec();
        assert!(w[..=37].iter().all(|&x| x == 1), "threads={threads}");
        assert!(w[38..].iter().all(|&x| x == 0), "threads={threads}");

        let m = SpecMap::new();
        let out = Loop::new().threads(threads).run(0..100u32, |i| {
            m.insert(i, i * 2);
            if i == 60 {
                Control::Return(format!("stopped at {i}"))
            } else {
                Control::Continue
            }
        });
        assert_eq!(out, LoopOutcome::Returned("stopped at 60".to_string()));
        let m = m.into_map();
        assert_eq!(m.len(), 61, "threads={threads}");
    }
}

#[test]
fn commit_actions_run_in_epoch_order_and_once() {
    for threads in THREADS {
        static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        LOG.lock().unwrap().clear();
        let shared = Spec::new(0u32);
        Loop::new().threads(threads).run(0..500u32, |i| {
            if i % 3 == 0 {
                shared.update(|s| *s += 1);
            }
            spin(1);
            on_commit(move || LOG.lock().unwrap().push(i));
            Control::<()>::Continue
        });
        assert_eq!(*LOG.lock().unwrap(), (0..500).collect::<Vec<_>>());
        assert_eq!(shared.get(), 167);
    }
}

#[test]
fn escaped_calls_are_undone_exactly_when_rolled_back() {
    for threads in THREADS {
        static PINNED: AtomicUsize = AtomicUsize::new(0);
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        static LOCK: EscapeLock = EscapeLock::new();
        PINNED.store(0, Ordering::SeqCst);
        CALLS.store(0, Ordering::SeqCst);
        let counter = Spec::new(0u64);
        Loop::new().threads(threads).run(0..300u64, |i| {
            escape(&LOCK, || {
                PINNED.fetch_add(1, Ordering::SeqCst);
                CALLS.fetch_add(1, Ordering::SeqCst);
            });
            on_violation(|| {
                PINNED.fetch_sub(1, Ordering::SeqCst);
            });
            let c = counter.get();
            spin(2);
            counter.set(c + i);
            Control::<()>::Continue
        });
        assert_eq!(counter.get(), (0..300).sum::<u64>());
        // Every call that survived is pinned once; rolled-back calls were undone.
        assert_eq!(PINNED.load(Ordering::SeqCst), 300, "threads={threads}");
        assert!(CALLS.load(Ordering::SeqCst) >= 300);
    }
}

/// What an escaped call takes and a commit-time action gives back is held from the
/// call to the epoch's commit: with one iteration per epoch, by at most the epochs in
/// flight (4 per thread), the bound the book's escape chapter gives for sizing a pool.
#[test]
fn an_escaped_take_given_back_at_commit_is_held_by_at_most_the_epochs_in_flight() {
    for threads in [2, 4] {
        static HELD: AtomicUsize = AtomicUsize::new(0);
        static MOST: AtomicUsize = AtomicUsize::new(0);
        static LOCK: EscapeLock = EscapeLock::new();
        HELD.store(0, Ordering::SeqCst);
        MOST.store(0, Ordering::SeqCst);
        let out = SpecVec::from(vec![0u64; 2000]);
        Loop::new()
            .threads(threads)
            .chunk(1)
            .run(0..2000usize, |i| {
                escape(&LOCK, || {
                    let now = HELD.fetch_add(1, Ordering::SeqCst) + 1;
                    MOST.fetch_max(now, Ordering::SeqCst);
                });
                on_violation(|| {
                    HELD.fetch_sub(1, Ordering::SeqCst);
                });
                out.set(i, spin(1));
                on_commit(|| {
                    HELD.fetch_sub(1, Ordering::SeqCst);
                });
                Control::<()>::Continue
            });
        assert_eq!(HELD.load(Ordering::SeqCst), 0, "threads={threads}");
        let most = MOST.load(Ordering::SeqCst);
        assert!(
            (1..=4 * threads).contains(&most),
            "threads={threads}: {most} held at once"
        );
    }
}

#[test]
fn failed_argument_check_waits_for_homefree_or_violation() {
    static LOCK: EscapeLock = EscapeLock::new();
    static BAD_CALLS: AtomicUsize = AtomicUsize::new(0);
    let next_page = Spec::new(1u64);
    let pages = SpecVec::from(vec![0u64; 200]);
    Loop::new().threads(2).run(0..200usize, |i| {
        let p = next_page.get();
        spin(2);
        next_page.set(p + 1);
        // Sequentially page numbers are i + 1; a stale read would pass a wrong one.
        escape_checked(
            &LOCK,
            || p == i as u64 + 1,
            || {
                if p != i as u64 + 1 {
                    BAD_CALLS.fetch_add(1, Ordering::SeqCst);
                }
            },
        );
        pages.set(i, p);
        Control::<()>::Continue
    });
    assert_eq!(BAD_CALLS.load(Ordering::SeqCst), 0);
    assert_eq!(pages.into_vec(), (1..=200).collect::<Vec<_>>());
}

#[test]
fn zombie_panics_are_rolled_back_and_real_panics_reach_the_caller() {
    for threads in THREADS {
        // Each epoch divides by a value that is zero only if read too early.
        let divisor = Spec::new(0u64);
        let sum = Spec::new(0u64);
        Loop::new().threads(threads).run(0..200u64, |i| {
            if i == 0 {
                spin(30);
                divisor.set(7);
                return Control::<()>::Continue;
            }
            let d = divisor.get();
            sum.update(|s| *s += 1000 / d);
            Control::Continue
        });
        assert_eq!(sum.into_inner(), 199 * (1000 / 7), "threads={threads}");

        let v = SpecVec::from(vec![0u8; 100]);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Loop::new().threads(threads).run(0..100usize, |i| {
                v.set(i, 1);
                if i == 50 {
                    std::panic::panic_any(format!("real panic at {i}"));
                }
                Control::<()>::Continue
            })
        }));
        let payload = r.expect_err("the homefree panic must reach the caller");
        assert_eq!(
            payload.downcast_ref::<String>().map(String::as_str),
            Some("real panic at 50")
        );
        let v = v.into_vec();
        assert!(v[..=50].iter().all(|&x| x == 1), "threads={threads}");
        assert!(v[51..].iter().all(|&x| x == 0), "threads={threads}");
    }
}

#[test]
fn iterator_panic_happens_in_sequence() {
    let seen = SpecVec::from(vec![0u8; 20]);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let items = (0..20usize).inspect(|&i| {
            if i == 12 {
                panic!("iterator failed");
            }
        });
        Loop::new().threads(2).run(items, |i| {
            seen.set(i, 1);
            Control::<()>::Continue
        })
    }));
    assert!(r.is_err());
    let s = seen.into_vec();
    assert!(s[..12].iter().all(|&x| x == 1));
    assert!(s[12..].iter().all(|&x| x == 0));
}

/// The state of a two-segment body: the item, then (item, value read in segment 0).
#[derive(Clone)]
enum Seg {
    Start(usize),
    Tail(usize, u64),
}

#[test]
fn checkpoint_rolls_back_only_the_later_segment() {
    static HEAD_RUNS: AtomicUsize = AtomicUsize::new(0);
    HEAD_RUNS.store(0, Ordering::SeqCst);
    let private = SpecVec::from(vec![0u64; 400]);
    let tail = Spec::new(0u64);
    // One iteration per epoch: with chunks, a rollback re-runs the later items too.
    Loop::new()
        .threads(2)
        .chunk(1)
        .run_segments(0..400usize, Seg::Start, |s| match s {
            Seg::Start(i) => {
                HEAD_RUNS.fetch_add(1, Ordering::SeqCst);
                let x = spin(20) % 1000;
                private.set(i, x);
                Step::Checkpoint(Seg::Tail(i, x))
            }
            Seg::Tail(i, x) => {
                tail.update(|t| *t = t.wrapping_mul(3).wrapping_add(x + i as u64));
                Step::Done(Control::<()>::Continue)
            }
        });
    let mut want = 0u64;
    for i in 0..400usize {
        want = want.wrapping_mul(3).wrapping_add(private.get(i) + i as u64);
    }
    assert_eq!(tail.get(), want);
    let r = tls_runtime::last_report().unwrap();
    // Violations hit the tail only: the head ran once per epoch.
    assert_eq!(HEAD_RUNS.load(Ordering::SeqCst), 400, "{r}");
    for d in &r.dependences {
        assert_eq!(d.segment, 1, "{r}");
    }
}

#[test]
fn line_memory_tracks_lines_not_bytes() {
    for threads in THREADS {
        let mem = SpecMemory::new(64 * 64);
        Loop::new().threads(threads).run(0..512usize, |i| {
            // Eight epochs share each line; each writes its own 8 bytes.
            let addr = i * 8;
            let prev = mem.read_u64(addr);
            mem.write_u64(addr, prev + i as u64 + 1);
            if i % 64 == 63 {
                let line_start = addr - 63 * 8 % 64;
                let mut buf = [0u8; 16];
                mem.read(line_start, &mut buf);
            }
            Control::<()>::Continue
        });
        for i in 0..512usize {
            assert_eq!(mem.read_u64(i * 8), i as u64 + 1, "threads={threads}");
        }
    }
}

#[test]
fn map_tracks_absent_keys() {
    for threads in THREADS {
        let m: SpecMap<u32, u32> = SpecMap::new();
        let found = SpecVec::from(vec![0u32; 200]);
        Loop::new().threads(threads).run(0..200u32, |i| {
            // Epoch i looks for the key that epoch i - 1 inserts.
            if i > 0
                && let Some(v) = m.get(&(i - 1))
            {
                found.set(i as usize, v + 1);
            }
            m.insert(i, i * 10);
            if i % 5 == 0 {
                m.remove(&i);
            }
            Control::<()>::Continue
        });
        let found = found.into_vec();
        for i in 1..200u32 {
            let want = if (i - 1) % 5 == 0 {
                0
            } else {
                (i - 1) * 10 + 1
            };
            assert_eq!(found[i as usize], want, "i={i} threads={threads}");
        }
        let m = m.into_map();
        assert_eq!(m.len(), 160);
    }
}

#[test]
fn nested_loops_run_inside_the_epoch() {
    let grid = SpecVec::from(vec![0u64; 100]);
    Loop::new().threads(2).run(0..10usize, |row| {
        Loop::new().threads(2).run(0..10usize, |col| {
            grid.set(row * 10 + col, (row * col) as u64);
            Control::<()>::Continue
        });
        Control::<()>::Continue
    });
    let g = grid.into_vec();
    assert_eq!(g[99], 81);
    assert_eq!(g[23], 6);
}

#[test]
fn loops_on_several_client_threads_share_the_pool() {
    std::thread::scope(|s| {
        for client in 0..4u64 {
            s.spawn(move || {
                for round in 0..20u64 {
                    let total = Spec::new(0u64);
                    let v = SpecVec::from(vec![0u64; 50]);
                    Loop::new().threads(2).run(0..50usize, |i| {
                        v.set(i, client * 1000 + round + i as u64);
                        if i % 7 == 0 {
                            total.update(|t| *t += i as u64);
                        }
                        Control::<()>::Continue
                    });
                    assert_eq!(
                        total.into_inner(),
                        (0..50).filter(|i| i % 7 == 0).sum::<u64>()
                    );
                    let v = v.into_vec();
                    assert_eq!(v[49], client * 1000 + round + 49);
                }
            });
        }
    });
}

#[test]
fn chunked_epochs_keep_sequential_semantics() {
    for chunk in [1, 3, 8] {
        let acc = Spec::new(0u64);
        let out = Loop::new().threads(2).chunk(chunk).run(0..100u64, |i| {
            acc.update(|a| *a = a.wrapping_mul(7).wrapping_add(i));
            if i == 77 {
                return Control::Return(acc.get());
            }
            Control::Continue
        });
        let mut want = 0u64;
        for i in 0..=77u64 {
            want = want.wrapping_mul(7).wrapping_add(i);
        }
        assert_eq!(out, LoopOutcome::Returned(want), "chunk={chunk}");
        assert_eq!(acc.into_inner(), want);
    }
}

#[test]
fn speculative_types_work_from_ordinary_threads() {
    let v = SpecVec::from(vec![0u64; 8]);
    std::thread::scope(|s| {
        for t in 0..8usize {
            let v = &v;
            s.spawn(move || {
                for _ in 0..1000 {
                    v.update(t, |x| *x += 1);
                }
            });
        }
    });
    assert_eq!(v.into_vec(), vec![1000; 8]);
}

#[test]
fn squashed_epochs_undo_their_escaped_calls() {
    for threads in THREADS {
        static HELD: AtomicUsize = AtomicUsize::new(0);
        static LOCK: EscapeLock = EscapeLock::new();
        HELD.store(0, Ordering::SeqCst);
        let out = Loop::new().threads(threads).chunk(1).run(0..200u64, |i| {
            escape(&LOCK, || HELD.fetch_add(1, Ordering::SeqCst));
            on_violation(|| {
                HELD.fetch_sub(1, Ordering::SeqCst);
            });
            spin(3);
            if i == 120 {
                return Control::Return(i);
            }
            Control::Continue
        });
        assert_eq!(out, LoopOutcome::Returned(120));
        // Epochs 0..=120 keep their call; every later one was squashed and undone.
        assert_eq!(HELD.load(Ordering::SeqCst), 121, "threads={threads}");
    }
}

#[test]
fn accumulations_apply_in_epoch_order() {
    for threads in THREADS {
        let mut sum = 0.0f64;
        let mut names: Vec<String> = Vec::new();
        {
            // SAFETY: both accumulators outlive the loop.
            let (acc_sum, acc_names) = unsafe {
                (
                    tls_runtime::Accumulator::new(&mut sum),
                    tls_runtime::Accumulator::new(&mut names),
                )
            };
            Loop::new().threads(threads).run(1..=500u32, |i| {
                spin(1);
                acc_sum.record(move |s| *s += 1.0 / f64::from(i));
                if i % 50 == 0 {
                    acc_names.record(move |n| n.push(format!("item {i}")));
                }
                Control::<()>::Continue
            });
        }
        let want = (1..=500u32).fold(0.0f64, |s, i| s + 1.0 / f64::from(i));
        assert_eq!(sum.to_bits(), want.to_bits(), "threads={threads}");
        assert_eq!(names.len(), 10);
        assert_eq!(names[0], "item 50");
        assert_eq!(names[9], "item 500");
    }
}

/// An item whose clone panics for one value: the runtime clones items to be able to
/// re-run epochs, so the panic surfaces as that iteration's panic (and nothing hangs).
#[derive(Debug)]
struct Fragile(u32);

impl Clone for Fragile {
    fn clone(&self) -> Self {
        if self.0 == 13 {
            panic!("cannot clone 13");
        }
        Fragile(self.0)
    }
}

#[test]
fn a_panicking_item_clone_is_that_iterations_panic() {
    for threads in THREADS {
        let seen = SpecVec::from(vec![0u8; 20]);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Loop::new()
                .threads(threads)
                .chunk(1)
                .site(Box::leak(Box::new(tls_runtime::LoopSite::new())))
                .run((0..20).map(Fragile), |f| {
                    seen.set(f.0 as usize, 1);
                    Control::<()>::Continue
                })
        }));
        if threads > 1 {
            let p = r.expect_err("the clone's panic reaches the caller");
            assert_eq!(p.downcast_ref::<&str>(), Some(&"cannot clone 13"));
            let s = seen.into_vec();
            assert!(s[..13].iter().all(|&x| x == 1), "threads={threads}");
            assert!(s[13..].iter().all(|&x| x == 0), "threads={threads}");
        } else {
            // In order, nothing is cloned.
            assert!(r.is_ok());
        }
    }
}

/// A loop in which every iteration reads what the one before wrote: speculation loses,
/// the adaptive policy runs stretches in order, and the report says so and why.
#[test]
fn a_loop_that_does_not_pay_says_why_it_ran_in_order() {
    let chain = Spec::new(0u64);
    let site: &'static tls_runtime::LoopSite = Box::leak(Box::new(tls_runtime::LoopSite::new()));
    let mut report = None;
    // The first runs may find the workers starting; a few runs of one site show the
    // policy's verdict on the loop itself.
    for _ in 0..5 {
        Loop::new().threads(2).site(site).run(0..2000u64, |i| {
            let v = chain.get();
            let mut x = v;
            for k in 0..200 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(k));
            }
            std::hint::black_box((x, i));
            chain.set(v + 1);
            Control::<()>::Continue
        });
        report = tls_runtime::last_report();
    }
    assert_eq!(chain.get(), 5 * 2000);
    let r = report.expect("a report");
    assert!(
        r.in_order_no_workers + r.in_order_measuring <= r.in_order_epochs,
        "{r}"
    );
    // Whether the policy got to judge depends on the worker joining in time (on a
    // loaded machine the caller may run every epoch alone): check what is reported
    // when it did. The site's verdicts themselves are unit-tested (adapt/tests.rs).
    let text = r.to_string();
    assert_eq!(r.in_order_epochs > 0, text.contains("held back:"), "{text}");
}
