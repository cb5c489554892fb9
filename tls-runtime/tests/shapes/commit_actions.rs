//! Commit-time actions (`on_commit`, accumulations): they run at commit, between the
//! writes their iteration made before and after them, and may panic, read what the
//! iteration wrote, or take ownership of a container it wrote.

use super::*;

#[test]
fn a_panicking_commit_action_ends_the_iteration_there() {
    each_schedule(|threads| {
        let v = SpecVec::from(vec![0u64; 64]);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let r = catch_unwind(AssertUnwindSafe(|| {
            Loop::new().threads(threads).run(0..64usize, |i| {
                spin(i as u64 % 3);
                v.set(i, 1);
                let seen = seen.clone();
                on_commit(move || {
                    seen.lock().unwrap().push(i);
                    if i == 30 {
                        panic!("commit action of 30");
                    }
                });
                // After the action: never happens for iteration 30.
                v.set(i, 2);
                Control::<()>::Continue
            })
        }));
        assert!(r.is_err());
        let want: Vec<u64> = (0..64)
            .map(|i| match i {
                0..30 => 2,
                30 => 1,
                _ => 0,
            })
            .collect();
        assert_eq!(v.into_vec(), want, "{threads} threads");
        assert_eq!(*seen.lock().unwrap(), (0..=30).collect::<Vec<_>>());
    });
}

#[test]
fn a_commit_action_sees_the_state_at_its_call() {
    each_schedule(|threads| {
        let cell = Arc::new(Spec::new(0u64));
        let seen = Arc::new(Mutex::new(Vec::new()));
        Loop::new().threads(threads).run(0..50u64, |i| {
            cell.set(i * 10);
            let (c, s) = (cell.clone(), seen.clone());
            on_commit(move || s.lock().unwrap().push(c.get()));
            cell.set(i * 10 + 1);
            Control::<()>::Continue
        });
        let want: Vec<u64> = (0..50).map(|i| i * 10).collect();
        assert_eq!(*seen.lock().unwrap(), want, "{threads} threads");
        assert_eq!(cell.get(), 491);
    });
}

#[test]
fn an_overflowing_accumulation_ends_the_loop_with_the_sequential_state() {
    each_schedule(|threads| {
        let v = SpecVec::from(vec![0u8; 40]);
        let total = std::sync::Mutex::new(250u8);
        let r = catch_unwind(AssertUnwindSafe(|| {
            Loop::new().threads(threads).run(0..40usize, |i| {
                v.set(i, 1);
                let total = &total;
                // What `total += 1` becomes in a `#[tls_loop]` body, with overflow
                // checks: the addition runs at commit.
                let add = move || {
                    let mut t = total.lock().unwrap_or_else(|e| e.into_inner());
                    *t = t.checked_add(1).expect("attempt to add with overflow");
                };
                let add: Box<dyn FnOnce() + Send + '_> = Box::new(add);
                // SAFETY: `total` outlives the loop, which runs or drops every action.
                let add: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(add) };
                on_commit(add);
                v.set(i, 2);
                Control::<()>::Continue
            })
        }));
        assert!(r.is_err());
        // 250 + 5 = 255; the sixth addition (iteration 5) overflows.
        let want: Vec<u8> = (0..40)
            .map(|i| match i {
                0..5 => 2,
                5 => 1,
                _ => 0,
            })
            .collect();
        assert_eq!(v.into_vec(), want, "{threads} threads");
        assert_eq!(*total.lock().unwrap_or_else(|e| e.into_inner()), 255);
    });
}

/// An iteration fills a scratch container of its own, hands it to a commit-time
/// action that consumes (or drops) it, then writes more: the commit holds the
/// scratch container's locks while the action frees it.
#[test]
fn a_commit_action_consumes_a_container_the_iteration_wrote() {
    each_schedule(|threads| {
        let out = SpecVec::from(vec![0u64; 60]);
        let flushed = Arc::new(Mutex::new(Vec::new()));
        Loop::new().threads(threads).run(0..60u64, |i| {
            spin(i % 4);
            let scratch = SpecVec::from(vec![0u64; 3]);
            let single = Arc::new(Spec::new(0u64));
            // An action before the writes: from here on the scratch containers get
            // versions and records, as data shared with other epochs would.
            let f = flushed.clone();
            on_commit(move || f.lock().unwrap().push((Vec::new(), u64::MAX)));
            for k in 0..3 {
                scratch.set(k, i * 10 + k as u64);
            }
            single.set(i);
            let f = flushed.clone();
            let kept = single.clone();
            on_commit(move || {
                let rows = scratch.into_vec();
                f.lock().unwrap().push((rows, kept.get()));
                drop(kept);
            });
            drop(single);
            // Writes after the action keep the commit's locks held while it runs.
            out.set(i as usize, i + 1);
            Control::<()>::Continue
        });
        let want: Vec<(Vec<u64>, u64)> = (0..60)
            .flat_map(|i| {
                [
                    (Vec::new(), u64::MAX),
                    ((0..3).map(|k| i * 10 + k).collect(), i),
                ]
            })
            .collect();
        assert_eq!(*flushed.lock().unwrap(), want, "{threads} threads");
        assert_eq!(out.into_vec(), (1..=60).collect::<Vec<_>>());
    });
}

