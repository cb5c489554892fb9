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
//! Waiting is safe where it happens: every earlier epoch is already handed out to a
//! thread that runs it to its end (the same wait `when_homefree` makes in a
//! destructor during the unwind). The one exception is a panic inside an `update` or
//! `with` closure, which holds its location: an earlier epoch may need it, so the
//! message is held in the epoch instead and the runner prints it once the epoch
//! commits (the program's own hook is then not called).
//!
//! A location that plain code or another loop changes after the epoch became homefree
//! but before it committed still rolls it back (see `live_loops`); a panic reported
//! in that window would be reported again if the re-run panics too.

use crate::epoch;
use std::sync::Once;

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
            if let Some(cx) = epoch::current_quiet()
                && !cx.homefree()
                && !cx.raising.get()
            {
                if crate::memory::nesting::nested() {
                    let thread = std::thread::current();
                    let name = thread.name().unwrap_or("<unnamed>");
                    *cx.held_panic.borrow_mut() = Some(format!("thread '{name}' {info}"));
                    return;
                }
                if !crate::homefree::wait_in_place(cx) {
                    // A zombie's panic.
                    return;
                }
            }
            previous(info)
        }));
    });
}
