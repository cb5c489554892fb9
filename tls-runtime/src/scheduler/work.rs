//! An epoch as the scheduler carries it: claimed and running ([`Work`]: its items and
//! the checkpoint [`Snapshot`]s its segments start from), then finished ([`Done`]:
//! its logs and how it ended, [`EpochEnd`]), waiting for commit in its [`DoneSlot`].

use super::Payload;
use crate::control::Control;
use crate::epoch::{AwaitHomefreeSignal, Cause, Logs};
use crate::sync::Mutex;
use crossbeam_utils::CachePadded;
use std::time::{Duration, Instant};

/// Where a segment of an epoch starts: the epoch's start (segment 0) or a checkpoint.
pub(super) struct Snapshot<S> {
    /// The position, in the epoch's items, of the item the segment runs.
    pub(super) item: usize,
    /// A clone of the state the segment starts from.
    pub(super) state: S,
    /// When the segment started (last started, after a rollback to it).
    pub(super) started: Instant,
    /// The epoch's tracked accesses by then (`EpochCx::accesses`): a violated
    /// load's place in its segment, for the report's advice.
    pub(super) accesses: u32,
}

/// An epoch's work: its items and, per segment, the position and state it starts
/// from and when it started.
pub(super) struct Work<T, S> {
    pub(super) index: u64,
    pub(super) items: Vec<T>,
    pub(super) snaps: Vec<Snapshot<S>>,
    /// A rollback threw away at least a quarter of the epoch's work so far (see
    /// [`crate::rules::lost_enough`]).
    pub(super) rolled_back: bool,
    /// When its last attempt finished, while it waits (published) for commit: a
    /// violation found then loses the work up to this moment, not the wait.
    pub(super) finished: Option<Instant>,
    /// Time its attempts ran, and the part of it rollbacks threw away: the
    /// difference is the work it took, counted for automatic chunking by whichever
    /// thread commits it.
    pub(super) ran: Duration,
    pub(super) lost: Duration,
    /// The position, in its items, of the item its last attempt ended in: the last
    /// one, unless that attempt ended the loop (`break`, `return`, a panic) early.
    pub(super) reached: usize,
}

impl<T, S> Work<T, S> {
    /// A claimed epoch of `items`, not yet run.
    pub(super) fn new(index: u64, items: Vec<T>) -> Self {
        Work {
            index,
            items,
            snaps: Vec::new(),
            rolled_back: false,
            finished: None,
            ran: Duration::ZERO,
            lost: Duration::ZERO,
            reached: 0,
        }
    }

    /// The iterations its last attempt ran: all of its items, or up to the one
    /// that ended the loop.
    pub(super) fn items_ran(&self) -> usize {
        (self.reached + 1).min(self.items.len())
    }

    /// The work the epoch took: the time its attempts ran, less what rollbacks
    /// threw away.
    pub(super) fn useful(&self) -> Duration {
        self.ran.saturating_sub(self.lost)
    }
}

/// How a finished epoch ended.
pub(super) enum EpochEnd<R> {
    Control(Control<R>),
    /// A panic; real if the epoch turns out homefree without a violation.
    Panic(Payload),
    /// The epoch stopped speculating (an escaped call's argument check failed, a
    /// synchronized load waited too long, ...): re-run once homefree.
    RerunHomefree(AwaitHomefreeSignal),
    /// The loop's iterator panicked producing this epoch's item.
    IterPanic(Payload),
    /// Its commit found it violated (by plain code or another loop): re-run from the
    /// segment, for the cause.
    Violated(u32, Option<Cause>),
}

/// A finished epoch waiting to be committed.
pub(super) struct Done<T, S, R> {
    pub(super) work: Work<T, S>,
    pub(super) segment: u32,
    pub(super) logs: Logs,
    pub(super) end: EpochEnd<R>,
}

/// Where a finished epoch waits for commit: one per position in the epoch ring.
pub(super) type DoneSlot<T, S, R> = CachePadded<Mutex<Option<Box<Done<T, S, R>>>>>;