/// As above, with the iteration writing the container after the action too (the
/// action drops the last handle: the commit still has records of it to apply), and one
/// action panicking (those records are discarded instead).
#[test]
fn a_commit_action_drops_a_container_written_after_it() {
    each_schedule(|threads| {
        let out = SpecVec::from(vec![0u64; 40]);
        let flushed = Arc::new(Mutex::new(Vec::new()));
        let r = catch_unwind(AssertUnwindSafe(|| {
            Loop::new().threads(threads).run(0..40u64, |i| {
                spin(i % 3);
                let scratch = Arc::new(SpecVec::from(vec![0u64; 2]));
                on_commit(|| {});
                scratch.set(0, i);
                scratch.set(1, i + 1);
                let (f, s) = (flushed.clone(), scratch.clone());
                on_commit(move || {
                    f.lock().unwrap().push(vec![s.get(0), s.get(1)]);
                    drop(s);
                    if i == 25 {
                        panic!("flush of 25");
                    }
                });
                scratch.set(1, 99);
                drop(scratch);
                out.set(i as usize, i + 1);
                Control::<()>::Continue
            })
        }));
        assert!(r.is_err(), "{threads} threads");
        let want: Vec<Vec<u64>> = (0..=25).map(|i| vec![i, i + 1]).collect();
        assert_eq!(*flushed.lock().unwrap(), want, "{threads} threads");
        let want: Vec<u64> = (0..40).map(|i| if i < 25 { i + 1 } else { 0 }).collect();
        assert_eq!(out.into_vec(), want, "{threads} threads");
    });
}

/// An iteration drops a container it wrote after registering an action: the
/// container's records leave the epoch's log, and the action must still run between
/// the same writes (it sees `out` as it was at the call, never the write after it),
/// also when the log becomes shorter than the action's old position.
#[test]
fn a_container_dropped_after_an_action_leaves_it_between_the_same_writes() {
    each_schedule(|threads| {
        let out = Arc::new(Spec::new(0u64));
        let tail = SpecVec::from(vec![0u64; 40]);
        let seen = Arc::new(Mutex::new(Vec::new()));
        Loop::new().threads(threads).chunk(1).run(0..40u64, |i| {
            spin(i % 3);
            let scratch = SpecVec::from(vec![0u64; 3]);
            on_commit(|| {});
            if i % 2 == 0 {
                // One record of `scratch` before the action, one after.
                scratch.set(0, i);
            } else {
                // `tail`'s record, then three of `scratch`, all before the action.
                tail.set(i as usize, i);
                for k in 0..3 {
                    scratch.set(k, i);
                }
            }
            let (o, s) = (out.clone(), seen.clone());
            on_commit(move || s.lock().unwrap().push(o.get()));
            out.set(i + 1);
            scratch.set(1, i);
            drop(scratch);
            Control::<()>::Continue
        });
        assert_eq!(
            *seen.lock().unwrap(),
            (0..40).collect::<Vec<u64>>(),
            "{threads} threads"
        );
        let want: Vec<u64> = (0..40).map(|i| if i % 2 == 1 { i } else { 0 }).collect();
        assert_eq!(tail.into_vec(), want, "{threads} threads");
    });
}

/// A commit-time action that touches a location from inside that location's own
/// `update` closure panics, as it does outside loops, also when the commit holds the
/// location's lock (a write follows the action).
#[test]
fn a_commit_action_reentering_an_update_closure_panics() {
    each_schedule(|threads| {
        let a = Arc::new(Spec::new(vec![7u64; 8]));
        let out = SpecVec::from(vec![0u64; 30]);
        let panicked = Arc::new(AtomicUsize::new(0));
        Loop::new().threads(threads).run(0..30u64, |i| {
            spin(i % 3);
            a.set(vec![i; 8]);
            let (a, p) = (a.clone(), panicked.clone());
            on_commit(move || {
                let r = catch_unwind(AssertUnwindSafe(|| {
                    a.update(|v| {
                        let first = &v[..];
                        a.set(Vec::new());
                        first.iter().sum::<u64>()
                    })
                }));
                if let Err(e) = r {
                    assert!(panic_message(&e).contains("inside its own"), "{e:?}");
                    p.fetch_add(1, Ordering::Relaxed);
                }
            });
            out.set(i as usize, 1);
            Control::<()>::Continue
        });
        assert_eq!(panicked.load(Ordering::Relaxed), 30, "{threads} threads");
        assert_eq!(a.get(), vec![29; 8]);
    });
}
