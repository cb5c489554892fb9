//! Speculative memory: the containers whose reads and writes the runtime tracks.
//!
//! Every container is made of [`slot::Slot`]s, one per tracked location: the single
//! value of a [`Spec`], each element of a [`SpecVec`], each key of a [`SpecMap`], each
//! 64-byte line of a [`SpecMemory`]. The functions here route an access to the
//! committed value (outside any epoch: no bookkeeping, and for small values without
//! drop glue no lock either, see `Slot::read_committed`) or through the
//! speculative protocol of `slot` (inside an epoch).

pub(crate) mod slot;

mod lines;
mod map;
mod spec;
mod vec;

pub use lines::{LINE_SIZE, SpecMemory};
pub use map::SpecMap;
pub use spec::Spec;
pub use vec::SpecVec;

use crate::epoch::{self, Versioned};
use core::panic::Location;
use slot::{Slot, WriteEffect};

/// Erases the lifetime of a container for an epoch's write log.
///
/// The log only holds the pointer while the epoch that wrote the container is in
/// flight: the loop drains every log before it returns, and a container dropped inside
/// an epoch removes itself from that epoch's log (`forget`).
pub(crate) fn erase<'a>(c: &'a (dyn Versioned + 'a)) -> *const dyn Versioned {
    let p: *const (dyn Versioned + 'a) = c;
    // SAFETY: only the trait object's lifetime bound changes; the pointer is never
    // dereferenced after the container is gone (see above).
    unsafe { core::mem::transmute::<*const (dyn Versioned + 'a), *const dyn Versioned>(p) }
}

/// Reads `slot` through `f`, speculatively when an epoch runs on this thread.
///
/// Always inlined, so that a read outside any loop is the thread-local check and the
/// committed read at the call site; the speculative path is a call.
#[inline(always)]
pub(crate) fn read_with<T, R>(
    slot: &Slot<T>,
    load: &'static Location<'static>,
    f: impl FnOnce(&T) -> R,
) -> R {
    match epoch::current() {
        None => slot.read_committed(f),
        Some(cx) => read_in_epoch(cx, slot, load, f),
    }
}

#[inline(never)]
fn read_in_epoch<T, R>(
    cx: &epoch::EpochCx,
    slot: &Slot<T>,
    load: &'static Location<'static>,
    f: impl FnOnce(&T) -> R,
) -> R {
    let a = cx.begin_access();
    cx.note(slot as *const Slot<T> as usize, false);
    slot.read_spec(&a, load, f)
}

/// Writes `value` to `slot` (element `key` of `owner`).
#[inline]
pub(crate) fn write<T>(
    slot: &Slot<T>,
    owner: &dyn Versioned,
    key: usize,
    written: &core::sync::atomic::AtomicBool,
    store: &'static Location<'static>,
    value: T,
) {
    match epoch::current() {
        None => slot.with_committed(|c| *c = value),
        Some(cx) => {
            let a = cx.begin_access();
            cx.note(slot as *const Slot<T> as usize, true);
            if slot.write_spec(&a, store, value) == WriteEffect::NewVersion {
                note_written(written);
                cx.log_write(erase(owner), key);
            }
        }
    }
}

/// Applies `f` to `slot`'s value (element `key` of `owner`): a read and a write.
#[inline]
pub(crate) fn update<T: Clone, R>(
    slot: &Slot<T>,
    owner: &dyn Versioned,
    key: usize,
    written: &core::sync::atomic::AtomicBool,
    site: &'static Location<'static>,
    f: impl FnOnce(&mut T) -> R,
) -> R {
    match epoch::current() {
        None => slot.with_committed(f),
        Some(cx) => {
            let a = cx.begin_access();
            let addr = slot as *const Slot<T> as usize;
            cx.note(addr, false);
            cx.note(addr, true);
            let (r, effect) = slot.update_spec(&a, site, f);
            if effect == WriteEffect::NewVersion {
                note_written(written);
                cx.log_write(erase(owner), key);
            }
            r
        }
    }
}

#[inline]
fn note_written(written: &core::sync::atomic::AtomicBool) {
    if !written.load(core::sync::atomic::Ordering::Relaxed) {
        written.store(true, core::sync::atomic::Ordering::Relaxed);
    }
}

/// Called when a container that was ever written speculatively is dropped: removes it
/// from the current epoch's write log, and aborts if another epoch still holds an
/// uncommitted version of it (its log would point at freed memory).
pub(crate) fn forget<'a, T: 'a>(
    owner: &'a (dyn Versioned + 'a),
    slots: impl Iterator<Item = &'a Slot<T>>,
) {
    let target = erase(owner) as *const ();
    let current = epoch::current();
    if let Some(cx) = current {
        cx.writes
            .borrow_mut()
            .retain(|w| w.target as *const () != target);
    }
    let me = current.map(|cx| cx.tag);
    for slot in slots {
        if slot.has_versions_except(me) {
            eprintln!(
                "tls-runtime: a speculative container was dropped while another epoch \
                 still had uncommitted writes to it; aborting to stay memory safe"
            );
            std::process::abort();
        }
    }
}
