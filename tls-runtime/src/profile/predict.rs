//! A loop's prediction from its recorded iterations: the epochs the runtime would
//! run (its automatic chunking, halved on rollbacks, lengthened while quiet), the
//! loads it would synchronize, and the mean of replays with lengths varied
//! (`model.rs` replays one set of epochs; see its docs for the rules).

use super::PREDICTED_CORES;
use super::calibration::{Costs, costs};
use super::model::{
    IN_ORDER_RATIO, SimDependence, Simulated, Site, SyncedSite, simulate, simulate_replay,
};
use super::recorder::{AccessKind, EpochProfile, Event};
use crate::adapt::{Distances, Stretch, WINDOW};
use crate::rules::{
    EPOCHS_PER_THREAD, MAX_CHUNK, chunk_for_target, halve_chunk, planned_chunk, run_chunk,
    target_epoch,
};
#[cfg(doc)]
use crate::rules::{QUIET_TARGET_EPOCH, TARGET_EPOCH};
use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

/// Replays per prediction (see [`simulate_varied`]).
const REPLAYS: usize = 6;

/// The epochs the runtime would run for `items` grouped `chunk` at a time, or with
/// `balanced` threads, at most `chunk` at a time evened out as automatic chunking
/// does ([`planned_chunk`]): durations add up, events keep their order and move by
/// the time of the items before them.
pub(super) fn chunked(
    items: &[EpochProfile],
    chunk: usize,
    balanced: Option<usize>,
) -> Cow<'_, [EpochProfile]> {
    if chunk <= 1 {
        // One iteration per epoch: the recorded epochs as they are, not a copy of
        // every event for each core count predicted.
        return Cow::Borrowed(items);
    }
    let mut epochs = Vec::new();
    let mut rest = items;
    while !rest.is_empty() {
        let size = match balanced {
            Some(threads) => planned_chunk(chunk, items.len(), threads, epochs.len() as u64),
            None => chunk,
        };
        let (group, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        epochs.push(merged(group));
    }
    Cow::Owned(epochs)
}

/// One epoch of the iterations `group`: durations add up, events keep their order
/// and move by the time of the items before them.
fn merged(group: &[EpochProfile]) -> EpochProfile {
    let mut epoch = EpochProfile::default();
    for item in group {
        let offset = epoch.dur;
        epoch.events.extend(item.events.iter().map(|ev| Event {
            at: ev.at + offset,
            ..*ev
        }));
        epoch.dur += item.dur;
        epoch.commit_work += item.commit_work;
    }
    epoch
}

