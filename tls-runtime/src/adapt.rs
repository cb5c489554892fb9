//! Adaptive fallback: speculation that does not pay is turned off, per loop site, and
//! tried again later.
//!
//! Participants tally their commits and hand them to the site a window of [`WINDOW`]
//! epochs at a time. When more than half of a window's epochs were rolled back, the
//! site switches to *in-order* execution: once no epoch is in flight, one thread runs
//! the following iterations itself, like the plain loop, with no tracking and no
//! per-epoch bookkeeping (a full dependence chain then costs about what the plain loop
//! does). After `backoff` in-order epochs the site probes
//! speculation again for one window; each failed probe doubles `backoff` (up to
//! [`MAX_BACKOFF`]) and a successful one resets it. The state lives in the site, so it
//! carries across runs of the same loop (a transaction's items loop runs once per
//! transaction).
//!
//! A window is judged on at least [`MIN_WINDOW`] of wall time, and only on epochs
//! committed while it was open; the first worker to join a window the caller started
//! alone (workers park while a site runs in order) starts it over, so a probe is not
//! judged on the wake-up. Without any worker for [`WAIT_FOR_HELPERS`], speculation
//! gains nothing and the site runs in order.
//!
//! The site also chooses how many iterations make one epoch when the loop does not
//! say (`chunk`): iterations much shorter than [`TARGET_EPOCH`] are grouped.
//!
//! Memory ordering: all fields are `Relaxed` counters and a flag. They steer
//! scheduling, not correctness: any interleaving of their updates yields a valid
//! schedule, since every epoch is protected by the violation protocol either way.

use core::panic::Location;
use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Epochs per decision window.
pub(crate) const WINDOW: u32 = 8;
/// First in-order stretch after speculation failed, in epochs.
pub(crate) const MIN_BACKOFF: u64 = 32;
/// Longest in-order stretch between probes.
pub(crate) const MAX_BACKOFF: u64 = 16384;
/// Speculation must estimate at least this speedup to go on; below it (a little
/// above 1, since speculative epochs pay for tracking) in-order execution is faster.
pub(crate) const MIN_GAIN: f64 = 1.1;
/// The shortest wall time a window is judged on: shorter ones measure the clock and
/// the scheduler more than the loop.
pub(crate) const MIN_WINDOW: Duration = Duration::from_micros(50);
/// How long a window waits for a worker's first vote before it is judged without
/// one (a parked worker takes tens of microseconds to wake, a new one longer).
pub(crate) const WAIT_FOR_HELPERS: Duration = Duration::from_millis(1);
/// The epoch length automatic chunking aims for.
pub(crate) const TARGET_EPOCH: Duration = Duration::from_micros(10);
/// The most iterations automatic chunking puts in one epoch.
pub(crate) const MAX_CHUNK: u32 = 256;

/// The adaptive state of one loop site.
#[derive(Debug)]
pub struct LoopSite {
    /// Read by every worker looking for work: kept apart from the counters the
    /// running thread writes.
    in_order: CachePadded<AtomicBool>,
    in_order_left: AtomicU64,
    backoff: AtomicU64,
    /// Iterations per epoch chosen by the runtime (when the loop does not set one).
    chunk: AtomicU32,
    /// [`PROBING`], [`LAST_PAID`] or [`STRUCK`]: how the last windows went (see
    /// [`LoopSite::judge`]).
    slow_windows: AtomicU32,
}

/// No window paid since the site last ran in order.
const PROBING: u32 = 0;
/// The last window paid.
const LAST_PAID: u32 = 1;
/// The last window gained too little after one that paid.
const STRUCK: u32 = 2;

/// What a window of speculation came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Speculation paid.
    Paid,
    /// Its committed work per wall time was under [`MIN_GAIN`].
    SlowOnce,
    /// Most epochs rolled back.
    Lost,
    /// No worker joined in [`WAIT_FOR_HELPERS`]: the machine is busy (other loops
    /// hold the workers, or the OS does not run them), which says nothing about the
    /// loop.
    Alone,
}

impl Default for LoopSite {
    fn default() -> Self {
        LoopSite::new()
    }
}

