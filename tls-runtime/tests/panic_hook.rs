//! A loop's panic reaches the program's own panic hook once, as the sequential loop's
//! would, whatever thread ran the iteration and whether it was speculative when it
//! panicked. (Its own test binary: the hook is process-wide.)

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tls_runtime::{Control, Loop, SpecVec};

static CALLS: AtomicUsize = AtomicUsize::new(0);
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[test]
fn the_program_s_panic_hook_sees_a_loop_s_panic_once() {
    std::panic::set_hook(Box::new(|info| {
        CALLS.fetch_add(1, Ordering::SeqCst);
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_default();
        MESSAGES.lock().unwrap().push(msg);
    }));
    for threads in [1, 2, 4] {
        for round in 0..20 {
            CALLS.store(0, Ordering::SeqCst);
            MESSAGES.lock().unwrap().clear();
            let out = SpecVec::from(vec![0u64; 40]);
            let caught = catch_unwind(AssertUnwindSafe(|| {
                Loop::new().threads(threads).run(0..40usize, |i| {
                    if i < 30 {
                        // Long enough that iteration 30 starts while 29 still runs:
                        // it panics while speculative.
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    out.set(i, i as u64 + 1);
                    if i == 30 {
                        panic!("boom at 30");
                    }
                    Control::<()>::Continue
                });
            }));
            let payload = caught.expect_err("the loop's panic comes out of it");
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom at 30"));
            let calls = CALLS.load(Ordering::SeqCst);
            let messages = MESSAGES.lock().unwrap().clone();
            assert_eq!(
                (calls, messages.as_slice()),
                (1, ["boom at 30".to_string()].as_slice()),
                "{threads} threads, round {round}"
            );
            let expected: Vec<u64> = (0..40).map(|i| if i <= 30 { i + 1 } else { 0 }).collect();
            assert_eq!(out.into_vec(), expected, "{threads} threads, round {round}");
        }
    }
}
