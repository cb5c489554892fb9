//! `SpecVec<T>`: a fixed-length vector of speculative elements.

use super::slot::Slot;
use crate::epoch::Access;
use super::{forget, read_with, update, write};
use crate::epoch::{Tag, Versioned};
use core::fmt;
use core::panic::Location;
use core::sync::atomic::{AtomicBool, Ordering};

/// A fixed-length vector whose elements are tracked one by one: epochs that touch
/// different elements never conflict.
///
/// ```
/// use tls_runtime::SpecVec;
/// let v = SpecVec::from(vec![0u32; 8]);
/// tls_runtime::for_each(0..8usize, |i| v.set(i, i as u32 * 10));
/// assert_eq!(v.into_vec(), vec![0, 10, 20, 30, 40, 50, 60, 70]);
/// ```
pub struct SpecVec<T> {
    slots: Box<[Slot<T>]>,
    written: AtomicBool,
}

impl<T> SpecVec<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the vector has no elements.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    #[track_caller]
    #[inline]
    fn slot(&self, i: usize) -> &Slot<T> {
        match self.slots.get(i) {
            Some(s) => s,
            None => panic!(
                "index out of bounds: the len is {} but the index is {i}",
                self.slots.len()
            ),
        }
    }

    /// Reads element `i`.
    ///
    /// Panics if `i >= len()`.
    #[track_caller]
    #[inline]
    pub fn get(&self, i: usize) -> T
    where
        T: Clone,
    {
        read_with(self.slot(i), Location::caller(), T::clone)
    }

    /// Reads element `i` through `f` without cloning it.
    ///
    /// Panics if `i >= len()`.
    #[track_caller]
    #[inline]
    pub fn with<R>(&self, i: usize, f: impl FnOnce(&T) -> R) -> R {
        read_with(self.slot(i), Location::caller(), f)
    }

    /// Replaces element `i`.
    ///
    /// Panics if `i >= len()`.
    #[track_caller]
    #[inline]
    pub fn set(&self, i: usize, value: T) {
        write(
            self.slot(i),
            self,
            i,
            &self.written,
            Location::caller(),
            value,
        )
    }

    /// Reads and modifies element `i` in place; returns what `f` returns.
    ///
    /// Panics if `i >= len()`.
    #[track_caller]
    #[inline]
    pub fn update<R>(&self, i: usize, f: impl FnOnce(&mut T) -> R) -> R
    where
        T: Clone,
    {
        update(self.slot(i), self, i, &self.written, Location::caller(), f)
    }

    /// Consumes the vector, returning the committed elements.
    pub fn into_vec(self) -> Vec<T> {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; we move the slots out once.
        let slots = unsafe { core::ptr::read(&this.slots) };
        slots
            .into_vec()
            .into_iter()
            .map(Slot::into_committed)
            .collect()
    }
}

impl<T> From<Vec<T>> for SpecVec<T> {
    fn from(v: Vec<T>) -> Self {
        SpecVec {
            slots: v.into_iter().map(Slot::new).collect(),
            written: AtomicBool::new(false),
        }
    }
}

impl<T> FromIterator<T> for SpecVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        SpecVec::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<T> Versioned for SpecVec<T> {
    fn commit_key(&self, key: usize, tag: Tag) {
        self.slots[key].commit(tag)
    }
    fn discard_key(&self, key: usize, a: &Access<'_>, from_segment: u32) {
        self.slots[key].discard(a, from_segment)
    }
}

impl<T> Drop for SpecVec<T> {
    fn drop(&mut self) {
        if self.written.load(Ordering::Relaxed) {
            forget(self, self.slots.iter());
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for SpecVec<T> {
    /// Shows the committed values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for s in self.slots.iter() {
            s.read_committed(|v| {
                list.entry(v);
            });
        }
        list.finish()
    }
}
