//! The per-epoch violation signal: each loop's [`EpochRing`] of padded [`EpochSlot`]s,
//! one per epoch that may be in flight (see the parent module).

use super::{Tag, index_of, serial_of};
use crate::adapt::SyncedLoads;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Mutex, Ordering, lock};
use core::panic::Location;
use crossbeam_utils::CachePadded;

/// `rollback_to` value meaning "not violated".
pub(crate) const NOT_VIOLATED: u32 = u32::MAX;

/// Why an epoch was violated: the store that hit a location it had loaded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cause {
    pub(crate) store: &'static Location<'static>,
    pub(crate) load: &'static Location<'static>,
    /// The speculative accesses the epoch made before the load (0: its first).
    pub(crate) load_ordinal: u32,
    /// A store really hit what the load read (not an injected violation, nor a
    /// version discarded with its container): what synchronized loads learn from.
    pub(crate) real: bool,
    /// Whether the storing epoch had itself loaded the location at the same load
    /// before the store (`x.set(x.get() + 1)`): a read-modify-write in two calls,
    /// which the report's advice names as the accumulation it may be. `None`: not
    /// known (a homefree epoch's reads leave no records).
    pub(crate) rewrite: Option<bool>,
    /// How many epochs before the violated one the storing epoch is, for a store of
    /// the same loop; 0: not known (another loop, plain code, no store at all). What
    /// a synchronized load waits for (`adapt/synced.rs`).
    pub(crate) distance: u64,
}

/// The shared, padded state of one in-flight epoch.
///
/// States of `rollback_to`:
///
/// ```text
///   NOT_VIOLATED --violate(s): fetch_min--> s --violate(s2 < s)--> s2
///        ^                                   |
///        +------- take_violation(): swap ----+
/// ```
///
/// Memory ordering: `violate` runs under the violated location's lock, after the new
/// version is in place, and its `fetch_min` is `AcqRel`. The victim reads `rollback_to`
/// with `Relaxed` while speculating (a late look only delays a rollback that will come:
/// the same check runs at every access, at every checkpoint and before commit); the
/// check before commit follows an `Acquire` load of the commit watermark that
/// synchronizes with the earlier epochs' `Release` commits, so every violation raised by
/// an earlier epoch is visible there. `tag` is published with `Release` before the epoch
/// makes any access and read with `Acquire` by violators.
#[derive(Debug)]
pub(crate) struct EpochSlot {
    tag: AtomicU64,
    rollback_to: AtomicU32,
    /// Whether `cause` may hold something (written under the `cause` lock).
    has_cause: AtomicBool,
    cause: Mutex<Option<(u32, Cause)>>,
}

impl EpochSlot {
    fn new() -> Self {
        EpochSlot {
            tag: AtomicU64::new(0),
            rollback_to: AtomicU32::new(NOT_VIOLATED),
            has_cause: AtomicBool::new(false),
            cause: Mutex::new(None),
        }
    }

    /// Makes the slot belong to epoch `tag`, with no violation pending.
    pub(crate) fn reset(&self, tag: Tag) {
        self.rollback_to.store(NOT_VIOLATED, Ordering::Relaxed);
        // A squashed epoch may have left a cause behind; the lock is taken only then,
        // not on every epoch.
        if self.take_cause_flag() {
            *lock(&self.cause) = None;
        }
        self.tag.store(tag, Ordering::Release);
    }

    fn take_cause_flag(&self) -> bool {
        // Load first: the common case (no cause) then writes nothing.
        self.has_cause.load(Ordering::Relaxed) && self.has_cause.swap(false, Ordering::Relaxed)
    }

