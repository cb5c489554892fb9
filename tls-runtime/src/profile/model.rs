//! The speedup model: `predict` replays the recorded epochs in loop order on `P`
//! simulated threads:
//!
//! - An epoch starts when a thread is free and the window of epochs in flight
//!   ([`EPOCHS_PER_THREAD`] times `P`, as in the scheduler) has room, and pays the measured
//!   per-epoch cost. It is stretched by the measured extra cost of each tracked read
//!   and of each speculative write (a new version).
//! - A read of a location that an earlier epoch writes *later* (in simulated time)
//!   is a violation, handled as the runtime handles it: the epoch learns of it at its
//!   next tracked access or checkpoint after the write (an `update`, recorded as a
//!   read and a write, is one access), unwinds, and restarts the segment that read
//!   it (or the whole epoch, without checkpoints) there. An epoch that reaches its
//!   end first (no tracked access left after the write, or the write came after it
//!   finished) is re-run once homefree by the thread that commits the epoch before
//!   it, right after that commit; the thread that ran it first went on to later
//!   epochs. Forwarding is free: a read after the earlier write sees its value.
//!   Restarts repeat until no earlier write comes after one of the epoch's reads.
//! - A load that violates a dense stretch of epochs (in a first replay) is
//!   *synchronized*, as the runtime learns to do (`adapt/synced.rs`): the replay that
//!   gives the prediction makes an epoch that reaches it wait, keeping its work, until
//!   the epoch its earlier stores came from has committed ([`SyncedSite`]'s
//!   distance, chosen as the runtime chooses it: the one before for a chain, three
//!   back where iteration i reads what i - 3 wrote), with one iteration an epoch
//!   unless the loop sets its chunk (the runtime's chunking does the same while it
//!   synchronizes a load). An epoch waits at each synchronized load it reaches, as the
//!   runtime does (a later one whose store is nearer waits again). Reads from there
//!   on can still be violated by the epochs between, and no longer by any earlier one.
//!   The dependences reported are the first replay's.
//! - A finished epoch frees its thread at once (finished epochs wait to commit
//!   without holding a thread); commits are in loop order, one after another, each
//!   paying the measured serialized cost of a commit hand-off plus the measured cost
//!   of committing each written location, plus the time the epoch's commit-time
//!   actions (`on_commit`, accumulations) took when recorded. The commit is work of
//!   the thread that does it: the epoch's own when the one before has committed by
//!   the time it finishes, else the thread that commits the one before (a chain);
//!   it pays the commit's share of the per-epoch cost and the commit-time actions.
//! - The predicted time is when the last epoch commits; the speedup is the
//!   sequential time (the sum of the epochs' durations and commit-time work) over it. The runtime falls
//!   back to in-order execution when speculation loses, so a prediction below about
//!   1 is reported as the in-order cost instead.
//!
//! A violation that hits a running epoch also costs the unwinding of its stack. The
//! costs come from `calibration.rs`.
//!
//! Where two threads' epochs end close together, whether a read wins its race with
//! the write it needs is decided by a few percent of an epoch's length, which moves
//! from run to run; so the prediction is the mean of several replays, the recorded
//! lengths and lengths varied by up to [`VARIATION`] (`simulate_varied`).
//!
//! Epochs are what the runtime would run: unless the loop sets its chunk, iterations
//! are grouped as the runtime's automatic chunking groups them (about
//! [`TARGET_EPOCH`] per epoch, or [`QUIET_TARGET_EPOCH`] where no epoch is violated;
//! at most [`MAX_CHUNK`] iterations; a run too short for those to leave each thread 16
//! epochs cut shorter, never below the [`TARGET_EPOCH`] grouping), and the group is
//! halved while more than a quarter of the simulated epochs lose a quarter of their
//! work or more to a restart (the runtime halves its chunk on the same rules,
//! [`halve_chunk`] and [`lost_enough_ns`]). Item boundaries inside a chunk are not
//! checkpoints, as in the runtime.

use super::calibration::Costs;
use super::recorder::{AccessKind, EpochProfile, Event};
use crate::rules::{EPOCHS_PER_THREAD, lost_enough_ns};
#[cfg(doc)]
use crate::rules::{MAX_CHUNK, QUIET_TARGET_EPOCH, TARGET_EPOCH, halve_chunk};
use std::collections::HashMap;
use std::panic::Location;

/// A source line of an access.
pub(super) type Site = &'static Location<'static>;

/// A load the runtime would synchronize, and how many epochs back the store it waits
/// for comes from (at least 1: the epoch before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SyncedSite {
    pub(super) load: Site,
    pub(super) distance: usize,
}

