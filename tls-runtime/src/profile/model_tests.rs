//! Tests of the speedup model (`model.rs`).

use super::*;
use crate::rules::{QUIET_TARGET_EPOCH, TARGET_EPOCH, run_chunk};

const FREE: Costs = Costs {
    epoch: 0.0,
    serial: 0.0,
    access: 0.0,
    recording: super::super::recorder::EventCosts {
        read: 0.0,
        write: 0.0,
        checkpoint: 0.0,
    },
    rollback: 0.0,
    write: 0.0,
    commit_write: 0.0,
};

fn epoch(dur: f64, events: &[(f64, usize, AccessKind)]) -> EpochProfile {
    EpochProfile {
        dur,
        events: events
            .iter()
            .map(|&(at, loc, kind)| Event {
                at,
                loc,
                kind,
                site: None,
            })
            .collect(),
        commit_work: 0.0,
    }
}

/// `n` independent iterations of 1 us, each writing a location of its own near its end.
fn independent_1us(n: usize) -> Vec<EpochProfile> {
    (0..n)
        .map(|i| epoch(1000.0, &[(900.0, i, AccessKind::Write)]))
        .collect()
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
fn a_homefree_re_run_is_done_by_the_committer_of_the_epoch_before() {
    // Epoch 1 reads at its start what epoch 0 writes at its end, and then has
    // nothing tracked: it re-runs after epoch 0 commits, on the thread that commits
    // epoch 0 (which finds it finished and violated). The thread that ran it first
    // went on at once. Epochs 2 and 3 are independent.
    let e = [
        epoch(2000.0, &[(2000.0, 5, AccessKind::Write)]),
        epoch(1000.0, &[(0.0, 5, AccessKind::Read)]),
        epoch(1000.0, &[]),
        epoch(1000.0, &[]),
    ];
    // Thread A: epoch 0 [0, 2000], epoch 1's re-run [2000, 3000]; thread B: epoch
    // 1's first run [0, 1000], epoch 2 [1000, 2000], epoch 3 [2000, 3000]. (Had the
    // re-run waited on the thread that ran it first, epochs 2 and 3 would have
    // ended at 4000.)
    assert_eq!(predict(&e, 2, &FREE), 3000.0);
}

#[test]
fn a_read_modify_write_is_one_access() {
    // Epoch 1's `update` of location 7 (a read and a write, recorded a moment
    // apart) races epoch 0's write of it at the same instant. Its own write part
    // makes no check: with nothing after it, epoch 1 finishes, and re-runs once
    // homefree, without paying an unwinding.
    let costs = Costs {
        rollback: 500.0,
        ..FREE
    };
    let e = [
        epoch(1000.0, &[(1000.0, 7, AccessKind::Write)]),
        epoch(
            1001.0,
            &[(999.8, 7, AccessKind::Read), (1000.2, 7, AccessKind::Write)],
        ),
    ];
    assert_eq!(predict(&e, 2, &costs), 2001.0);
}

#[test]
fn replays_vary_epoch_lengths_a_little_and_average() {
    for j in 0..1000 {
        let u = unit_noise(j, 3);
        assert!((-1.0..1.0).contains(&u), "{u}");
    }
    // Independent epochs: the varied replays average close to the recorded one.
    let e: Vec<_> = (0..200)
        .map(|i| epoch(1000.0, &[(500.0, i, AccessKind::Write)]))
        .collect();
    let recorded = predict(&e, 2, &FREE);
    let varied = simulate_varied(simulate(&e, 2, &FREE), &e, 2, &FREE, &[]).time;
    assert!(
        (varied / recorded - 1.0).abs() < VARIATION,
        "{varied} {recorded}"
    );
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
                &[
                    (1000.0, 7, AccessKind::Read),
                    (1000.0, 7, AccessKind::Write),
                ],
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
    let c = chunked(&items, 2, None);
    assert_eq!(c.len(), 3);
    assert_eq!(c[0].dur, 200.0);
    assert_eq!(c[2].dur, 100.0);
    let at: Vec<_> = c[0].events.iter().map(|e| (e.at, e.loc)).collect();
    assert_eq!(at, [(10.0, 0), (90.0, 0), (110.0, 1), (190.0, 1)]);
}

#[test]
fn automatic_chunks_are_evened_out_as_the_runtime_cuts_them() {
    let items: Vec<_> = (0..10).map(|_| epoch(100.0, &[])).collect();
    // At most 3 an epoch on 2 threads: 3, 3, 2, 2 (as `rules::planned_chunk` cuts
    // a run), where a chunk the loop sets gives 3, 3, 3, 1.
    let even: Vec<f64> = chunked(&items, 3, Some(2)).iter().map(|e| e.dur).collect();
    assert_eq!(even, [300.0, 300.0, 200.0, 200.0]);
    let set: Vec<f64> = chunked(&items, 3, None).iter().map(|e| e.dur).collect();
    assert_eq!(set, [300.0, 300.0, 300.0, 100.0]);
}

#[test]
fn quiet_chunks_follow_the_windows_as_the_runtime_tunes_them() {
    // 2 us iterations, one in a hundred 1 ms long (every 100th, from the 50th).
    let items: Vec<_> = (0..4000)
        .map(|i| epoch(if i % 100 == 50 { 1_000_000.0 } else { 2_000.0 }, &[]))
        .collect();
    let per_item = QUIET_TARGET_EPOCH.as_nanos() as usize / 2_000;
    let epochs = chunked_adaptively(&items, 4, 4, 2, 0.0);
    // Every iteration once, in order.
    let total: f64 = epochs.iter().map(|e| e.dur).sum();
    assert_eq!(total, items.iter().map(|e| e.dur).sum::<f64>());
    // The first window's epochs hold the chunk it started with; a window of short
    // iterations only then sets the quiet target's chunk, and one holding a long
    // iteration a far shorter one.
    assert!(epochs[..8].iter().all(|e| e.dur == 8_000.0));
    // (An epoch's iterations: its short ones, and its long one if any.)
    let sizes: Vec<usize> = epochs
        .iter()
        .map(|e| (e.dur as usize % 1_000_000) / 2_000 + usize::from(e.dur >= 1_000_000.0))
        .collect();
    assert!(sizes.contains(&per_item), "{sizes:?}");
    assert!(
        sizes.iter().any(|&s| s > 1 && s < per_item / 4),
        "{sizes:?}"
    );
    // Chunked by the mean (12 us an iteration), the epochs behind a long one cover
    // a tenth of it; as the runtime chunks them, far more: a better prediction.
    let by_mean = predict(
        &chunked(&items, per_item * 2_000 / 12_000, Some(2)),
        2,
        &FREE,
    );
    let adaptive = predict(&epochs, 2, &FREE);
    assert!(adaptive < 0.9 * by_mean, "{adaptive} vs {by_mean}");
    // And the prediction takes those epochs.
    let predicted = predict_chunked(&items, 2, &FREE, None).time;
    assert!(predicted < 0.9 * by_mean, "{predicted} vs {by_mean}");
    // Iterations alike: the chunk stays where it started when that is the target's
    // (the run's plan evens the epochs out to within one iteration).
    let alike: Vec<_> = (0..1000).map(|_| epoch(2_000.0, &[])).collect();
    let sizes: Vec<f64> = chunked_adaptively(&alike, per_item, 5, 2, 0.0)
        .iter()
        .map(|e| e.dur / 2_000.0)
        .collect();
    let planned: Vec<f64> = chunked(&alike, run_chunk(per_item, 5, 1000, 2), Some(2))
        .iter()
        .map(|e| e.dur / 2_000.0)
        .collect();
    assert_eq!(sizes, planned);
}

#[test]
fn short_independent_iterations_are_predicted_in_chunks() {
    // 1 us iterations with 1 us of cost per epoch: one per epoch would gain
    // nothing on 2 threads; grouped ten at a time the cost nearly vanishes.
    let costs = Costs {
        epoch: 1000.0,
        ..FREE
    };
    let items = independent_1us(2000);
    let sequential = 2000.0 * 1000.0;
    let one = sequential / predict_chunked(&items, 2, &costs, Some(1)).time;
    let auto = sequential / predict_chunked(&items, 2, &costs, None).time;
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
    let auto = sequential / predict_chunked(&items, 2, &FREE, None).time;
    let eight = sequential / predict_chunked(&items, 2, &FREE, Some(8)).time;
    let one = sequential / predict_chunked(&items, 2, &FREE, Some(1)).time;
    assert!(auto >= eight, "auto {auto} vs chunk 8 {eight}");
    assert!(
        (auto - one).abs() < 0.05 * one,
        "auto {auto} vs chunk 1 {one}"
    );
}

#[test]
fn a_loop_never_violated_is_predicted_in_the_quiet_targets_longer_epochs() {
    // 1 us iterations with 2 us of cost per epoch. The runtime groups them for
    // the short target first (about 8 a chunk, a fifth lost to the per-epoch cost);
    // seeing no violation it lengthens its epochs to the quiet target, and so does
    // the model.
    let costs = Costs {
        epoch: 2000.0,
        ..FREE
    };
    let items = independent_1us(20_000);
    let sequential = 20_000.0 * 1000.0;
    let short = TARGET_EPOCH.as_nanos() as usize / 1000;
    let at_short = sequential / predict_chunked(&items, 2, &costs, Some(short)).time;
    let auto = sequential / predict_chunked(&items, 2, &costs, None).time;
    assert!(at_short < 1.7, "short target: {at_short}");
    assert!(auto > 1.85, "quiet target: {auto}");
}

#[test]
fn a_short_run_is_cut_into_epochs_for_every_thread() {
    // 200 iterations of 1 us on 2 threads: the quiet target (80 per epoch) would
    // leave 3 epochs; the runtime cuts the run into at least 16 per thread, but
    // not below the short target's chunk.
    let items = independent_1us(200);
    let sequential = 200.0 * 1000.0;
    let auto = sequential / predict_chunked(&items, 2, &FREE, None).time;
    let quiet = QUIET_TARGET_EPOCH.as_nanos() as usize / 1000;
    let uncut = sequential / predict_chunked(&items, 2, &FREE, Some(quiet)).time;
    assert!(auto > 1.8, "cut: {auto}");
    assert!(uncut < 1.7, "uncut: {uncut}");
}

#[path = "model_sync_tests.rs"]
mod synced;
