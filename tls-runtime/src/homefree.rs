//! Leaving speculation for the rest of an iteration: [`when_homefree`] and [`scope`].
//!
//! Some work cannot be speculative at all, yet its result is needed by the iteration
//! itself (so [`on_commit()`](crate::on_commit) is too late): threads that fan the
//! iteration's work out, calls into libraries that keep their own threads. The
//! iteration then waits until it is the oldest one in flight (homefree: every earlier
//! iteration has committed), commits what it did so far, and runs the rest as plain
//! code does, exactly as the homefree epoch already does at its first write
//! (`memory::publish_prefix`). Threads started from there write committed data, in
//! the place the sequential loop puts them: after every earlier iteration and before
//! every later one, which a write of theirs violates if it read the old value.

use crate::epoch::{self, AwaitHomefreeSignal};

/// Runs `f` as plain code, once every earlier iteration of the current loop has
/// committed; outside a speculative loop, runs it at once.
///
/// In a speculative epoch that is not yet homefree, the epoch stops here (it rolls back
/// to its last checkpoint, as a violation would, and its thread takes other work) and
/// runs again when it is homefree. Then, or at once if it already was, what the
/// iteration did so far is committed, and the rest of the iteration, `f` included,
/// runs as plain code: its writes are in place, commit-time actions run at once, and
/// it can no longer roll back. Threads that `f` starts (see [`scope`]) may read and
/// write speculative data as the sequential loop's would. The same holds in every
/// mode: in order (`TLS_MODE=sequential`, one thread) the call only runs `f`.
///
/// In a `Drop` of a value the body owns, run while a rollback unwinds the iteration
/// (or squashes it: an earlier iteration ended the loop), the call is skipped: that
/// attempt is thrown away, and the re-run, if any, makes the call again. A call that
/// returns `()` then returns at once; one that returns a value has none to give and
/// aborts the process with a message saying so.
///
/// The iteration runs in loop order from this call on, so a loop that calls this in
/// every iteration gains only from the work before the call. Calling it from inside
/// an `update` or `with` closure panics, in every mode and outside loops too (in an
/// iteration, the closure holds a location that committing may wait for).
///
/// ```
/// use tls_runtime::{SpecVec, for_each, when_homefree};
/// let out = SpecVec::from(vec![0u64; 8]);
/// for_each(0..8, |i| {
///     let square = (i * i) as u64; // speculative, in parallel with other iterations
///     // A library call that starts its own threads: run it in loop order.
///     let total: u64 = when_homefree(|| {
///         std::thread::scope(|s| {
///             let a = s.spawn(|| square + 1);
///             let b = s.spawn(|| square + 2);
///             a.join().unwrap() + b.join().unwrap()
///         })
///     });
///     out.set(i, total);
/// });
/// assert_eq!(out.get(3), 2 * 9 + 3);
/// ```
#[track_caller]
pub fn when_homefree<R>(f: impl FnOnce() -> R) -> R {
    // Refused in every mode (and outside loops), so that a program does not pass
    // when run in order and panic in parallel.
    if crate::memory::nesting::nested() {
        panic!(
            "tls-runtime: `when_homefree` (or `tls_runtime::scope`) was called inside an \
             `update` or `with` closure, which holds its location while the iteration \
             would wait; call it before or after the access"
        );
    }
    if let Some(cx) = epoch::current()
        && !cx.published()
    {
        if cx.raising.get() {
            // A `Drop` of the body's, run while a rollback or squash unwinds the
            // iteration: its work belongs to an attempt being thrown away (the
            // re-run, if any, calls it again), so `f` must not run.
            return skipped(WHEN_HOMEFREE);
        }
        if std::thread::panicking() {
            // A `Drop` of the body's, run while the iteration's own panic unwinds:
            // the panic is the sequential program's only if the epoch becomes
            // homefree unviolated; waiting cannot unwind again, so wait in place.
            if !wait_in_place(cx) {
                return skipped(WHEN_HOMEFREE);
            }
        } else {
            let _ = cx.begin_access();
            if !cx.homefree() {
                cx.raise(AwaitHomefreeSignal::WhenHomefree);
            }
        }
        crate::memory::publish_prefix(cx);
    }
    f()
}

/// Waits until the epoch of `cx` is homefree (`true`) or violated (`false`), without
/// unwinding.
pub(crate) fn wait_in_place(cx: &crate::epoch::EpochCx) -> bool {
    let mut spins = 0u32;
    loop {
        match cx.settled() {
            Some(homefree) => return homefree,
            None => crate::workers::backoff(&mut spins),
        }
    }
}

/// How [`skipped`] names `when_homefree` and `scope`.
const WHEN_HOMEFREE: &str = "`when_homefree` (or `tls_runtime::scope`)";

/// The result of a call (`what`) skipped because it was made from a destructor of an
/// attempt being thrown away: nothing, for a call that returns `()`. A call that
/// returns a value has none to give, and unwinding cannot be stopped from a destructor
/// (a panic now would abort anyway): say why, and stop.
#[cold]
pub(crate) fn skipped<R>(what: &str) -> R {
    if core::any::type_name::<R>() == "()" && core::mem::size_of::<R>() == 0 {
        // SAFETY: `R` is `()`, whose only value has no bytes.
        return unsafe { core::mem::transmute_copy::<(), R>(&()) };
    }
    say!(
        "tls-runtime: {what} returning a value was called from a destructor while an \
         iteration was being rolled back: its work would run for an attempt that is thrown \
         away, and there is no value to return instead. Call it in the loop body, or return \
         `()` from it (such a call is skipped there, and made when the iteration runs \
         again). Aborting."
    );
    std::process::abort()
}

/// [`std::thread::scope`] for a loop body: the threads run once every earlier iteration
/// has committed (see [`when_homefree`]), so what they read and write of speculative
/// data is what the sequential loop's threads would read and write.
///
/// ```
/// use tls_runtime::{SpecVec, for_each};
/// let rows: Vec<Vec<u64>> = (0..16).map(|i| (0..100).map(|j| i * j).collect()).collect();
/// let sums = SpecVec::from(vec![0u64; 16]);
/// for_each(0..16, |i| {
///     tls_runtime::scope(|s| {
///         let (left, right) = rows[i].split_at(50);
///         let a = s.spawn(|| left.iter().sum::<u64>());
///         let b = s.spawn(|| right.iter().sum::<u64>());
///         sums.set(i, a.join().unwrap() + b.join().unwrap());
///     });
/// });
/// assert_eq!(sums.get(2), (0..100).map(|j| 2 * j).sum::<u64>());
/// ```
#[track_caller]
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope std::thread::Scope<'scope, 'env>) -> T,
{
    when_homefree(|| std::thread::scope(f))
}
