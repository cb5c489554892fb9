//! Synchronized loads: a load that violates most epochs waits instead.
//!
//! When the same load (a source line) keeps violating the epochs that run it, because
//! each epoch reads what the one before writes near its end (a running total updated
//! as an iteration's last step, say), speculation on it only loses: the later epoch
//! reads too early, runs on, and is rolled back when the earlier one writes. Worse,
//! the threads can fall into lockstep, each re-run meeting the next write the same
//! way, and then every epoch is lost. For such a load the site learns to *synchronize*
//! it, as TLS hardware does with frequently violated loads: an epoch that reaches it
//! waits, keeping the work it did so far, until the epoch the violating stores came
//! from has committed (for a running total, the epoch just before, so until
//! homefree; for iteration i reading what i - 3 wrote, the epoch three back), then
//! reads as usual, still tracked, so that a store from nearer violates it as before.
//! Of the violations counted, the wait reaches back as far as the nearest stores
//! that make up a quarter of them ([`NEARER_SHARE`]): a rare store from nearer (one
//! iteration in fifty writing what the next reads, in a loop whose dependence is five
//! apart) is left to violate, since waiting for it in every epoch would run the loop
//! one epoch at a time. Once the load is synchronized, stores from nearer than its
//! wait are counted as a new candidate, and a dense stretch of them (as below)
//! shortens the wait. The rest of the epoch overlaps with the next ones as
//! before. With automatic chunking only violations whose storing epoch and every
//! epoch after it hold one iteration count (`scheduler/rollback.rs`): among chunked
//! epochs a dependence between iterations three apart shows as one on the epoch
//! just before.
//!
//! The rule: a load is synchronized once it has violated [`SYNC_AFTER`] distinct
//! epochs, at least half of the epochs between the first of them and the last
//! ([`SYNC_DENSITY`]). A load that violates a quarter of its epochs (a dependence
//! between every fourth pair) stays speculative: waiting at it in every epoch would
//! cost more than the re-runs. A synchronized load is released after
//! [`SYNC_FOR`] epochs reached it (waiting or finding the store they depend on in
//! already), and learned again if it still violates, so a dependence that
//! went away costs one such stretch of waiting at most. Sooner if it went away: now
//! and then an epoch that reaches the load reads it without waiting (a *probe*: the
//! first after [`PROBE_EVERY`] / 2 epochs, then one in [`PROBE_EVERY`], twice as
//! far apart after each probe that was violated, up to [`PROBE_EVERY_MAX`], so that
//! a dependence that stays costs few rollbacks, and never closer than twice the
//! epochs the loop keeps in flight, so that a probe's violation has come by the
//! time the next one judges it), and once [`QUIET_PROBES`] probes in
//! a row saw no violation of the load by the next one, it is released (an outside
//! probe's loop of short runs, whose first twenty runs formed a chain, waited at the
//! load for all of its 600 runs). A wait that lasts longer than
//! [`MAX_WAIT`] gives up and re-runs the epoch when homefree, so a wait can never hold
//! up a loop whose earlier epochs need this thread.

use crate::epoch::{AwaitHomefreeSignal, EpochCx, NOT_VIOLATED};
use crate::sync::lock_std;
use core::panic::Location;
use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Distinct epochs a load must violate before it is synchronized.
pub(crate) const SYNC_AFTER: u64 = 8;
/// Violated epochs per epoch run, from the first violation counted to the last, that
/// a load must reach (one in two).
pub(crate) const SYNC_DENSITY: u64 = 2;
/// Epochs reaching a synchronized load (each a wait, unless the store it depends on
/// is in already) after which it is released (and learned again if needed).
pub(crate) const SYNC_FOR: u32 = 4096;
/// The longest an epoch waits at a synchronized load before it gives up (and re-runs
/// when homefree).
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(2);
/// Epochs reaching a synchronized load from one probe to the next, at first.
pub(crate) const PROBE_EVERY: u32 = 64;
/// The most epochs between two probes (a probe a violation followed doubles the
/// interval).
pub(crate) const PROBE_EVERY_MAX: u32 = 512;
/// Probes in a row with no violation of the load by the next probe, after which it
/// is released.
pub(crate) const QUIET_PROBES: u32 = 3;
/// Loads synchronized at once per site.
const SLOTS: usize = 4;
/// Loads whose violations are counted at once per site.
const CANDIDATES: usize = 8;
/// One in this many of a candidate's violations, from its nearest stores, is enough
/// for the wait to reach back to them (see the module's docs).
pub(crate) const NEARER_SHARE: u64 = 4;

