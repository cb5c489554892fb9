//! `SpecVec<T>`: a fixed-length vector of speculative elements.

use super::consume::{consume_slots, drop_slots};
use super::slot::Slot;
use super::{Header, read_with, update, write};
use core::fmt;
use core::panic::Location;

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
    header: Header,
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
        read_with(
            self.slot(i),
            self.header.origin(),
            Location::caller(),
            T::clone,
        )
    }

    /// Reads element `i` through `f` without cloning it.
    ///
    /// Panics if `i >= len()`.
    #[track_caller]
    #[inline]
    pub fn with<R>(&self, i: usize, f: impl FnOnce(&T) -> R) -> R {
        read_with(self.slot(i), self.header.origin(), Location::caller(), f)
    }

    /// Replaces element `i`.
    ///
    /// Panics if `i >= len()`.
    #[track_caller]
    #[inline]
    pub fn set(&self, i: usize, value: T) {
        write(self.slot(i), &self.header, Location::caller(), value)
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
        update(self.slot(i), &self.header, Location::caller(), f)
    }

    /// Consumes the vector, returning its elements: the committed ones, or, inside an
    /// epoch that wrote the vector, the ones that epoch sees.
    pub fn into_vec(mut self) -> Vec<T> {
        let slots = core::mem::take(&mut self.slots);
        consume_slots(slots, self.header.was_written())
    }
}

impl<T> From<Vec<T>> for SpecVec<T> {
    fn from(v: Vec<T>) -> Self {
        // The header first: see `Header::new`.
        let header = Header::new();
        SpecVec {
            slots: v.into_iter().map(Slot::new).collect(),
            header,
        }
    }
}

impl<T> FromIterator<T> for SpecVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        SpecVec::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<T> Drop for SpecVec<T> {
    fn drop(&mut self) {
        drop_slots(core::mem::take(&mut self.slots), self.header.was_written());
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
