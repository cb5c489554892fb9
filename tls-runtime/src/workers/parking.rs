//! Where idle workers park, and how a waker wakes as many of them as it has work
//! for (the protocol in the module docs of `workers.rs`).
//!
//! Written against `crate::sync`'s atomics and, under `--cfg loom`, loom's mutex and
//! thread parking, so that `loom_tests.rs` checks this code for lost wake-ups.

use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

#[cfg(loom)]
use loom::sync::{Arc, Mutex, MutexGuard};
#[cfg(loom)]
use loom::thread::{self, Thread};
#[cfg(not(loom))]
use std::sync::{Arc, Mutex, MutexGuard};
#[cfg(not(loom))]
use std::thread::{self, Thread};

/// A flag shared between a worker and the threads that wake or nudge it.
pub(crate) type Flag = Arc<AtomicBool>;

/// A new [`Flag`] set to `value`.
pub(crate) fn flag(value: bool) -> Flag {
    Arc::new(AtomicBool::new(value))
}

/// A parked worker, as a waker sees it.
struct Sleeper {
    thread: Thread,
    /// Set by the waker that takes the worker off the list (under its lock).
    woken: Flag,
    /// The worker's flag for the nudges (`WorkerThread::waiting`), set for those
    /// woken.
    waiting: Flag,
}

/// The parked workers.
pub(crate) struct Parking {
    /// How many workers are on `parked` (changed under its lock, read without it).
    sleepers: AtomicUsize,
    /// The parked workers, the most recently parked last (woken first: its caches
    /// are the least cold).
    parked: Mutex<Vec<Sleeper>>,
}

impl Parking {
    pub(crate) fn new() -> Self {
        Parking {
            sleepers: AtomicUsize::new(0),
            parked: Mutex::new(Vec::new()),
        }
    }

    fn list(&self) -> MutexGuard<'_, Vec<Sleeper>> {
        // A panic under this lock leaves the list whole (pushes and drains).
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes up to `seats` parked workers, setting their `waiting` flags; the
    /// caller has just moved `generation` (every awake worker looks again then).
    /// Whether it woke any.
    pub(crate) fn wake(&self, seats: usize) -> bool {
        // A read-modify-write read (see `park`).
        if seats == 0 || self.sleepers.fetch_add(0, Ordering::SeqCst) == 0 {
            return false;
        }
        let mut parked = self.list();
        let first = parked.len() - seats.min(parked.len());
        let woke = first < parked.len();
        for s in parked.drain(first..) {
            // Flagged for the caller's nudge before the worker can run and clear it.
            s.waiting.store(true, Ordering::Relaxed);
            s.woken.store(true, Ordering::SeqCst);
            s.thread.unpark();
        }
        self.sleepers.store(parked.len(), Ordering::SeqCst);
        woke
    }

    /// Parks the calling worker until a waker takes it off the list (or, outside
    /// loom, for [`PARK_TIMEOUT`] at most), unless `generation` has moved from
    /// `seen`. Whether it parked.
    ///
    /// Counted in `sleepers` before `generation` is read again, as a waker moves
    /// `generation` before it reads `sleepers`: either this worker sees the move
    /// and does not park, or the waker sees the count and, under the list's lock,
    /// finds the worker on the list. All four accesses are read-modify-writes: if
    /// this worker's read of `generation` comes first in its order, the waker's
    /// move reads from it and so sees the count written before it; if the move
    /// comes first, the read sees it. (With a plain store and load on each side,
    /// only `SeqCst`'s single total order would forbid both missing each other,
    /// which the loom model cannot check; it found that very deadlock.)
    pub(crate) fn park(
        &self,
        generation: &AtomicU64,
        seen: u64,
        woken: &Flag,
        waiting: &Flag,
    ) -> bool {
        {
            let mut parked = self.list();
            self.sleepers.swap(parked.len() + 1, Ordering::SeqCst);
            if generation.fetch_add(0, Ordering::SeqCst) != seen {
                self.sleepers.store(parked.len(), Ordering::SeqCst);
                return false;
            }
            woken.store(false, Ordering::SeqCst);
            parked.push(Sleeper {
                thread: thread::current(),
                woken: Arc::clone(woken),
                waiting: Arc::clone(waiting),
            });
        }
        if !sleep_until(woken) {
            // Timed out: off the list, unless a waker has just taken it off
            // (wakers set the flag under the list's lock).
            let mut parked = self.list();
            if !woken.load(Ordering::SeqCst) {
                let me = thread::current().id();
                parked.retain(|s| s.thread.id() != me);
                self.sleepers.store(parked.len(), Ordering::SeqCst);
            }
        }
        true
    }

