//! A zombie stuck in plain code: an epoch that read stale data and then waits, in code
//! with no tracked access or poll, for something only fresh data would give it. The
//! loop cannot end before the zombie reaches a tracked access; what it must do is say
//! so (stderr and `LoopReport::stuck_zombies`), and still give the sequential result
//! once the zombie moves on.
//!
//! Its own test binary: `TLS_ZOMBIE_WARN_MS` is read once per process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tls_runtime::{Control, Loop, LoopSite, Spec, SpecVec};

/// Plain code the macro does not see: spins until `release`, touching nothing
/// tracked (the shape that "loops until two values agree" has).
#[inline(never)]
fn wait_for(release: &AtomicBool) {
    while !release.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
}

#[test]
fn a_zombie_stuck_in_plain_code_is_named_counted_and_then_rolled_back() {
    // SAFETY: no other thread of this process exists yet, and nothing reads the
    // environment concurrently (this binary's only test sets it first thing).
    unsafe { std::env::set_var("TLS_ZOMBIE_WARN_MS", "100") };
    // First: the process's first violation, by plain code (the watchdog starts
    // only after a violation, and here no commit follows it).
    named_after_plain_code_changed_what_it_read();
    // 4 items: the caller waits for the loop to settle; 12: it waits on a full window
    // of epochs in flight (two threads, four each), held up by the zombie.
    for n in [4usize, 12] {
        named_once(n);
    }
    named_on_the_caller();
}

/// The zombie on the loop's calling thread: no participant is left to wait and watch
/// (the worker leaves once it has nothing to claim), so only the watchdog can say so.
fn named_on_the_caller() {
    let caller = std::thread::current().id();
    for attempt in 0..40 {
        let ready = Spec::new(false);
        let out = SpecVec::from(vec![0u64; 3]);
        let release = AtomicBool::new(false);
        let stuck_on_caller = AtomicBool::new(false);
        let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
        // A loop just before, so that the worker spins and claims epoch 1 at once
        // while the caller runs epoch 0 and then claims epoch 2.
        Loop::new().threads(2).run(0..64, |i| {
            out.set(i % 3, 0);
            Control::<()>::Continue
        });
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(600));
                release.store(true, Ordering::Release);
            });
            Loop::new().threads(2).site(site).run(0..3, |i| {
                if i == 0 {
                    // Long enough for the worker to claim epoch 1 even if it has to
                    // wake first (a loaded machine made 40 attempts in a row miss
                    // without this): the caller then claims epoch 2.
                    std::thread::sleep(Duration::from_millis(5));
                }
                if i == 1 {
                    std::thread::sleep(Duration::from_millis(50));
                    ready.set(true);
                }
                if i == 2 {
                    let seen = ready.get();
                    if !seen && std::thread::current().id() == caller {
                        // Stale, on the caller: stuck until released.
                        stuck_on_caller.store(true, Ordering::Relaxed);
                        wait_for(&release);
                    }
                    out.set(2, u64::from(seen));
                }
                Control::<()>::Continue
            });
        });
        assert_eq!(out.into_vec(), [0, 0, 1], "attempt {attempt}");
        let report = tls_runtime::last_report().expect("a report");
        if stuck_on_caller.load(Ordering::Relaxed) {
            assert_eq!(report.stuck_zombies, 1, "attempt {attempt}: {report}");
            return;
        }
    }
    panic!("no attempt had the zombie on the calling thread");
}

