//! The speedup model: `predict` replays the recorded epochs in loop order on `P`
//! simulated threads:
//!
//! - An epoch starts when a thread is free and the window of epochs in flight
//!   ([`EPOCHS_PER_THREAD`] times `P`, as in the scheduler) has room, and pays the measured
//!   per-epoch cost. It is stretched by the measured extra cost of each tracked read
//!   and of each speculative write (a new version).
//! - A read of a location that an earlier epoch writes *later* (in simulated time)
//!   is a violation, handled as the runtime handles it: the epoch learns of it at its
//!   next tracked access or checkpoint after the write, unwinds, and restarts the
//!   segment that read it (or the whole epoch, without checkpoints) there. An epoch
//!   that reaches its end first (no tracked access left after the write, or the
//!   write came after it finished) waits, and re-runs the segment once it is
//!   homefree (when the epoch before it commits), on the first thread free then.
//!   Forwarding is free: a read after the earlier write sees its value. Restarts
//!   repeat until no earlier write comes after one of the epoch's reads.
//! - A finished epoch frees its thread at once (finished epochs wait to commit
//!   without holding a thread); commits are in loop order, one after another, each
//!   paying the measured serialized cost of a commit hand-off plus the measured cost
//!   of committing each written location, plus the time the epoch's commit-time
//!   actions (`on_commit`, accumulations) took when recorded; that time also
//!   occupies the epoch's thread.
//! - The predicted time is when the last epoch commits; the speedup is the
//!   sequential time (the sum of the epochs' durations and commit-time work) over it. The runtime falls
//!   back to in-order execution when speculation loses, so a prediction below about
//!   1 is reported as the in-order cost instead.
//!
//! A violation that hits a running epoch also costs the unwinding of its stack. The
//! costs come from `calibration.rs`.
//!
//! Epochs are what the runtime would run: unless the loop sets its chunk, iterations
//! are grouped as the runtime's automatic chunking groups them (about
//! [`TARGET_EPOCH`] per epoch, at most [`MAX_CHUNK`] iterations), and the group is
//! halved while more than a quarter of the simulated epochs lose a quarter of their
//! work or more to a restart (the runtime halves its chunk on the same rules,
//! [`halve_chunk`] and [`lost_enough_ns`]). Item boundaries inside a chunk are not
//! checkpoints, as in the runtime.

use super::PREDICTED_CORES;
use super::calibration::{Costs, costs};
use super::recorder::{AccessKind, EpochProfile, Event};
use crate::rules::{EPOCHS_PER_THREAD, MAX_CHUNK, TARGET_EPOCH, halve_chunk, lost_enough_ns};
use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

/// The predicted wall time (ns) of the recorded epochs on `threads` threads.
#[cfg(test)]
pub(crate) fn predict(epochs: &[EpochProfile], threads: usize, costs: &Costs) -> f64 {
    simulate(epochs, threads, costs).0
}

