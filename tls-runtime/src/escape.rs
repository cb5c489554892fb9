//! Escaping speculation: calls that must run for real even from a speculative epoch,
//! and the undo actions that reverse them if the epoch is rolled back past the call.
//!
//! An escaped call runs non-speculatively (speculative containers it touches are read
//! and written as committed data), serialized with other calls of the same function by
//! its [`EscapeLock`], and it is *not* rolled back: the epoch registers an undo action
//! (`on_violation`) that the runtime runs, newest first, if the epoch rolls back to a
//! segment before the call. A call from a homefree epoch can never be rolled back, so
//! it registers nothing.

use crate::epoch::{self, AwaitHomefreeSignal, CurrentGuard};
use std::sync::Mutex;

/// Serializes the calls of one escaped function (the `#[escape]` macro makes one
/// `static` per function).
#[derive(Debug, Default)]
pub struct EscapeLock(Mutex<()>);

impl EscapeLock {
    /// A new, unlocked escape lock.
    pub const fn new() -> Self {
        EscapeLock(Mutex::new(()))
    }
}

/// Runs `f` non-speculatively, serialized by `lock`: the plain-function form of
/// `#[escape]`.
///
/// Outside any speculative epoch this is just `f()`. Inside one, a violation that is
/// already pending is raised first (an epoch that read stale data never makes the
/// call), then `f` runs with speculation suspended.
///
/// ```
/// use tls_runtime::{EscapeLock, escape, on_violation};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// static PINS: AtomicUsize = AtomicUsize::new(0);
/// static PIN_LOCK: EscapeLock = EscapeLock::new();
/// tls_runtime::for_each(0..100, |_| {
///     escape(&PIN_LOCK, || PINS.fetch_add(1, Ordering::Relaxed));
///     // If this epoch is rolled back past the call, take the pin back.
///     on_violation(|| { PINS.fetch_sub(1, Ordering::Relaxed); });
/// });
/// assert_eq!(PINS.load(Ordering::Relaxed), 100);
/// ```
pub fn escape<R>(lock: &EscapeLock, f: impl FnOnce() -> R) -> R {
    match epoch::current() {
        None => f(),
        Some(cx) => {
            let _ = cx.begin_access();
            let _serial = lock.0.lock().unwrap_or_else(|e| e.into_inner());
            let _suspended = CurrentGuard::set(None);
            f()
        }
    }
}

/// Like [`escape`], but first checks the call's arguments: in a speculative epoch, if
/// `args_ok` returns `false` the arguments must come from stale speculative data, so the
/// call is not made; the epoch waits until it is violated (and re-runs) or becomes
/// homefree (then the arguments are what the sequential program computes, and the call
/// is made without the check).
pub fn escape_checked<R>(
    lock: &EscapeLock,
    args_ok: impl FnOnce() -> bool,
    f: impl FnOnce() -> R,
) -> R {
    if let Some(cx) = epoch::current() {
        let a = cx.begin_access();
        if !a.homefree && !args_ok() {
            cx.raise(AwaitHomefreeSignal);
        }
    }
    escape(lock, f)
}

/// Registers `undo` to run if the current epoch is rolled back to before this point:
/// the plain-function form of `#[on_violation]`.
///
/// Undo actions run newest first, non-speculatively. Outside any speculative epoch, or
/// in a homefree one, nothing can be rolled back and `undo` is dropped unrun.
pub fn on_violation(undo: impl FnOnce() + Send + 'static) {
    if let Some(cx) = epoch::current()
        && !cx.homefree()
    {
        cx.undo
            .borrow_mut()
            .push((cx.segment.get(), Box::new(undo)));
    }
}

/// Whether the calling code runs inside a speculative epoch that is not (yet known to
/// be) homefree.
pub fn is_speculative() -> bool {
    epoch::current().is_some_and(|cx| !cx.homefree())
}
