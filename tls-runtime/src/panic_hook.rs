//! Keeps zombie panics quiet, and lets real ones reach the program's own hook.
//!
//! A speculative epoch that read inconsistent data may panic; that panic is rolled
//! back, never seen. The default hook (or one the program set before its first loop)
//! would still report it, so the runtime chains a hook in front of it: a panic in an
//! epoch that is not known to be homefree waits, in the hook, until the epoch is
//! either homefree with no violation (the panic is the sequential program's: the
//! program's hook is called with it, once, as in a plain loop) or violated (a
//! zombie's: nothing is reported, and the iteration runs again).
//!
//! The wait is bounded ([`WAIT_LIMIT`]): the panicking code may hold something an
//! earlier epoch needs before it can finish (a `OnceLock` whose initializer panicked,
//! a `Mutex` guard), and the standard library holds its hook lock while a hook runs,
//! so a thread that changes the hook meanwhile blocks every other panic, an earlier
//! epoch's real one included. Past the limit, and where waiting is known to be wrong,
//! the message is held in the epoch instead, the unwind goes on (releasing what it
//! holds), and the runner prints the message if the epoch commits with the panic
//! (the program's own hook is then not called). Waiting is known to be wrong inside
//! an `update` or `with` closure, which holds its location, and inside an escaped
//! call (whose panic is its suspended epoch's): it holds its escape lock, which the
//! earlier epochs' calls of the same function wait for.
//!
//! A location that plain code or another loop changes after the epoch became homefree
//! but before it committed still rolls it back (see `live_loops`); a panic reported
//! in that window would be reported again if the re-run panics too. An attempt re-run
//! once homefree for another reason (a `Drop` read after a delayed call while the
//! panic unwound, the body caught the runtime's unwinding) read nothing stale: the
//! re-run replays the panics it reported, which are counted per segment
//! (`EpochCx::reported`) and not reported again. A panic after the runtime's own
//! unwinding began belongs to an attempt that is thrown away: held, never reported.

use crate::epoch::{self, EpochCx};
use std::cell::Cell;
use std::sync::Once;
use std::time::{Duration, Instant};

/// How long a speculative epoch's panic waits in the hook for the epoch to settle
/// before its message is held instead (see the module docs): long enough for the
/// earlier epochs of most loops to commit, short enough that a wait on something the
/// panicking code holds costs a panic little.
const WAIT_LIMIT: Duration = Duration::from_millis(50);

thread_local! {
    /// The epoch an escaped call on this thread suspended (null outside one).
    static ESCAPED_FROM: Cell<*const EpochCx> = const { Cell::new(core::ptr::null()) };
    /// Whether this thread takes a loop's items ahead of its epochs ([`claim_item`]).
    static CLAIMING: Cell<bool> = const { Cell::new(false) };
    /// The message of a panic of the items iterator taken ahead, held back.
    static CLAIM_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    /// Whether this thread drops what a thrown-away attempt left ([`discard`]).
    static DISCARDING: Cell<bool> = const { Cell::new(false) };
}

/// Drops `items`, closures a rolled-back or squashed attempt recorded for its commit
/// (or those after one that panicked at commit), which the sequential program never
/// drops unrun: it runs them where they are made. A panic of a value they own (a
/// guard whose `Drop` panics unless it was used) is the runtime's doing, not the
/// program's: each drop is caught, and the hook reports nothing. Dropped together,
/// the first such panic dropped the rest while unwinding, and the next one aborted
/// the process.
pub(crate) fn discard<T>(items: impl IntoIterator<Item = T>) {
    let was = DISCARDING.with(|d| d.replace(true));
    for item in items {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(item)));
    }
    DISCARDING.with(|d| d.set(was));
}

/// Calls `next` (the loop's items iterator, taken ahead of the epochs that run the
/// items). A panic in it is the sequential program's only if the loop gets that far
/// (it may `break` before): its message is held back, not given to the program's
/// hook, and returned with the panic, for the loop to print if it ends with it.
pub(crate) fn claim_item<T>(
    next: impl FnOnce() -> T,
) -> Result<T, (Box<dyn std::any::Any + Send>, Option<String>)> {
    let was = CLAIMING.with(|c| c.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(next));
    CLAIMING.with(|c| c.set(was));
    r.map_err(|p| (p, CLAIM_PANIC.with(|m| m.borrow_mut().take())))
}

