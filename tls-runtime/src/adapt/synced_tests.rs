//! Tests of synchronized loads (`synced.rs`).

use super::*;

#[track_caller]
fn here() -> &'static Location<'static> {
    Location::caller()
}

/// The wait at a synchronized load reaches back as far as the nearest stores that
/// violated it, unless they were rare: three epochs for a dependence between
/// iterations three apart (unknown distances count as one); shortened when a
/// stretch of epochs is violated from nearer later, not by one such violation.
#[test]
fn a_synchronized_load_waits_for_the_nearest_store_it_saw() {
    let s = SyncedLoads::new();
    let load = here();
    for i in 0..SYNC_AFTER {
        s.note_violation(load, 1, 10 + i, if i == 2 { 4 } else { 3 });
    }
    assert_eq!(s.must_wait(load, 1), Some(3));
    s.note_violation(load, 1, 40, 0);
    assert_eq!(
        s.must_wait(load, 1),
        Some(3),
        "one nearer store does not shorten it"
    );
    // Every epoch from here on violated by the epoch before: a stretch.
    for i in 41..41 + SYNC_AFTER {
        s.note_violation(load, 1, i, 1);
    }
    assert_eq!(
        s.must_wait(load, 1),
        Some(1),
        "a stretch of nearer stores does"
    );
    let other = here();
    for i in 0..SYNC_AFTER {
        s.note_violation(other, 1, 10 + i, 2);
    }
    assert_eq!(s.must_wait(other, 1), Some(2));
    s.note_violation(other, 1, 40, 5);
    assert_eq!(
        s.must_wait(other, 1),
        Some(2),
        "a farther store does not lengthen it"
    );
}

/// A loop whose dependence is five iterations apart, with a store from the
/// iteration before now and then: the wait reaches five back, and the rare
/// store is left to violate (waiting for it would run the loop in order: an
/// outside probe's loop ran 0.68-0.92 times the plain loop's speed on 4 threads
/// that way, against 1.10-1.22 without the rare store).
#[test]
fn a_rare_nearer_store_does_not_shorten_the_wait() {
    let s = SyncedLoads::new();
    let load = here();
    for i in 0..SYNC_AFTER {
        s.note_violation(load, 1, 10 + i, if i == 3 { 1 } else { 5 });
    }
    assert_eq!(s.must_wait(load, 1), Some(5));
    // A quarter of them from the epoch before: that is where the wait reaches.
    let near = here();
    for i in 0..SYNC_AFTER {
        s.note_violation(near, 1, 10 + i, if i % 4 == 0 { 1 } else { 5 });
    }
    assert_eq!(s.must_wait(near, 1), Some(1));
    let mut d = Distances::new();
    assert_eq!(d.wait(), 1, "nothing counted");
    for x in [9, 12, 30] {
        d.add(x);
    }
    assert_eq!(d.wait(), 9, "far stores: the nearest of them");
}

#[test]
fn a_load_that_violates_most_epochs_is_synchronized_and_released_later() {
    let s = SyncedLoads::new();
    let load = here();
    for i in 0..SYNC_AFTER - 1 {
        s.note_violation(load, 1, 10 + i, 1);
        // The same epoch violated again counts once.
        s.note_violation(load, 1, 10 + i, 1);
    }
    assert!(!s.contains(load));
    s.note_violation(load, 1, 10 + SYNC_AFTER, 1);
    assert!(s.contains(load));
    // Violated between each probe and the next: it stays synchronized.
    let mut probes = 0;
    for _ in 0..SYNC_FOR - 1 {
        if s.must_wait(load, 1).is_none() {
            probes += 1;
            s.note_violation(load, 1, 100, 1);
        }
    }
    // 32, 64, 128, 256, then every 512 waits.
    assert_eq!(probes, 4 + (SYNC_FOR - 1 - 480) / PROBE_EVERY_MAX);
    assert!(s.must_wait(load, 1).is_some(), "the last wait still waits");
    assert!(!s.contains(load), "released after SYNC_FOR waits");
    assert!(s.must_wait(load, 1).is_none());
}

/// A synchronized load whose dependence went away is released once its probes
/// see no violation, long before `SYNC_FOR` waits.
#[test]
fn a_load_whose_probes_are_not_violated_is_released() {
    let s = SyncedLoads::new();
    let load = here();
    for i in 0..SYNC_AFTER {
        s.note_violation(load, 1, 10 + i, 1);
    }
    let mut reached = 0;
    while s.contains(load) {
        s.must_wait(load, 1);
        reached += 1;
    }
    // The first probe is the (PROBE_EVERY / 2)th, then one in PROBE_EVERY, and
    // each is judged at the next.
    let bound = PROBE_EVERY / 2 + PROBE_EVERY * QUIET_PROBES;
    assert_eq!(reached, bound);
    assert!(bound < SYNC_FOR / 8);
}

/// A release and a new load's synchronization, interleaved by hand: the count
/// of occupied slots follows the slots, so the new load waits. (With a flag
/// stored after a scan of the slots, the release's "none left" landed after the
/// new load's "one more", and the new load never waited again.)
#[test]
fn a_release_racing_a_new_load_leaves_it_synchronized() {
    let s = SyncedLoads::new();
    let (a, b) = (here(), here());
    for i in 0..SYNC_AFTER {
        s.note_violation(a, 1, 10 + i, 1);
    }
    assert!(s.contains(a));
    // The releasing thread empties a's slot...
    assert!(!s.slots[0].swap(core::ptr::null_mut(), Relaxed).is_null());
    // ... b is synchronized meanwhile, into that slot ...
    s.synchronize(b, 1);
    // ... and the release counts its slot out.
    s.occupied.fetch_sub(1, Relaxed);
    assert!(s.active());
    assert_eq!(s.must_wait(b, 1), Some(1));
}

#[test]
fn a_load_that_violates_one_epoch_in_four_stays_speculative() {
    let s = SyncedLoads::new();
    let load = here();
    for k in 0..100 {
        s.note_violation(load, 1, 4 * k + 1, 1);
    }
    assert!(!s.contains(load));
    assert!(s.must_wait(here(), 1).is_none());
}

#[test]
fn violations_count_across_short_runs() {
    // Each run's epochs are numbered from 0. Every epoch but the first of
    // 4-epoch runs violated: synchronized within three runs.
    let s = SyncedLoads::new();
    let load = here();
    for run in 0..3 {
        for i in 1..4 {
            s.note_violation(load, run, i, 1);
        }
        s.run_ended(4);
    }
    assert!(s.contains(load));
    // The last epoch of 8-epoch runs violated: one in eight, never.
    let s = SyncedLoads::new();
    for run in 0..50 {
        s.note_violation(load, run, 7, 1);
        s.run_ended(8);
    }
    assert!(!s.contains(load));
}

/// The runs without a violation count: one violation, early in a run, every
/// 100 runs of 10 epochs is one in a thousand epochs (counting only each
/// violated run's epochs up to the violation made it one in two, and an outside
/// probe's transaction loop waited at the load for 4,096 epochs).
#[test]
fn runs_without_violations_count_between_violations() {
    let s = SyncedLoads::new();
    let load = here();
    for run in 0..2000u32 {
        if run % 100 == 0 {
            s.note_violation(load, run, 1, 1);
        }
        s.run_ended(10);
    }
    assert!(!s.contains(load));
}
