//! Shapes of ordinary safe Rust that users write around speculative data, each run
//! many times at 2, 4 and 8 threads and compared with the sequential result: containers
//! made and consumed inside an epoch, containers inside containers, loops running at
//! the same time on shared data, nested accesses, escapes that run loops, panics in
//! closures and commit-time actions.
//!
//! Every case is deterministic in its expected answer; only the schedule varies.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tls_runtime::{
    Control, EscapeLock, Loop, LoopOutcome, Spec, SpecMap, SpecVec, Step, escape, on_commit,
};

const THREADS: [usize; 3] = [2, 4, 8];

/// Repetitions of each case per thread count: `TLS_SHAPES_ROUNDS`, default 12 (CI runs
/// the file once more under valgrind with fewer).
fn rounds() -> usize {
    std::env::var("TLS_SHAPES_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

/// About `n` hundred nanoseconds of work, so that epochs overlap.
fn spin(n: u64) -> u64 {
    let mut x = n;
    for i in 0..n * 40 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// `TLS_SHAPES_INJECT=<per million>` runs every case with violations injected at that
/// rate (`tls_runtime::inject_violations`): CI runs the file once more that way.
fn inject_from_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Some(rate) = std::env::var("TLS_SHAPES_INJECT")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            tls_runtime::inject_violations(rate);
        }
    });
}

fn each_schedule(mut case: impl FnMut(usize)) {
    inject_from_env();
    for threads in THREADS {
        for _ in 0..rounds() {
            case(threads);
        }
    }
}

/// The text of a panic's payload (empty if it is not a string).
fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or_default()
}

/// A helper that builds a container, fills it with its own loop and consumes it.
fn squares_upto(n: u64) -> Vec<u64> {
    let v = SpecVec::from(vec![0u64; n as usize]);
    tls_runtime::for_each(0..n as usize, |k| v.set(k, (k * k) as u64));
    v.into_vec()
}
#[test]
fn containers_made_and_consumed_inside_an_epoch() {
    each_schedule(|threads| {
        let out = SpecVec::from(vec![0u64; 200]);
        let sums = SpecVec::from(vec![0u64; 200]);
        let chain = Spec::new(0u64);
        Loop::new().threads(threads).run(0..200usize, |i| {
            spin(i as u64 % 5);
            let c = Spec::new(1u64);
            c.set(2);
            c.update(|x| *x += i as u64);
            out.set(i, c.into_inner());
            sums.set(i, squares_upto(i as u64 % 7).iter().sum());
            // A dependence, so that epochs roll back around the local containers.
            if i % 3 == 0 {
                chain.update(|x| *x += 1);
            }
            let dropped = SpecVec::from(vec![1u8; 4]);
            dropped.set(0, 9);
            drop(dropped);
            let forgotten = Spec::new(String::from("kept"));
            forgotten.set(String::from("gone"));
            core::mem::forget(forgotten);
            Control::<()>::Continue
        });
        let want: Vec<u64> = (0..200).map(|i| 2 + i).collect();
        assert_eq!(out.into_vec(), want, "{threads} threads");
        let want: Vec<u64> = (0..200u64)
            .map(|i| (0..i % 7).map(|k| k * k).sum())
            .collect();
        assert_eq!(sums.into_vec(), want);
        assert_eq!(chain.into_inner(), 67);
    });
}

#[test]
fn a_local_container_carried_across_a_checkpoint_is_rolled_back_with_it() {
    each_schedule(|threads| {
        let shared = Spec::new(0u64);
        let out = SpecVec::from(vec![0u64; 100]);
        Loop::new().threads(threads).run_segments(
            0..100usize,
            |i| (i, None::<Arc<Spec<u64>>>),
            |(i, local)| match local {
                None => {
                    let c = Arc::new(Spec::new(10u64));
                    c.set(11);
                    Step::Checkpoint((i, Some(c)))
                }
                Some(c) => {
                    // Written in a later segment: a rollback to the checkpoint must
                    // undo this, or the re-run adds twice.
                    c.update(|x| *x += 1);
                    let s = shared.get();
                    shared.set(s + 1);
                    out.set(i, c.get() + s);
                    Step::Done(Control::<()>::Continue)
                }
            },
        );
        let want: Vec<u64> = (0..100).map(|i| 12 + i).collect();
        assert_eq!(out.into_vec(), want, "{threads} threads");
        assert_eq!(shared.into_inner(), 100);
    });
}