/// A dependence the model saw violate epochs: a store in one epoch, a load in a later
/// one that ran before it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SimDependence {
    /// Restarts it caused.
    pub(super) count: u64,
    /// Work those restarts threw away (ns).
    pub(super) lost: f64,
    /// The load's offsets in its epoch, as shares of the epoch (summed over
    /// `count`): a late load is one a checkpoint before it would save.
    pub(super) load_share_sum: f64,
    /// Tracked accesses the epoch made before the load (summed over `count`).
    pub(super) load_index_sum: u64,
    /// The earliest sub-thread segment the load was in.
    pub(super) segment: u32,
}

impl SimDependence {
    /// Adds what another replay saw of the same dependence.
    pub(super) fn add(&mut self, other: &SimDependence) {
        self.count += other.count;
        self.lost += other.lost;
        self.load_share_sum += other.load_share_sum;
        self.load_index_sum += other.load_index_sum;
        self.segment = self.segment.min(other.segment);
    }
}

/// What one simulation gives.
pub(super) struct Simulated {
    /// The predicted wall time (ns).
    pub(super) time: f64,
    /// Epochs a restart cost a quarter or more of their work so far (the runtime's
    /// measure for halving its chunk).
    pub(super) rolled_back: usize,
    /// The dependences that violated epochs, by (store, load) line.
    pub(super) deps: HashMap<(Site, Site), SimDependence>,
    /// Per load line, the epochs it was violated in, in the order noted (for the
    /// runtime's rule of when to synchronize a load, `predict::synchronized`).
    pub(super) violated: HashMap<Site, Vec<usize>>,
}

/// One finished epoch's writes of one location: when the first and the last landed,
/// and the first's line.
struct WriteSpan {
    epoch: usize,
    first: f64,
    last: f64,
    site: Option<Site>,
}

/// The earliest write that violates an epoch's read, as `simulate` finds it.
struct Hit {
    /// When the write lands.
    write_at: f64,
    /// The violated read's segment.
    seg: usize,
    store: Option<Site>,
    load: Option<Site>,
    /// The read's offset from its segment's start (the epoch's start, or the
    /// checkpoint before it), as a share of the epoch: the work a checkpoint just
    /// before the read would keep.
    share: f64,
    /// Tracked accesses the epoch made before the read.
    index: u64,
}

/// The predicted wall time (ns) of the recorded epochs on `threads` threads.
#[cfg(test)]
pub(crate) fn predict(epochs: &[EpochProfile], threads: usize, costs: &Costs) -> f64 {
    simulate(epochs, threads, costs).time
}

/// Replays the recorded epochs on `threads` simulated threads.
pub(super) fn simulate(epochs: &[EpochProfile], threads: usize, costs: &Costs) -> Simulated {
    simulate_replay(epochs, threads, costs, 0, &[])
}

