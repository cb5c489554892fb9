//! The synchronization primitives the protocol is written against.
//!
//! Under `--cfg loom` they are loom's model-checked versions (as crossbeam does under
//! `crossbeam_loom`), so the loom models in `src/loom_tests.rs` explore every interleaving of
//! the real slot and commit code, not of a copy.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

/// Hint that we are busy-waiting; under loom, lets the model scheduler run another thread.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// An `UnsafeCell` whose accesses loom can check for data races.
#[derive(Debug)]
pub(crate) struct RaceCell<T>(
    #[cfg(loom)] loom::cell::UnsafeCell<T>,
    #[cfg(not(loom))] core::cell::UnsafeCell<T>,
);

impl<T> RaceCell<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(loom)]
        return RaceCell(loom::cell::UnsafeCell::new(value));
        #[cfg(not(loom))]
        RaceCell(core::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with exclusive access to the contents.
    ///
    /// # Safety
    /// The caller must hold whatever lock guards this cell, so that no other access to it
    /// runs at the same time.
    #[inline]
    pub(crate) unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(loom)]
        // SAFETY: the caller holds the guarding lock (this function's contract).
        return self.0.with_mut(|p| f(unsafe { &mut *p }));
        #[cfg(not(loom))]
        // SAFETY: the caller holds the guarding lock (this function's contract).
        f(unsafe { &mut *self.0.get() })
    }

    /// A bitwise copy of the contents, taken while a lock holder may be writing them
    /// (the optimistic read of a sequence lock).
    ///
    /// # Safety
    /// The copy may be torn: the caller must treat it as uninitialized until it has
    /// validated that no lock holder ran meanwhile, and may then use it only as a
    /// value whose bits are a copy of the contents (it must not drop it unless `T` has
    /// no drop glue).
    #[cfg(not(loom))]
    #[inline]
    pub(crate) unsafe fn copy_racy(&self) -> core::mem::MaybeUninit<T> {
        // SAFETY: the pointer is valid and aligned for `T`; a volatile read into
        // `MaybeUninit` asserts nothing about the bits it finds (this function's
        // contract puts their validation on the caller).
        unsafe { core::ptr::read_volatile(self.0.get() as *const core::mem::MaybeUninit<T>) }
    }

    /// Consumes the cell.
    pub(crate) fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

/// A one-word spin lock that doubles as a sequence lock.
///
/// Every speculative location carries one. Critical sections are a few dozen
/// instructions (find a version, clone a value, record a reader), so spinning is far
/// cheaper than parking (a park/unpark round trip costs about 57 us on the 2-core machines we measure on).
///
/// The word counts lock holds: even means unlocked, odd means locked, and every
/// unlock moves it to the next even number.
///
/// ```text
///   2n --fetch_or(1, Acquire)--> 2n+1 --store(2n+2, Release)--> 2n+2
/// ```
///
/// The count lets a reader that only needs the committed value skip the lock (one
/// `lock`-prefixed instruction is most of a 3 ns budget on the machines we measure
/// on): it notes an even count, copies the value, and keeps the copy only if the
/// count is unchanged ([`RawLock::read_begin`] / [`RawLock::read_validate`]). Every
/// holder, reader or writer, moves the count, so any change to the guarded data in
/// between is seen.
///
/// Memory ordering: the Acquire `fetch_or` and Release store order every access to the
/// guarded data inside the critical section. The Release fence after taking the lock
/// keeps the holder's writes from becoming visible before the odd count does, and
/// the reader's Acquire fence keeps its copy from being read after its second look at
/// the count (the classic sequence-lock pairing).
#[derive(Debug)]
pub(crate) struct RawLock(AtomicU64);

/// Proof of holding a [`RawLock`]: the count the holder set.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Held(u64);

#[cfg(test)]
impl Held {
    /// A token a test's stand-in for a lock hands out.
    pub(crate) fn for_test(n: u64) -> Held {
        Held(n)
    }

    /// What [`Held::for_test`] was given.
    pub(crate) fn test_value(self) -> u64 {
        self.0
    }
}

impl RawLock {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        RawLock(AtomicU64::new(0))
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        RawLock(AtomicU64::new(0))
    }

    #[inline]
    pub(crate) fn lock(&self) -> Held {
        match self.try_lock() {
            Some(held) => held,
            None => self.lock_contended(),
        }
    }

    /// Takes the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<Held> {
        if !self.try_set() {
            return None;
        }
        fence(Ordering::Release);
        // Nobody else changes the count while we hold it.
        Some(Held(self.0.load(Ordering::Relaxed)))
    }

    /// Sets bit 0 if it was clear; returns whether it did.
    #[inline]
    fn try_set(&self) -> bool {
        // Only bit 0 of the old value is used, so this compiles to one `lock bts`
        // rather than a compare-exchange loop (setting bit 0 of an odd count changes
        // nothing).
        #[cfg(not(loom))]
        return self.0.fetch_or(1, Ordering::Acquire) & 1 == 0;
        // Under loom, the same transition as a compare-exchange: a failed `fetch_or`
        // still counts as a store there, which multiplies the interleavings of a
        // waiting thread past what the models can explore.
        #[cfg(loom)]
        {
            let count = self.0.load(Ordering::Relaxed);
            count & 1 == 0
                && self
                    .0
                    .compare_exchange(count, count | 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        }
    }

    /// Waits for the lock (the slow path of [`RawLock::lock`]).
    #[cold]
    pub(crate) fn lock_contended(&self) -> Held {
        let mut spins = 0u32;
        loop {
            while self.0.load(Ordering::Relaxed) & 1 != 0 {
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(256) {
                    #[cfg(not(loom))]
                    std::thread::yield_now();
                }
                spin_hint();
            }
            if self.try_set() {
                fence(Ordering::Release);
                return Held(self.0.load(Ordering::Relaxed));
            }
        }
    }

    #[inline]
    pub(crate) fn unlock(&self, held: Held) {
        self.0.store(held.0.wrapping_add(1), Ordering::Release);
    }

    /// Starts an optimistic read: the count to validate against, or `None` while the
    /// lock is held.
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn read_begin(&self) -> Option<u64> {
        let count = self.0.load(Ordering::Acquire);
        (count & 1 == 0).then_some(count)
    }

    /// Whether nobody took the lock since [`RawLock::read_begin`] returned `count`:
    /// then what the reader copied in between is what the holder before left.
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn read_validate(&self, count: u64) -> bool {
        fence(Ordering::Acquire);
        self.0.load(Ordering::Relaxed) == count
    }
}

#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

/// Locks a mutex, ignoring poisoning: the runtime's own mutexes guard plain data whose
/// invariants hold between statements, so a panic elsewhere cannot leave them torn.
pub(crate) fn lock<T>(m: &Mutex<T>) -> impl core::ops::DerefMut<Target = T> + '_ {
    #[cfg(loom)]
    return m.lock().unwrap();
    #[cfg(not(loom))]
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// [`lock`] for the mutexes that stay `std`'s under `--cfg loom` too: `static`s (loom's
/// `Mutex::new` is not `const`) and the one the worker pool's `Condvar` waits on.
pub(crate) fn lock_std<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