type Node = Arc<Spec<u64>>;

/// The values of the linked nodes.
fn node_values(nodes: SpecVec<Option<Node>>) -> Vec<Option<u64>> {
    nodes
        .into_vec()
        .into_iter()
        .map(|o| o.map(|node| node.get()))
        .collect()
}

#[test]
fn nodes_created_in_epochs_and_linked_into_a_vector() {
    each_schedule(|threads| {
        let n = 150;
        let nodes: SpecVec<Option<Node>> = SpecVec::from(vec![None; n]);
        Loop::new().threads(threads).run(0..n, |i| {
            spin(i as u64 % 4);
            let node = Arc::new(Spec::new(i as u64));
            node.update(|x| *x *= 2);
            // Read the previous node (a dependence on the epoch before) and write it.
            if i > 0
                && let Some(prev) = nodes.get(i - 1)
            {
                let p = prev.get();
                node.update(|x| *x += p % 1000);
                prev.update(|x| *x += 1);
            }
            nodes.set(i, Some(node));
            // Every tenth epoch unlinks the node two back, which later epochs wrote.
            if i % 10 == 9 {
                nodes.set(i - 2, None);
            }
            Control::<()>::Continue
        });
        let mut want: Vec<Option<u64>> = vec![None; n];
        for i in 0..n {
            let mut v = 2 * i as u64;
            if i > 0
                && let Some(p) = want[i - 1].as_mut()
            {
                v += *p % 1000;
                *p += 1;
            }
            want[i] = Some(v);
            if i % 10 == 9 {
                want[i - 2] = None;
            }
        }
        assert_eq!(node_values(nodes), want, "{threads} threads");
    });
}

#[test]
fn two_loops_at_once_lose_no_update() {
    for threads in THREADS {
        for _ in 0..4 {
            let total = Spec::new(0u64);
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        Loop::new().threads(threads).run(0..1500u32, |i| {
                            // A commit-time action before the update: the update is
                            // applied after the action runs, and must not be lost.
                            if i % 2 == 0 {
                                on_commit(|| {});
                            }
                            total.update(|t| *t += 1);
                            Control::<()>::Continue
                        });
                    });
                }
            });
            assert_eq!(total.into_inner(), 3000, "{threads} threads");
        }
    }
}

#[test]
fn a_plain_thread_and_a_loop_lose_no_update() {
    for threads in THREADS {
        for _ in 0..4 {
            let total = Spec::new(0u64);
            let map = SpecMap::new();
            std::thread::scope(|s| {
                s.spawn(|| {
                    for k in 0..1500u64 {
                        total.update(|t| *t += 1);
                        map.insert(k % 3, k);
                    }
                });
                Loop::new().threads(threads).run(0..1500u64, |k| {
                    spin(k % 3);
                    total.update(|t| *t += 1);
                    Control::<()>::Continue
                });
            });
            assert_eq!(total.into_inner(), 3000, "{threads} threads");
        }
    }
}

#[test]
fn nested_accesses_in_update_closures() {
    each_schedule(|threads| {
        let v = SpecVec::from(vec![1u64, 1]);
        let other = Spec::new(3u64);
        Loop::new().threads(threads).run(0..300usize, |i| {
            let (a, b) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
            v.update(a, |x| *x = (*x + v.get(b)) % 1_000_003);
            other.update(|o| *o = (*o + v.with(a, |x| *x)) % 1_000_003);
            Control::<()>::Continue
        });
        let (mut w, mut o) = ([1u64, 1], 3u64);
        for i in 0..300 {
            let (a, b) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
            w[a] = (w[a] + w[b]) % 1_000_003;
            o = (o + w[a]) % 1_000_003;
        }
        assert_eq!(v.into_vec(), w, "{threads} threads");
        assert_eq!(other.into_inner(), o);
    });
}

#[test]
fn an_access_to_a_location_inside_its_own_closure_panics_clearly() {
    for threads in [1, 2] {
        let v = SpecVec::from(vec![1u64; 4]);
        let r = catch_unwind(AssertUnwindSafe(|| {
            Loop::new().threads(threads).run(0..4usize, |i| {
                v.update(i, |x| *x += v.get(i));
                Control::<()>::Continue
            })
        }));
        let payload = r.expect_err("must panic");
        let msg = panic_message(&payload);
        assert!(msg.contains("inside its own"), "{threads} threads: {msg}");
    }
    // Outside any loop too.
    let s = Spec::new(1u64);
    assert!(catch_unwind(AssertUnwindSafe(|| s.update(|x| *x += s.get()))).is_err());
}