impl LoopSite {
    /// A site that starts out speculating.
    pub const fn new() -> Self {
        LoopSite {
            in_order: CachePadded::new(AtomicBool::new(false)),
            in_order_left: AtomicU64::new(0),
            backoff: AtomicU64::new(MIN_BACKOFF),
            chunk: AtomicU32::new(1),
            // A new site gets the benefit of the doubt: its first window also pays
            // for the workers' wake-up and the chunk size still growing.
            slow_windows: AtomicU32::new(LAST_PAID),
        }
    }

    /// Iterations per epoch, as chosen by [`LoopSite::tune_chunk`].
    #[inline]
    pub(crate) fn chunk(&self) -> usize {
        self.chunk.load(Relaxed) as usize
    }

    /// Adapts the iterations per epoch to what a participant measured: `items`
    /// iterations in `busy` of work over `epochs` epochs, `rolled_back` of them rolled
    /// back. Short iterations are grouped so that an epoch lasts about
    /// [`TARGET_EPOCH`] and the per-epoch cost (claiming, publishing, committing:
    /// a few cache-line transfers) stays small; frequent rollbacks halve the chunk,
    /// since a larger epoch loses more work per violation.
    pub(crate) fn tune_chunk(&self, epochs: u32, items: u64, rolled_back: u32, busy: Duration) {
        if items == 0 || epochs == 0 {
            return;
        }
        let current = self.chunk.load(Relaxed).max(1);
        let next = if rolled_back * 4 > epochs {
            (current / 2).max(1)
        } else {
            let per_item = busy.as_nanos() as f64 / items as f64;
            let ideal = (TARGET_EPOCH.as_nanos() as f64 / per_item.max(1.0))
                .clamp(1.0, f64::from(MAX_CHUNK));
            // Move by at most a factor of two per window.
            (ideal as u32).clamp((current / 2).max(1), current * 2)
        };
        self.chunk.store(next, Relaxed);
    }

    /// Whether epochs should now start only when homefree.
    #[inline]
    pub(crate) fn in_order(&self) -> bool {
        self.in_order.load(Relaxed)
    }

    /// How many epochs may still run in order before speculation is probed again.
    pub(crate) fn in_order_budget(&self) -> u64 {
        self.in_order_left.load(Relaxed).max(1)
    }

    /// `n` epochs ran in order; after `backoff` of them, probe speculation again.
    /// Returns whether speculation resumes now.
    pub(crate) fn ran_in_order(&self, n: u64) -> bool {
        let left = self.in_order_left.load(Relaxed).saturating_sub(n);
        self.in_order_left.store(left, Relaxed);
        if left == 0 {
            self.in_order.store(false, Relaxed);
            return true;
        }
        false
    }

    /// The verdict on a window of speculation: if it did not pay, run in order for
    /// the current backoff (doubled for next time); if it did, reset the backoff.
    ///
    /// A window that only gained too little, right after one that paid, is given one
    /// more chance: on a shared machine one descheduled thread can stall a window of
    /// a loop that does pay, and a wrong verdict costs a whole in-order stretch. A
    /// probe after an in-order stretch gets no second chance (each would double the
    /// cost of probing a loop that never pays), and rollbacks and a missing worker
    /// are not timing noise: they count at once.
    pub(crate) fn judge(&self, verdict: Verdict) {
        let backoff = self.backoff.load(Relaxed);
        let state = self.slow_windows.load(Relaxed);
        if verdict == Verdict::SlowOnce && state == LAST_PAID {
            self.slow_windows.store(STRUCK, Relaxed);
            return;
        }
        match verdict {
            Verdict::Paid => self.slow_windows.store(LAST_PAID, Relaxed),
            // Being alone says nothing of the loop: keep what the last verdict said.
            Verdict::Alone => {}
            Verdict::SlowOnce | Verdict::Lost => self.slow_windows.store(PROBING, Relaxed),
        }
        if verdict == Verdict::Paid {
            self.backoff.store(MIN_BACKOFF, Relaxed);
        } else if verdict == Verdict::Alone {
            // Run in order for the current stretch, without lengthening the next:
            // a busy moment must not cost the loop thousands of in-order epochs
            // once the workers are back.
            self.in_order_left.store(backoff, Relaxed);
            self.in_order.store(true, Relaxed);
        } else {
            self.in_order_left.store(backoff, Relaxed);
            self.backoff.store((backoff * 2).min(MAX_BACKOFF), Relaxed);
            self.in_order.store(true, Relaxed);
        }
    }
}

