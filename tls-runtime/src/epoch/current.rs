//! Which epoch, if any, runs on this thread: the thread-local every access to
//! speculative data asks first, the guard that sets it, and the mark that refuses
//! such accesses from a loop's items iterator.

use super::EpochCx;
use core::cell::Cell;

thread_local! {
    static CURRENT: Cell<*const EpochCx> = const { Cell::new(core::ptr::null()) };
}

/// `CURRENT` while a loop's items iterator runs ([`CurrentGuard::items`]): no epoch, and
/// no access to speculative data either (see [`current`]). Never dereferenced.
const ITEMS_MARK: usize = 1;

/// The epoch running on this thread, if any (and not suspended by an escape).
///
/// Every access to speculative data asks this first, so this is also where an access
/// from a loop's items iterator is refused: the runtime pulls items ahead of the
/// iterations that run them, so the iterator would read values from before earlier
/// iterations' writes, a result the sequential loop never gives. It panics, in every
/// mode, rather than answer.
#[inline]
pub(crate) fn current() -> Option<&'static EpochCx> {
    let p = CURRENT.with(Cell::get);
    if p as usize <= ITEMS_MARK {
        if p as usize == ITEMS_MARK {
            items_iterator_access();
        }
        return None;
    }
    // SAFETY: `CURRENT` is only set by `CurrentGuard`, which clears it before the context
    // it points to goes away, and holds a context's address or null or `ITEMS_MARK`
    // (excluded above); the reference never leaves this thread, and callers use it
    // only within the access it was fetched for (never across a guard's drop).
    unsafe { p.as_ref() }
}

/// [`current`] for code that must not panic (the panic hook, drops): the items
/// iterator's mark reads as no epoch.
#[inline]
pub(crate) fn current_quiet() -> Option<&'static EpochCx> {
    let p = CURRENT.with(Cell::get);
    if p as usize <= ITEMS_MARK {
        return None;
    }
    // SAFETY: as in `current`.
    unsafe { p.as_ref() }
}

#[cold]
#[inline(never)]
fn items_iterator_access() -> ! {
    panic!(
        "a speculative loop's items iterator used speculative data (a Spec, SpecVec, \
         SpecMap or SpecMemory, or a runtime call such as poll): the runtime takes items \
         ahead of the iterations that run them, so the iterator would see values from \
         before earlier iterations' writes. Compute the items before the loop (collect \
         them into a Vec), or test the condition in the loop body and end the loop with \
         `break`."
    )
}

/// Sets the thread's current epoch for its lifetime, restoring the previous one after.
pub(crate) struct CurrentGuard(*const EpochCx);

impl CurrentGuard {
    /// Makes `cx` (or no epoch, for `None`) current.
    #[inline]
    pub(crate) fn set(cx: Option<&EpochCx>) -> Self {
        let p = cx.map_or(core::ptr::null(), |c| c as *const EpochCx);
        CurrentGuard(CURRENT.with(|c| c.replace(p)))
    }

    /// Marks this thread as running a loop's items iterator (see [`current`]).
    // Inline: the in-order paths take it once an item, around a `next()` of a few
    // nanoseconds.
    #[inline]
    pub(crate) fn items() -> Self {
        CurrentGuard(CURRENT.with(|c| c.replace(ITEMS_MARK as *const EpochCx)))
    }
}

/// A loop's items, each pulled with the thread marked as running the items iterator
/// ([`CurrentGuard::items`]), in every mode, so that a loop whose iterator reads
/// speculative data fails the same way whether it runs in order or speculatively.
pub(crate) struct MarkedItems<I>(pub(crate) I);

impl<I: Iterator> Iterator for MarkedItems<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let _items = CurrentGuard::items();
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl Drop for CurrentGuard {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}
