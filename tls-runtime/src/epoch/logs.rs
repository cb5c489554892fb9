//! What an epoch logs as it runs (the versions it wrote, its undo and commit-time
//! actions), and the logs moved out of its context when it finishes.

use super::{Action, LoggedSlot};

/// One entry of an epoch's write log: a version the epoch created, named by the slot
/// and the version's (segment, generation).
pub(crate) struct WriteRecord {
    /// The slot; it outlives the record (see `memory::consume`).
    pub(crate) slot: *const dyn LoggedSlot,
    pub(crate) segment: u32,
    pub(crate) generation: u32,
}

// SAFETY: a write record points at a speculative location, which is `Sync` for the
// record's purposes (its lock serializes every access) and outlives the record: a
// container dropped while records point into it removes them or keeps its slots
// alive (see `memory::consume`), so the record may be committed or discarded from
// any thread of the loop.
unsafe impl Send for WriteRecord {}

/// An undo action of an epoch: it runs if the epoch rolls back to `segment` or
/// earlier, or if a commit-time action registered before it (one of the first
/// `after_actions`) panics at commit.
pub(crate) struct Undo {
    pub(crate) segment: u32,
    pub(crate) after_actions: usize,
    pub(crate) run: Action,
}

/// A commit-time action of an epoch: it runs at commit after the epoch's writes that
/// came before it (the first `writes_before` records of the log) and before the rest.
pub(crate) struct Deferred {
    pub(crate) segment: u32,
    pub(crate) writes_before: usize,
    /// A program's own delayed call (`on_commit`), which may read or write
    /// speculative data; not an accumulation or delayed output, which touch none.
    pub(crate) touches_data: bool,
    pub(crate) run: Action,
}

/// What an epoch has logged, moved out of its context when it finishes so that
/// whichever thread commits (or re-runs, or squashes) it can move it back in.
#[derive(Default)]
pub(crate) struct Logs {
    pub(crate) writes: Vec<WriteRecord>,
    pub(crate) undo: Vec<Undo>,
    pub(crate) commits: Vec<Deferred>,
    pub(crate) held_panic: Option<String>,
    /// See `EpochCx::reported`.
    pub(crate) reported: Vec<u32>,
    /// See `EpochCx::published`.
    pub(crate) published: bool,
}