/// The predicted wall time (ns) of the recorded epochs on `threads` threads, and how
/// many epochs a restart cost a quarter or more of their work so far (the runtime's
/// measure for halving its chunk).
fn simulate(epochs: &[EpochProfile], threads: usize, costs: &Costs) -> (f64, usize) {
    if epochs.is_empty() {
        return (0.0, 0);
    }
    let mut rolled_back = 0;
    let window = threads * EPOCHS_PER_THREAD;
    let mut free = vec![0.0f64; threads];
    let mut commit = Vec::with_capacity(epochs.len());
    // Final write times of finished epochs, per location: (epoch, time).
    let mut writes: HashMap<usize, Vec<(usize, f64)>> = HashMap::new();
    let mut last_commit = 0.0f64;
    for (j, e) in epochs.iter().enumerate() {
        let (slot, &thread_free) = free
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .expect("at least one thread");
        let window_free = if j >= window { commit[j - window] } else { 0.0 };
        let start = thread_free.max(window_free) + costs.epoch;
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
        let dur = e.dur + reads * costs.access + written * costs.write;
        // Threads never run in lockstep: a read that comes less than this after the
        // earlier epoch's write it needs races with that write in a real run (an
        // epoch's start moves by its per-epoch cost and by a few percent of its
        // length from one run to the next), and loses about as often as it wins. The
        // model counts such a read as violated: a prediction that assumed it always
        // wins would promise a dependence at the very end of each epoch (a running
        // sum) nearly full overlap, which no run gets.
        let race = costs.epoch + RACE_SHARE * dur;
        let scale = if e.dur > 0.0 { dur / e.dur } else { 1.0 };
        // Segment start offsets.
        let mut seg_starts = vec![0.0];
        for ev in &e.events {
            if ev.kind == AccessKind::Checkpoint {
                seg_starts.push(ev.at * scale);
            }
        }
        // `t0` is when the epoch's offset 0 would have been, after restarts.
        let mut t0 = start;
        let mut counted = false;
        // Set when the epoch ended violated and re-runs once it is homefree, on
        // whichever thread commits the epoch before it: (re-run start, its length).
        let mut rerun: Option<(f64, f64)> = None;
        loop {
            // The earliest violating write: (its time, the violated read's segment);
            // and the earliest segment with a violated read.
            let mut first: Option<(f64, usize)> = None;
            let mut earliest_seg = usize::MAX;
            let mut seg = 0usize;
            for ev in &e.events {
                match ev.kind {
                    AccessKind::Checkpoint => seg += 1,
                    AccessKind::Write => {}
                    AccessKind::Read => {
                        let read_at = t0 + ev.at * scale;
                        let Some(ws) = writes.get(&ev.loc) else {
                            continue;
                        };
                        for &(i, w) in ws.iter().rev() {
                            if commit[i] <= start - costs.epoch {
                                break;
                            }
                            if i < j && w > read_at - race {
                                // A write just before the read counts from the read
                                // on: the read lost the race and the write lands
                                // right after it.
                                let w = w.max(read_at);
                                earliest_seg = earliest_seg.min(seg);
                                if first.is_none_or(|(f, _)| w < f) {
                                    first = Some((w, seg));
                                }
                            }
                        }
                    }
                }
            }
            let Some((w, seg)) = first else { break };
            let seg_start = seg_starts[seg];
            // The epoch learns of the violation at its next tracked access or
            // checkpoint after the write, and then unwinds to the segment's start.
            // With none left (the write came after its last one, or after it
            // finished), it ends, waits, and re-runs the segment once homefree.
            let noticed = e
                .events
                .iter()
                .map(|ev| t0 + ev.at * scale)
                .find(|&at| at > w && at < t0 + dur);
            let Some(noticed) = noticed else {
                // Every earlier write is known by then: the re-run starts from the
                // earliest segment any of them violated.
                let seg_start = seg_starts[earliest_seg];
                let homefree = commit[j - 1];
                rerun = Some((homefree, dur - seg_start));
                if !counted && lost_enough_ns(dur - seg_start, dur) {
                    rolled_back += 1;
                }
                // The first run's thread is free when its body ends.
                free[slot] = t0 + dur;
                t0 = homefree - seg_start;
                break;
            };
            if !counted {
                let lost = noticed - (t0 + seg_start);
                if lost_enough_ns(lost, noticed - t0) {
                    rolled_back += 1;
                    counted = true;
                }
            }
            let new_t0 = noticed + costs.rollback - seg_start;
            if new_t0 <= t0 {
                break;
            }
            t0 = new_t0;
        }
        let finish = t0 + dur;
        let slot = match rerun {
            // The re-run occupies the thread that is free first once the epoch is
            // homefree (the committer), not the one that ran it first.
            Some((at, len)) => {
                let (next, &f) = free
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .expect("at least one thread");
                free[next] = f.max(at) + len;
                next
            }
            None => {
                free[slot] = finish;
                slot
            }
        };
        // Commit-time actions (`on_commit`, accumulations) run one epoch after
        // another, and they are also work a thread does: charged to the epoch's
        // own thread, right after it, so that no simulated thread idles waiting
        // for the commit order.
        last_commit =
            finish.max(last_commit) + costs.serial + written * costs.commit_write + e.commit_work;
        free[slot] = free[slot].max(finish) + e.commit_work;
        commit.push(last_commit);
        for ev in &e.events {
            if ev.kind == AccessKind::Write {
                writes
                    .entry(ev.loc)
                    .or_default()
                    .push((j, t0 + ev.at * scale));
            }
        }
    }
    (last_commit, rolled_back)
}