/// A candidate's violations by how many epochs back their stores came from (profile
/// mode's model counts its loads' stores with this one piece too).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Distances {
    /// Distances 1 to 7.
    near: [u64; 7],
    /// Distances of 8 or more, and the fewest of them.
    far: u64,
    far_min: u64,
}

impl Distances {
    pub(crate) fn new() -> Self {
        Distances {
            near: [0; 7],
            far: 0,
            far_min: u64::MAX,
        }
    }

    /// Counts a violation by a store `distance` (at least 1) epochs back.
    pub(crate) fn add(&mut self, distance: u64) {
        let bucket = usize::try_from(distance.saturating_sub(1)).unwrap_or(usize::MAX);
        match self.near.get_mut(bucket) {
            Some(n) => *n += 1,
            None => {
                self.far += 1;
                self.far_min = self.far_min.min(distance);
            }
        }
    }

    /// Whether nothing was counted.
    pub(crate) fn is_empty(&self) -> bool {
        self.far == 0 && self.near.iter().all(|&n| n == 0)
    }

    /// How far back the wait reaches: the nearest distance that, with those nearer
    /// still, counts for at least one violation in [`NEARER_SHARE`] (distances of 8
    /// or more count as one: past 7, the nearest of them).
    pub(crate) fn wait(&self) -> u64 {
        let total: u64 = self.near.iter().sum::<u64>() + self.far;
        let mut so_far = 0;
        for (d, n) in self.near.iter().enumerate() {
            so_far += n;
            if so_far > 0 && so_far * NEARER_SHARE >= total {
                return d as u64 + 1;
            }
        }
        if self.far > 0 { self.far_min } else { 1 }
    }
}

/// A load's violations so far.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    load: &'static Location<'static>,
    /// The loop run (its serial) and index of the last epoch counted (distinct
    /// epochs only).
    run: u32,
    last: u64,
    /// Where the last epoch counted stands among all the site's epochs
    /// (`SyncedLoads::position`).
    at: u64,
    stretch: Stretch,
    /// The violations counted, by how many epochs back their stores came from.
    distances: Distances,
}

/// One stretch of a load's violated epochs, counted by the rule above (the runtime's
/// candidates, and profile mode's model of them, count with this one piece).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stretch {
    /// Epochs counted, and epochs run from the first counted to the last.
    epochs: u64,
    span: u64,
}

impl Stretch {
    /// A stretch that starts at a violated epoch.
    pub(crate) const fn new() -> Self {
        Stretch { epochs: 1, span: 1 }
    }

    /// Counts the next distinct violated epoch, `gap` epochs run after the last one
    /// counted; whether the load is to be synchronized now. A gap too wide to count
    /// as one stretch starts a new one at this epoch.
    pub(crate) fn count(&mut self, gap: u64) -> bool {
        if gap > SYNC_DENSITY * SYNC_AFTER {
            *self = Stretch::new();
            return false;
        }
        self.epochs += 1;
        self.span += gap;
        self.epochs >= SYNC_AFTER && self.epochs * SYNC_DENSITY >= self.span
    }

    /// Whether the last [`Stretch::count`] started a new stretch.
    fn restarted(&self) -> bool {
        self.epochs == 1
    }
}