static COUNTED: EscapeLock = EscapeLock::new();
static CALLS: AtomicUsize = AtomicUsize::new(0);

/// An escaped function that runs a speculative loop calling itself.
fn count(depth: u32) -> usize {
    escape(&COUNTED, || {
        CALLS.fetch_add(1, Ordering::Relaxed);
        if depth == 0 {
            return 1;
        }
        let total = Spec::new(0usize);
        tls_runtime::for_each(0..3u32, |_| {
            let n = count(depth - 1);
            total.update(|t| *t += n);
        });
        total.into_inner()
    })
}

#[test]
fn an_escaped_function_that_runs_a_loop_calling_itself() {
    for threads in THREADS {
        let got = Loop::new().threads(threads).run(0..4u32, |_| {
            let n = count(2);
            if n == 9 {
                Control::Continue
            } else {
                Control::Return(n)
            }
        });
        assert_eq!(got, LoopOutcome::Completed, "{threads} threads");
    }
}

#[test]
fn a_panicking_update_closure_keeps_its_change() {
    each_schedule(|threads| {
        let v = SpecVec::from(vec![0u64; 64]);
        let r = catch_unwind(AssertUnwindSafe(|| {
            Loop::new().threads(threads).run(0..64usize, |i| {
                spin(i as u64 % 3);
                v.update(i, |x| {
                    *x = 7;
                    if i == 40 {
                        panic!("iteration 40");
                    }
                });
                Control::<()>::Continue
            })
        }));
        assert!(r.is_err());
        let want: Vec<u64> = (0..64).map(|i| if i <= 40 { 7 } else { 0 }).collect();
        assert_eq!(v.into_vec(), want, "{threads} threads");
    });
}

#[test]
fn a_read_closure_may_write_the_location_it_reads_as_outside_loops() {
    each_schedule(|threads| {
        let s = Spec::new(0u64);
        let m: SpecMap<u32, u64> = SpecMap::new();
        m.insert(0, 1);
        m.insert(1, 2);
        Loop::new().threads(threads).chunk(1).run(0..200u32, |i| {
            spin(u64::from(i % 3));
            s.with(|v| s.set(v + 1));
            let (a, b) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
            let sum = m.with(&a, |va| {
                va.copied().unwrap() % 1000 + m.get(&b).unwrap() % 1000
            });
            m.insert(a, sum * 3);
            Control::<()>::Continue
        });
        let plain = Spec::new(0u64);
        let mut want = [1u64, 2];
        for i in 0..200 {
            plain.with(|v| plain.set(v + 1));
            let (a, b) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
            want[a] = (want[a] % 1000 + want[b] % 1000) * 3;
        }
        assert_eq!(s.into_inner(), plain.into_inner(), "{threads} threads");
        let got = m.into_map();
        assert_eq!((got[&0], got[&1]), (want[0], want[1]), "{threads} threads");
    });
}

/// A loop whose items iterator reads speculative data that the body writes
/// (`take_while(|&i| !stop.get(i))` with the body setting `stop`): the runtime pulls
/// items ahead of the iterations that run them, so it could not give the sequential
/// result. It is refused with a clear panic, in every mode and at every thread count,
/// before any item runs; an iterator that reads nothing speculative, and a nested
/// loop's iterator inside an epoch (it runs in order, as part of that epoch), are fine.
#[test]
fn an_items_iterator_that_reads_speculative_data_is_refused() {
    for threads in [1, 2, 4, 8] {
        let stop = SpecVec::from(vec![false; 64]);
        let ran = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            Loop::new()
                .threads(threads)
                .run((0..64usize).take_while(|&i| !stop.get(i)), |i| {
                    ran.fetch_add(1, Ordering::Relaxed);
                    if i == 10 {
                        stop.set(11, true);
                    }
                    Control::<()>::Continue
                })
        }));
        let payload = r.expect_err("must panic");
        let msg = panic_message(&payload);
        assert!(msg.contains("items iterator"), "{threads} threads: {msg}");
        assert_eq!(ran.load(Ordering::Relaxed), 0, "{threads} threads");
        // The thread is usable afterwards: a plain access outside any loop.
        assert!(!stop.get(0));
    }
    each_schedule(|threads| {
        let v = SpecVec::from(vec![1u64; 8]);
        let total = Spec::new(0u64);
        Loop::new().threads(threads).run(0..8usize, |i| {
            // A nested loop's iterator reads what this epoch and earlier ones wrote.
            v.set(i, v.get(i) + 1);
            let sum = Spec::new(0u64);
            Loop::new().run((0..=i).map(|j| v.get(j)), |x| {
                sum.update(|s| *s += x);
                Control::<()>::Continue
            });
            let sum = sum.into_inner();
            total.update(|t| *t += sum);
            Control::<()>::Continue
        });
        // Item i sums v[0..=i] after v[0..=i] were incremented: 2 (i + 1) each.
        assert_eq!(total.get(), (0..8u64).map(|i| 2 * (i + 1)).sum::<u64>());
    });
}

