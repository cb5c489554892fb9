//! A loop's panic reaches the program's own panic hook once, as the sequential loop's
//! would, whatever thread ran the iteration and whether it was speculative when it
//! panicked; a zombie's panic never reaches it. (Its own test binary: the hook is
//! process-wide, and both tests run in one function so that they never overlap.)

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tls_runtime::{Control, EscapeLock, Loop, LoopSite, SpecVec, escape};

static CALLS: AtomicUsize = AtomicUsize::new(0);
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Forgets the hook calls so far.
fn forget_calls() {
    CALLS.store(0, Ordering::SeqCst);
    MESSAGES.lock().unwrap().clear();
}

/// The hook calls since [`forget_calls`], and their messages.
fn seen() -> (usize, Vec<String>) {
    (
        CALLS.load(Ordering::SeqCst),
        MESSAGES.lock().unwrap().clone(),
    )
}

#[test]
fn the_program_s_panic_hook_sees_real_panics_once_and_zombies_never() {
    std::panic::set_hook(Box::new(|info| {
        CALLS.fetch_add(1, Ordering::SeqCst);
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        MESSAGES.lock().unwrap().push(msg);
    }));
    a_real_panic_is_seen_once();
    a_zombie_s_panic_is_never_seen();
    a_panic_inside_an_update_closure_ends_the_loop();
    a_zombie_s_panic_in_an_escaped_call_is_never_seen();
    a_panic_that_holds_what_an_earlier_iteration_needs_does_not_hang();
    an_items_panic_past_a_break_is_never_seen();
    panics_a_homefree_re_run_replays_are_seen_once();
}

/// An attempt that reported real panics and then re-ran once homefree replays them:
/// the re-run's are not reported again. Two shapes from an outside probe, where the
/// hook ran up to four times per panic: a body that catches its items' panics and
/// uses `when_homefree` (the runtime's own unwinding, caught with them, re-runs the
/// attempt), and a guard whose `Drop` reads after a delayed call while the
/// iteration's real panic unwinds.
fn panics_a_homefree_re_run_replays_are_seen_once() {
    use tls_runtime::{Spec, on_commit, when_homefree};
    const N: usize = 120;
    for threads in [2, 4] {
        for round in 0..10 {
            forget_calls();
            let total = Spec::new(0u64);
            Loop::new().threads(threads).chunk(4).run(0..N, |i| {
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    let t = total.get();
                    std::hint::black_box((0..300).fold(t, |a, k| a ^ k));
                    assert!(!i.is_multiple_of(7), "bad item {i}");
                    total.set(t + i as u64);
                    when_homefree(|| ());
                }));
                Control::<()>::Continue
            });
            let (calls, messages) = seen();
            let bad = (0..N).filter(|i| i.is_multiple_of(7)).count();
            // (The hook counts, so the test's own failure is printed here.)
            if calls != bad {
                eprintln!(
                    "caught panics: {threads} threads, round {round}: {calls} hook calls for {bad} panics: {messages:?}"
                );
            }
            assert_eq!(calls, bad);
        }
    }
    struct ReadsOnDrop<'a>(&'a Spec<u64>, &'a SpecVec<u64>, usize);
    impl Drop for ReadsOnDrop<'_> {
        fn drop(&mut self) {
            let c = std::sync::Arc::new(());
            on_commit(move || drop(c));
            self.1.set(self.2, self.0.get());
        }
    }
    for threads in [2, 4, 8] {
        for round in 0..10 {
            forget_calls();
            let seq = std::sync::Arc::new(Spec::new(0u64));
            let seen_at = SpecVec::from(vec![0u64; 60]);
            let caught = catch_unwind(AssertUnwindSafe(|| {
                Loop::new().threads(threads).chunk(1).run(0..60usize, |i| {
                    let _guard = ReadsOnDrop(&seq, &seen_at, i);
                    let s = std::sync::Arc::clone(&seq);
                    on_commit(move || s.update(|x| *x += 1));
                    std::hint::black_box((0..2000).fold(i, |a, k| a ^ k));
                    assert!(i != 45, "boom at {i}");
                    Control::<()>::Continue
                })
            }));
            assert!(caught.is_err());
            let (calls, messages) = seen();
            if calls != 1 || seen_at.get(45) != 46 {
                eprintln!(
                    "drop after a delayed call: {threads} threads, round {round}: {calls} hook \
                     calls {messages:?}, seen {}",
                    seen_at.get(45)
                );
            }
            assert_eq!((calls, seen_at.get(45)), (1, 46));
        }
    }
}