/// The loads a site synchronizes, and the violations that may make it synchronize more.
///
/// Its atomics are `Relaxed` (but a slot's publication, Release/Acquire, so that a
/// load found there comes with its fresh counts), as the rest of the site's state:
/// they steer scheduling, never correctness (an epoch that waits or does not is
/// protected by the violation protocol either way); a race between a release and a
/// new load costs at most a stretch of relearning (the count of occupied slots
/// follows the slots by read-modify-writes, so none is left filled and unseen).
#[derive(Debug)]
pub(crate) struct SyncedLoads {
    /// How many slots hold a load, changed only by read-modify-writes that follow
    /// the slots' own (a flag stored after a scan could end up false beside a slot
    /// filled meanwhile, and the load would never wait again): read when an epoch
    /// begins (a speculative read of an epoch that began with none pays nothing more;
    /// see `EpochCx::new`).
    occupied: AtomicU32,
    slots: [AtomicPtr<Location<'static>>; SLOTS],
    /// Epochs left to reach the load in the same slot before it is released.
    left: [AtomicU32; SLOTS],
    /// Whether the load in the same slot was violated since the last probe.
    violated: [AtomicBool; SLOTS],
    /// Probes in a row after which no violation came.
    quiet: [AtomicU32; SLOTS],
    /// Epochs to reach the load before the next probe, and from one to the next.
    until_probe: [AtomicU32; SLOTS],
    probe_every: [AtomicU32; SLOTS],
    /// How many epochs back the stores that violated the load in the same slot came
    /// from ([`Distances::wait`]): an epoch waits there until the epoch that far back
    /// has committed (1: until homefree).
    distance: [AtomicU64; SLOTS],
    candidates: Mutex<Vec<Candidate>>,
    /// Epochs of the site's runs that have ended, all together: where a violated
    /// epoch stands among all the site's epochs, across runs (see `position`).
    ended_epochs: AtomicU64,
    /// An epoch of the site read speculative data after an `on_commit` call it had
    /// not run yet, and waited (`memory::await_delayed_calls`): automatic chunking
    /// then puts one iteration in each epoch (`LoopSite::chunk_for_run`).
    delayed_call_reads: AtomicBool,
}

impl Candidate {
    fn new(load: &'static Location<'static>, run: u32, index: u64, at: u64, distance: u64) -> Self {
        let mut distances = Distances::new();
        distances.add(distance);
        Candidate {
            load,
            run,
            last: index,
            at,
            stretch: Stretch::new(),
            distances,
        }
    }
}

fn same(a: &Location<'_>, b: &Location<'_>) -> bool {
    core::ptr::eq(a, b)
        || (a.line() == b.line() && a.column() == b.column() && a.file() == b.file())
}

impl SyncedLoads {
    pub(crate) const fn new() -> Self {
        SyncedLoads {
            occupied: AtomicU32::new(0),
            slots: [const { AtomicPtr::new(core::ptr::null_mut()) }; SLOTS],
            left: [const { AtomicU32::new(0) }; SLOTS],
            violated: [const { AtomicBool::new(false) }; SLOTS],
            quiet: [const { AtomicU32::new(0) }; SLOTS],
            until_probe: [const { AtomicU32::new(0) }; SLOTS],
            probe_every: [const { AtomicU32::new(PROBE_EVERY) }; SLOTS],
            distance: [const { AtomicU64::new(1) }; SLOTS],
            candidates: Mutex::new(Vec::new()),
            ended_epochs: AtomicU64::new(0),
            delayed_call_reads: AtomicBool::new(false),
        }
    }

    /// Notes that an epoch read after an `on_commit` call it held (see the field).
    pub(crate) fn note_delayed_call_read(&self) {
        if !self.delayed_call_reads.load(Relaxed) {
            self.delayed_call_reads.store(true, Relaxed);
        }
    }

    /// Whether an epoch of the site ever read after an `on_commit` call it held.
    pub(crate) fn delayed_call_reads(&self) -> bool {
        self.delayed_call_reads.load(Relaxed)
    }