/// One loop run's window of speculative epochs, filled by its participants' votes
/// (each hands over a few epochs at a time, so that commits do not all write one
/// shared line) and judged when full.
#[derive(Debug)]
pub(crate) struct Window {
    /// Epochs in a full window: [`WINDOW`] per thread, so that every thread's votes
    /// are in before the window is judged.
    size: u32,
    epochs: AtomicU32,
    rolled_back: AtomicU32,
    useful_ns: AtomicU64,
    /// Votes from threads other than the loop's caller in this window.
    helpers: AtomicU32,
    start: std::sync::Mutex<Instant>,
    /// Moves on each [`Window::open`], so that a participant can drop the tally of
    /// epochs it committed before the window opened (see [`Window::generation`]).
    generation: CachePadded<AtomicU32>,
}

impl Window {
    pub(crate) fn new(threads: usize) -> Self {
        Window {
            size: WINDOW * threads.max(1) as u32,
            epochs: AtomicU32::new(0),
            rolled_back: AtomicU32::new(0),
            useful_ns: AtomicU64::new(0),
            helpers: AtomicU32::new(0),
            start: std::sync::Mutex::new(Instant::now()),
            generation: CachePadded::new(AtomicU32::new(0)),
        }
    }

    /// Which window is open now. A participant's tally that started under an older
    /// one holds epochs from before this window's start: voting it would credit the
    /// window with work done outside its wall time (a window judged from such votes
    /// once found a full dependence chain "paying").
    pub(crate) fn generation(&self) -> u32 {
        self.generation.load(Relaxed)
    }

    /// Starts a new window now (speculation starts or resumes).
    pub(crate) fn open(&self) {
        self.open_at(Instant::now());
    }

    /// Starts a new window at `now`.
    fn open_at(&self, now: Instant) {
        self.epochs.store(0, Relaxed);
        self.rolled_back.store(0, Relaxed);
        self.useful_ns.store(0, Relaxed);
        self.helpers.store(0, Relaxed);
        *self.start.lock().unwrap_or_else(|e| e.into_inner()) = now;
        self.generation.fetch_add(1, Relaxed);
    }

    /// A participant (`helper`: not the loop's caller) committed `epochs`
    /// speculative epochs, `rolled_back` of which were rolled back at least once,
    /// spending `useful` on work that committed. Once the window is full, speculation
    /// is judged not to pay when most epochs rolled back, or when the useful work of
    /// all threads adds up to less than [`MIN_GAIN`] times the window's wall time (a
    /// dependence that forwarding hides from the rollback count still serializes the
    /// epochs), or when no worker helped at all.
    pub(crate) fn vote(
        &self,
        site: &LoopSite,
        epochs: u32,
        rolled_back: u32,
        useful: Duration,
        helper: bool,
    ) {
        self.vote_at(site, epochs, rolled_back, useful, helper, Instant::now());
    }

