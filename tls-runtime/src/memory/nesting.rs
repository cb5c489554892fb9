//! Accesses made from inside another access's closure.
//!
//! `update` and `with` run the user's closure while holding the location's lock, so
//! that a read-modify-write is one atomic access, as with a `Mutex`. A closure that
//! touches another location then holds one lock while it waits for another, and two
//! such closures on two threads, each holding what the other wants, would wait for
//! ever. The rules, checked only when a lock is found busy (the common path pays for
//! one thread-local push and pop per closure):
//!
//! - The same location from inside its own closure can never be granted (the thread
//!   would wait on itself): it panics, saying what to write instead. The check does
//!   not depend on the mode, so a sequential run and a speculative one end the same
//!   way.
//! - Another location whose lock is busy, from a speculative epoch: spin a bounded
//!   time, then roll the epoch back to the start of its segment (the second time, wait
//!   to re-run it until it is homefree), which releases the
//!   outer lock. The homefree epoch never rolls back and plain code has nothing to roll
//!   back, so they wait: the speculative epochs they could be waiting for give way.
//!   Two plain threads (or the homefree epochs of two loops) that nest accesses in
//!   opposite orders wait for each other as they would with two `Mutex`es.
//! - A location whose lock this thread's commit holds (a commit-time action touching
//!   data its iteration wrote, see `memory::log` and `commit_hold`): the access goes
//!   ahead under the commit's hold, at the point of the commit where the action runs.

use crate::sync::RawLock;
use core::cell::Cell;

/// A lock held by an enclosing closure on this thread.
struct Frame {
    lock: *const RawLock,
    outer: *const Frame,
}

thread_local! {
    static INNERMOST: Cell<*const Frame> = const { Cell::new(core::ptr::null()) };
}

/// Runs `f` with `lock` (held by the caller) noted as held by a closure on this thread.
#[inline]
pub(crate) fn in_closure<R>(lock: &RawLock, f: impl FnOnce() -> R) -> R {
    struct Pop(*const Frame);
    impl Drop for Pop {
        fn drop(&mut self) {
            INNERMOST.with(|c| c.set(self.0));
        }
    }
    let outer = INNERMOST.with(Cell::get);
    let frame = Frame { lock, outer };
    INNERMOST.with(|c| c.set(&frame));
    let _pop = Pop(outer);
    f()
}

/// Whether a closure on this thread holds `lock`.
pub(crate) fn holds(lock: &RawLock) -> bool {
    let mut f = INNERMOST.with(Cell::get);
    while !f.is_null() {
        // SAFETY: frames live on the stack of `in_closure` calls that are still running
        // on this thread (each unlinks its frame before returning or unwinding past it).
        let frame = unsafe { &*f };
        if core::ptr::eq(frame.lock, lock) {
            return true;
        }
        f = frame.outer;
    }
    false
}

/// Whether this thread runs inside an access's closure.
pub(crate) fn nested() -> bool {
    !INNERMOST.with(Cell::get).is_null()
}

/// The panic for an access to a location from inside its own closure.
#[cold]
#[track_caller]
pub(crate) fn reentered() -> ! {
    panic!(
        "tls-runtime: a speculative location was accessed from inside its own `update` or \
         `with` closure, which holds it; read the value before the call, or make the whole \
         change inside the one closure"
    )
}
