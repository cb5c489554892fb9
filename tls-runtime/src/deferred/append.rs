//! Appends that copy from what they are given (`out.push_str(&s)`,
//! `out.extend_from_slice(&v)`, `out.extend(v.iter())`), as `#[tls_loop]` records them.
//!
//! An accumulation's update runs at commit, after the iteration; an argument that
//! borrows the iteration's own data (a local `String`, a temporary from `format!`) is
//! gone by then, and [`Accumulator::record`] refuses such an update at compile time.
//! The sequential program may borrow there because these methods copy what they are
//! given. So, for the standard collections whose contents do not depend on the
//! order of inserts (the sequences, and the B-tree maps and sets, which iterate in
//! key order), the update is applied at once to a new, empty value of the variable's
//! type (the *part*), which copies what it borrows while it is there, and the commit
//! appends the part to the variable: the same elements in the same order as the
//! sequential loop's call. Outside speculation the update applies to the variable
//! at once, with no part. For other types (anything that is not [`Merge`]) the
//! update is recorded as it is, and a borrow of the iteration's data stays a compile
//! error.
//!
//! The choice is made by method resolution at the call (`(&Appending(acc)).append_with(f)`
//! finds [`AppendToPart`] when the type is `Merge`, else [`AppendInPlace`] through
//! one more reference), so the macro needs no type information.

use super::Accumulator;
use core::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, LinkedList, VecDeque};

/// A collection that a part (a new, empty value appended to in an iteration) is
/// appended to at commit, with the effect of the appends the part received.
pub trait Merge: Default {
    /// Appends `part` to `self`.
    fn merge(&mut self, part: Self);
}

impl<T> Merge for Vec<T> {
    fn merge(&mut self, mut part: Self) {
        self.append(&mut part);
    }
}

impl<T> Merge for VecDeque<T> {
    fn merge(&mut self, mut part: Self) {
        self.append(&mut part);
    }
}

impl<T> Merge for LinkedList<T> {
    fn merge(&mut self, mut part: Self) {
        self.append(&mut part);
    }
}

impl Merge for String {
    fn merge(&mut self, part: Self) {
        self.push_str(&part);
    }
}

// The B-tree maps and sets: a part holds each key once, with the value of the last
// insert of it, and keeps the first of equal keys, as the variable does; appended, it
// gives the variable what the sequential inserts would have, and the order they iterate
// in is the keys'. Not the hash maps and sets, nor `BinaryHeap`: the order they iterate
// in (and a heap's order of equal elements) depends on the order of the inserts, which
// a part's append changes.
impl<K: Ord, V> Merge for BTreeMap<K, V> {
    fn merge(&mut self, mut part: Self) {
        self.append(&mut part);
    }
}

impl<T: Ord> Merge for BTreeSet<T> {
    fn merge(&mut self, mut part: Self) {
        self.append(&mut part);
    }
}

/// An accumulator whose update copies from its arguments: see the module docs.
pub struct Appending<'r, 'a, T>(pub &'r Accumulator<'a, T>);

/// The update applied to a part now, the part appended at commit (a [`Merge`] type).
pub trait AppendToPart<T> {
    /// Applies `update` to a new part and records the part's append.
    fn append_with<F: FnOnce(&mut T)>(&self, update: F);
}

impl<T: Merge + Send> AppendToPart<T> for Appending<'_, '_, T> {
    #[inline]
    fn append_with<F: FnOnce(&mut T)>(&self, update: F) {
        // Outside speculation (a loop run in order, one thread) the update applies
        // to the variable at once, and needs no part (an allocation per update).
        if let Some(update) = self.0.apply_now(update) {
            let mut part = T::default();
            update(&mut part);
            self.0.record(move |t| t.merge(part));
        }
    }
}

/// The update recorded as it is (any other type).
pub trait AppendInPlace<'a, T> {
    /// Records `update`.
    fn append_with<F: FnOnce(&mut T) + Send + 'a>(&self, update: F);
}

impl<'a, T: Send> AppendInPlace<'a, T> for &Appending<'_, 'a, T> {
    #[inline]
    fn append_with<F: FnOnce(&mut T) + Send + 'a>(&self, update: F) {
        self.0.record(update);
    }
}

/// The right side of an accumulation written as a borrow (`text += &s`, `sum +=
/// &*boxed`), kept for the update at commit: a copy where the type has one
/// ([`ToOwned`]: every `Clone` type, `str`, slices), since the borrowed value may be
/// the iteration's own; else the borrow itself, which must then outlive the loop
/// (a value of the caller's, `h += &items[i]`), as the sequential call would not need.
/// Chosen like [`Appending`]'s path, by method resolution at the call.
pub struct Borrowed<'r, T: ?Sized>(pub &'r T);

/// A kept right side: the `&T` the update is applied with.
pub trait KeptBorrow<T: ?Sized> {
    /// The value, borrowed for the update.
    fn get(&self) -> &T;
}

/// A copy of the borrowed value.
pub struct Copied<O>(O);

impl<T: ?Sized + ToOwned> KeptBorrow<T> for Copied<T::Owned> {
    #[inline]
    fn get(&self) -> &T {
        core::borrow::Borrow::borrow(&self.0)
    }
}