    /// [`Window::vote`] at time `now` (the tests replay windows on a clock of their
    /// own).
    fn vote_at(
        &self,
        site: &LoopSite,
        epochs: u32,
        rolled_back: u32,
        useful: Duration,
        helper: bool,
        now: Instant,
    ) {
        if helper && self.helpers.load(Relaxed) == 0 && self.epochs.load(Relaxed) > 0 {
            // The first worker to join a window the caller started alone (workers
            // park while a site runs in order, and take tens of microseconds to
            // wake): judge speculation from now on, not the caller's lone start.
            // This vote's epochs ran before now, so they are not counted either.
            self.open_at(now);
            self.helpers.store(1, Relaxed);
            return;
        }
        let total = self.epochs.fetch_add(epochs, Relaxed) + epochs;
        let bad = self.rolled_back.fetch_add(rolled_back, Relaxed) + rolled_back;
        let useful_ns = useful.as_nanos() as u64;
        let useful = self.useful_ns.fetch_add(useful_ns, Relaxed) + useful_ns;
        let helpers = self.helpers.fetch_add(u32::from(helper), Relaxed) + u32::from(helper);
        if total < self.size {
            return;
        }
        let wall =
            now.saturating_duration_since(*self.start.lock().unwrap_or_else(|e| e.into_inner()));
        // A window must be long enough for its timing to mean something; and workers
        // hand their votes over every few epochs and may have to wake first: give
        // them time to show up before judging a window without them.
        if wall < MIN_WINDOW || (helpers == 0 && wall < WAIT_FOR_HELPERS) {
            return;
        }
        let wall = wall.as_nanos() as f64;
        self.open_at(now);
        let gain = if wall > 0.0 {
            useful as f64 / wall
        } else {
            f64::INFINITY
        };
        // A window the caller ran alone (no worker was free, or none woke in time)
        // gained nothing from speculation, whatever it rolled back.
        site.judge(if helpers == 0 {
            Verdict::Alone
        } else if bad * 2 > total {
            Verdict::Lost
        } else if gain < MIN_GAIN {
            Verdict::SlowOnce
        } else {
            Verdict::Paid
        });
    }
}