    /// Whether an epoch must wait before making the load at `load`, and for the
    /// epoch how many back to commit (1: until homefree); counts the wait towards the
    /// load's release. `None` for a probe (see the module's docs).
    /// `window`: the epochs the loop keeps in flight (a probe is judged no sooner
    /// than twice that many epochs after it, by when its violation has come).
    #[inline]
    pub(crate) fn must_wait(&self, load: &'static Location<'static>, window: u64) -> Option<u64> {
        if !self.active() {
            return None;
        }
        let k = self.find(load)?;
        // At least 1: `note_violation` counts an unknown distance as 1.
        let distance = self.distance[k].load(Relaxed);
        if self.left[k].fetch_sub(1, Relaxed) <= 1 {
            self.release(k);
        } else if self.until_probe[k].fetch_sub(1, Relaxed) <= 1 {
            // The probe before this one was violated by now, if its dependence
            // is still there (the first one has none before it to judge: it only
            // starts the count).
            let mut every = self.probe_every[k].load(Relaxed);
            if self.violated[k].swap(false, Relaxed) {
                self.quiet[k].store(0, Relaxed);
                every = (every * 2).min(PROBE_EVERY_MAX);
                self.probe_every[k].store(every, Relaxed);
            } else if self.quiet[k].fetch_add(1, Relaxed) >= QUIET_PROBES {
                self.release(k);
            }
            let floor = u32::try_from(2 * window).unwrap_or(u32::MAX);
            self.until_probe[k].store(every.max(floor), Relaxed);
            return None;
        }
        Some(distance)
    }

    /// Whether any load is synchronized now.
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.occupied.load(Relaxed) > 0
    }

    /// Whether `load` is synchronized now.
    #[cfg(test)]
    pub(crate) fn contains(&self, load: &'static Location<'static>) -> bool {
        self.active() && self.find(load).is_some()
    }

    #[cold]
    fn find(&self, load: &'static Location<'static>) -> Option<usize> {
        self.slots.iter().position(|s| {
            // Acquire: the slot's counters were set before it was filled.
            let p = s.load(Acquire);
            // SAFETY: slots hold null or a `&'static Location`.
            !p.is_null() && same(unsafe { &*p }, load)
        })
    }

    fn release(&self, k: usize) {
        // Counted out once, by whichever thread empties it.
        if !self.slots[k].swap(core::ptr::null_mut(), Relaxed).is_null() {
            self.occupied.fetch_sub(1, Relaxed);
        }
    }

    /// Counts a run of the site that ran `epochs` epochs, once it ended.
    pub(crate) fn run_ended(&self, epochs: u64) {
        self.ended_epochs.fetch_add(epochs, Relaxed);
    }

    /// Where epoch `index` of a run stands among all the site's epochs: the epochs
    /// of the runs that ended before now, then the run's own. Exact for runs one
    /// after another; for runs at once (a transaction's loop on several client
    /// threads), it counts the epochs of the others that ended meanwhile.
    fn position(&self, index: u64) -> u64 {
        self.ended_epochs.load(Relaxed) + index
    }