/// [`simulate`], with each epoch's length varied as replay `replay` of
/// [`simulate_varied`] varies it (replay 0: as recorded).
pub(super) fn simulate_replay(
    epochs: &[EpochProfile],
    threads: usize,
    costs: &Costs,
    replay: u64,
    synced: &[SyncedSite],
) -> Simulated {
    let mut deps: HashMap<(Site, Site), SimDependence> = HashMap::new();
    let mut violated: HashMap<Site, Vec<usize>> = HashMap::new();
    if epochs.is_empty() {
        return Simulated {
            time: 0.0,
            rolled_back: 0,
            deps,
            violated,
        };
    }
    let mut rolled_back = 0;
    let window = threads * EPOCHS_PER_THREAD;
    let mut free = vec![0.0f64; threads];
    let mut commit = Vec::with_capacity(epochs.len());
    // The thread that committed each epoch.
    let mut committers: Vec<usize> = Vec::with_capacity(epochs.len());
    // Final write times of finished epochs, per location: (epoch, time, line).
    // Per location, the writes of finished epochs in epoch order: one span per epoch
    // (a chunk of iterations writes a running total once per iteration; a read needs
    // only whether an epoch writes after it, and from when).
    let mut writes: HashMap<usize, Vec<WriteSpan>> = HashMap::new();
    let mut last_commit = 0.0f64;
    for (j, e) in epochs.iter().enumerate() {
        let (slot, &thread_free) = free
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .expect("at least one thread");
        let window_free = if j >= window { commit[j - window] } else { 0.0 };
        // When its thread takes it; epochs committed by then cannot violate it.
        let claimed = thread_free.max(window_free);
        let start = claimed + costs.epoch * (1.0 - COMMIT_SHARE);
        let reads = e
            .events
            .iter()
            .filter(|ev| ev.kind == AccessKind::Read)
            .count() as f64;
        let written = e
            .events
            .iter()
            .filter(|ev| ev.kind == AccessKind::Write)
            .count() as f64;
        // The epoch's length in this replay; its events move with it (`scale`).
        let varied = if replay == 0 {
            e.dur
        } else {
            e.dur * (1.0 + VARIATION * unit_noise(j as u64, replay))
        };
        let dur = varied + reads * costs.access + written * costs.write;
        // Threads never run in lockstep: a read that comes less than this after the
        // earlier epoch's write it needs races with that write in a real run (an
        // epoch's start moves by a few percent of its length from one run to the
        // next), and loses about as often as it wins. The model counts such a read as
        // violated: a prediction that assumed it always wins would promise a
        // dependence at the very end of each epoch (a running sum) nearly full
        // overlap, which no run gets. (Not scaled by the calibrated per-epoch cost:
        // that moves between processes, and a margin that followed it moved every
        // prediction of a loop with a dependence.)
        let race = RACE_SHARE * dur;
        let scale = if e.dur > 0.0 { dur / e.dur } else { 1.0 };
        // Segment start offsets.
        let mut seg_starts = vec![0.0];
        for ev in &e.events {
            if ev.kind == AccessKind::Checkpoint {
                seg_starts.push(ev.at * scale);
            }
        }
        // The synchronized loads the epoch reaches (see `synchronized`), in its
        // order: at each, the epoch waits until the epoch its store comes from has
        // committed, and from there on no read can be violated by that epoch or any
        // before it. A load with no epoch that far back makes no wait.
        let waits = SyncWaits::new(e, j, synced);
        // When an event at offset `at` happens, for offset 0 at `t0` and the waits
        // `shifts` (`SyncWaits::shifts` for that `t0`).
        let time_of = |t0: f64, shifts: &[f64], at: f64| t0 + at * scale + waits.shift(shifts, at);
        // `t0` is when the epoch's offset 0 would have been, after restarts.
        let mut t0 = start;
        let mut counted = false;
        let mut restarts = 0u32;
        // Set when the epoch ended violated and re-runs once it is homefree, on
        // whichever thread commits the epoch before it: (re-run start, its length).
        let mut rerun: Option<(f64, f64)> = None;
        // Where the epoch resumes after a restart (a segment's start, as recorded
        // times scaled): the synchronized loads before it were waited at already.
        let mut resumed_at = 0.0f64;
        loop {
            // The earliest violating write, and the earliest segment with a violated
            // read.
            let mut first: Option<Hit> = None;
            let mut earliest_seg = usize::MAX;
            let mut seg = 0usize;
            let mut index = 0u64;
            let shifts = waits.shifts(t0, scale, &commit, resumed_at);
            let stall = SyncWaits::total(&shifts);
            for ev in &e.events {
                if ev.kind != AccessKind::Checkpoint {
                    index += 1;
                }
                match ev.kind {
                    AccessKind::Checkpoint => seg += 1,
                    AccessKind::Write => {}
                    AccessKind::Read => {
                        // Epochs up to this one have committed before a read after
                        // the synchronized load.
                        let committed = waits.committed_before(ev.at);
                        let read_at = time_of(t0, &shifts, ev.at);
                        // A violation found lands by now: no later read (they come in
                        // time order) can be violated earlier than it.
                        if first.as_ref().is_some_and(|f| f.write_at <= read_at) {
                            break;
                        }
                        let Some(ws) = writes.get(&ev.loc) else {
                            continue;
                        };
                        for span in ws.iter().rev() {
                            let i = span.epoch;
                            if committed.is_some_and(|c| i <= c) {
                                break;
                            }
                            // Epochs commit in order, each after its writes: once
                            // one committed before this epoch was claimed, or before
                            // the read (less the race), so did every earlier one.
                            if commit[i] <= claimed.max(read_at - race) {
                                break;
                            }
                            if i < j && span.last > read_at - race {
                                // A write just before the read counts from the read
                                // on: the read lost the race and the write lands
                                // right after it. So does an epoch that wrote before
                                // the read and writes again after it: the read saw a
                                // version the next write replaces.
                                let store = span.site;
                                let w = if span.first > read_at - race {
                                    span.first.max(read_at)
                                } else {
                                    read_at
                                };
                                earliest_seg = earliest_seg.min(seg);
                                if first.as_ref().is_none_or(|f| w < f.write_at) {
                                    first = Some(Hit {
                                        write_at: w,
                                        seg,
                                        store,
                                        load: ev.site,
                                        share: if dur > 0.0 {
                                            (ev.at * scale - seg_starts[seg]) / dur
                                        } else {
                                            0.0
                                        },
                                        index: index - 1,
                                    });
                                }
                            }
                        }
                    }
                }
            }
            let Some(Hit {
                write_at: w,
                seg,
                store,
                load,
                share,
                index: load_index,
            }) = first
            else {
                break;
            };
            let mut note = |lost: f64| {
                if let (Some(store), Some(load)) = (store, load) {
                    let d = deps.entry((store, load)).or_insert(SimDependence {
                        segment: seg as u32,
                        ..SimDependence::default()
                    });
                    d.count += 1;
                    violated.entry(load).or_default().push(j);
                    d.lost += lost.max(0.0);
                    d.load_share_sum += share;
                    d.load_index_sum += load_index;
                    d.segment = d.segment.min(seg as u32);
                }
            };
            let seg_start = seg_starts[seg];
            // The epoch learns of the violation at its next tracked access or
            // checkpoint after the write, and then unwinds to the segment's start.
            // With none left (the write came after its last one, or after it
            // finished), it ends, waits, and re-runs the segment once homefree.
            // (After MAX_RESTARTS restarts, the epoch is taken to run on until the
            // one before commits: the replay of an epoch whose many reads are each
            // violated by a different write would otherwise restart once per write,
            // rescanning all of them each time.)
            restarts += 1;
            let noticed = e
                .events
                .iter()
                .enumerate()
                .filter(|&(i, ev)| checks(&e.events, i, ev))
                .map(|(_, ev)| time_of(t0, &shifts, ev.at))
                .find(|&at| at > w && at < t0 + dur + stall)
                .filter(|_| restarts <= MAX_RESTARTS);
            let Some(noticed) = noticed else {
                // Every earlier write is known by then: the re-run starts from the
                // earliest segment any of them violated.
                let seg_start = seg_starts[earliest_seg];
                let homefree = commit[j - 1];
                rerun = Some((homefree, dur - seg_start));
                if !counted && lost_enough_ns(dur - seg_start, dur) {
                    rolled_back += 1;
                }
                note(dur - seg_start);
                // The first run's thread is free when its body ends.
                free[slot] = t0 + dur + stall;
                t0 = homefree - seg_start;
                resumed_at = seg_start;
                break;
            };
            let lost = noticed - (t0 + seg_start);
            if !counted && lost_enough_ns(lost, noticed - t0) {
                rolled_back += 1;
                counted = true;
            }
            note(lost);
            let new_t0 = noticed + costs.rollback - seg_start;
            if new_t0 <= t0 {
                break;
            }
            t0 = new_t0;
            resumed_at = seg_start;
        }
        let shifts = waits.shifts(t0, scale, &commit, resumed_at);
        let finish = t0 + dur + SyncWaits::total(&shifts);
        for ev in &e.events {
            if ev.kind == AccessKind::Write {
                let at = time_of(t0, &shifts, ev.at);
                let spans = writes.entry(ev.loc).or_default();
                match spans.last_mut() {
                    Some(span) if span.epoch == j => span.last = at,
                    _ => spans.push(WriteSpan {
                        epoch: j,
                        first: at,
                        last: at,
                        site: ev.site,
                    }),
                }
            }
        }
        let slot = match rerun {
            // The re-run is done by the thread that commits the epoch before (it
            // finds this one finished and violated at the watermark), once that
            // commit is done; the thread that ran it first went on to later epochs
            // as soon as its run ended.
            Some((at, len)) => {
                let next = committers.last().copied().unwrap_or(slot);
                free[next] = free[next].max(at) + len;
                next
            }
            None => {
                free[slot] = finish;
                slot
            }
        };
        // The commit, in loop order, is done by the thread that finds the epoch at
        // the watermark: its own, if the epoch before has committed by the time it
        // finishes; else the thread that commits the epoch before, right after that
        // one (a chain: one thread commits the epochs that waited, one after another,
        // as the runtime's does). The commit's share of the per-epoch cost, and the
        // epoch's commit-time actions (`on_commit`, accumulations), occupy that
        // thread; the hand-off and the written locations are serialized.
        let (committer, ready) = match committers.last() {
            Some(&prev) if finish < last_commit => (prev, last_commit),
            _ => (slot, finish),
        };
        last_commit = ready + costs.serial + written * costs.commit_write + e.commit_work;
        free[committer] = free[committer].max(last_commit) + costs.epoch * COMMIT_SHARE;
        committers.push(committer);
        commit.push(last_commit);
    }
    Simulated {
        time: last_commit,
        rolled_back,
        deps,
        violated,
    }
}

