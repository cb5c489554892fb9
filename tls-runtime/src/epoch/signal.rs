//! What an attempt unwinds to its runner with (`EpochCx::raise`): a rollback, or a
//! request to run again once homefree, with the reason.

use core::panic::Location;

/// The unwinding payload that carries a rollback to the epoch runner.
pub(crate) struct RollbackSignal;

/// The unwinding payload of an epoch that stops speculating: it waits until it is
/// violated (and re-runs for that) or homefree (and re-runs as the oldest epoch,
/// where it need not speculate), and says why, for the trace.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AwaitHomefreeSignal {
    /// An escaped call's argument check failed (the argument may be stale).
    ArgumentCheck,
    /// The body asked to run the rest of the iteration as plain code
    /// (`when_homefree`, `tls_runtime::scope`).
    WhenHomefree,
    /// A synchronized load waited longer than it may for the epochs before it.
    SyncedLoad(&'static Location<'static>),
    /// The epoch gave way twice to another thread holding a location it needed.
    GaveWay,
    /// A speculative load came after an `on_commit` call the epoch had not run, and
    /// the epoch could not wait there for long enough.
    DelayedCall(&'static Location<'static>),
    /// The loop body caught the runtime's own signal (a rollback's unwinding) with
    /// `catch_unwind` and went on: what the attempt did after it is not the
    /// iteration's.
    CaughtByBody,
}

impl AwaitHomefreeSignal {
    /// Why the epoch re-ran, in words (the detail of its span in `TLS_TRACE`).
    pub(crate) fn describe(self) -> String {
        let why = match self {
            AwaitHomefreeSignal::ArgumentCheck => "an escaped call's argument check failed".into(),
            AwaitHomefreeSignal::WhenHomefree => "when_homefree".into(),
            AwaitHomefreeSignal::SyncedLoad(load) => format!(
                "waited too long at synchronized load {}",
                crate::report::SourceLocation(load)
            ),
            AwaitHomefreeSignal::GaveWay => "gave way twice to a location's holder".into(),
            AwaitHomefreeSignal::DelayedCall(load) => format!(
                "load {} after an `on_commit` call not yet run",
                crate::report::SourceLocation(load)
            ),
            AwaitHomefreeSignal::CaughtByBody => {
                "the body caught a rollback with catch_unwind".into()
            }
        };
        format!("re-run once homefree: {why}")
    }
}
