//! `Spec<T>`: one speculative cell.

use super::consume::{consume_slots, drop_slots, one};
use super::slot::Slot;
use super::{Header, read_with, update, write};
use core::fmt;
use core::panic::Location;

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
    /// Boxed: epochs' write logs point at it, so it must not move with the `Spec`.
    /// Dropped by hand (see `Drop`).
    slot: core::mem::ManuallyDrop<Box<Slot<T>>>,
    header: Header,
}

impl<T> Spec<T> {
    /// A cell holding `value`.
    pub fn new(value: T) -> Self {
        // The header first: see `Header::new`.
        let header = Header::new();
        Spec {
            slot: core::mem::ManuallyDrop::new(Box::new(Slot::new(value))),
            header,
        }
    }

    /// Reads the value.
    #[track_caller]
    #[inline]
    pub fn get(&self) -> T
    where
        T: Clone,
    {
        read_with(
            &self.slot,
            self.header.origin(),
            Location::caller(),
            T::clone,
        )
    }

    /// Reads the value through `f` without cloning it.
    #[track_caller]
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        read_with(&self.slot, self.header.origin(), Location::caller(), f)
    }

    /// Replaces the value.
    #[track_caller]
    #[inline]
    pub fn set(&self, value: T) {
        write(&self.slot, &self.header, Location::caller(), value)
    }

    /// Reads and modifies the value in place; returns what `f` returns.
    #[track_caller]
    #[inline]
    pub fn update<R>(&self, f: impl FnOnce(&mut T) -> R) -> R
    where
        T: Clone,
    {
        update(&self.slot, &self.header, Location::caller(), f)
    }

    /// Consumes the cell, returning its value: the committed one, or, inside an epoch
    /// that wrote the cell, the one that epoch sees.
    pub fn into_inner(self) -> T {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; we move the slot out once.
        let slot = core::mem::ManuallyDrop::into_inner(unsafe { core::ptr::read(&this.slot) });
        let written = this.header.was_written();
        consume_slots(one(slot), written)
            .pop()
            .expect("one slot, one value")
    }
}

impl<T> Drop for Spec<T> {
    fn drop(&mut self) {
        // SAFETY: the slot is taken once, here, and `self` is not used afterwards.
        let slot = unsafe { core::mem::ManuallyDrop::take(&mut self.slot) };
        drop_slots(one(slot), self.header.was_written());
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
