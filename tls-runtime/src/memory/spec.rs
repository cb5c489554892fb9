//! `Spec<T>`: one speculative cell.

use super::slot::Slot;
use super::{forget, read_with, update, write};
use crate::epoch::{Tag, Versioned};
use crate::epoch::Access;
use core::fmt;
use core::panic::Location;
use core::sync::atomic::{AtomicBool, Ordering};

/// A speculative cell: a value that epochs of a speculative loop may read and write.
///
/// Inside an epoch, reads and writes are tracked: a read sees the epoch's own write,
/// else the newest write of an earlier epoch, else the committed value; writes are
/// buffered until the epoch commits. If an earlier epoch writes the cell after a later
/// one read it, the later epoch is rolled back and re-run. Outside any speculative loop
/// a `Spec<T>` behaves like a `Mutex<T>` you never hold: one uncontended lock per
/// write, and per read of a value with drop glue or over 64 bytes; a read of a smaller
/// plain value (a number, a small `Copy` struct) takes no lock.
///
/// Only the cell's own reads and writes are tracked: interior mutability inside the
/// value (a `Cell`, an atomic, a `Mutex`) changes it behind the runtime's back and is
/// neither rolled back nor ordered by it.
///
/// ```
/// use tls_runtime::Spec;
/// let total = Spec::new(0u64);
/// tls_runtime::for_each(1..=100u64, |i| total.update(|t| *t += i));
/// assert_eq!(total.into_inner(), 5050);
/// ```
pub struct Spec<T> {
    slot: Slot<T>,
    written: AtomicBool,
}

impl<T> Spec<T> {
    /// A cell holding `value`.
    pub fn new(value: T) -> Self {
        Spec {
            slot: Slot::new(value),
            written: AtomicBool::new(false),
        }
    }

    /// Reads the value.
    #[track_caller]
    #[inline]
    pub fn get(&self) -> T
    where
        T: Clone,
    {
        read_with(&self.slot, Location::caller(), T::clone)
    }

    /// Reads the value through `f` without cloning it.
    #[track_caller]
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        read_with(&self.slot, Location::caller(), f)
    }

    /// Replaces the value.
    #[track_caller]
    #[inline]
    pub fn set(&self, value: T) {
        write(
            &self.slot,
            self,
            0,
            &self.written,
            Location::caller(),
            value,
        )
    }

    /// Reads and modifies the value in place; returns what `f` returns.
    #[track_caller]
    #[inline]
    pub fn update<R>(&self, f: impl FnOnce(&mut T) -> R) -> R
    where
        T: Clone,
    {
        update(&self.slot, self, 0, &self.written, Location::caller(), f)
    }

    /// Consumes the cell, returning its committed value.
    pub fn into_inner(self) -> T {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; we move the slot out once.
        let slot = unsafe { core::ptr::read(&this.slot) };
        slot.into_committed()
    }
}

impl<T> Versioned for Spec<T> {
    fn commit_key(&self, _key: usize, tag: Tag) {
        self.slot.commit(tag)
    }
    fn discard_key(&self, _key: usize, a: &Access<'_>, from_segment: u32) {
        self.slot.discard(a, from_segment)
    }
}

impl<T> Drop for Spec<T> {
    fn drop(&mut self) {
        if self.written.load(Ordering::Relaxed) {
            forget(self, core::iter::once(&self.slot));
        }
    }
}

impl<T: Default> Default for Spec<T> {
    fn default() -> Self {
        Spec::new(T::default())
    }
}

impl<T: fmt::Debug> fmt::Debug for Spec<T> {
    /// Shows the committed value (not any epoch's uncommitted one).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.slot
            .read_committed(|v| f.debug_tuple("Spec").field(v).finish())
    }
}

impl<T> From<T> for Spec<T> {
    fn from(value: T) -> Self {
        Spec::new(value)
    }
}
