//! The synchronization primitives the protocol is written against.
//!
//! Under `--cfg loom` they are loom's model-checked versions (as crossbeam does under
//! `crossbeam_loom`), so the loom tests in `tests/loom.rs` explore every interleaving of
//! the real slot and commit code, not of a copy.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

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

    /// Consumes the cell.
    pub(crate) fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

/// A one-word test-and-test-and-set spin lock.
///
/// Every speculative location carries one. Critical sections are a few dozen
/// instructions (find a version, clone a value, record a reader), so spinning is far
/// cheaper than parking (DESIGN.md section 8: a park/unpark round trip costs ~57 us here).
///
/// States: `0` unlocked, `1` locked.
///
/// ```text
///   0 --CAS(Acquire)--> 1 --store(Release)--> 0
/// ```
///
/// Memory ordering: the Acquire CAS and Release store order every access to the guarded
/// data inside the critical section; nothing else is published through this word.
#[derive(Debug)]
pub(crate) struct RawLock(AtomicU32);

impl RawLock {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        RawLock(AtomicU32::new(0))
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        RawLock(AtomicU32::new(0))
    }

    #[inline]
    pub(crate) fn lock(&self) {
        if self
            .0
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.0.load(Ordering::Relaxed) != 0 {
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(256) {
                    #[cfg(not(loom))]
                    std::thread::yield_now();
                }
                spin_hint();
            }
            if self
                .0
                .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        self.0.store(0, Ordering::Release);
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
