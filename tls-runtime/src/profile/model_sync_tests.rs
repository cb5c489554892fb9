//! Tests of the speedup model's synchronized loads (`model.rs`, `predict.rs`): loads
//! the runtime would synchronize, and the waits the replay makes there.

use super::*;

#[track_caller]
fn here() -> Site {
    Location::caller()
}

/// `n` epochs of `dur` that each read location 7 at `load` and write it at `store`,
/// both at `at`, after a checkpoint at `checkpoint` if any.
fn reading_late(
    n: usize,
    dur: f64,
    at: f64,
    (load, store): (Site, Site),
    checkpoint: Option<f64>,
) -> Vec<EpochProfile> {
    let access = |kind, site| Event {
        at,
        loc: 7,
        kind,
        site: Some(site),
    };
    (0..n)
        .map(|_| EpochProfile {
            dur,
            events: checkpoint
                .map(|c| Event {
                    at: c,
                    loc: 0,
                    kind: AccessKind::Checkpoint,
                    site: None,
                })
                .into_iter()
                .chain([
                    access(AccessKind::Read, load),
                    access(AccessKind::Write, store),
                ])
                .collect(),
            commit_work: 0.0,
        })
        .collect()
}

/// "Sum at the end": every epoch reads and writes one total as its last step. In a
/// replay without synchronization most epochs read it too early and re-run; the
/// runtime synchronizes that load, and with it epochs overlap but for the short
/// tail: the prediction follows the synchronized replay, close to 2x on 2 threads,
/// while the dependence is still reported.
#[test]
fn a_load_that_violates_most_epochs_is_predicted_synchronized() {
    let (load, store) = (here(), here());
    let e = reading_late(64, 10_000.0, 9_800.0, (load, store), None);
    let plain = simulate(&e, 2, &FREE);
    assert!(
        synchronized(&plain) == vec![load],
        "the first replay finds the load violating most epochs"
    );
    let sequential = 64.0 * 10_000.0;
    let with = predict_chunked(&e, 2, &FREE, Some(1));
    let speedup = sequential / with.time;
    assert!(speedup > 1.9, "{speedup}");
    assert!(!with.deps.is_empty(), "the dependence is still reported");
    let unsynced = sequential / plain.time;
    assert!(unsynced < 1.5, "without synchronization: {unsynced}");
}

/// With a synchronized load the runtime runs one iteration an epoch (unless the loop
/// sets its chunk), and so does the prediction: short iterations that automatic
/// chunking would group still overlap but for their tails.
#[test]
fn a_synchronized_load_is_predicted_one_iteration_an_epoch() {
    let site = here();
    // A checkpoint just before: a rollback loses little, so the chunk is not halved
    // for it.
    let e = reading_late(400, 2_000.0, 1_950.0, (site, site), Some(1_900.0));
    let sequential = 400.0 * 2_000.0;
    let auto = sequential / predict_chunked(&e, 2, &FREE, None).time;
    let grouped = sequential / predict_chunked(&e, 2, &FREE, Some(5)).time;
    assert!(auto > 1.8, "one iteration an epoch: {auto}");
    assert!(
        grouped < auto - 0.3,
        "five an epoch, set by the loop: {grouped}"
    );
}

/// Iteration i reads, first thing, what iteration i - `distance` stored at its end
/// (location i), iterations of 10 us.
fn at_distance(n: usize, distance: usize, (load, store): (Site, Site)) -> Vec<EpochProfile> {
    (0..n)
        .map(|i| EpochProfile {
            dur: 10_000.0,
            events: (i >= distance)
                .then(|| Event {
                    at: 0.0,
                    loc: i - distance,
                    kind: AccessKind::Read,
                    site: Some(load),
                })
                .into_iter()
                .chain([Event {
                    at: 10_000.0,
                    loc: i,
                    kind: AccessKind::Write,
                    site: Some(store),
                }])
                .collect(),
            commit_work: 0.0,
        })
        .collect()
}

/// The runtime synchronizes a load at the distance of the store it depends on: an
/// epoch waits there for the epoch that store comes from, not for the one before. So
/// does the model: where iteration i reads what i - 3 stored at its end, three epochs
/// run side by side on any number of cores (it predicted 1x on 16 while the load
/// waited for the epoch before).
#[test]
fn a_synchronized_load_waits_for_the_epoch_its_store_comes_from() {
    let (load, store) = (here(), here());
    let e = at_distance(300, 3, (load, store));
    assert_eq!(
        with_distances(&e, &[load], 16),
        vec![SyncedSite { load, distance: 3 }]
    );
    let sequential = 300.0 * 10_000.0;
    let first = simulate(&e, 16, &FREE);
    assert_eq!(synchronized(&first), vec![load], "violated at 16 threads");
    let many = sequential / predict_chunked(&e, 16, &FREE, Some(1)).time;
    assert!((2.7..=3.0).contains(&many), "16 threads: {many}");
    let two = sequential / predict_chunked(&e, 2, &FREE, Some(1)).time;
    assert!(two > 1.9, "2 threads: {two}");
    // A chain (distance 1) stays one epoch at a time.
    let chain = at_distance(300, 1, (load, store));
    let one = sequential / predict_chunked(&chain, 16, &FREE, Some(1)).time;
    assert!(one < 1.05, "a chain: {one}");
}