fn named_once(n: usize) {
    let mut named = 0;
    // The zombie needs epoch 1 to run beside epoch 0 and the caller to be the one
    // waiting; a few attempts make that certain enough (it is nearly always the first).
    for attempt in 0..10 {
        let ready = Spec::new(false);
        let out = SpecVec::from(vec![0u64; n]);
        let release = AtomicBool::new(false);
        let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
        std::thread::scope(|s| {
            // Whatever happens, the zombie is let go after a while, so the test ends.
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(600));
                release.store(true, Ordering::Release);
            });
            Loop::new().threads(2).site(site).run(0..n, |i| {
                if i == 0 {
                    std::thread::sleep(Duration::from_millis(50));
                    ready.set(true);
                }
                if i == 1 {
                    let seen = ready.get();
                    if !seen {
                        // Stale: sequentially `ready` is already true here.
                        wait_for(&release);
                    }
                    out.set(1, u64::from(seen));
                }
                if i >= 2 {
                    out.set(i, i as u64 * 10);
                }
                Control::<()>::Continue
            });
        });
        // The sequential result, whatever the schedule was.
        let expected: Vec<u64> = (0..n as u64)
            .map(|i| if i < 2 { i } else { i * 10 })
            .collect();
        assert_eq!(out.into_vec(), expected, "{n} items, attempt {attempt}");
        let report = tls_runtime::last_report().expect("a report");
        assert!(report.stuck_zombies <= 1, "{report}");
        named += report.stuck_zombies;
        if report.stuck_zombies == 1 {
            assert!(report.violations >= 1, "{report}");
            assert!(report.to_string().contains("stuck zombies: 1"), "{report}");
            break;
        }
    }
    assert_eq!(
        named, 1,
        "{n} items: no attempt had the caller wait on a stuck zombie"
    );
}

/// Spins until `flag` is set, for at most `ms` milliseconds; whether it was set.
fn spin_until(flag: &AtomicBool, ms: u64) -> bool {
    let t = std::time::Instant::now();
    while !flag.load(Ordering::Acquire) {
        if t.elapsed() > Duration::from_millis(ms) {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// The zombie on the caller, violated by a plain thread's write (outside any loop):
/// no commit follows the violation, and the worker has nothing to do, so the
/// watchdog must start from the violation itself, on time. The process's first
/// violation: each attempt that does not place the zombie has none.
fn named_after_plain_code_changed_what_it_read() {
    let on_worker = || {
        std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("tls-worker"))
    };
    for attempt in 0..40 {
        let ready = Spec::new(false);
        let out = SpecVec::from(vec![0u64; 3]);
        let (release, stuck) = (AtomicBool::new(false), AtomicBool::new(false));
        let (worker_in, caller_in) = (AtomicBool::new(false), AtomicBool::new(false));
        // Set once the worker's epoch 1 stops waiting for the caller (by timeout,
        // on a machine too busy to run both).
        let worker_out = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let t = std::time::Instant::now();
                while !stuck.load(Ordering::Acquire) && t.elapsed() < Duration::from_secs(3) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if stuck.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(5));
                    ready.set(true); // plain code: violates the epoch that read it
                    std::thread::sleep(Duration::from_millis(600));
                }
                release.store(true, Ordering::Release);
            });
            // Wanted: epoch 0 on the caller waits for the worker to hold epoch 1,
            // which waits for the caller to be in epoch 2: epoch 2 then runs on the
            // caller and, once stuck, is the oldest left. A worker that spins picks
            // the loop up as soon as it is published and may claim epoch 0 itself
            // (about one loop in 400 here): that attempt does not place the zombie,
            // and its epoch 0 must not wait for an epoch 1 that only it could run.
            Loop::new().threads(2).chunk(1).run(0..3usize, |i| {
                match i {
                    0 => {
                        if !on_worker() {
                            spin_until(&worker_in, 2000);
                        }
                    }
                    1 => {
                        if on_worker() {
                            worker_in.store(true, Ordering::Release);
                            spin_until(&caller_in, 2000);
                            worker_out.store(true, Ordering::Release);
                        }
                    }
                    _ => {
                        let seen = ready.get();
                        // Epoch 1 was on the worker, not yet finished, when `ready`
                        // was read: the read was speculative, so the plain write
                        // below violates it.
                        let speculative = worker_in.load(Ordering::Acquire)
                            && !worker_out.load(Ordering::Acquire);
                        if !on_worker() && speculative && !stuck.load(Ordering::Acquire) {
                            caller_in.store(true, Ordering::Release);
                            if !seen {
                                stuck.store(true, Ordering::Release);
                                wait_for(&release);
                            }
                        }
                        out.set(2, u64::from(seen));
                    }
                }
                Control::<()>::Continue
            });
        });
        let report = tls_runtime::last_report().expect("a report");
        if stuck.load(Ordering::Acquire) {
            assert_eq!(out.into_vec(), [0, 0, 1], "attempt {attempt}");
            assert_eq!(report.stuck_zombies, 1, "attempt {attempt}: {report}");
            return;
        }
    }
    panic!("no attempt had the zombie on the calling thread");
}
