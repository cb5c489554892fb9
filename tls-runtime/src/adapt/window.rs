//! One loop run's window of speculative epochs: filled by its participants' votes and
//! judged, when full, on whether speculation pays.

use super::WINDOW;
use super::site::{LoopSite, Verdict};
use crate::sync::{Mutex, lock};
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Speculation must estimate at least this speedup to go on (by its threads' busy
/// time, or by the measured in-order cost where the site has one); below it (a little
/// above 1, since speculative epochs pay for tracking) in-order execution is faster.
pub(crate) const MIN_GAIN: f64 = 1.1;
/// Where the site knows what its iterations cost in order, a window must also
/// commit its iterations at least this many times faster than the in-order loop
/// would have run them. The threads' busy time can call a window paying that ran
/// slower than the plain loop: a loop of 8 ns iterations, each writing a `SpecVec`
/// element, kept two threads busy at 13-15 ns an iteration (the two threads' epochs
/// and their tracked writes each take longer than one in-order iteration) and
/// passed [`MIN_GAIN`] even with its work capped at [`OVERHEAD_BOUND`] times the
/// in-order cost. Not above 1: a window counts the iterations of the epochs it
/// committed, while its wall time also runs epochs that commit in the next one (a
/// window of 8 epochs a thread can be off by a quarter either way), and a loop
/// wrongly held back loses more than one wrongly speculated.
pub(crate) const MIN_PLAIN_GAIN: f64 = 1.0;
/// How many times its in-order cost a window's iterations may be credited with
/// (see [`Window::vote_at`]).
pub(crate) const OVERHEAD_BOUND: f64 = 2.0;
/// The shortest wall time a window is judged on: shorter ones measure the clock and
/// the scheduler more than the loop.
pub(crate) const MIN_WINDOW: Duration = Duration::from_micros(50);
/// How long a window in which no worker arrived or voted waits for one before it
/// is judged without (a parked worker takes tens of microseconds to wake, a new one
/// longer).
pub(crate) const WAIT_FOR_HELPERS: Duration = Duration::from_millis(1);
/// How long a window waits for the vote of a worker that is in the run but has not
/// voted in it (busy with a long epoch, or with epochs queued behind one) before it
/// is judged without: long enough for iterations of a millisecond or two and the
/// commits queued behind them, short enough that a worker the OS has taken off its
/// CPU (a scheduler tick is 4 ms) does not leave the caller speculating alone, at
/// speculation's cost, for long.
pub(crate) const WAIT_FOR_VOTE: Duration = Duration::from_millis(10);
/// A site whose iterations took less than this each in their epochs (tracking
/// included) measures the plain loop's cost (see `Verdict::Measure`): tracking may
/// cost more than the second thread gains.
/// The epoch time says little of the plain cost: 64 tracked reads an iteration took
/// 5 us in epochs where the plain loop took 75 ns (the reads' lines passed between
/// the CPUs), so the bound is high; above it, one iteration in order would cost
/// more than the measurement is worth.
pub(crate) const MEASURE_BELOW: Duration = Duration::from_micros(100);
/// How long a stretch run only to measure the plain loop's cost lasts (at least one
/// iteration; the clock is read after iterations 1, 2, 4, ...).
pub(crate) const MEASURE_FOR: Duration = Duration::from_micros(20);

/// A window not yet full is judged at once (as [`Verdict::Lost`]: in order at the
/// first strike) when it has already taken this many times what the in-order loop
/// takes for a full window's iterations, counting every epoch its threads may have
/// committed without voting yet ([`Window::hopeless`]): it cannot pay, however its
/// votes fall. Waiting for it to fill cost a dependence chain on a busy machine
/// dearly: with two other processes keeping both CPUs busy, each handoff between
/// the two threads waited for a scheduler tick (4 ms) while the in-order loop took
/// 20 us an iteration, and each probe of speculation (two windows of 16 epochs, a
/// slow window striking twice) took about 65 ms, the loop 9 to 17 times as long as
/// the plain one. No healthy window comes near it: two threads, or eight on two
/// CPUs, fill a window in one to two times its in-order time.
pub(crate) const HOPELESS: f64 = 4.0;

/// What `epochs` epochs would take the in-order loop, in nanoseconds, where the site
/// knows an iteration's in-order cost: each of as many iterations as the `epochs_seen`
/// epochs of `items` held on average, or as the site's chunk, if more (used by
/// [`Window::hopeless`] and a thread's early vote, `Votes::far_behind`).
pub(super) fn in_order_ns(
    site: &LoopSite,
    items: u64,
    epochs_seen: u32,
    epochs: u32,
) -> Option<f64> {
    let per_item = site.in_order_per_item()?;
    let per_epoch = (items as f64 / f64::from(epochs_seen.max(1))).max(site.chunk() as f64);
    Some(f64::from(epochs) * per_epoch * per_item)
}

/// How long a loop's caller runs alone before it moves the workers off its own CPU
/// (see `workers::nudge_off_this_cpu`): a worker that is not queued behind
/// the caller joins within tens of microseconds.
pub(crate) const NUDGE_AFTER: Duration = Duration::from_micros(100);

/// A participant's vote: it committed `epochs` speculative epochs of `items`
/// iterations, `rolled_back` of which were rolled back at least once, spending
/// `useful` on work that committed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) epochs: u32,
    pub(crate) items: u64,
    pub(crate) rolled_back: u32,
    pub(crate) useful: Duration,
    /// The epochs' own work (their runs, less what rollbacks threw away and waits at
    /// synchronized loads), wherever in time it ran.
    pub(crate) work: Duration,
    /// The tracked accesses the epochs made (their attempts together).
    pub(crate) accesses: u64,
}