/// Nodes followed through a vector of links and written in two segments of one
/// iteration, while other iterations link new nodes and unlink old ones: a rollback of
/// the follower and of the linker (which drops the node the follower wrote) race.
#[test]
fn a_node_written_across_a_checkpoint_while_its_link_is_replaced() {
    const LINKS: usize = 12;
    let link = |i: usize| i.is_multiple_of(4);
    let unlink = |i: usize| i % 7 == 3;
    let follow = |i: usize| (i * 5) % LINKS;
    each_schedule(|threads| {
        let nodes: SpecVec<Option<Node>> = SpecVec::from(vec![None; LINKS]);
        Loop::new().threads(threads).run_segments(
            0..120usize,
            |i| (i, None::<Option<Node>>),
            |(i, followed)| match followed {
                None => {
                    spin(i as u64 % 3);
                    if link(i) {
                        nodes.set(i % LINKS, Some(Arc::new(Spec::new(i as u64))));
                    }
                    let n = nodes.get(follow(i));
                    if let Some(n) = &n {
                        n.update(|x| *x += 1);
                    }
                    Step::Checkpoint((i, Some(n)))
                }
                Some(n) => {
                    if let Some(n) = n {
                        n.update(|x| *x += 2);
                        if unlink(i) {
                            nodes.set((i + 3) % LINKS, None);
                        }
                    }
                    Step::Done(Control::<()>::Continue)
                }
            },
        );
        let mut want: Vec<Option<u64>> = vec![None; LINKS];
        for i in 0..120 {
            if link(i) {
                want[i % LINKS] = Some(i as u64);
            }
            if let Some(n) = want[follow(i)].as_mut() {
                *n += 3;
                if unlink(i) {
                    want[(i + 3) % LINKS] = None;
                }
            }
        }
        assert_eq!(node_values(nodes), want, "{threads} threads");
    });
}

/// A helper that fans an iteration's work out to threads through `tls_runtime::scope`:
/// the threads read what earlier iterations wrote, and write for later ones.
fn fan_out(cells: &SpecVec<u64>, total: &Spec<u64>, i: usize) {
    let previous = if i > 0 { cells.get(i - 1) } else { 1 };
    tls_runtime::scope(|s| {
        for part in 0..3u64 {
            // Additions commute: the scope's threads may run in any order.
            s.spawn(move || total.update(|t| *t += part * previous));
        }
        s.spawn(|| cells.set(i, (previous * 3 + i as u64) % 1_000_003));
    });
}

#[test]
fn threads_started_by_an_iteration_through_scope() {
    const N: usize = 60;
    let want = {
        let (cells, total) = (SpecVec::from(vec![0u64; N]), Spec::new(0u64));
        for i in 0..N {
            fan_out(&cells, &total, i);
        }
        (cells.into_vec(), total.into_inner())
    };
    each_schedule(|threads| {
        let (cells, total) = (SpecVec::from(vec![0u64; N]), Spec::new(0u64));
        Loop::new().threads(threads).run(0..N, |i| {
            spin(3);
            fan_out(&cells, &total, i);
            Control::<()>::Continue
        });
        let got = (cells.into_vec(), total.into_inner());
        assert_eq!(got, want, "{threads} threads");
    });
}

mod commit_actions;