/// The epochs the runtime would run for `items` on `threads` threads under automatic
/// chunking while no epoch is violated, starting from the site's chunk `first` and
/// short chunk `short` (see [`run_chunk`]): as
/// `LoopSite::tune_chunk` does on each thread's tally, the chunk is chosen again
/// after every [`WINDOW`] epochs from what an iteration took in them (with the
/// per-epoch cost `epoch_cost` spread over their items), cut for the run by
/// [`run_chunk`] and evened out by [`planned_chunk`]. Where a few iterations take
/// far longer than the rest, the chunk follows the windows: long after windows of
/// short iterations only, short after one holding a long one. Chunked by the mean
/// instead (a loop of 2 us iterations, 1 ms one time in a hundred: 6 iterations an
/// epoch where the runtime averaged 21), the epochs in flight behind a long one
/// covered a tenth of it rather than a third, and the prediction was 1.47x where
/// the runtime measured 1.73-1.83x.
pub(super) fn chunked_adaptively(
    items: &[EpochProfile],
    first: usize,
    short: usize,
    threads: usize,
    epoch_cost: f64,
) -> Vec<EpochProfile> {
    let window = WINDOW as usize;
    let (mut site_chunk, mut short) = (first.max(1), short.max(1));
    let mut epochs: Vec<EpochProfile> = Vec::new();
    let (mut window_items, mut window_time) = (0usize, 0.0);
    let mut rest = items;
    while !rest.is_empty() {
        let chunk = run_chunk(site_chunk, short, items.len(), threads);
        let size = planned_chunk(chunk, items.len(), threads, epochs.len() as u64);
        let (group, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        let epoch = merged(group);
        window_items += group.len();
        window_time += epoch.dur + epoch.commit_work + epoch_cost;
        epochs.push(epoch);
        if epochs.len().is_multiple_of(window) {
            let per_item = window_time / window_items as f64;
            site_chunk = chunk_for_target(true, per_item);
            short = chunk_for_target(false, per_item);
            (window_items, window_time) = (0, 0.0);
        }
    }
    epochs
}

/// The predicted wall time of `items` on `threads` threads with the runtime's
/// chunking: `chunk` iterations per epoch if the loop sets it, else the automatic
/// choice (about [`TARGET_EPOCH`] per epoch, or [`QUIET_TARGET_EPOCH`] when no epoch
/// is violated), halved while more than a quarter of the epochs roll back.
pub(super) fn predict_chunked(
    items: &[EpochProfile],
    threads: usize,
    costs: &Costs,
    chunk: Option<usize>,
) -> Simulated {
    // The runtime sizes chunks from the busy time per iteration, which includes the
    // per-epoch cost spread over the chunk: it settles where
    // `chunk * mean + epoch cost = target`, within the run's cap.
    let mean = items.iter().map(|e| e.dur + e.commit_work).sum::<f64>() / items.len().max(1) as f64;
    let for_target = |quiet: bool| {
        let ideal = (target_epoch(quiet).as_nanos() as f64 - costs.epoch) / mean.max(1.0);
        ideal.clamp(1.0, f64::from(MAX_CHUNK)) as usize
    };
    let auto = |quiet: bool| run_chunk(for_target(quiet), for_target(false), items.len(), threads);
    let mut c = chunk.unwrap_or_else(|| auto(false));
    // An automatic chunk is evened out over the run, as the runtime does.
    let balanced = chunk.is_none().then_some(threads);
    loop {
        let epochs = chunked(items, c, balanced);
        // The chunk is chosen on the recorded lengths alone; the varied replays only
        // refine the prediction for the chunk chosen, and only where a dependence
        // makes timing matter (without one, replays differ by their lengths alone).
        let sim = simulate(&epochs, threads, costs);
        if chunk.is_none() && c > 1 && halve_chunk(sim.rolled_back as u64, epochs.len() as u64) {
            c /= 2;
            continue;
        }
        if sim.deps.is_empty() {
            // No epoch violated: the runtime lengthens its epochs to the quiet
            // target, and keeps them there while none is violated.
            let quiet = auto(true);
            if chunk.is_none() && quiet > c {
                let (first, short) = (for_target(true), for_target(false));
                let epochs = chunked_adaptively(items, first, short, threads, costs.epoch);
                let longer = simulate(&epochs, threads, costs);
                if longer.deps.is_empty() {
                    return longer;
                }
            }
            return sim;
        }
        // The runtime learns to synchronize these loads and then runs without their
        // violations, one iteration an epoch unless the loop sets its chunk; the
        // dependences stay as found (the report names them, with their advice).
        let single = match chunk {
            None => chunked(items, 1, None),
            Some(_) => epochs.clone(),
        };
        let synced = with_distances(&single, &synchronized(&sim), threads);
        if synced.is_empty() {
            return simulate_varied(sim, &epochs, threads, costs, &[]);
        }
        let with = simulate_replay(&single, threads, costs, 0, &synced);
        let with = simulate_varied(with, &single, threads, costs, &synced);
        let mut unsynced = simulate_varied(sim, &epochs, threads, costs, &[]);
        unsynced.time = with.time;
        unsynced.rolled_back = with.rolled_back;
        return unsynced;
    }
}

/// The loads the runtime would synchronize after the replay `sim`: those that
/// violated a stretch of epochs as `adapt::synced` counts them, at least
/// `SYNC_AFTER` distinct epochs with no more than `SYNC_DENSITY` epochs run per
/// one violated, a gap wider than `SYNC_DENSITY * SYNC_AFTER` starting the count
/// over. (Counted on the whole run instead, a load that violated dense stretches
/// but under half of all epochs was left unsynchronized, while the runtime
/// synchronizes it within its first such stretch: a loop whose every iteration adds
/// to one total at its end was predicted 1.2-1.3x instead of about 1.85x in one
/// profiled run in five, against 1.8x measured.)
pub(super) fn synchronized(sim: &Simulated) -> Vec<Site> {
    let mut loads: Vec<Site> = sim
        .violated
        .iter()
        .filter(|(_, epochs)| dense_stretch(epochs))
        .map(|(&load, _)| load)
        .collect();
    loads.sort_by_key(|l| (l.file(), l.line(), l.column()));
    loads
}

/// The `loads` to synchronize, each with the distance at which the runtime would
/// synchronize it on `epochs` with `threads` threads: per read at the load, how many
/// epochs back the last store of what it reads came from, counted as the runtime
/// counts the violations of a load ([`Distances`]: the nearest that make up a
/// quarter), over the stores near enough to violate it (in the window of epochs in
/// flight). A load never stored that near is left out: the runtime learns only from
/// violations among one-iteration epochs, and such a load has none (it violated the
/// first replay's chunks of several iterations).
pub(super) fn with_distances(
    epochs: &[EpochProfile],
    loads: &[Site],
    threads: usize,
) -> Vec<SyncedSite> {
    let reach = threads * EPOCHS_PER_THREAD;
    let mut counted = vec![Distances::new(); loads.len()];
    // Per location, the last epoch so far that stored it.
    let mut stored: HashMap<usize, usize> = HashMap::new();
    for (j, e) in epochs.iter().enumerate() {
        for ev in &e.events {
            match ev.kind {
                AccessKind::Write => {
                    stored.insert(ev.loc, j);
                }
                AccessKind::Read => {
                    let Some(k) = ev.site.and_then(|s| loads.iter().position(|&l| l == s)) else {
                        continue;
                    };
                    // A read of what its own epoch stored sees its own version.
                    // Epoch j - reach has committed before j is claimed.
                    if let Some(&i) = stored.get(&ev.loc).filter(|&&i| i < j && j - i < reach) {
                        counted[k].add((j - i) as u64);
                    }
                }
                AccessKind::Checkpoint => {}
            }
        }
    }
    loads
        .iter()
        .zip(counted)
        .filter(|(_, d)| !d.is_empty())
        .map(|(&load, d)| SyncedSite {
            load,
            distance: d.wait() as usize,
        })
        .collect()
}

/// Whether the violated `epochs` (in the order noted) hold a stretch that makes the
/// runtime synchronize their load (see [`synchronized`]).
fn dense_stretch(epochs: &[usize]) -> bool {
    let mut sorted = epochs.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut stretch = Stretch::new();
    sorted
        .windows(2)
        .any(|w| stretch.count((w[1] - w[0]) as u64))
}

/// Predicted speedups for [`PREDICTED_CORES`], with the sequential time they are
/// relative to.
pub(crate) fn speedups(
    epochs: &[EpochProfile],
    chunk: Option<usize>,
) -> (Duration, Vec<(usize, f64)>) {
    let costs = costs();
    let epochs = &*without_interruptions(epochs);
    let sequential: f64 = epochs.iter().map(|e| e.dur + e.commit_work).sum();
    let out = PREDICTED_CORES
        .iter()
        .map(|&p| {
            let t = if p == 1 {
                sequential
            } else {
                predict_chunked(epochs, p, &costs, chunk).time
            };
            let s = if t > 0.0 { sequential / t } else { 1.0 };
            // The adaptive fallback runs the loop in order rather than lose.
            (p, s.max(IN_ORDER_RATIO))
        })
        .collect();
    (Duration::from_nanos(sequential as u64), out)
}

/// Iterations recorded fewer than this are taken as they are by
/// [`without_interruptions`].
const RARE_FROM: usize = 100;

/// The longest stretch an interruption charged to an iteration is taken to last: an
/// iteration longer than [`without_interruptions`]'s bound by more is the loop's own.
/// On the 2-core development VM the interrupted iterations of a loop of identical
/// ones were 8 to 110 us longer than the rest (thread CPU time; a preemption, which
/// that leaves out, shows as wall time only).
const INTERRUPTION_MAX: f64 = 250_000.0;

/// The recorded iterations with the machine's interruptions taken out: an iteration
/// longer than both four times the median and twice the 99th percentile (so one of
/// fewer than 1 in 100), but by less than [`INTERRUPTION_MAX`], is replayed at that
/// bound, its events moved in proportion.
///
/// Such iterations are what the machine did, not what the loop does: an interrupt's
/// handler is charged to the CPU time of the thread it interrupted where the kernel
/// does not account interrupt time apart (as on the 2-core development VM, where a
/// loop of 800 identical 7 us iterations recorded three to five iterations of 30 to
/// 100 us in every run). On many cores each one stalls the commits behind it, so as
/// recorded they moved the 16-core prediction of that loop between 12.0x and 15.5x
/// from one run to the next, the low ones in the runs with the longest such
/// iterations. A rare iteration longer than that by milliseconds is the loop's own
/// (an outside test: 5 of 2000 iterations of 2 ms among 5 us ones, taken as
/// interruptions, made the 2-core prediction 1.94-1.97x against 1.29-1.44x measured);
/// one a little longer than an interruption can last is still taken for one, and its
/// stall of the others left out.
pub(super) fn without_interruptions(items: &[EpochProfile]) -> Cow<'_, [EpochProfile]> {
    if items.len() < RARE_FROM {
        return Cow::Borrowed(items);
    }
    let mut lengths: Vec<f64> = items.iter().map(|e| e.dur).collect();
    lengths.sort_by(f64::total_cmp);
    let median = lengths[lengths.len() / 2];
    let p99 = lengths[lengths.len() * 99 / 100];
    let bound = (4.0 * median).max(2.0 * p99);
    let interrupted = |dur: f64| dur > bound && dur - bound < INTERRUPTION_MAX;
    if !items.iter().any(|e| interrupted(e.dur)) {
        return Cow::Borrowed(items);
    }
    Cow::Owned(
        items
            .iter()
            .map(|e| {
                let mut e = e.clone();
                if interrupted(e.dur) {
                    let k = bound / e.dur;
                    for ev in &mut e.events {
                        ev.at *= k;
                    }
                    e.dur = bound;
                }
                e
            })
            .collect(),
    )
}