/// The epochs the runtime would run for `items` grouped `chunk` at a time: durations
/// add up, events keep their order and move by the time of the items before them.
fn chunked(items: &[EpochProfile], chunk: usize) -> Cow<'_, [EpochProfile]> {
    if chunk <= 1 {
        // One iteration per epoch: the recorded epochs as they are, not a copy of
        // every event for each core count predicted.
        return Cow::Borrowed(items);
    }
    let epochs: Vec<EpochProfile> = items
        .chunks(chunk)
        .map(|group| {
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
        })
        .collect();
    Cow::Owned(epochs)
}

/// The predicted wall time of `items` on `threads` threads with the runtime's
/// chunking: `chunk` iterations per epoch if the loop sets it, else the automatic
/// choice (about [`TARGET_EPOCH`] per epoch), halved while more than a quarter of the
/// epochs roll back.
fn predict_chunked(
    items: &[EpochProfile],
    threads: usize,
    costs: &Costs,
    chunk: Option<usize>,
) -> f64 {
    let mut c = chunk.unwrap_or_else(|| {
        // The runtime sizes chunks from the busy time per iteration, which includes
        // the per-epoch cost spread over the chunk: it settles where
        // `chunk * mean + epoch cost = TARGET_EPOCH`.
        let mean =
            items.iter().map(|e| e.dur + e.commit_work).sum::<f64>() / items.len().max(1) as f64;
        let ideal = (TARGET_EPOCH.as_nanos() as f64 - costs.epoch) / mean.max(1.0);
        ideal.clamp(1.0, f64::from(MAX_CHUNK)) as usize
    });
    loop {
        let epochs = chunked(items, c);
        let (t, rolled_back) = simulate(&epochs, threads, costs);
        if chunk.is_none() && c > 1 && halve_chunk(rolled_back as u64, epochs.len() as u64) {
            c /= 2;
            continue;
        }
        return t;
    }
}

/// Predicted speedups for [`PREDICTED_CORES`], with the sequential time they are
/// relative to.
pub(crate) fn speedups(
    epochs: &[EpochProfile],
    chunk: Option<usize>,
) -> (Duration, Vec<(usize, f64)>) {
    let costs = costs();
    let sequential: f64 = epochs.iter().map(|e| e.dur + e.commit_work).sum();
    let out = PREDICTED_CORES
        .iter()
        .map(|&p| {
            let t = if p == 1 {
                sequential
            } else {
                predict_chunked(epochs, p, &costs, chunk)
            };
            let s = if t > 0.0 { sequential / t } else { 1.0 };
            // The adaptive fallback runs the loop in order rather than lose.
            (p, s.max(IN_ORDER_RATIO))
        })
        .collect();
    (Duration::from_nanos(sequential as u64), out)
}

/// The share of an epoch's length by which a read must follow the write it needs to
/// be sure to see it (see `simulate`).
const RACE_SHARE: f64 = 0.05;