/// Marks this thread as running an escaped call of `cx` (whose speculation it
/// suspended) until dropped, for the hook.
pub(crate) struct EscapedFrom(*const EpochCx);

impl EscapedFrom {
    pub(crate) fn enter(cx: &EpochCx) -> Self {
        EscapedFrom(ESCAPED_FROM.with(|c| c.replace(cx)))
    }
}

impl Drop for EscapedFrom {
    fn drop(&mut self) {
        ESCAPED_FROM.with(|c| c.set(self.0));
    }
}

/// The epoch whose escaped call this thread runs, if any.
fn escaped_from() -> Option<&'static EpochCx> {
    let p = ESCAPED_FROM.with(Cell::get);
    // SAFETY: set by `EscapedFrom::enter` from a live epoch context for the length of
    // the escaped call, which runs inside the epoch's attempt (the context outlives
    // it), and reset when the call returns or unwinds.
    unsafe { p.as_ref() }
}

/// Holds the panic's message in `cx`, for the runner to print if the epoch commits.
fn hold(cx: &EpochCx, info: &std::panic::PanicHookInfo<'_>) {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    *cx.held_panic.borrow_mut() = Some(format!("thread '{name}' {info}"));
}

/// Waits up to [`WAIT_LIMIT`] for `cx` to be homefree (`Some(true)`) or violated
/// (`Some(false)`); `None` past the limit.
fn settle_within(cx: &EpochCx) -> Option<bool> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if let Some(homefree) = cx.settled() {
            return Some(homefree);
        }
        if spins.is_multiple_of(64) && start.elapsed() > WAIT_LIMIT {
            return None;
        }
        crate::workers::backoff(&mut spins);
    }
}

/// Installs the hook once per process.
///
/// Not while this thread is panicking (a loop run by a destructor during an unwind):
/// the standard library refuses to change the hook then, with a panic that would abort
/// the process. The loop runs all the same; a zombie's panic in it may be printed,
/// and the next loop started outside an unwind installs the hook.
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    if std::thread::panicking() {
        return;
    }
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if DISCARDING.with(Cell::get) {
                return;
            }
            if CLAIMING.with(Cell::get) {
                let thread = std::thread::current();
                let name = thread.name().unwrap_or("<unnamed>");
                let msg = format!("thread '{name}' {info}");
                CLAIM_PANIC.with(|m| *m.borrow_mut() = Some(msg));
                return;
            }
            if let Some(cx) = escaped_from()
                && !cx.homefree()
            {
                hold(cx, info);
                return;
            }
            if let Some(cx) = epoch::current_quiet()
                && cx.raising.get()
            {
                // A panic after the runtime's own unwinding started: in a `Drop` it
                // runs (the process aborts after this hook), or after the body caught
                // that unwinding with `catch_unwind` and went on, where nothing the
                // attempt does is kept (it runs again). Reported, a caught panic of
                // such an attempt was reported again by the re-run, or out of order.
                hold(cx, info);
                return;
            }
            if let Some(cx) = epoch::current_quiet()
                && !cx.homefree()
            {
                if crate::memory::nesting::nested() {
                    hold(cx, info);
                    return;
                }
                match settle_within(cx) {
                    Some(true) => {}
                    // A zombie's panic.
                    Some(false) => return,
                    None => {
                        hold(cx, info);
                        return;
                    }
                }
            }
            if let Some(cx) = escaped_from().or_else(epoch::current_quiet) {
                let replayed = cx.replayed_reports.get();
                if replayed > 0 {
                    // Reported already, by the attempt this re-run replays.
                    cx.replayed_reports.set(replayed - 1);
                    return;
                }
                if let Ok(mut r) = cx.reported.try_borrow_mut() {
                    r.push(cx.segment.get());
                }
            }
            previous(info)
        }));
    });
}