/// Adds to `recorded` (the replay of the epochs as recorded) [`REPLAYS`] - 1 replays
/// with each epoch's length varied by up to [`VARIATION`] (deterministically), and
/// averages: an epoch's length moves by a few percent from one run to the next, and
/// where two threads' epochs end close together (a dependence at the end of each
/// epoch), whether they race is decided by those few percent. One replay of the
/// recorded lengths picks one outcome; a real run goes either way, and a prediction
/// from one replay was off by half on such loops.
pub(super) fn simulate_varied(
    recorded: Simulated,
    epochs: &[EpochProfile],
    threads: usize,
    costs: &Costs,
    synced: &[SyncedSite],
) -> Simulated {
    let mut total = recorded;
    for replay in 1..REPLAYS {
        let sim = simulate_replay(epochs, threads, costs, replay as u64, synced);
        total.time += sim.time;
        total.rolled_back += sim.rolled_back;
        for (k, d) in sim.deps {
            total
                .deps
                .entry(k)
                .or_insert(SimDependence {
                    segment: d.segment,
                    ..SimDependence::default()
                })
                .add(&d);
        }
    }
    let n = REPLAYS as f64;
    total.time /= n;
    total.rolled_back = (total.rolled_back as f64 / n).round() as usize;
    for d in total.deps.values_mut() {
        // Averaged counts; the sums of shares and indexes stay consistent with them.
        let count = d.count;
        d.count = (count as f64 / n).ceil() as u64;
        d.lost /= n;
        let per = d.count as f64 / count.max(1) as f64;
        d.load_share_sum *= per;
        d.load_index_sum = (d.load_index_sum as f64 * per).round() as u64;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iteration(dur: f64) -> EpochProfile {
        EpochProfile {
            dur,
            ..EpochProfile::default()
        }
    }

    #[test]
    fn a_few_interrupted_iterations_are_replayed_at_the_bound() {
        let mut items: Vec<EpochProfile> = (0..800)
            .map(|i| iteration(7000.0 + (i % 7) as f64))
            .collect();
        items[100].dur = 103_000.0;
        items[500].dur = 55_000.0;
        let kept = without_interruptions(&items);
        let longest = kept.iter().map(|e| e.dur).fold(0.0, f64::max);
        assert!((28_000.0..28_100.0).contains(&longest), "{longest}");
        assert_eq!(kept[101].dur, items[101].dur);
    }

    #[test]
    fn a_load_is_synchronized_at_its_first_dense_stretch_as_the_runtime_does() {
        // Every other epoch of 100..120, in a run of 2000: far under half of the run,
        // but the runtime synchronizes it there.
        let stretch: Vec<usize> = (100..120).step_by(2).collect();
        assert!(dense_stretch(&stretch));
        // Noted out of order and twice (restarts): counted once each.
        let mut shuffled: Vec<usize> = stretch.iter().rev().copied().collect();
        shuffled.extend_from_slice(&stretch);
        assert!(dense_stretch(&shuffled));
        // One epoch in twenty: never dense.
        assert!(!dense_stretch(&(0..2000).step_by(20).collect::<Vec<_>>()));
        // Dense, but fewer than SYNC_AFTER epochs.
        assert!(!dense_stretch(&(0..7).collect::<Vec<_>>()));
        // One in three: the span outgrows twice the count.
        assert!(!dense_stretch(&(0..60).step_by(3).collect::<Vec<_>>()));
    }

    #[test]
    fn loops_whose_lengths_really_vary_are_left_as_recorded() {
        // 2 to 18 us in a pseudo-random order (the predict bench's "lengths vary").
        let items: Vec<EpochProfile> = (0..800usize)
            .map(|i| iteration(1000.0 * (2 + (i.wrapping_mul(2_654_435_761) >> 7) % 17) as f64))
            .collect();
        assert!(matches!(without_interruptions(&items), Cow::Borrowed(_)));
        // One in ten iterations 5x longer: the 99th percentile is among them.
        let items: Vec<EpochProfile> = (0..800)
            .map(|i| iteration(if i % 10 == 0 { 35_000.0 } else { 7000.0 }))
            .collect();
        assert!(matches!(without_interruptions(&items), Cow::Borrowed(_)));
        // Too few iterations to call any of them rare.
        let mut few: Vec<EpochProfile> = (0..50).map(|_| iteration(7000.0)).collect();
        few[3].dur = 100_000.0;
        assert!(matches!(without_interruptions(&few), Cow::Borrowed(_)));
    }

    #[test]
    fn rare_iterations_longer_than_an_interruption_lasts_are_the_loops_own() {
        // 5 of 2000 iterations of 2 ms among 5 us ones, and one interrupted for 60 us.
        let mut items: Vec<EpochProfile> = (0..2000).map(|_| iteration(5000.0)).collect();
        for i in [100, 500, 900, 1300, 1700] {
            items[i].dur = 2_000_000.0;
        }
        items[1000].dur = 65_000.0;
        let kept = without_interruptions(&items);
        assert_eq!(kept[500].dur, 2_000_000.0);
        assert!(kept[1000].dur < 65_000.0, "{}", kept[1000].dur);
        // Without the interruption, nothing is replayed otherwise.
        items[1000].dur = 5000.0;
        assert!(matches!(without_interruptions(&items), Cow::Borrowed(_)));
    }
}
