//! Escaping speculation: calls that must run for real even from a speculative epoch,
//! and the undo actions that reverse them if the epoch is rolled back past the call.
//!
//! An escaped call runs non-speculatively (speculative containers it touches are read
//! and written as committed data), serialized with other calls of the same function by
//! its [`EscapeLock`], and it is *not* rolled back: the epoch registers an undo action
//! (`on_violation`) that the runtime runs, newest first, if the epoch rolls back to a
//! segment before the call. Until it commits, or publishes what it did at its first
//! write once homefree (`memory::publish_prefix`), even a homefree epoch can roll back
//! (plain code or another loop may change what it read), so it registers undo actions
//! too.
//!
//! The lock is re-entrant on its own thread: an escaped function may call itself, or
//! run a speculative loop whose body calls it. A loop started inside an escaped call
//! runs in order on the calling thread ([`inside_escape`]): its epochs would otherwise
//! run on workers that wait for the lock this thread holds.

use crate::epoch::{self, AwaitHomefreeSignal, CurrentGuard};
use core::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::LocalKey;

/// Serializes the calls of one escaped function (the `#[escape]` macro makes one
/// `static` per function). Re-entrant on the thread that holds it.
#[derive(Debug, Default)]
pub struct EscapeLock {
    mutex: Mutex<()>,
    /// The holding thread's token (see [`thread_token`]), or 0.
    owner: AtomicUsize,
}

impl EscapeLock {
    /// A new, unlocked escape lock.
    pub const fn new() -> Self {
        EscapeLock {
            mutex: Mutex::new(()),
            owner: AtomicUsize::new(0),
        }
    }

    /// Runs `f` holding the lock (at once if this thread already holds it).
    fn hold<R>(&self, f: impl FnOnce() -> R) -> R {
        let me = thread_token();
        // Only this thread ever stores its own token, so seeing it means we hold the
        // lock; any other value (another holder, or none) means we do not.
        if self.owner.load(Ordering::Relaxed) == me {
            return f();
        }
        struct Release<'a>(&'a AtomicUsize);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(0, Ordering::Relaxed);
            }
        }
        let _guard = self.mutex.lock().unwrap_or_else(|e| e.into_inner());
        self.owner.store(me, Ordering::Relaxed);
        let _release = Release(&self.owner);
        f()
    }
}

thread_local! {
    static TOKEN: u8 = const { 0 };
    static ESCAPES: Cell<u32> = const { Cell::new(0) };
}

/// A number unique to the calling thread while it lives (the address of a
/// thread-local), never 0.
fn thread_token() -> usize {
    TOKEN.with(|t| t as *const u8 as usize)
}

/// Whether this thread is inside an escaped call: a loop started here runs in order.
pub(crate) fn inside_escape() -> bool {
    ESCAPES.with(Cell::get) > 0
}

/// Runs `f` counted as inside an escaped call: a loop started there runs in order on
/// this thread. Commit-time actions run so too (their commit holds locks that the
/// epochs of a loop on other threads could wait for).
pub(crate) fn escaped<R>(f: impl FnOnce() -> R) -> R {
    with_raised(&ESCAPES, f)
}

/// Runs `f` with this thread's `counter` one higher, lowered again when `f` returns
/// or unwinds (a mark that nests: "inside an escaped call", "inside an in-order
/// iteration").
pub(crate) fn with_raised<R>(counter: &'static LocalKey<Cell<u32>>, f: impl FnOnce() -> R) -> R {
    struct Lower(&'static LocalKey<Cell<u32>>);
    impl Drop for Lower {
        #[inline]
        fn drop(&mut self) {
            self.0.with(|c| c.set(c.get() - 1));
        }
    }
    counter.with(|c| c.set(c.get() + 1));
    let _lower = Lower(counter);
    f()
}

/// Runs `f` non-speculatively, serialized by `lock`: the plain-function form of
/// `#[escape]`.
///
/// Outside any speculative epoch this is just `f()`. Inside one, a violation that is
/// already pending is raised first (an epoch that read stale data never makes the
/// call), then `f` runs with speculation suspended, holding the lock: speculative
/// containers it reads give their committed values (not the epoch's own writes so
/// far, nor uncommitted ones of earlier epochs), and its writes to them are made at
/// once, as plain code's are. Pass it what it needs from the iteration as arguments.
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
            cx.skipped_escape.set(false);
            let _ = cx.begin_access();
            lock.hold(|| {
                let _suspended = CurrentGuard::set(None);
                let _from = crate::panic_hook::EscapedFrom::enter(cx);
                escaped(f)
            })
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
    if !check_arguments(args_ok) {
        return crate::homefree::skipped("`escape_checked`");
    }
    escape(lock, f)
}

/// The argument check of [`escape_checked`] and `#[escape(check = ...)]`: whether the
/// call may be made. In a speculative epoch that is not homefree, a failed check
/// re-runs the iteration once homefree (unwinding from here). In a `Drop` of the
/// body's run while the iteration unwinds (its own panic, or a rollback), unwinding
/// again would abort the process: the check waits in place, and if the epoch is
/// violated meanwhile (its attempt is thrown away) the call must not be made: `false`.
/// An [`on_violation`] right after such a skipped call registers nothing, since there
/// is no call to undo.
pub(crate) fn check_arguments(args_ok: impl FnOnce() -> bool) -> bool {
    let Some(cx) = epoch::current() else {
        return true;
    };
    cx.skipped_escape.set(false);
    let _ = cx.begin_access();
    if cx.homefree() || args_ok() {
        return true;
    }
    if !std::thread::panicking() {
        cx.raise(AwaitHomefreeSignal::ArgumentCheck);
    }
    if crate::homefree::wait_in_place(cx) {
        return true;
    }
    cx.skipped_escape.set(true);
    false
}

/// Registers `undo` to run if the current epoch is rolled back to before this point:
/// the plain-function form of `#[on_violation]`.
///
/// Undo actions run newest first, non-speculatively. Outside any speculative loop
/// nothing can be rolled back and `undo` is dropped unrun; once the epoch commits, its
/// undo actions are dropped unrun.
pub fn on_violation(undo: impl FnOnce() + Send + 'static) {
    if let Some(cx) = epoch::current()
        && !cx.published()
        // The escaped call this undoes was skipped (see `check_arguments`).
        && !cx.skipped_escape.replace(false)
    {
        cx.register_undo(epoch::Action::new(undo));
    }
}

/// Whether the calling code runs inside a speculative epoch that is not (yet known to
/// be) homefree.
pub fn is_speculative() -> bool {
    epoch::current().is_some_and(|cx| !cx.homefree())
}
