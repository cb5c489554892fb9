//! Violations injected on purpose, to test code that runs in speculative loops.
//!
//! A loop body that is correct when epochs never conflict can still be wrong when
//! they do: an escaped call without the right undo, a commit-time action that
//! assumes it runs once, state kept outside speculative containers. Conflicts are
//! rare and timing-dependent, so a test can run a thousand times without one.
//! [`inject_violations`] makes them common: each tracked access, checkpoint or poll
//! of a speculative (not homefree) epoch is, with the given probability, treated as
//! if an earlier epoch had just written what the epoch read, and the epoch rolls back
//! to the start of its current segment and runs again. The result must still be the
//! sequential one; if it is not, the body has a bug that real conflicts would hit.
//!
//! Injected violations appear in reports with both sides of the dependence at this
//! file's line, so they are easy to tell apart, and with no advice: the report says
//! they were injected (there is nothing in the loop to fix).
//!
//! The rate applies per check, so an epoch's chance to finish unviolated falls with
//! the checks it makes: a body of 60 checks (an inner loop the macro polls, say) at
//! one in five finishes speculatively about once in 650,000 attempts, and nearly all
//! of its work is redone when it becomes homefree (the homefree epoch is never hit).
//! The result stays right but the loop runs many times slower; for such bodies use a
//! rate of a few per thousand checks. Injected violations never make a load
//! synchronized (see the report's synchronized loads): only real ones count.

use crate::epoch::{Cause, EpochCx};
use core::cell::Cell;
use core::panic::Location;
use core::sync::atomic::{AtomicU32, Ordering};

/// Whether a dependence whose store is `store` is an injected one (both its sides
/// name this file's line): not the loop's, so the report gives it no advice.
pub(crate) fn is_injected(store: crate::report::SourceLocation) -> bool {
    store.0.file() == file!()
}

/// What a report says of an injected dependence, in place of advice.
pub(crate) const INJECTED: &str =
    "injected by inject_violations, not a dependence of the loop's: nothing to fix";

/// Injected violations per million checks (0: none).
static RATE: AtomicU32 = AtomicU32::new(0);

/// Sets how often speculative epochs are violated on purpose: `per_million` of
/// their tracked accesses, checkpoints and polls roll them back (0, the default,
/// turns injection off; values above a million count as a million). The oldest
/// (homefree) epoch is never hit, so loops still finish. For tests: see the module
/// docs.
///
/// ```
/// use tls_runtime::{SpecVec, inject_violations};
/// let v = SpecVec::from(vec![0u64; 64]);
/// inject_violations(200_000); // one check in five
/// tls_runtime::for_each(0..64usize, |i| v.update(i, |x| *x += i as u64));
/// inject_violations(0);
/// assert_eq!(v.into_vec(), (0..64).collect::<Vec<u64>>());
/// ```
pub fn inject_violations(per_million: u32) {
    RATE.store(per_million.min(1_000_000), Ordering::Relaxed);
}

thread_local! {
    static RNG: Cell<u64> = const { Cell::new(0x9E37_79B9_7F4A_7C15) };
    /// Set while the runtime's own epochs run on this thread (profile mode's
    /// calibration): they are not the user's to test, and nothing catches a rollback
    /// of theirs.
    static OFF: Cell<bool> = const { Cell::new(false) };
}

/// Turns injection off on this thread while it lives.
pub(crate) struct Off(bool);

impl Off {
    pub(crate) fn new() -> Self {
        Off(OFF.with(|o| o.replace(true)))
    }
}

impl Drop for Off {
    fn drop(&mut self) {
        OFF.with(|o| o.set(self.0));
    }
}

/// Maybe violates the speculative epoch `cx` at its current segment (called where
/// it looks for violations).
#[inline]
pub(crate) fn maybe_violate(cx: &EpochCx) {
    let rate = RATE.load(Ordering::Relaxed);
    if rate == 0 || OFF.with(Cell::get) {
        return;
    }
    let draw = RNG.with(|r| {
        // xorshift64: cheap, and good enough to spread injections.
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        x
    });
    if draw % 1_000_000 < u64::from(rate) {
        let here = Location::caller();
        cx.violate_self(Cause {
            store: here,
            load: here,
            load_ordinal: 0,
            real: false,
            rewrite: None,
            distance: 0,
        });
    }
}