/// The site of a loop identified by its source location and name (for loops run
/// without a `static` site of their own).
pub(crate) fn site_for(location: &'static Location<'static>, name: &str) -> &'static LoopSite {
    type Key = (usize, String);
    static SITES: Mutex<Option<HashMap<Key, &'static LoopSite>>> = Mutex::new(None);
    let mut sites = SITES.lock().unwrap_or_else(|e| e.into_inner());
    let key = (
        location as *const Location<'static> as usize,
        name.to_owned(),
    );
    sites
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert_with(|| Box::leak(Box::new(LoopSite::new())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Plenty of useful work: these votes are judged by rollbacks alone.
    const D: Duration = Duration::from_secs(3600);

    /// A clock of the test's own, so that no verdict depends on how the machine
    /// schedules the test.
    struct Clock(Cell<Instant>);

    impl Clock {
        fn new() -> Self {
            Clock(Cell::new(Instant::now()))
        }

        fn advance(&self, d: Duration) {
            self.0.set(self.0.get() + d);
        }

        /// Lets a window reach the length it is judged on.
        fn age(&self) {
            self.advance(MIN_WINDOW + Duration::from_micros(50));
        }

        fn open(&self, w: &Window) {
            w.open_at(self.0.get());
        }

        fn vote(
            &self,
            w: &Window,
            site: &LoopSite,
            epochs: u32,
            rolled_back: u32,
            useful: Duration,
            helper: bool,
        ) {
            w.vote_at(site, epochs, rolled_back, useful, helper, self.0.get());
        }
    }

    #[test]
    fn speculation_without_gain_switches_to_in_order() {
        let clock = Clock::new();
        // One window of 20 ms in which the two threads committed `gained` ms of work.
        let window = |site: &LoopSite, w: &Window, gained: u64| {
            clock.open(w);
            clock.advance(Duration::from_millis(20));
            clock.vote(w, site, WINDOW, 0, Duration::from_millis(gained / 2), true);
            clock.vote(
                w,
                site,
                WINDOW,
                0,
                Duration::from_millis(gained - gained / 2),
                false,
            );
        };
        let (site, w) = (LoopSite::new(), Window::new(2));
        // 10 ms of committed work in a 20 ms window: half the in-order speed. A new
        // site gets a second window; a probe after an in-order stretch does not.
        window(&site, &w, 10);
        assert!(!site.in_order(), "a new site gets a second window");
        window(&site, &w, 10);
        assert!(site.in_order());
        site.ran_in_order(MIN_BACKOFF);
        assert!(!site.in_order());
        window(&site, &w, 10);
        assert!(site.in_order(), "a probe gets no second chance");
        // After a window that paid, one slow window may be the machine; two in a
        // row are the loop.
        let (site, w) = (LoopSite::new(), Window::new(2));
        for gained in [36, 10] {
            window(&site, &w, gained);
            assert!(!site.in_order());
        }
        window(&site, &w, 10);
        assert!(site.in_order(), "two slow windows in a row");
        // A slow window followed by a good one forgets the first.
        let (site, w) = (LoopSite::new(), Window::new(2));
        for gained in [36, 6, 36, 6] {
            window(&site, &w, gained);
        }
        assert!(!site.in_order());
        let (site, w) = (LoopSite::new(), Window::new(2));
        window(&site, &w, 36);
        assert!(!site.in_order());
    }

    #[test]
    fn a_window_without_workers_waits_for_them_then_runs_in_order() {
        let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
        clock.open(&w);
        clock.age();
        clock.vote(&w, &site, 2 * WINDOW, 0, Duration::from_micros(100), false);
        assert!(!site.in_order(), "too early to judge without the workers");
        clock.advance(WAIT_FOR_HELPERS);
        clock.vote(&w, &site, 2 * WINDOW, 0, Duration::from_millis(1), false);
        assert!(site.in_order(), "the caller alone gained nothing");
        // ... which does not lengthen the next in-order stretch.
        assert_eq!(site.in_order_budget(), MIN_BACKOFF);
        assert_eq!(site.backoff.load(Relaxed), MIN_BACKOFF);
    }

    #[test]
    fn the_first_worker_to_join_restarts_the_window() {
        let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
        clock.open(&w);
        clock.advance(Duration::from_millis(2));
        // The caller ran alone while the worker woke; the worker's first vote starts
        // the window over and is not counted.
        clock.vote(&w, &site, WINDOW, 0, Duration::from_micros(500), false);
        let generation = w.generation();
        clock.vote(&w, &site, WINDOW, 0, D, true);
        assert_ne!(w.generation(), generation);
        assert_eq!(w.epochs.load(Relaxed), 0);
        assert_eq!(w.useful_ns.load(Relaxed), 0);
        assert!(!site.in_order());
        // From then on, the window is judged on what both threads do in it.
        clock.advance(Duration::from_millis(2));
        clock.vote(&w, &site, WINDOW, 0, Duration::from_micros(1900), true);
        clock.vote(&w, &site, WINDOW, 0, Duration::from_micros(1900), false);
        assert!(!site.in_order());
        assert_eq!(w.epochs.load(Relaxed), 0, "judged and reopened");
    }

    #[test]
    fn short_windows_are_not_judged() {
        let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(1));
        clock.open(&w);
        clock.vote(&w, &site, 4 * WINDOW, 4 * WINDOW, D, true);
        assert!(!site.in_order(), "judged before MIN_WINDOW");
        clock.age();
        clock.vote(&w, &site, WINDOW, WINDOW, D, true);
        assert!(site.in_order());
    }

    #[test]
    fn mostly_rolled_back_windows_switch_to_in_order_and_back() {
        let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(1));
        clock.open(&w);
        clock.age();
        clock.vote(&w, &site, 8, 2, D, true);
        assert!(!site.in_order(), "a quarter rolled back still pays");
        clock.vote(&w, &site, 4, 3, D, true);
        assert!(!site.in_order(), "the window is not full yet");
        clock.age();
        clock.vote(&w, &site, 4, 3, D, true);
        assert!(site.in_order());
        assert_eq!(site.in_order_budget(), MIN_BACKOFF);
        assert!(!site.ran_in_order(MIN_BACKOFF - 1));
        assert!(site.in_order());
        assert!(site.ran_in_order(1), "probe speculation after the backoff");
        assert!(!site.in_order());
        // A failed probe doubles the next in-order stretch.
        clock.age();
        clock.vote(&w, &site, WINDOW, WINDOW, D, true);
        assert!(site.in_order());
        assert_eq!(site.in_order_budget(), 2 * MIN_BACKOFF);
        site.ran_in_order(2 * MIN_BACKOFF - 1);
        assert!(site.in_order());
        site.ran_in_order(1);
        assert!(!site.in_order());
        // A good window resets the backoff.
        clock.age();
        clock.vote(&w, &site, WINDOW, 0, D, true);
        assert_eq!(site.backoff.load(Relaxed), MIN_BACKOFF);
    }
}