/// Reads after a synchronized load are still violated by the epochs between the one
/// waited for and their own: the wait orders them after that epoch only.
#[test]
fn reads_after_a_synchronized_load_still_see_nearer_stores() {
    let (load, store, near) = (here(), here(), here());
    // As `at_distance` with 3, and each epoch also reads location 1_000_000 at its
    // middle, which every epoch writes at its end: a chain through a later read.
    let mut e = at_distance(200, 3, (load, store));
    for ep in &mut e {
        ep.events.insert(
            ep.events.len() - 1,
            Event {
                at: 5_000.0,
                loc: 1_000_000,
                kind: AccessKind::Read,
                site: Some(near),
            },
        );
        ep.events.push(Event {
            at: 10_000.0,
            loc: 1_000_000,
            kind: AccessKind::Write,
            site: Some(store),
        });
    }
    let synced = [SyncedSite { load, distance: 3 }];
    let sim = simulate_replay(&e, 4, &FREE, 0, &synced);
    assert!(
        sim.deps.keys().any(|&(_, l)| l == near),
        "the nearer store violates the later read"
    );
    assert!(
        !sim.deps.keys().any(|&(_, l)| l == load),
        "the synchronized load waits for its store"
    );
}

/// As the runtime, the model waits for the stores that make up a quarter of a load's
/// dependences, not for a rare nearer one: five back where one iteration in fifty
/// also reads what the one before stored (waiting for that in every epoch would
/// predict the loop in order).
#[test]
fn a_rare_nearer_store_leaves_the_wait_where_most_stores_are() {
    let (load, store) = (here(), here());
    let mut e = at_distance(300, 5, (load, store));
    for (i, ep) in e.iter_mut().enumerate().skip(50).step_by(50) {
        ep.events[0].loc = i - 1;
    }
    assert_eq!(
        with_distances(&e, &[load], 16),
        vec![SyncedSite { load, distance: 5 }]
    );
    let sequential = 300.0 * 10_000.0;
    let many = sequential / predict_chunked(&e, 16, &FREE, Some(1)).time;
    assert!(many > 3.5, "16 threads: {many}");
    // Stores forty back, farther than 2 threads' window of epochs in flight: none
    // can violate the load.
    let far = at_distance(300, 40, (load, store));
    assert!(
        with_distances(&far, &[load], 2).is_empty(),
        "none near enough"
    );
}

/// The runtime waits at every synchronized load an epoch reaches, and so does the
/// model: here a load of what iteration i - 8 stored, first thing (it waits for
/// nothing on 2 threads), then a running total read at 10% of each iteration and
/// stored at 60%. The runtime waits at the total until the epoch before has
/// committed: nine tenths of each epoch after the one before, 1.1x. Waiting only at
/// the first synchronized load, the replay let the total be read early and rolled
/// nearly every epoch back (292 of 300, 1.0x).
#[test]
fn an_epoch_waits_at_each_synchronized_load() {
    let (load, store, total_load, total_store) = (here(), here(), here(), here());
    let mut e = at_distance(300, 8, (load, store));
    for ep in &mut e {
        let last = ep.events.len() - 1;
        ep.events.insert(
            last,
            Event {
                at: 1_000.0,
                loc: 1_000_000,
                kind: AccessKind::Read,
                site: Some(total_load),
            },
        );
        ep.events.insert(
            last + 1,
            Event {
                at: 6_000.0,
                loc: 1_000_000,
                kind: AccessKind::Write,
                site: Some(total_store),
            },
        );
    }
    let synced = [
        SyncedSite { load, distance: 8 },
        SyncedSite {
            load: total_load,
            distance: 1,
        },
    ];
    let sequential = 300.0 * 10_000.0;
    let sim = simulate_replay(&e, 2, &FREE, 0, &synced);
    let two = sequential / sim.time;
    assert!(
        sim.deps.is_empty(),
        "the total's load waits for its store ({two}x): {:?}",
        sim.deps.values().map(|d| d.count).collect::<Vec<_>>()
    );
    assert!((1.05..1.2).contains(&two), "2 threads: {two}");
}
