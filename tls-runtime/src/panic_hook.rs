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
pub(crate) fn install() {
    static ONCE: Once = Once::new();
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
