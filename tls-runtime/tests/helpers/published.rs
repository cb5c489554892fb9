//! A value the loop body reads and writes through functions of another file, as a
//! program's helpers do: what `profile_mode.rs` checks the advice against.

use tls_runtime::Spec;

/// The value the last iteration published.
pub(crate) fn latest(shared: &Spec<u64>) -> u64 {
    shared.get()
}

/// Publishes a new value for the next iteration.
pub(crate) fn publish(shared: &Spec<u64>, v: u64) {
    shared.set(v);
}