/// The synchronized loads one epoch reaches, in its order: each one's offset in the
/// recorded epoch and the epoch it waits for (the runtime waits at each, so a later
/// load with a nearer store waits again after an earlier one with a farther store).
struct SyncWaits {
    /// (offset, the epoch waited for), by offset.
    at: Vec<(f64, usize)>,
    /// The latest epoch waited for by the loads up to each (a prefix maximum).
    committed: Vec<usize>,
}

impl SyncWaits {
    fn new(e: &EpochProfile, j: usize, synced: &[SyncedSite]) -> Self {
        let at: Vec<(f64, usize)> = if synced.is_empty() {
            Vec::new()
        } else {
            e.events
                .iter()
                .filter_map(|ev| {
                    let site = ev.site.filter(|_| ev.kind == AccessKind::Read)?;
                    let load = synced.iter().find(|l| l.load == site)?;
                    Some((ev.at, j.checked_sub(load.distance.max(1))?))
                })
                .collect()
        };
        let committed = at
            .iter()
            .scan(0, |latest, &(_, i)| {
                *latest = i.max(*latest);
                Some(*latest)
            })
            .collect();
        SyncWaits { at, committed }
    }

    /// The loads reached by offset `at` (a load at `at` included: its read comes
    /// after its wait).
    fn reached(&self, at: f64) -> usize {
        self.at.partition_point(|&(s, _)| s <= at)
    }

