//! Per-thread stripes of shared state: a counter, cache or id source that
//! every transaction would write is split into `STRIPES` copies, each on
//! its own cache lines, and a thread uses the copy of its stripe. Threads
//! on different stripes then never write the same line; readers of the
//! whole (statistics, checkpoints) visit every stripe.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes per striped value (a power of two; threads beyond it share).
pub(crate) const STRIPES: usize = 16;

/// This thread's stripe: threads take stripes in the order they first ask.
pub(crate) fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

/// A value alone on its cache lines (two, against the adjacent-line prefetcher).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Padded<T>(pub(crate) T);

/// One `T` per stripe.
pub(crate) struct Striped<T> {
    stripes: Box<[Padded<T>]>,
}

impl<T: Default> Default for Striped<T> {
    fn default() -> Self {
        Striped {
            stripes: (0..STRIPES).map(|_| Padded::default()).collect(),
        }
    }
}

impl<T> Striped<T> {
    /// This thread's copy.
    pub(crate) fn mine(&self) -> &T {
        &self.stripes[stripe()].0
    }

    /// Stripe `i`'s copy.
    pub(crate) fn at(&self, i: usize) -> &T {
        &self.stripes[i % STRIPES].0
    }

    /// Every copy.
    pub(crate) fn all(&self) -> impl Iterator<Item = &T> {
        self.stripes.iter().map(|p| &p.0)
    }
}

/// A counter that threads add to without sharing a cache line.
pub(crate) type Counter = Striped<AtomicU64>;

impl Counter {
    pub(crate) fn add(&self, n: u64) {
        self.mine().fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn sum(&self) -> u64 {
        self.all().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}
