//! A loop site's adaptive state ([`LoopSite`]): whether it runs in order now, how long
//! the in-order stretch lasts before speculation is probed again, and the verdict on a
//! window of speculation that switches it.

use crate::sync::lock_std;
use core::panic::Location;
use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The fewest iterations of an in-order stretch that measure the plain loop's cost
/// per iteration.
const MIN_MEASURED_ITEMS: u64 = 16;
/// The most iterations a stretch run only to measure that cost takes (see
/// [`Verdict::Measure`]).
pub(crate) const MAX_MEASURED_ITEMS: u64 = 4096;
/// Measuring stretches a site takes, keeping the least cost they measured: one
/// stretch of 20 us, descheduled or cold for part of it, read 370 ns an iteration of
/// a loop whose plain iterations take 40, and the site speculated at 55 times the
/// plain loop's time ever after.
pub(crate) const MEASURES: u32 = 2;
/// How many times more or less than before an iteration must cost in order for the
/// site to take it as another loop's (see [`LoopSite::note_in_order`] and
/// `StretchCost`): iterations of one loop vary, and a stretch's time varies with the
/// machine; a loop called on other data can cost a hundred times more or less.
pub(crate) const STALE: u64 = 4;
/// The same for an iteration's cost in epochs (see [`LoopSite::window_epoch_cost`]),
/// which also carries the epoch's own cost shared among its iterations, and so moves
/// with the chunk: a loop of 8 ns iterations moved by more than four times between
/// windows of short and long epochs, and measured its in-order cost again and
/// again.
pub(crate) const EPOCH_STALE: u64 = 16;
/// Speculation a site runs (judged windows' wall time, over all its runs) before it
/// measures: a measuring stretch costs a drain and the second thread's time, 5-10%
/// of a first run of a few milliseconds (the `first_run` bench), and about 1% of what
/// the site has run by then.
pub(crate) const MEASURE_AFTER: Duration = Duration::from_millis(10);

/// First in-order stretch after speculation failed, in epochs.
pub(crate) const MIN_BACKOFF: u64 = 32;
/// Longest in-order stretch between probes. A probe of a loop that never pays costs
/// a window of violated epochs (about 40 re-runs of a full dependence chain, some
/// 200 us on a 2-core VM); at 16,384 epochs of 1 us between probes that was 1 to 2% of
/// the loop, at this length it is under half a percent. A loop reaches it only after
/// eleven failed probes in a row.
pub(crate) const MAX_BACKOFF: u64 = 65536;
/// Longest time an in-order stretch lasts, however many epochs its backoff allows.
/// A verdict taken while the machine was disturbed (a core taken by another tenant
/// for a while, so that two threads ran no faster than one) must not keep a loop
/// that does pay in order for seconds after the machine recovered; a loop that never
/// pays probes at least this often, a window of re-runs each time (for a full
/// dependence chain of 20 us iterations, some 0.6 ms per 100 ms).
pub(crate) const MAX_STRETCH: Duration = Duration::from_millis(100);

/// Whether `a` is more than `factor` times `b`, or `b` more than `factor` times `a`.
fn far_apart(a: u64, b: u64, factor: u64) -> bool {
    a > b.saturating_mul(factor) || b > a.saturating_mul(factor)
}

/// `ns` nanoseconds in picoseconds, at least 1 (0 means "not known").
fn ps(ns: f64) -> u64 {
    ((ns * 1000.0) as u64).max(1)
}

/// Nanoseconds since the first call in this process: a time an atomic can hold.
pub(crate) fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    // At least 1: 0 is "no stretch".
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