    /// For offset 0 at `t0`, each load's wait added to those before it: everything
    /// from a load on moves by its entry. `scale` stretches recorded offsets as the
    /// replay does; `commit` holds the earlier epochs' commit times. Loads before
    /// `from` (the start of the segment a restarted epoch resumes from) wait no
    /// more: the run that reached them waited there, and a re-run once homefree has
    /// nothing to wait for (counted from its segment's start, such a load would
    /// seem to come before the commit it waited for).
    fn shifts(&self, t0: f64, scale: f64, commit: &[f64], from: f64) -> Vec<f64> {
        let mut shift = 0.0;
        self.at
            .iter()
            .map(|&(at, i)| {
                if at * scale >= from {
                    shift += (commit[i] - (t0 + at * scale + shift)).max(0.0);
                }
                shift
            })
            .collect()
    }

    /// How far the waits before offset `at` move it (`shifts` from [`Self::shifts`]).
    fn shift(&self, shifts: &[f64], at: f64) -> f64 {
        match self.reached(at) {
            0 => 0.0,
            k => shifts[k - 1],
        }
    }

    /// All the waits together.
    fn total(shifts: &[f64]) -> f64 {
        shifts.last().copied().unwrap_or(0.0)
    }

    /// The latest epoch that has committed by a read at offset `at` (it waited for
    /// it), if any.
    fn committed_before(&self, at: f64) -> Option<usize> {
        match self.reached(at) {
            0 => None,
            k => Some(self.committed[k - 1]),
        }
    }
}

/// Whether event `i` (`ev`) is an access at which the runtime looks for a violation.
/// A read-modify-write (`update`) is one access recorded as a read and then a write of
/// the same location: its write part makes no check of its own (a violation that
/// arrives during it is found at the next access).
fn checks(events: &[Event], i: usize, ev: &Event) -> bool {
    ev.kind != AccessKind::Write
        || i == 0
        || !(events[i - 1].kind == AccessKind::Read && events[i - 1].loc == ev.loc)
}

/// A deterministic value in [-1, 1) for epoch `j` of replay `r` (splitmix64).
fn unit_noise(j: u64, r: u64) -> f64 {
    let mut z = j
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(r.wrapping_mul(0xD1B5_4A32_D192_ED03));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// Restarts of one epoch the replay follows (see `simulate_replay`).
const MAX_RESTARTS: u32 = 8;

/// How much a replay varies each epoch's length: up to this share either way.
const VARIATION: f64 = 0.08;

/// The share of the calibrated per-epoch cost that is the commit (published epoch
/// taken, its versions made committed values, the next one handed on): about half in
/// the runtime's traces; paid by the committing thread.
const COMMIT_SHARE: f64 = 0.5;

/// The share of an epoch's length by which a read must follow the write it needs to
/// be sure to see it (see `simulate`).
const RACE_SHARE: f64 = 0.05;

/// What a loop running in order under the adaptive fallback keeps of the plain
/// loop's speed.
pub(super) const IN_ORDER_RATIO: f64 = 0.97;

#[cfg(test)]
use super::predict::{
    chunked, chunked_adaptively, predict_chunked, simulate_varied, synchronized, with_distances,
};

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