/// More than a tracked access costs beyond a plain one, even one whose cache line
/// another CPU holds (50 to 110 ns measured on the 2-core development machine; 10 to
/// 30 ns otherwise): taken off the epochs' work for each, what is left is work the
/// in-order loop does too (see [`in_order_estimate_ns`]).
pub(crate) const ACCESS_BOUND_NS: f64 = 150.0;

/// What the in-order loop would take for a window's `items` iterations, in
/// nanoseconds, given what an iteration cost in the site's measuring stretch
/// (`per_item`), and the work of the window's epochs (`work_ns`) with the tracked
/// accesses they made (`accesses`): the larger of two estimates.
///
/// - `items` times `per_item`: right when the iterations cost alike;
/// - the epochs' work less [`ACCESS_BOUND_NS`] for each access: a bound below, right
///   when some iterations cost far more than others and track little. A measuring
///   stretch runs a few iterations (20 us of them), and where a few iterations in a
///   hundred take 15 to 130 times the others (records of very different sizes) it
///   almost never meets a dear one: `items` times `per_item` then put windows that
///   ran 1.5 to 2 times faster than the in-order loop at 0.4 to 0.9 of it, and the
///   site ran in order for most of its runs. The epochs' work holds the dear
///   iterations.
///
/// Where tracking is much of the work (many accesses an iteration), the second
/// estimate is about nothing, and the first decides. (Scaled instead by the measured
/// cost over the window's cheapest iteration, it took iterations of different
/// lengths for tracking overhead: a loop of 0.2 to 20 us iterations, a tracked read
/// every 20 ns, was judged 1.8 times faster than in order while running at 0.41.)
pub(super) fn in_order_estimate_ns(items: u64, per_item: f64, work_ns: f64, accesses: u64) -> f64 {
    let by_items = items as f64 * per_item;
    by_items.max(work_ns - accesses as f64 * ACCESS_BOUND_NS)
}

/// A window's sums: what its votes added up to, and its wall time. Those of a run's
/// window that the run ended before it filled are kept by the site, so that its next
/// run's window goes on from them (see [`Window::carry_to`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Partial {
    pub(super) epochs: u32,
    rolled_back: u32,
    useful_ns: u64,
    work_ns: u64,
    items: u64,
    accesses: u64,
    helpers: u32,
    /// The window's wall time so far, within runs (the time between runs is not the
    /// loop's).
    wall: Duration,
}

impl Partial {
    /// A window just opened.
    const EMPTY: Partial = Partial {
        epochs: 0,
        rolled_back: 0,
        useful_ns: 0,
        work_ns: 0,
        items: 0,
        accesses: 0,
        helpers: 0,
        wall: Duration::ZERO,
    };
}