    /// The epoch the slot belongs to now (read by the zombie watchdog, not under loom).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn tag(&self, order: Ordering) -> Tag {
        self.tag.load(order)
    }

    /// The pending rollback target, or `NOT_VIOLATED`.
    #[inline]
    pub(crate) fn pending(&self, order: Ordering) -> u32 {
        self.rollback_to.load(order)
    }

    /// Clears and returns the pending rollback target and its cause.
    pub(crate) fn take_violation(&self) -> (u32, Option<Cause>) {
        // The common case, no violation, costs one load of the epoch's own line. A
        // violator stores its cause before lowering `rollback_to`, so once we see the
        // target, the cause is there.
        if self.rollback_to.load(Ordering::Acquire) == NOT_VIOLATED {
            return (NOT_VIOLATED, None);
        }
        // Under the cause lock, as violators lower the target (`record`): a target
        // taken here comes with the cause recorded for it, and one lowered after
        // the swap leaves its own cause behind for the next look. (Taken apart, a
        // violation landing between the swap and the take left a pending target
        // with no cause: a rollback the report and the trace could not name.)
        let mut cause = lock(&self.cause);
        let target = self.rollback_to.swap(NOT_VIOLATED, Ordering::AcqRel);
        self.has_cause.store(false, Ordering::Relaxed);
        (target, cause.take().map(|(_, c)| c))
    }

    /// Lowers the pending rollback target to `segment`, keeping the cause of the
    /// lowest target asked for.
    fn record(&self, segment: u32, cause: Option<Cause>) {
        let mut c = lock(&self.cause);
        if let Some(cause) = cause
            && c.as_ref().is_none_or(|(s, _)| segment < *s)
        {
            *c = Some((segment, cause));
            self.has_cause.store(true, Ordering::Relaxed);
        }
        self.rollback_to.fetch_min(segment, Ordering::AcqRel);
        crate::scheduler::note_violation();
    }
}

/// The slots of the epochs a loop may have in flight, indexed by epoch index modulo the
/// ring's length.
#[derive(Debug)]
pub(crate) struct EpochRing {
    slots: Box<[CachePadded<EpochSlot>]>,
    mask: u64,
    /// The loop site's synchronized loads (none for the runtime's own epochs).
    synced: Option<&'static SyncedLoads>,
}

impl EpochRing {
    /// A ring with room for at least `window` epochs in flight.
    pub(crate) fn new(window: usize) -> Self {
        let len = window.max(1).next_power_of_two();
        EpochRing {
            slots: (0..len)
                .map(|_| CachePadded::new(EpochSlot::new()))
                .collect(),
            mask: len as u64 - 1,
            synced: None,
        }
    }

    /// The ring, with epochs that wait at the loads `synced` names.
    pub(crate) fn synchronizing(mut self, synced: &'static SyncedLoads) -> Self {
        self.synced = Some(synced);
        self
    }

    /// The synchronized loads of the loop's site.
    #[inline]
    pub(crate) fn synced(&self) -> Option<&'static SyncedLoads> {
        self.synced
    }

    /// How many epochs fit in flight.
    pub(crate) fn len(&self) -> u64 {
        self.mask + 1
    }

    /// The position of epoch `index` in the ring.
    #[inline]
    pub(crate) fn position(&self, index: u64) -> usize {
        (index & self.mask) as usize
    }

    /// The slot of epoch `index`.
    #[inline]
    pub(crate) fn slot(&self, index: u64) -> &EpochSlot {
        &self.slots[(index & self.mask) as usize]
    }

    /// Asks epoch `victim` to roll back to `segment`, for `cause`.
    ///
    /// Does nothing if the slot already belongs to another epoch (the victim's record was
    /// dead). Called with the violated location's lock held.
    pub(crate) fn violate(&self, victim: Tag, segment: u32, cause: Cause) {
        let slot = self.slot(index_of(victim));
        if slot.tag.load(Ordering::Acquire) != victim {
            return;
        }
        slot.record(segment, Some(cause));
    }

    /// Asks epoch `tag` to roll back to `segment` again, for `cause` (a violation
    /// taken by a commit that then could not go on), if the slot still belongs to it.
    pub(crate) fn rearm(&self, tag: Tag, segment: u32, cause: Option<Cause>) {
        let slot = self.slot(index_of(tag));
        if slot.tag.load(Ordering::Acquire) == tag {
            slot.record(segment, cause);
        }
    }

    /// Squashes every in-flight epoch of loop `serial` after `index`: they roll back to
    /// their start and learn from the loop's stop index that they must not re-run.
    pub(crate) fn squash_after(&self, serial: u32, index: u64) {
        for slot in self.slots.iter() {
            let tag = slot.tag.load(Ordering::Acquire);
            if serial_of(tag) == serial && index_of(tag) > index {
                slot.rollback_to.fetch_min(0, Ordering::AcqRel);
                crate::scheduler::note_violation();
            }
        }
    }
}