    /// Workers parked now.
    #[cfg(any(test, loom))]
    pub(crate) fn sleepers(&self) -> usize {
        self.sleepers.load(Ordering::SeqCst)
    }

    /// [`Parking::sleepers`], read relaxed: a hint for spinning threads.
    pub(crate) fn sleepers_hint(&self) -> usize {
        self.sleepers.load(Ordering::Relaxed)
    }
}

/// How long a parked worker sleeps before it looks at the jobs again by itself
/// (a backstop: every event that wants it wakes it).
#[cfg(not(loom))]
const PARK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Sleeps until `woken` is set or [`PARK_TIMEOUT`] has passed; whether it was set.
/// A park may return early, or at once for an unpark meant for an earlier park: the
/// flag says whether this one was woken.
#[cfg(not(loom))]
fn sleep_until(woken: &AtomicBool) -> bool {
    let deadline = std::time::Instant::now() + PARK_TIMEOUT;
    while !woken.load(Ordering::SeqCst) {
        let now = std::time::Instant::now();
        if now >= deadline {
            return false;
        }
        thread::park_timeout(deadline - now);
    }
    true
}

/// Under loom: sleeps until `woken` is set (no timeout, so that a lost wake-up
/// shows as a deadlock).
#[cfg(loom)]
fn sleep_until(woken: &AtomicBool) -> bool {
    while !woken.load(Ordering::SeqCst) {
        thread::park();
    }
    true
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Waits (bounded) until `ok` holds.
    fn eventually(what: &str, ok: impl Fn() -> bool) {
        let t = Instant::now();
        while !ok() {
            assert!(t.elapsed() < Duration::from_secs(20), "never: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A wake for one seat wakes one parked worker of three, and flags it for the
    /// nudge; the others stay parked until a wake with seats for them.
    #[test]
    fn a_wake_wakes_as_many_parked_workers_as_it_has_seats() {
        let parking = Parking::new();
        let generation = AtomicU64::new(0);
        let done = AtomicUsize::new(0);
        let flags: Vec<Flag> = (0..3).map(|_| flag(false)).collect();
        std::thread::scope(|s| {
            for waiting in &flags {
                let (parking, generation, done) = (&parking, &generation, &done);
                s.spawn(move || {
                    let woken = flag(false);
                    // Parks again after a timeout: only a wake ends it.
                    loop {
                        let seen = generation.load(Ordering::SeqCst);
                        if parking.park(generation, seen, &woken, waiting)
                            && woken.load(Ordering::SeqCst)
                        {
                            done.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                    }
                });
            }
            eventually("three parked", || parking.sleepers() == 3);
            assert!(parking.wake(1));
            eventually("one woken", || done.load(Ordering::SeqCst) == 1);
            std::thread::sleep(Duration::from_millis(50));
            assert_eq!(
                done.load(Ordering::SeqCst),
                1,
                "a wake for one seat woke more"
            );
            let flagged = flags.iter().filter(|f| f.load(Ordering::SeqCst)).count();
            assert_eq!(flagged, 1, "the woken worker is flagged for the nudge");
            assert!(!parking.wake(0), "no seat, no wake");
            // The other two, whenever they are parked (one may be between a
            // timeout and its next park).
            eventually("all woken", || {
                parking.wake(usize::MAX);
                done.load(Ordering::SeqCst) == 3
            });
        });
        assert_eq!(parking.sleepers(), 0);
    }
}
