//! Keeps zombie panics quiet.
//!
//! A speculative epoch that read inconsistent data may panic; that panic is rolled
//! back, never seen. The default hook would still print it, so the runtime chains a
//! hook in front of it: a panic in an epoch that is not known to be homefree has its
//! message held in the epoch; if the epoch later turns out homefree with no violation
//! (the panic is real), the runner prints the held message then.

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
                let thread = std::thread::current();
                let name = thread.name().unwrap_or("<unnamed>");
                *cx.held_panic.borrow_mut() = Some(format!("thread '{name}' {info}"));
                return;
            }
            previous(info)
        }));
    });
}