/// One loop run's window of speculative epochs, filled by its participants' votes
/// (each hands over a few epochs at a time, so that commits do not all write one
/// shared line) and judged when full.
#[derive(Debug)]
pub(crate) struct Window {
    /// Epochs in a full window: [`WINDOW`] per thread, so that every thread's votes
    /// are in before the window is judged.
    size: u32,
    pub(super) epochs: AtomicU32,
    rolled_back: AtomicU32,
    pub(super) useful_ns: AtomicU64,
    /// Iterations the window's epochs committed.
    items: AtomicU64,
    /// The window's epochs' own work ([`Tally::work`]), in nanoseconds.
    work_ns: AtomicU64,
    /// The tracked accesses they made ([`Tally::accesses`]).
    accesses: AtomicU64,
    /// Votes from threads other than the loop's caller in this window, or 1 from a
    /// worker's arrival (see [`Window::helper_joined_at`]).
    helpers: AtomicU32,
    /// The caller has moved the workers off its CPU in this run (once a run).
    nudged: AtomicBool,
    /// A worker has entered this run: the caller no longer moves the workers.
    joined: AtomicBool,
    /// Workers in the run now.
    inside: AtomicU32,
    start: Mutex<Instant>,
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
            items: AtomicU64::new(0),
            work_ns: AtomicU64::new(0),
            accesses: AtomicU64::new(0),
            helpers: AtomicU32::new(0),
            nudged: AtomicBool::new(false),
            joined: AtomicBool::new(false),
            inside: AtomicU32::new(0),
            start: Mutex::new(Instant::now()),
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
    pub(super) fn open_at(&self, now: Instant) {
        self.set_sums(&Partial::EMPTY, now);
        self.generation.fetch_add(1, Relaxed);
    }

    /// The window's sums so far, its wall time up to `now`.
    fn sums(&self, now: Instant) -> Partial {
        Partial {
            epochs: self.epochs.load(Relaxed),
            rolled_back: self.rolled_back.load(Relaxed),
            useful_ns: self.useful_ns.load(Relaxed),
            work_ns: self.work_ns.load(Relaxed),
            items: self.items.load(Relaxed),
            accesses: self.accesses.load(Relaxed),
            helpers: self.helpers.load(Relaxed),
            wall: now.saturating_duration_since(*lock(&self.start)),
        }
    }

    /// Sets the window's sums to `p`, as if it had started `p.wall` before `now`.
    fn set_sums(&self, p: &Partial, now: Instant) {
        self.epochs.store(p.epochs, Relaxed);
        self.rolled_back.store(p.rolled_back, Relaxed);
        self.useful_ns.store(p.useful_ns, Relaxed);
        self.work_ns.store(p.work_ns, Relaxed);
        self.items.store(p.items, Relaxed);
        self.accesses.store(p.accesses, Relaxed);
        self.helpers.store(p.helpers, Relaxed);
        *lock(&self.start) = now.checked_sub(p.wall).unwrap_or(now);
    }

    /// The run ends: a window it did not fill is kept by `site` for its next run.
    /// A loop of fewer epochs than a window (a transaction's items loop of ten) would
    /// otherwise never be judged: a chain of 10 iterations, run 2,000 times,
    /// speculated in every run at 0.8 of the plain loop's speed.
    pub(crate) fn carry_to(&self, site: &LoopSite) {
        self.carry_to_at(site, Instant::now());
    }

    /// [`Window::carry_to`] at `now`.
    pub(super) fn carry_to_at(&self, site: &LoopSite, now: Instant) {
        let partial = (self.epochs.load(Relaxed) > 0).then(|| self.sums(now));
        site.keep_partial(partial);
    }

    /// The run starts: its window goes on from the one the site's last run left
    /// unfilled, if any.
    pub(crate) fn resume_from(&self, site: &LoopSite) {
        self.resume_from_at(site, Instant::now());
    }

    /// [`Window::resume_from`] at `now`.
    pub(super) fn resume_from_at(&self, site: &LoopSite, now: Instant) {
        if let Some(p) = site.take_partial() {
            self.set_sums(&p, now);
        }
    }

    /// Whether a worker has entered this run.
    pub(crate) fn joined(&self) -> bool {
        self.joined.load(Relaxed)
    }

    /// A worker entered the loop run (see [`Window::helper_joined_at`]).
    pub(crate) fn helper_joined(&self) {
        self.helper_joined_at(Instant::now());
    }

    /// A worker entered the loop run at `now`. The first to come to a window
    /// that no worker has voted in starts it over: speculation is judged from now
    /// on, not on the caller's lone start while the worker woke (workers park
    /// between loops and while a site runs in order, and a wake-up can take from
    /// tens of microseconds to a millisecond). It also counts as a helper at once:
    /// a worker hands over its tally only every [`WINDOW`] epochs, and a worker
    /// that came late in [`WAIT_FOR_HELPERS`] would otherwise not have voted
    /// before the caller judged the window alone, so that the site ran in order
    /// with a worker in the loop (seen on the first run of new sites: a worker
    /// joining 0.5-0.7 ms into the run, then parked again for an in-order stretch).
    pub(super) fn helper_joined_at(&self, now: Instant) {
        self.inside.fetch_add(1, Relaxed);
        if !self.joined.load(Relaxed) {
            self.joined.store(true, Relaxed);
        }
        if self.helpers.load(Relaxed) == 0 {
            self.open_at(now);
            self.helpers.store(1, Relaxed);
        }
    }