/// The adaptive state of one loop site.
#[derive(Debug)]
pub struct LoopSite {
    /// Read by every worker looking for work: kept apart from the counters the
    /// running thread writes.
    in_order: CachePadded<AtomicBool>,
    in_order_left: AtomicU64,
    /// What an iteration took when the site last ran in order, in picoseconds (0:
    /// never measured): the plain loop's cost, which a window of speculation is
    /// judged against (see `Window::vote_at`).
    in_order_ps_per_item: AtomicU64,
    /// What the last in-order stretch took an iteration, in picoseconds, if that
    /// was [`STALE`] times the average or more and not yet believed (0: it was
    /// not; see [`LoopSite::note_in_order`]).
    far_above_ps: AtomicU64,
    /// Measuring stretches taken (see [`MEASURES`]).
    measures: AtomicU32,
    /// What the iterations whose in-order cost the site knows took an iteration in
    /// epochs, in picoseconds (0: not known; the next window judged tells): windows
    /// whose iterations take far more or far less than that run other iterations
    /// (see [`LoopSite::window_epoch_cost`]).
    cost_epoch_ps: AtomicU64,
    /// What the last window judged took an iteration in epochs, in picoseconds: the
    /// iterations an in-order stretch that follows it runs, most likely.
    last_window_epoch_ps: AtomicU64,
    /// Wall time of the windows judged so far, in nanoseconds (see
    /// [`MEASURE_AFTER`]).
    speculated_ns: AtomicU64,
    pub(super) backoff: AtomicU64,
    /// Iterations per epoch chosen by the runtime (when the loop does not set one).
    pub(super) chunk: AtomicU32,
    /// Iterations per epoch that [`TARGET_EPOCH`](crate::rules::TARGET_EPOCH) gives,
    /// as last measured: the least a run of known length is cut to (see
    /// [`crate::rules::run_chunk`]).
    pub(super) short_chunk: AtomicU32,
    /// An epoch of this site has rolled back: automatic chunking no longer aims at
    /// [`QUIET_TARGET_EPOCH`](crate::rules::QUIET_TARGET_EPOCH) (see
    /// [`LoopSite::tune_chunk`]).
    pub(super) rolled_back_once: AtomicBool,
    /// Iterations the site's last speculative run committed: the length automatic
    /// chunking assumes for a run whose iterator does not tell its own.
    pub(super) last_run_items: AtomicU64,
    /// [`PROBING`], [`LAST_PAID`], [`STRUCK`] or [`PROBE_STRUCK`]: how the last windows went (see
    /// [`LoopSite::judge`]).
    slow_windows: AtomicU32,
    /// Why the current in-order stretch began ([`HeldBack`] as a number).
    held_back: AtomicU8,
    /// A worker came for the loop during an in-order stretch held back for want of
    /// one (see [`LoopSite::worker_arrived`]).
    worker_arrived: AtomicBool,
    /// When the current in-order stretch began ([`now_ns`]; 0: none).
    stretch_began: AtomicU64,
    /// In-order stretches too short to count alone, pooled (see
    /// [`LoopSite::note_in_order`]): their time in nanoseconds, and iterations.
    pooled_ns: AtomicU64,
    pooled_items: AtomicU64,
    /// A window of the site's current run paid (see [`LoopSite::run_starts`]).
    paid_in_run: AtomicBool,
    /// The window the site's last run ended in before it filled, which the next
    /// run's goes on from (see `Window::carry_to`).
    partial: Mutex<Option<super::window::Partial>>,
    /// Loads that violate most epochs, where epochs wait instead (`synced.rs`).
    pub(crate) synced: super::SyncedLoads,
}

/// Why a loop site runs a stretch of epochs in order (reported per run, see
/// [`crate::LoopReport::in_order_no_workers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeldBack {
    /// No worker joined in time: the workers were starting or busy elsewhere.
    NoWorkers = 0,
    /// A window of speculation gained too little, or most of its epochs rolled back.
    DidNotPay = 1,
    /// A short stretch measures what an iteration costs without speculation, which
    /// the site's windows are then judged against (see [`Verdict::Measure`]).
    Measuring = 2,
}