/// What a loop running in order under the adaptive fallback keeps of the plain
/// loop's speed.
const IN_ORDER_RATIO: f64 = 0.97;

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: Costs = Costs {
        epoch: 0.0,
        serial: 0.0,
        access: 0.0,
        clock: 0.0,
        rollback: 0.0,
        write: 0.0,
        commit_write: 0.0,
    };

    fn epoch(dur: f64, events: &[(f64, usize, AccessKind)]) -> EpochProfile {
        EpochProfile {
            dur,
            events: events
                .iter()
                .map(|&(at, loc, kind)| Event { at, loc, kind })
                .collect(),
            commit_work: 0.0,
        }
    }

    #[test]
    fn commit_time_work_runs_one_epoch_after_another() {
        // Independent epochs of 10 us whose commit-time actions take 6 us: the
        // actions run in order, so 64 epochs take at least 64 x 6 us on any number
        // of threads, and about 64 x 16 us on one.
        let e: Vec<_> = (0..64)
            .map(|i| EpochProfile {
                commit_work: 6_000.0,
                ..epoch(10_000.0, &[(5_000.0, 1000 + i, AccessKind::Write)])
            })
            .collect();
        let one = predict(&e, 1, &FREE);
        let two = predict(&e, 2, &FREE);
        let many = predict(&e, 16, &FREE);
        assert!((one - 64.0 * 16_000.0).abs() < 1.0, "{one}");
        assert!(two < one && two >= 64.0 * 8_000.0 - 1.0, "{two}");
        assert!((64.0 * 6_000.0..64.0 * 6_500.0).contains(&many), "{many}");
    }

    #[test]
    fn independent_epochs_scale_with_threads() {
        let e: Vec<_> = (0..64)
            .map(|i| {
                epoch(
                    1000.0,
                    &[(10.0, i, AccessKind::Read), (900.0, i, AccessKind::Write)],
                )
            })
            .collect();
        assert_eq!(predict(&e, 1, &FREE), 64_000.0);
        assert_eq!(predict(&e, 4, &FREE), 16_000.0);
        assert_eq!(predict(&e, 64, &FREE), 1000.0);
    }

    #[test]
    fn a_full_chain_does_not_speed_up() {
        // Each epoch reads at its start what the previous one writes at its end.
        let e: Vec<_> = (0..32)
            .map(|_| {
                epoch(
                    1000.0,
                    &[(0.0, 7, AccessKind::Read), (1000.0, 7, AccessKind::Write)],
                )
            })
            .collect();
        let t = predict(&e, 8, &FREE);
        assert!((t - 32_000.0).abs() < 1e-6, "{t}");
    }

    #[test]
    fn a_checkpoint_before_the_conflicting_tail_saves_the_head() {
        // 900 ns private head, then a 100 ns tail that reads and writes one counter.
        let plain: Vec<_> = (0..16)
            .map(|_| {
                epoch(
                    1000.0,
                    &[(900.0, 1, AccessKind::Read), (1000.0, 1, AccessKind::Write)],
                )
            })
            .collect();
        let split: Vec<_> = (0..16)
            .map(|_| {
                epoch(
                    1000.0,
                    &[
                        (900.0, 0, AccessKind::Checkpoint),
                        (900.0, 1, AccessKind::Read),
                        (1000.0, 1, AccessKind::Write),
                    ],
                )
            })
            .collect();
        let without = predict(&plain, 2, &FREE);
        let with = predict(&split, 2, &FREE);
        // Without the checkpoint a violated epoch redoes its head too.
        assert!(with < without, "with {with} without {without}");
        // Two threads, 16 epochs: heads overlap, tails are serialized (16 x 100 ns).
        assert!(with <= 16.0 * 1000.0 / 2.0 + 16.0 * 100.0, "{with}");
    }

    #[test]
    fn a_dependence_every_fourth_epoch() {
        let e: Vec<_> = (0..40)
            .map(|i| {
                if i % 4 == 0 {
                    epoch(
                        1000.0,
                        &[(0.0, 5, AccessKind::Read), (1000.0, 5, AccessKind::Write)],
                    )
                } else {
                    epoch(1000.0, &[(500.0, 100 + i, AccessKind::Write)])
                }
            })
            .collect();
        let t2 = predict(&e, 2, &FREE);
        // The dependent epochs are four apart: with two threads they never overlap,
        // so the loop runs at full speed.
        assert_eq!(t2, 20_000.0);
        // With eight threads each dependent epoch waits for the previous one.
        let t8 = predict(&e, 8, &FREE);
        assert!(t8 > 40_000.0 / 8.0, "{t8}");
    }

    #[test]
    fn a_violation_is_noticed_at_the_next_access_or_handled_when_homefree() {
        // Epoch 0 writes location 5 early (at 100 ns); epoch 1 read it at its start.
        let writer = epoch(1000.0, &[(100.0, 5, AccessKind::Write)]);
        // With no tracked access after the write, epoch 1 runs to its end, waits,
        // and re-runs once epoch 0 has committed (at 1000 ns).
        let silent = [writer.clone(), epoch(1000.0, &[(0.0, 5, AccessKind::Read)])];
        assert_eq!(predict(&silent, 2, &FREE), 2000.0);
        // An access at 500 ns is where it learns of the violation and restarts.
        let busy = [
            writer,
            epoch(
                1000.0,
                &[(0.0, 5, AccessKind::Read), (500.0, 9, AccessKind::Write)],
            ),
        ];
        assert_eq!(predict(&busy, 2, &FREE), 1500.0);
    }

    #[test]
    fn a_homefree_re_run_takes_the_first_free_thread() {
        // Epoch 1 reads at its start what epoch 0 writes at its end, and then has
        // nothing tracked: it re-runs after epoch 0 commits. Epochs 2 and 3 are
        // independent and keep the other thread busy meanwhile.
        let e = [
            epoch(1000.0, &[(1000.0, 5, AccessKind::Write)]),
            epoch(1000.0, &[(0.0, 5, AccessKind::Read)]),
            epoch(1000.0, &[]),
            epoch(1000.0, &[]),
        ];
        // Thread A: epoch 0 [0, 1000], epoch 2 [1000, 2000]; thread B: epoch 1's
        // first run [0, 1000], its re-run [1000, 2000], epoch 3 [2000, 3000].
        assert_eq!(predict(&e, 2, &FREE), 3000.0);
    }

    #[test]
    fn a_read_that_races_with_the_write_it_needs_counts_as_violated() {
        // Every epoch adds to one total as its very last step: on two threads in
        // lockstep, the next epoch's read comes at the same instant as this epoch's
        // write. Real threads are never in lockstep; about half such reads lose, and
        // each loss costs a whole epoch. The model must not promise the overlap.
        let e: Vec<_> = (0..32)
            .map(|_| {
                epoch(
                    1000.0,
                    &[(1000.0, 7, AccessKind::Read), (1000.0, 7, AccessKind::Write)],
                )
            })
            .collect();
        let t = predict(&e, 2, &FREE);
        assert!(t >= 0.9 * 32_000.0, "{t}");
        // A read well after the write (a tenth of an epoch) is forwarded, as before.
        let later: Vec<_> = (0..32)
            .map(|i| {
                let at = if i % 2 == 0 { 800.0 } else { 950.0 };
                epoch(
                    1000.0,
                    &[(at, 7, AccessKind::Read), (at, 7, AccessKind::Write)],
                )
            })
            .collect();
        assert!(predict(&later, 2, &FREE) < 0.6 * 32_000.0);
    }

    #[test]
    fn serialized_commit_cost_bounds_the_speedup() {
        let costs = Costs {
            serial: 100.0,
            ..FREE
        };
        let e: Vec<_> = (0..1000).map(|_| epoch(1000.0, &[])).collect();
        let t = predict(&e, 64, &costs);
        // Commits cannot go faster than one per 100 ns.
        assert!(t >= 1000.0 * 100.0, "{t}");
    }

    #[test]
    fn chunks_add_up_durations_and_shift_events() {
        let items: Vec<_> = (0..5)
            .map(|i| {
                epoch(
                    100.0,
                    &[(10.0, i, AccessKind::Read), (90.0, i, AccessKind::Write)],
                )
            })
            .collect();
        let c = chunked(&items, 2);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].dur, 200.0);
        assert_eq!(c[2].dur, 100.0);
        let at: Vec<_> = c[0].events.iter().map(|e| (e.at, e.loc)).collect();
        assert_eq!(at, [(10.0, 0), (90.0, 0), (110.0, 1), (190.0, 1)]);
    }

    #[test]
    fn short_independent_iterations_are_predicted_in_chunks() {
        // 1 us iterations with 1 us of cost per epoch: one per epoch would gain
        // nothing on 2 threads; grouped ten at a time the cost nearly vanishes.
        let costs = Costs {
            epoch: 1000.0,
            ..FREE
        };
        let items: Vec<_> = (0..2000)
            .map(|i| epoch(1000.0, &[(900.0, i, AccessKind::Write)]))
            .collect();
        let sequential = 2000.0 * 1000.0;
        let one = sequential / predict_chunked(&items, 2, &costs, Some(1));
        let auto = sequential / predict_chunked(&items, 2, &costs, None);
        assert!(one < 1.05, "one per epoch: {one}");
        assert!(auto > 1.7, "chunked: {auto}");
    }

    #[test]
    fn chunks_that_roll_back_are_halved_down_to_what_pays() {
        // Each iteration reads and then writes one shared location at its very end:
        // in a chunk of several, the first read of the next epoch is violated by the
        // last write of the one before and the whole chunk re-runs; one iteration per
        // epoch loses only its tail.
        let items: Vec<_> = (0..400)
            .map(|_| {
                epoch(
                    1000.0,
                    &[
                        (0.0, 0, AccessKind::Checkpoint),
                        (950.0, 7, AccessKind::Read),
                        (990.0, 7, AccessKind::Write),
                    ],
                )
            })
            .collect();
        let sequential = 400.0 * 1000.0;
        let auto = sequential / predict_chunked(&items, 2, &FREE, None);
        let eight = sequential / predict_chunked(&items, 2, &FREE, Some(8));
        let one = sequential / predict_chunked(&items, 2, &FREE, Some(1));
        assert!(auto >= eight, "auto {auto} vs chunk 8 {eight}");
        assert!(
            (auto - one).abs() < 0.05 * one,
            "auto {auto} vs chunk 1 {one}"
        );
    }
}