    /// A worker left the loop run.
    pub(crate) fn helper_left(&self) {
        self.inside.fetch_sub(1, Relaxed);
    }

    /// Whether a window not yet full at `now`, holding `total` epochs of `items`
    /// iterations that took `useful_ns` of work, cannot pay (see [`HOPELESS`]); if
    /// so, its wall time. It cannot when a worker is in
    /// it, the site knows what an iteration costs in order, the window has taken
    /// `HOPELESS` times what the in-order loop takes for its voted epochs and a
    /// whole window's more (each thread votes every [`WINDOW`] epochs, so fewer
    /// than that have committed unvoted), and its threads spent less than a
    /// `HOPELESS`th of that time working. The last is what tells a window held up
    /// (waiting on one another, descheduled) from one whose iterations now cost
    /// far more than those the in-order cost was measured on: that one keeps its
    /// threads busy, and is judged when full, where `LoopSite::window_epoch_cost`
    /// sees the change.
    fn hopeless(
        &self,
        site: &LoopSite,
        total: u32,
        items: u64,
        useful_ns: u64,
        helpers: u32,
        now: Instant,
    ) -> Option<Duration> {
        if helpers == 0 || total == 0 || items == 0 {
            return None;
        }
        // Most votes end here, before the window's start is locked and read.
        let best = in_order_ns(site, items, total, total + self.size)?;
        let wall = now.saturating_duration_since(*lock(&self.start));
        if wall < MIN_WINDOW {
            return None;
        }
        let ns = wall.as_nanos() as f64;
        let threads = f64::from(self.size / WINDOW);
        (best * HOPELESS < ns && useful_ns as f64 * HOPELESS < ns * threads).then_some(wall)
    }

    /// A participant (`helper`: not the loop's caller) handed over its tally (see
    /// [`Tally`]). Once the window is full, speculation is judged not to pay when
    /// most epochs rolled back, or when the useful work of all threads adds up to
    /// less than [`MIN_GAIN`] times the window's wall time (a dependence that
    /// forwarding hides from the rollback count still serializes the epochs), or
    /// when no worker helped at all.
    pub(crate) fn vote(&self, site: &LoopSite, tally: Tally, helper: bool) {
        self.vote_at(site, tally, helper, Instant::now());
    }

