//! Closures a rolled-back attempt recorded for its commit are dropped unrun, which the
//! sequential program never does (it runs each where it is made). A value they own
//! whose `Drop` panics unless it was used (a guard that must be consumed) must not
//! end the loop: that panic is the runtime's doing. Dropped together, the first such
//! panic escaped the loop as "a worker's loop panicked", and the next one, dropped
//! while it unwound, aborted the process.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use tls_runtime::{Control, Loop, SpecVec, inject_violations, on_commit};

mod common;
use common::spin;

/// Whether a guard dropped unused panics (only while the loop runs).
static ARMED: AtomicBool = AtomicBool::new(false);

/// Must be consumed: panics when dropped unused, unless its thread is already
/// unwinding (a value the body owns when a rollback unwinds it, which would abort
/// the process in any program).
struct MustRun(u64);

impl MustRun {
    fn consume(self) -> u64 {
        let v = self.0;
        std::mem::forget(self);
        v
    }
}

impl Drop for MustRun {
    fn drop(&mut self) {
        if ARMED.load(SeqCst) && !std::thread::panicking() {
            panic!("a guard of iteration {} was dropped unused", self.0);
        }
    }
}

#[test]
fn recorded_calls_of_rolled_back_attempts_are_dropped_quietly() {
    static LOG: Mutex<Vec<u64>> = Mutex::new(Vec::new());
    const N: u64 = 300;
    for threads in [2, 4] {
        LOG.lock().unwrap().clear();
        let shared = SpecVec::from(vec![0u64; 4]);
        ARMED.store(true, SeqCst);
        inject_violations(150_000);
        Loop::new().threads(threads).run(0..N, |i| {
            let guard = MustRun(i);
            on_commit(move || LOG.lock().unwrap().push(guard.consume()));
            // Real conflicts besides the injected ones, after the call.
            shared.update((i % 4) as usize, |s| *s += spin(1) % 2 + 1);
            Control::<()>::Continue
        });
        inject_violations(0);
        ARMED.store(false, SeqCst);
        assert_eq!(
            *LOG.lock().unwrap(),
            (0..N).collect::<Vec<_>>(),
            "threads {threads}"
        );
    }
}