/// No window paid since the site last ran in order.
const PROBING: u32 = 0;
/// The last window paid.
const LAST_PAID: u32 = 1;
/// The last window gained too little after one that paid.
const STRUCK: u32 = 2;
/// The first window of a probe (after an in-order stretch) gained too little.
const PROBE_STRUCK: u32 = 3;

/// What a window of speculation came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Speculation paid.
    Paid,
    /// Its committed work per wall time was under [`MIN_GAIN`](super::window::MIN_GAIN).
    SlowOnce,
    /// Most epochs rolled back.
    Lost,
    /// No worker joined in [`WAIT_FOR_HELPERS`](super::window::WAIT_FOR_HELPERS): the machine is busy (other loops
    /// hold the workers, or the OS does not run them), which says nothing about the
    /// loop.
    Alone,
    /// The window paid by its threads' busy time, but the site has not taken its
    /// [`MEASURES`] measurements yet, and its iterations are short enough (under
    /// [`MEASURE_BELOW`](super::window::MEASURE_BELOW) of epoch time each) that
    /// tracking may cost more than the second thread gains: run in order for
    /// [`MEASURE_FOR`](super::window::MEASURE_FOR) (at most [`MAX_MEASURED_ITEMS`]
    /// iterations) to learn what the plain loop costs. (A loop of
    /// 10 ns iterations, each updating a `SpecVec` element, kept two threads busy
    /// at a third of the plain loop's speed and was judged paying on every window.)
    Measure,
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
            in_order_ps_per_item: AtomicU64::new(0),
            far_above_ps: AtomicU64::new(0),
            measures: AtomicU32::new(0),
            cost_epoch_ps: AtomicU64::new(0),
            last_window_epoch_ps: AtomicU64::new(0),
            speculated_ns: AtomicU64::new(0),
            backoff: AtomicU64::new(MIN_BACKOFF),
            chunk: AtomicU32::new(1),
            short_chunk: AtomicU32::new(1),
            rolled_back_once: AtomicBool::new(false),
            last_run_items: AtomicU64::new(0),
            // A new site gets the benefit of the doubt: its first window also pays
            // for the workers' wake-up and the chunk size still growing.
            slow_windows: AtomicU32::new(LAST_PAID),
            held_back: AtomicU8::new(HeldBack::DidNotPay as u8),
            worker_arrived: AtomicBool::new(false),
            stretch_began: AtomicU64::new(0),
            pooled_ns: AtomicU64::new(0),
            pooled_items: AtomicU64::new(0),
            paid_in_run: AtomicBool::new(false),
            partial: Mutex::new(None),
            synced: super::SyncedLoads::new(),
        }
    }

    /// Why the current in-order stretch began.
    pub(crate) fn held_back(&self) -> HeldBack {
        match self.held_back.load(Relaxed) {
            0 => HeldBack::NoWorkers,
            2 => HeldBack::Measuring,
            _ => HeldBack::DidNotPay,
        }
    }

    /// A run of the site starts. An in-order stretch carried over from a run in
    /// which speculation also paid is cut to [`MIN_BACKOFF`] epochs, so that this
    /// run probes speculation early: that run changed on the way. (A loop whose
    /// first half was independent and whose second half a chain ended each run in
    /// a stretch its failed probes had doubled; carried whole into the next run, it
    /// ran that run's independent half in order, and later runs gained 1.10 times
    /// over the plain loop against 1.31 in the first.) A stretch after a run that
    /// never paid runs on: a transaction's short loop that never pays, run once per
    /// transaction, would otherwise probe every few transactions.
    pub(crate) fn run_starts(&self) {
        if !self.paid_in_run.swap(false, Relaxed) {
            return;
        }
        if self.in_order() && self.held_back() == HeldBack::DidNotPay {
            let cut = MIN_BACKOFF.saturating_mul(self.chunk().max(1) as u64);
            self.in_order_left.fetch_min(cut, Relaxed);
        }
    }

    /// Keeps the unfilled window a run ended in (`None`: it ended in none).
    pub(super) fn keep_partial(&self, partial: Option<super::window::Partial>) {
        *lock_std(&self.partial) = partial;
    }

    /// Takes the unfilled window the last run ended in.
    pub(super) fn take_partial(&self) -> Option<super::window::Partial> {
        lock_std(&self.partial).take()
    }

    /// Whether epochs should now start only when homefree.
    #[inline]
    pub(crate) fn in_order(&self) -> bool {
        self.in_order.load(Relaxed)
    }

    /// An in-order stretch ran `items` iterations in `spent`: the plain loop's cost
    /// per iteration, as a running average. Stretches of fewer than
    /// [`MIN_MEASURED_ITEMS`] iterations (the runs of a short loop, each its own
    /// stretch) are pooled until they add up to that many. (Counted alone once one
    /// lasted [`MEASURE_FOR`](super::window::MEASURE_FOR), as a measuring stretch is,
    /// only the short stretches the OS slowed were counted: 10-iteration runs of
    /// 1 us iterations, on a machine other processes kept busy, read 3.7 us an
    /// iteration, and a chain of them was judged 3 to 4 times faster than in order.)
    pub(crate) fn note_in_order(&self, spent: Duration, items: u64) {
        if items == 0 {
            return;
        }
        if items >= MIN_MEASURED_ITEMS {
            self.note_stretch(spent, items);
            return;
        }
        let ns = spent.as_nanos() as u64;
        let pooled_ns = self.pooled_ns.fetch_add(ns, Relaxed) + ns;
        let pooled = self.pooled_items.fetch_add(items, Relaxed) + items;
        if pooled >= MIN_MEASURED_ITEMS {
            self.pooled_ns.store(0, Relaxed);
            self.pooled_items.store(0, Relaxed);
            self.note_stretch(Duration::from_nanos(pooled_ns), pooled);
        }
    }

    /// [`LoopSite::note_in_order`] for one stretch or a pool of them (a short one
    /// says little: not counted, unless it lasted
    /// [`MEASURE_FOR`](super::window::MEASURE_FOR), as a measuring stretch of long
    /// iterations does).
    fn note_stretch(&self, spent: Duration, items: u64) {
        if items == 0 || (items < MIN_MEASURED_ITEMS && spent < super::window::MEASURE_FOR) {
            return;
        }
        let now = (spent.as_nanos() as u64).saturating_mul(1000) / items;
        let old = self.in_order_ps_per_item.load(Relaxed);
        // A stretch far above the average may have been descheduled for part of
        // it: with two other processes keeping both CPUs busy, a 32-iteration
        // stretch of a 20 us-an-iteration loop lost a 4 ms scheduler tick and
        // read 420 us an iteration; the windows judged against that "paid" at a
        // tenth of the plain loop's speed. It is believed when the next stretch
        // says so too (as `StretchCost` believes a dearer block).
        let far_above = old != 0 && now > old.saturating_mul(STALE);
        let before = self.far_above_ps.swap(0, Relaxed);
        if far_above && before == 0 {
            self.far_above_ps.store(now, Relaxed);
            return;
        }
        // A stretch far from the average ran other iterations than it was made of
        // (a site whose loop is called on other data): it replaces the average
        // (the cheaper of two far above it: noise only lengthens a stretch).
        // Averaged in a quarter at a time, a site that measured 60 ns iterations
        // and then ran 2.3 us ones judged three probes in a row against a cost too
        // low, each followed by an in-order stretch twice as long as the last.
        let next = if old == 0 || far_apart(now, old, STALE) {
            // New iterations: those of the window that sent the loop in order.
            self.cost_epoch_ps
                .store(self.last_window_epoch_ps.load(Relaxed), Relaxed);
            if far_above { now.min(before) } else { now }
        } else {
            (old * 3 + now) / 4
        };
        self.in_order_ps_per_item.store(next.max(1), Relaxed);
    }

    /// A measuring stretch ran `items` iterations in `spent` (see
    /// [`Verdict::Measure`]): the least of such measurements stands (noise only
    /// makes a measurement longer), averaged with later in-order stretches.
    pub(crate) fn note_measured(&self, spent: Duration, items: u64) {
        self.measures.fetch_add(1, Relaxed);
        let old = self.in_order_ps_per_item.load(Relaxed);
        self.note_stretch(spent, items);
        let new = self.in_order_ps_per_item.load(Relaxed);
        if old != 0 && new > old {
            self.in_order_ps_per_item.store(old, Relaxed);
        }
    }

    /// A window whose epochs took `epoch_ns` an iteration asks for a measuring
    /// stretch: the iterations measured are of that cost in epochs.
    pub(crate) fn note_measure_asked(&self, epoch_ns: f64) {
        self.cost_epoch_ps.store(ps(epoch_ns), Relaxed);
    }

    /// A window whose epochs took `epoch_ns` an iteration is being judged. If that
    /// is more than [`EPOCH_STALE`] times above or below what the iterations whose
    /// in-order cost the site knows took, the loop now runs other iterations (a
    /// function called on other data, a loop whose iterations change on the way),
    /// and that cost says nothing of them: forget it (and measure again). Where
    /// what they took is not known yet, this window tells.
    pub(crate) fn window_epoch_cost(&self, epoch_ns: f64) {
        let now = ps(epoch_ns);
        self.last_window_epoch_ps.store(now, Relaxed);
        let then = self.cost_epoch_ps.load(Relaxed);
        if self.in_order_ps_per_item.load(Relaxed) == 0 {
            return;
        }
        if then == 0 {
            self.cost_epoch_ps.store(now, Relaxed);
        } else if far_apart(now, then, EPOCH_STALE) {
            self.cost_epoch_ps.store(0, Relaxed);
            self.in_order_ps_per_item.store(0, Relaxed);
            self.measures.store(0, Relaxed);
        }
    }

    /// A window of `wall` nanoseconds with a worker in it was judged.
    pub(crate) fn speculated(&self, wall: f64) {
        self.speculated_ns.fetch_add(wall as u64, Relaxed);
    }

    /// Whether a window that paid should be followed by a measuring stretch: the
    /// site has speculated for [`MEASURE_AFTER`] and not taken [`MEASURES`] of
    /// them.
    pub(crate) fn wants_measure(&self) -> bool {
        self.measures.load(Relaxed) < MEASURES
            && self.speculated_ns.load(Relaxed) >= MEASURE_AFTER.as_nanos() as u64
    }

    /// What an iteration costs run in order, in picoseconds (0: not measured).
    pub(crate) fn in_order_ps(&self) -> u64 {
        self.in_order_ps_per_item.load(Relaxed)
    }

    /// What an iteration costs run in order, in nanoseconds, if measured.
    pub(crate) fn in_order_per_item(&self) -> Option<f64> {
        match self.in_order_ps_per_item.load(Relaxed) {
            0 => None,
            ps => Some(ps as f64 / 1000.0),
        }
    }

    /// How many epochs may still run in order before speculation is probed again.
    pub(crate) fn in_order_budget(&self) -> u64 {
        self.in_order_left.load(Relaxed).max(1)
    }

    /// A worker would have joined the loop, but the site runs in order. If the
    /// stretch was held back for want of a worker ([`HeldBack::NoWorkers`]: none had
    /// joined in [`WAIT_FOR_HELPERS`](super::window::WAIT_FOR_HELPERS), typically a
    /// worker still starting or waking), the reason is gone: the stretch ends at the
    /// next iteration and speculation resumes (see [`LoopSite::ran_in_order`]),
    /// rather than keep the worker idle for the rest of the stretch. A stretch held
    /// back because speculation did not pay is the loop's own verdict and runs on.
    pub(crate) fn worker_arrived(&self) {
        if self.held_back() == HeldBack::NoWorkers && !self.worker_arrived.load(Relaxed) {
            self.worker_arrived.store(true, Relaxed);
        }
    }

    /// Whether the in-order stretch should end before its budget: a worker arrived
    /// during a stretch held back for want of one.
    #[inline]
    pub(crate) fn stretch_cut_short(&self) -> bool {
        self.worker_arrived.load(Relaxed)
    }

    /// An in-order stretch ended because its iterations came to cost far more than
    /// when it began (`per_item_ps` now): that is their in-order cost from now on
    /// (not the stretch's average, mostly of the cheaper ones), and speculation is
    /// probed at once (see [`super::StretchCost`]).
    pub(crate) fn iterations_got_dearer(&self, per_item_ps: u64) {
        self.in_order_ps_per_item.store(per_item_ps.max(1), Relaxed);
        self.far_above_ps.store(0, Relaxed);
        // What they take in epochs: the next window tells.
        self.cost_epoch_ps.store(0, Relaxed);
        self.in_order_left.store(0, Relaxed);
    }

    /// Whether the in-order stretch has lasted [`MAX_STRETCH`] at `now` ([`now_ns`]).
    pub(crate) fn stretch_expired_at(&self, now: u64) -> bool {
        let began = self.stretch_began.load(Relaxed);
        began != 0 && now.saturating_sub(began) >= MAX_STRETCH.as_nanos() as u64
    }

    /// `n` epochs ran in order; after `backoff` of them, after [`MAX_STRETCH`], once
    /// a worker arrived during a stretch held back for want of one, or after a
    /// measuring stretch (which ends on the clock), probe speculation again.
    /// Returns whether speculation resumes now.
    pub(crate) fn ran_in_order(&self, n: u64) -> bool {
        self.ran_in_order_at(n, now_ns())
    }

    /// [`LoopSite::ran_in_order`] at time `now` ([`now_ns`]; the tests use a clock
    /// of their own).
    pub(super) fn ran_in_order_at(&self, n: u64, now: u64) -> bool {
        let left = self.in_order_left.load(Relaxed).saturating_sub(n);
        let arrived = self.worker_arrived.load(Relaxed);
        let measured = self.held_back() == HeldBack::Measuring;
        if left == 0 || arrived || measured || self.stretch_expired_at(now) {
            if arrived {
                self.worker_arrived.store(false, Relaxed);
            }
            self.in_order_left.store(0, Relaxed);
            self.stretch_began.store(0, Relaxed);
            self.in_order.store(false, Relaxed);
            return true;
        }
        self.in_order_left.store(left, Relaxed);
        false
    }

    /// The verdict on a window of speculation: if it did not pay, run in order for
    /// the current backoff (doubled for next time); if it did, reset the backoff.
    ///
    /// A window that only gained too little, right after one that paid, is given one
    /// more chance: on a shared machine one descheduled thread can stall a window of
    /// a loop that does pay, and a wrong verdict costs a whole in-order stretch. So
    /// does a probe's first window after an in-order stretch: it starts from
    /// in-order execution, its epochs' pipeline not yet full (a loop in which
    /// iteration 4k+1 reads what 4k stored, 1.4 times faster than in order when
    /// speculating, judged its probes' first windows at 0.9-1.05 times the in-order
    /// speed; one window each, its in-order stretches doubled until whole runs went
    /// in order, in half the runs). That second window costs a loop that never
    /// pays one window per probe more, at most once per [`MAX_BACKOFF`] epochs once
    /// the backoff has grown. Rollbacks and a missing worker are not timing noise:
    /// they count at once.
    pub(crate) fn judge(&self, verdict: Verdict) {
        self.judge_at(verdict, now_ns());
    }

    /// [`LoopSite::judge`] at time `now` ([`now_ns`]).
    pub(super) fn judge_at(&self, verdict: Verdict, now: u64) {
        let backoff = self.backoff.load(Relaxed);
        if matches!(verdict, Verdict::Paid | Verdict::Measure) && !self.paid_in_run.load(Relaxed) {
            self.paid_in_run.store(true, Relaxed);
        }
        if verdict == Verdict::Measure {
            // The window paid as far as it could be judged: as for `Paid`, and a
            // stretch that measures.
            self.slow_windows.store(LAST_PAID, Relaxed);
            self.backoff.store(MIN_BACKOFF, Relaxed);
            self.held_back.store(HeldBack::Measuring as u8, Relaxed);
            self.in_order_left.store(MAX_MEASURED_ITEMS, Relaxed);
            self.stretch_began.store(now, Relaxed);
            self.in_order.store(true, Relaxed);
            return;
        }
        let state = self.slow_windows.load(Relaxed);
        if verdict == Verdict::SlowOnce && state == LAST_PAID {
            self.slow_windows.store(STRUCK, Relaxed);
            return;
        }
        if verdict == Verdict::SlowOnce && state == PROBING {
            self.slow_windows.store(PROBE_STRUCK, Relaxed);
            return;
        }
        match verdict {
            Verdict::Paid => self.slow_windows.store(LAST_PAID, Relaxed),
            // Being alone says nothing of the loop: keep what the last verdict said.
            Verdict::Alone => {}
            Verdict::SlowOnce | Verdict::Lost => self.slow_windows.store(PROBING, Relaxed),
            Verdict::Measure => unreachable!("handled above"),
        }
        // A worker that came during an earlier stretch says nothing about this one.
        self.worker_arrived.store(false, Relaxed);
        if verdict == Verdict::Paid {
            self.backoff.store(MIN_BACKOFF, Relaxed);
        } else if verdict == Verdict::Alone {
            // Run in order for the current stretch, without lengthening the next:
            // a busy moment must not cost the loop thousands of in-order epochs
            // once the workers are back.
            self.held_back.store(HeldBack::NoWorkers as u8, Relaxed);
            self.in_order_left.store(backoff, Relaxed);
            self.stretch_began.store(now, Relaxed);
            self.in_order.store(true, Relaxed);
        } else {
            // The backoff counts epochs, as the windows that probe speculation do;
            // an in-order stretch runs one iteration at a time. (Counted in
            // iterations, a loop of 10 ns iterations, 250 to an epoch, ran a stretch
            // of 32 iterations between probes of 4,000, and speculated most of
            // the time at a third of the in-order speed.)
            let epoch = self.chunk().max(1) as u64;
            self.held_back.store(HeldBack::DidNotPay as u8, Relaxed);
            self.in_order_left
                .store(backoff.saturating_mul(epoch), Relaxed);
            self.backoff.store((backoff * 2).min(MAX_BACKOFF), Relaxed);
            self.stretch_began.store(now, Relaxed);
            self.in_order.store(true, Relaxed);
        }
    }
}

/// The site of a loop identified by its source location and name (for loops run
/// without a `static` site of their own).
pub(crate) fn site_for(location: &'static Location<'static>, name: &str) -> &'static LoopSite {
    // `None`: the site shared by every further name at this location.
    type Key = (usize, Option<String>);
    static SITES: Mutex<Option<HashMap<Key, &'static LoopSite>>> = Mutex::new(None);
    let mut sites = lock_std(&SITES);
    let sites = sites.get_or_insert_with(HashMap::new);
    let at = location as *const Location<'static> as usize;
    let named = (at, Some(name.to_owned()));
    let key = if sites.contains_key(&named) || sites.len() < MAX_NAMED_SITES {
        named
    } else {
        (at, None)
    };
    sites
        .entry(key)
        .or_insert_with(|| Box::leak(Box::new(LoopSite::new())))
}

/// Loop sites kept per (location, name): a program that names its loops by the run
/// (`format!("batch {n}")`) would otherwise add a site for ever with every run. Past
/// this many, further names at a location share one site (they share the adaptive
/// state; reports still carry each loop's own name). Source locations are finite, so
/// the table stays bounded.
pub(crate) const MAX_NAMED_SITES: usize = 4096;