    /// [`Window::vote`] at time `now` (the tests replay windows on a clock of their
    /// own).
    pub(super) fn vote_at(&self, site: &LoopSite, tally: Tally, helper: bool, now: Instant) {
        let Tally {
            epochs,
            items,
            rolled_back,
            useful,
            work,
            accesses,
        } = tally;
        let total = self.epochs.fetch_add(epochs, Relaxed) + epochs;
        let items = self.items.fetch_add(items, Relaxed) + items;
        let bad = self.rolled_back.fetch_add(rolled_back, Relaxed) + rolled_back;
        let useful_ns = useful.as_nanos() as u64;
        let useful = self.useful_ns.fetch_add(useful_ns, Relaxed) + useful_ns;
        let work_ns = work.as_nanos() as u64;
        let work = self.work_ns.fetch_add(work_ns, Relaxed) + work_ns;
        let accesses = self.accesses.fetch_add(accesses, Relaxed) + accesses;
        let helpers = self.helpers.fetch_add(u32::from(helper), Relaxed) + u32::from(helper);
        if helpers == 0 && !helper && !self.nudged.load(Relaxed) && !self.joined.load(Relaxed) {
            // No worker yet: one queued behind the caller on its CPU would not run
            // until the kernel moves it, so move it now. (Once one has come, a
            // window without its votes is one it spent elsewhere or descheduled:
            // moving it would not help.)
            let alone = now.saturating_duration_since(*lock(&self.start));
            if alone >= NUDGE_AFTER && !self.nudged.swap(true, Relaxed) {
                crate::workers::nudge_off_this_cpu();
            }
        }
        if total < self.size {
            if let Some(wall) = self.hopeless(site, total, items, useful, helpers, now) {
                self.open_at(now);
                site.speculated(wall.as_nanos() as f64);
                site.judge(Verdict::Lost);
            }
            return;
        }
        let wall = now.saturating_duration_since(*lock(&self.start));
        // A window must be long enough for its timing to mean something; and workers
        // hand their votes over every few epochs and may have to wake first: give
        // them time to show up before judging a window without them. A worker in
        // the run that has not voted in this window is busy with epochs that have
        // not committed yet (a long iteration, or epochs queued behind one): its
        // vote will come, and a window judged without it would be judged "alone"
        // with a worker at work (a loop whose iterations took 3 us, and 50 to 400
        // us one time in thirty, ran stretches of 32 to 128 epochs in order "for
        // want of a worker" in half its runs). It is waited for up to
        // WAIT_FOR_VOTE.
        let wait = if self.inside.load(Relaxed) > 0 {
            WAIT_FOR_VOTE
        } else {
            WAIT_FOR_HELPERS
        };
        if wall < MIN_WINDOW || (helpers == 0 && wall < wait) {
            return;
        }
        let wall = wall.as_nanos() as f64;
        self.open_at(now);
        // The epochs' own time counts what speculation adds to each iteration
        // (tracking, claiming, committing) as work. Where the site has run in
        // order, the window's iterations are worth at most OVERHEAD_BOUND times
        // what they cost there: a dependence chain of iterations of tens of
        // nanoseconds, one iteration an epoch while its load is synchronized, kept
        // two threads "busy" on that overhead and speculated at a thirtieth of the
        // plain loop's speed. (Not the in-order cost itself: the iterations a window
        // counts are those of its committed epochs, while its work includes epochs
        // still in flight at its edges, a quarter more in a window of 8 epochs a
        // thread; and two threads run each iteration slower than one does.)
        // Busy time is counted from a thread's first commit in the window, so the
        // work of an epoch that ran across the window's start is missing from it;
        // after a long epoch, a burst of commits then looks like no work at all (a
        // loop of 3 us iterations, 50 to 400 us one time in thirty, judged its
        // windows at 0.2 to 1 times the wall time with both threads at work). The
        // committed epochs' own work does not depend on when they commit: the
        // window counts the larger of the two.
        let mut useful = (useful as f64).max(work as f64);
        // What an iteration took in the window's epochs.
        let epoch_per_item = (items > 0).then(|| useful / items as f64);
        if let Some(e) = epoch_per_item {
            site.window_epoch_cost(e);
        }
        let measured = site.in_order_per_item();
        // How much faster than the in-order loop the window committed its
        // iterations, where the site knows the in-order cost.
        let mut plain_gain = None;
        if let Some(per_item) = measured
            && items > 0
        {
            let in_order = in_order_estimate_ns(items, per_item, work as f64, accesses);
            useful = useful.min(OVERHEAD_BOUND * in_order);
            plain_gain = Some(in_order / wall);
        }
        if helpers > 0 {
            site.speculated(wall);
        }
        // Iterations short enough (in epoch time) to ask for a measurement, or whose
        // tracked accesses may be half their epochs' work whatever their length:
        // their epoch time. (A loop of 20 us iterations making 1,000 tracked reads
        // each took 117 us an iteration in its epochs, above MEASURE_BELOW, never
        // measured its in-order cost, and was judged by its busy threads alone:
        // speculating for good at 0.40 of the plain loop's speed, in one process
        // in four.)
        let tracking_heavy = accesses > 0 && 2.0 * accesses as f64 * ACCESS_BOUND_NS >= work as f64;
        let measure = epoch_per_item.filter(|&e| {
            site.wants_measure() && (e < MEASURE_BELOW.as_nanos() as f64 || tracking_heavy)
        });
        let gain = if wall > 0.0 {
            useful / wall
        } else {
            f64::INFINITY
        };
        // Where the in-order cost is known, a window that committed its iterations
        // MIN_GAIN times faster than the in-order loop runs them paid, whatever its
        // threads' busy time says (re-runs of violated epochs find their lines warm:
        // a loop whose epochs 4k+1 re-ran that way measured a busy-time gain of
        // 1.0-1.05 in windows 1.15 times faster than in order); one slower than the
        // in-order loop did not.
        let slow = match plain_gain {
            Some(g) => g < MIN_PLAIN_GAIN || (g < MIN_GAIN && gain < MIN_GAIN),
            None => gain < MIN_GAIN,
        };
        // A window the caller ran alone (no worker was free, or none woke in time)
        // gained nothing from speculation, whatever it rolled back.
        site.judge(if helpers == 0 {
            Verdict::Alone
        } else if bad * 2 > total {
            Verdict::Lost
        } else if slow {
            Verdict::SlowOnce
        } else if let Some(e) = measure {
            site.note_measure_asked(e);
            Verdict::Measure
        } else {
            Verdict::Paid
        });
    }
}