/// The borrow itself.
pub struct Kept<'r, T: ?Sized>(&'r T);

impl<T: ?Sized> KeptBorrow<T> for Kept<'_, T> {
    #[inline]
    fn get(&self) -> &T {
        self.0
    }
}

/// Keeps a copy (a [`ToOwned`] type).
pub trait KeepCopy<T: ?Sized + ToOwned> {
    /// The copy.
    fn keep(&self) -> Copied<T::Owned>;
}

impl<T: ?Sized + ToOwned> KeepCopy<T> for Borrowed<'_, T> {
    #[inline]
    fn keep(&self) -> Copied<T::Owned> {
        Copied(self.0.to_owned())
    }
}

/// Keeps the borrow (any other type).
pub trait KeepBorrow<'r, T: ?Sized> {
    /// The borrow.
    fn keep(&self) -> Kept<'r, T>;
}

impl<'r, T: ?Sized> KeepBorrow<'r, T> for &Borrowed<'r, T> {
    #[inline]
    fn keep(&self) -> Kept<'r, T> {
        Kept(self.0)
    }
}

/// The argument of an `extend` call as `#[tls_loop]` records it: an iterator is
/// collected in the epoch (it is lazy: run at commit, it would read speculative data
/// as it is then, not as the call saw it); any other argument (a collection, a
/// slice, or whatever a program's own `extend` takes) is kept as it is. Chosen like
/// [`Appending`]'s path, by method resolution at the call
/// (`(&ExtendArg::new(a)).take_arg()` finds [`CollectIterator`] for an iterator,
/// else [`KeepArg`] through one more reference).
pub struct ExtendArg<T>(Cell<Option<T>>);

impl<T> ExtendArg<T> {
    /// Wraps the argument.
    #[inline]
    pub fn new(arg: T) -> Self {
        ExtendArg(Cell::new(Some(arg)))
    }

    fn take(&self) -> T {
        self.0
            .take()
            .expect("an extend argument is taken once, by the macro's own call")
    }
}

/// An iterator argument, collected now.
pub trait CollectIterator<I: Iterator> {
    /// The items, collected.
    fn take_arg(&self) -> Vec<I::Item>;
}

impl<I: Iterator> CollectIterator<I> for ExtendArg<I> {
    #[inline]
    fn take_arg(&self) -> Vec<I::Item> {
        self.take().collect()
    }
}

/// Any other argument, kept as it is.
pub trait KeepArg<T> {
    /// The argument.
    fn take_arg(&self) -> T;
}

impl<T> KeepArg<T> for &ExtendArg<T> {
    #[inline]
    fn take_arg(&self) -> T {
        self.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends `parts` as the macro does, three iterations' worth, and returns the
    /// variable.
    fn appended<T: Merge + Send>(start: T, parts: [fn(&mut T, &str); 3]) -> T {
        let mut v = start;
        {
            // SAFETY: dropped before `v` is read.
            let acc = unsafe { Accumulator::new(&mut v) };
            for (k, f) in parts.into_iter().enumerate() {
                let local = format!("{k}");
                // As the macro writes it: the borrow is what lets a type that is
                // not `Merge` find `AppendInPlace`.
                #[allow(clippy::needless_borrow)]
                (&Appending(&acc)).append_with(|t| f(t, &local));
            }
        }
        v
    }

    #[test]
    fn a_part_appended_gives_what_the_appends_give_the_variable() {
        let s = appended(String::from(">"), [|t, l| t.push_str(l); 3]);
        assert_eq!(s, ">012");
        let v = appended(
            vec![9],
            [|t: &mut Vec<u8>, l| t.extend_from_slice(l.as_bytes()); 3],
        );
        assert_eq!(v, [9, b'0', b'1', b'2']);
        // The last insert of a key wins, as in the sequential loop.
        let m = appended(
            BTreeMap::from([(1, String::new())]),
            [
                |t, l| t.extend([(1, l.to_string()), (2, l.to_string())]),
                |t, l| t.extend([(2, format!("{l}!"))]),
                |_, _| {},
            ],
        );
        assert_eq!(m, BTreeMap::from([(1, "0".into()), (2, "1!".into())]));
        let b = appended(BTreeSet::from([5]), [|t, l| t.extend(l.bytes()); 3]);
        assert_eq!(b, BTreeSet::from([5, b'0', b'1', b'2']));
    }

    #[test]
    fn an_extend_argument_is_collected_only_if_it_is_an_iterator() {
        let spec = crate::Spec::new(3u64);
        // As the macro writes it.
        #[allow(clippy::needless_borrow)]
        let lazy = (&ExtendArg::new((0..3u64).map(|k| k + spec.get()))).take_arg();
        spec.set(100);
        assert_eq!(lazy, vec![3, 4, 5], "collected before the later write");
        let caller = [7u64, 8];
        #[allow(clippy::needless_borrow)]
        let slice: &[u64] = (&ExtendArg::new(&caller[..])).take_arg();
        assert_eq!(slice, &[7, 8]);
        #[allow(clippy::needless_borrow)]
        let count: u32 = (&ExtendArg::new(4u32)).take_arg();
        assert_eq!(count, 4);
    }
}