fn a_real_panic_is_seen_once() {
    for threads in [1, 2, 4] {
        for round in 0..20 {
            forget_calls();
            let out = SpecVec::from(vec![0u64; 40]);
            let caught = catch_unwind(AssertUnwindSafe(|| {
                Loop::new().threads(threads).run(0..40usize, |i| {
                    if i < 30 {
                        // Long enough that iteration 30 starts while 29 still runs:
                        // it panics while speculative.
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    out.set(i, i as u64 + 1);
                    // Every later iteration panics too, but only while speculative:
                    // in order, the loop ends at 30.
                    if i >= 30 {
                        panic!("boom at {i}");
                    }
                    Control::<()>::Continue
                });
            }));
            let payload = caught.expect_err("the loop's panic comes out of it");
            assert_eq!(
                payload.downcast_ref::<String>().map(String::as_str),
                Some("boom at 30")
            );
            assert_eq!(
                seen(),
                (1, vec!["boom at 30".to_string()]),
                "{threads} threads, round {round}"
            );
            let expected: Vec<u64> = (0..40).map(|i| if i <= 30 { i + 1 } else { 0 }).collect();
            assert_eq!(out.into_vec(), expected, "{threads} threads, round {round}");
        }
    }
}

/// Each iteration checks what the one before it stored at its end: in order that is
/// always there, so an iteration that panics on it ran on stale data (a zombie).
fn a_zombie_s_panic_is_never_seen() {
    zombie_rounds(24, |threads, done| {
        Loop::new().threads(threads).run(0..24usize, |i| {
            let before = if i > 0 { done.get(i - 1) } else { 1 };
            assert_eq!(before, 1, "zombie at {i}");
            std::thread::sleep(Duration::from_micros(100));
            done.set(i, 1);
            Control::<()>::Continue
        });
    });
}

/// Runs `run_loop` (with a thread count, on `n` items all 0) ten times at each of 1,
/// 2 and 4 threads: it must leave every item 1, and no panic may reach the hook.
fn zombie_rounds(n: usize, run_loop: impl Fn(usize, &SpecVec<u64>)) {
    for threads in [1, 2, 4] {
        for round in 0..10 {
            forget_calls();
            let done = SpecVec::from(vec![0u64; n]);
            run_loop(threads, &done);
            assert_eq!(
                done.into_vec(),
                vec![1; n],
                "{threads} threads, round {round}"
            );
            assert_eq!(
                seen(),
                (0, Vec::<String>::new()),
                "{threads} threads, round {round}: a zombie's panic reached the hook"
            );
        }
    }
}

/// A panic inside an `update` closure, which holds its location and so cannot wait
/// in the hook: the loop still ends with it and keeps what the plain loop keeps
/// (the hook may or may not see it, depending on whether the iteration was
/// speculative then; the runtime prints the message otherwise).
fn a_panic_inside_an_update_closure_ends_the_loop() {
    for threads in [1, 2, 4] {
        for round in 0..10 {
            let v = SpecVec::from(vec![0u64; 32]);
            let caught = catch_unwind(AssertUnwindSafe(|| {
                Loop::new().threads(threads).run(0..32usize, |i| {
                    std::thread::sleep(Duration::from_micros(50));
                    v.update(i, |x| {
                        *x = i as u64 + 1;
                        if i == 20 {
                            panic!("boom in update");
                        }
                    });
                    Control::<()>::Continue
                });
            }));
            let payload = caught.expect_err("the loop's panic comes out of it");
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom in update"));
            let expected: Vec<u64> = (0..32).map(|i| if i <= 20 { i + 1 } else { 0 }).collect();
            assert_eq!(v.into_vec(), expected, "{threads} threads, round {round}");
        }
    }
}

/// A zombie passes a stale value to an escaped call, which panics on it: the call runs
/// with the epoch suspended, and its panic is still the zombie's, never seen. (A new
/// site per loop, so that no loop learns to stop speculating.)
fn a_zombie_s_panic_in_an_escaped_call_is_never_seen() {
    static LOCK: EscapeLock = EscapeLock::new();
    zombie_rounds(8, |threads, done| {
        let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
        Loop::new()
            .threads(threads)
            .chunk(1)
            .site(site)
            .run(0..8usize, |i| {
                let before = if i > 0 { done.get(i - 1) } else { 1 };
                escape(&LOCK, || {
                    assert_eq!(before, 1, "stale value in escape at {i}")
                });
                std::thread::sleep(Duration::from_millis(1));
                done.set(i, 1);
                Control::<()>::Continue
            });
    });
}

/// A lazily built table whose initializer panics: a speculative iteration that gets
/// there first panics holding the `OnceLock`'s initialization, which iteration 0 then
/// waits for. The speculative panic must not wait for iteration 0 for ever: the loop
/// ends with iteration 0's panic, the one the plain loop has, seen once.
fn a_panic_that_holds_what_an_earlier_iteration_needs_does_not_hang() {
    for threads in [1, 2] {
        for round in 0..4 {
            forget_calls();
            let table: OnceLock<u64> = OnceLock::new();
            let caught = catch_unwind(AssertUnwindSafe(|| {
                Loop::new().threads(threads).chunk(1).run(0..2usize, |i| {
                    if i == 0 {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let t = table.get_or_init(|| panic!("cannot build the table"));
                    std::hint::black_box(t);
                    Control::<()>::Continue
                });
            }));
            let payload = caught.expect_err("the loop's panic comes out of it");
            assert_eq!(
                payload.downcast_ref::<&str>(),
                Some(&"cannot build the table"),
                "{threads} threads, round {round}"
            );
            assert_eq!(
                seen(),
                (1, vec!["cannot build the table".to_string()]),
                "{threads} threads, round {round}"
            );
        }
    }
}

/// The runtime takes items ahead of the epochs that run them; an items iterator that
/// panics on an item past the one whose iteration breaks never panics in the plain
/// loop. Its panic reached the program's hook (7 to 9 runs in 10 at 2 to 8 threads),
/// though the loop's result was right.
fn an_items_panic_past_a_break_is_never_seen() {
    let mut items: Vec<Option<u64>> = (0..2000).map(Some).collect();
    items[1000] = None;
    for threads in [1, 2, 4] {
        for round in 0..20 {
            forget_calls();
            let out = SpecVec::from(vec![0u64; 1000]);
            let outcome = Loop::new().threads(threads).run(
                items.iter().map(|o| o.expect("an item present")),
                |i| {
                    if i == 999 {
                        return Control::<()>::Break;
                    }
                    out.set(i as usize, i * 2);
                    Control::Continue
                },
            );
            assert!(
                matches!(outcome, tls_runtime::LoopOutcome::Broke),
                "{threads} threads, round {round}"
            );
            assert_eq!(out.get(998), 1996);
            assert_eq!(seen(), (0, vec![]), "{threads} threads, round {round}");
        }
    }
    // Reached, the items' panic is the loop's.
    let caught = catch_unwind(AssertUnwindSafe(|| {
        Loop::new()
            .threads(2)
            .run(items.iter().map(|o| o.expect("an item present")), |_| {
                Control::<()>::Continue
            })
    }));
    assert!(caught.is_err());
}