    /// Counts a violation of epoch `index` of loop run `run` by a store to what the
    /// load at `load` read, made `distance` epochs before it (0: not known, counted
    /// as 1); synchronizes the load once the rule above holds. For a load
    /// synchronized already, only a store from nearer than its wait counts, towards
    /// a shorter wait.
    pub(crate) fn note_violation(
        &self,
        load: &'static Location<'static>,
        run: u32,
        index: u64,
        distance: u64,
    ) {
        let distance = distance.max(1);
        if self.active()
            && let Some(k) = self.find(load)
        {
            // Still needed (a probe's read, or one after a wait too short).
            if !self.violated[k].load(Relaxed) {
                self.violated[k].store(true, Relaxed);
            }
            if distance >= self.distance[k].load(Relaxed) {
                return;
            }
        }
        let at = self.position(index);
        let mut cands = lock_std(&self.candidates);
        let k = match cands.iter().position(|c| same(c.load, load)) {
            Some(k) => k,
            None => {
                if cands.len() == CANDIDATES {
                    // The least violating one goes.
                    let (least, _) = cands
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, c)| c.stretch.epochs)
                        .unwrap();
                    cands.swap_remove(least);
                }
                cands.push(Candidate::new(load, run, index, at, distance));
                return;
            }
        };
        let c = &mut cands[k];
        if run == c.run && index == c.last {
            c.distances.add(distance);
            return;
        }
        // Epochs run since the last one counted (none if rollbacks were counted out
        // of order), across runs: a transaction's items loop runs once per
        // transaction, and the runs without a violation in between count. (Counting
        // only the new run's epochs up to this one, violations hundreds of runs
        // apart made a dense stretch: an outside probe's New Order loop, with 10
        // violations in 9,000 epochs, was synchronized for 4,096 epochs.)
        let gap = at.saturating_sub(c.at);
        // (A gap too wide for one stretch is only ever forward: then this epoch is
        // the last, as for an epoch counted in the stretch.)
        c.last = if run == c.run {
            c.last.max(index)
        } else {
            index
        };
        c.at = c.at.max(at);
        c.run = run;
        let dense = c.stretch.count(gap);
        if c.stretch.restarted() {
            // The stretch before says nothing of this one's distances.
            c.distances = Distances::new();
        }
        c.distances.add(distance);
        if dense {
            let distance = c.distances.wait();
            cands.swap_remove(k);
            drop(cands);
            self.synchronize(load, distance);
        }
    }

    /// Synchronizes `load` with a wait `distance` epochs back; shortens the wait of a
    /// load synchronized already (its nearer stores made a candidate).
    fn synchronize(&self, load: &'static Location<'static>, distance: u64) {
        if let Some(k) = self.find(load) {
            self.distance[k].fetch_min(distance, Relaxed);
            return;
        }
        let p = load as *const Location<'static> as *mut Location<'static>;
        for (k, s) in self.slots.iter().enumerate() {
            if !s.load(Relaxed).is_null() {
                continue;
            }
            // The counts first, published by the slot (Release, `find`'s Acquire),
            // so that a wait that finds the load at once counts down from a full
            // budget (a stale 0 would release it at once).
            self.left[k].store(SYNC_FOR, Relaxed);
            self.distance[k].store(distance, Relaxed);
            self.violated[k].store(false, Relaxed);
            self.quiet[k].store(0, Relaxed);
            self.until_probe[k].store(PROBE_EVERY / 2, Relaxed);
            self.probe_every[k].store(PROBE_EVERY, Relaxed);
            if s.compare_exchange(core::ptr::null_mut(), p, Release, Relaxed)
                .is_ok()
            {
                self.occupied.fetch_add(1, Relaxed);
                return;
            }
        }
    }
}

/// Waits at `load`, keeping the epoch's work, until every epoch `behind` or more
/// before `cx` has committed (`behind` 1: until `cx` is homefree); a violation
/// meanwhile rolls it back as at any access. The load that follows is tracked as
/// any speculative one, so a wait too short (a store from nearer than `behind`)
/// costs a violation, never a wrong value. Gives up after [`MAX_WAIT`] (raising
/// `give_up`): the epoch then re-runs from its segment's start once homefree, its
/// thread free meanwhile to commit or run other epochs (more threads than cores, an
/// earlier epoch that needs this thread).
///
/// A synchronized load waits for the epoch its violating stores came from, at the
/// nearest, not for every earlier one: an outside probe's loop in which iteration i
/// read what i - 3 wrote, synchronized at homefree, ran its epochs one at a time and
/// then in order (0.99 times the plain loop's speed, against 1.6 to 1.8 times
/// without the synchronization).
#[cold]
pub(crate) fn wait_until_committed(
    cx: &EpochCx,
    load: &'static Location<'static>,
    give_up: AwaitHomefreeSignal,
    behind: u64,
) {
    let started = Instant::now();
    let after_call = matches!(give_up, AwaitHomefreeSignal::DelayedCall(_));
    let note = |gave_up: bool| {
        cx.synced_waits.borrow_mut().push(crate::epoch::LoadWait {
            load,
            waited: started.elapsed(),
            behind,
            gave_up,
            after_call,
        });
    };
    let mut spins = 0u32;
    loop {
        // Refreshes the watermark; a pending violation unwinds from here.
        if cx.ring().slot(cx.index).pending(Ordering::Relaxed) != NOT_VIOLATED {
            note(false);
        }
        cx.check_violation();
        if cx.committed_behind(behind) {
            // An epoch whose store came from far enough back to be in already did
            // not wait (only one that had to wait for homefree counts as before).
            if spins > 0 || behind == 1 {
                note(false);
            }
            return;
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(64) {
            if started.elapsed() > MAX_WAIT {
                note(true);
                cx.raise(give_up);
            }
            std::thread::yield_now();
        }
        crate::sync::spin_hint();
    }
}

#[cfg(test)]
#[path = "synced_tests.rs"]
mod tests;
