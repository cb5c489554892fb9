//! The report's own tests: names made printable, counts, which threads ran.

use super::*;
use crate::epoch::Cause;

#[test]
fn control_characters_in_a_name_are_escaped() {
    assert_eq!(super::printable("items été"), "items été");
    assert_eq!(super::printable("a\nb\t\u{1b}[31m"), "a\\nb\\t\\u{1b}[31m");
}

/// Two participants, one of which ran nothing: the report says one of the two
/// threads ran epochs; with both, it says nothing more.
#[test]
fn a_report_says_when_not_every_thread_ran_epochs() {
    let report = |helper_ran: bool| {
        let mut all = ThreadStats::default();
        all.merge(ThreadStats {
            epochs: 10,
            items: 10,
            busy: Duration::from_micros(100),
            ..ThreadStats::default()
        });
        all.merge(ThreadStats {
            epochs: u64::from(helper_ran),
            ..ThreadStats::default()
        });
        let wall = Duration::from_micros(100);
        all.into_report("l".into(), Location::caller(), RunMode::Parallel, 2, wall)
    };
    assert_eq!(counted(1, "thread"), "1 thread");
    assert_eq!(counted(0, "epoch"), "0 epochs");
    let alone = report(false);
    assert_eq!(alone.threads_ran, 1);
    assert!(
        alone
            .to_string()
            .contains("(Parallel, 2 threads, 1 of them ran epochs)")
    );
    let both = report(true);
    assert_eq!(both.threads_ran, 2);
    assert!(both.to_string().contains("(Parallel, 2 threads)"), "{both}");
}

/// Ten epochs of 10 us, `accesses` tracked accesses in all.
fn ten_epochs(accesses: u64) -> ThreadStats {
    ThreadStats {
        epochs: 10,
        items: 10,
        accesses,
        busy: Duration::from_micros(100),
        ..ThreadStats::default()
    }
}

/// A violation's cause: `store` to what `load` read as its first access.
fn cause(
    store: &'static Location<'static>,
    load: &'static Location<'static>,
    rewrite: Option<bool>,
) -> Cause {
    Cause {
        store,
        load,
        load_ordinal: 0,
        real: true,
        rewrite,
        distance: 1,
    }
}

/// The report of a loop whose one thread saw `ts`, in `mode`.
#[track_caller]
fn report_of(ts: ThreadStats, mode: RunMode) -> LoopReport {
    let mut all = ThreadStats::default();
    all.merge(ts);
    all.into_report(
        "l".into(),
        Location::caller(),
        mode,
        1,
        Duration::from_micros(100),
    )
}

/// A parallel run places a violated load by its tracked accesses since its segment's
/// start: a load right after a checkpoint is not advised another one, one far into
/// its segment is.
#[test]
fn a_load_is_placed_in_its_segment() {
    let (store, soon, late) = (Location::caller(), Location::caller(), Location::caller());
    let mut ts = ten_epochs(200);
    let at_15 = |load| Cause {
        load_ordinal: 15,
        ..cause(store, load, Some(false))
    };
    for _ in 0..5 {
        // 15 accesses into the epoch, none since the checkpoint before it.
        ts.violation(&at_15(soon), 1, 0, Duration::from_micros(1));
        // 15 accesses into the epoch, no checkpoint before it.
        ts.violation(&at_15(late), 0, 15, Duration::from_micros(2));
    }
    let r = report_of(ts, RunMode::Parallel);
    let kind = |load: &'static Location<'static>| {
        let d = r.dependences.iter().find(|d| d.load.0 == load).unwrap();
        d.advice.as_ref().unwrap().kind
    };
    assert_eq!(kind(soon), crate::AdviceKind::TrueDependence, "{r}");
    assert_eq!(kind(late), crate::AdviceKind::Checkpoint, "{r}");
}

/// A load and a store at two calls that the storing epoch made on one location, in
/// that order, in (nearly) every violation where that is known: early in the epoch, a
/// counter the iteration goes on with (a true dependence, the accumulation named as
/// the way out); late, a checkpoint with the accumulation named (an outside probe's
/// value read and then overwritten with another had been named an accumulation);
/// where in the epoch it comes not known (few tracked accesses), an accumulation,
/// whose text says when it is not one.
#[test]
fn a_read_modify_write_in_two_calls_is_advised_by_where_its_load_is() {
    let (store, load) = (Location::caller(), Location::caller());
    // 20 tracked accesses an epoch; the load `at` of them into it.
    let report = |rewrite: Option<bool>, accesses: u64, at: u32| {
        let mut ts = ten_epochs(accesses);
        for _ in 0..9 {
            ts.violation(
                &cause(store, load, rewrite),
                0,
                at,
                Duration::from_micros(1),
            );
            // Homefree writers: not known.
            ts.violation(&cause(store, load, None), 0, at, Duration::from_micros(1));
        }
        let r = report_of(ts, RunMode::Parallel);
        r.dependences[0].advice.as_ref().unwrap().kind
    };
    use crate::AdviceKind::{Checkpoint, TrueDependence};
    assert_eq!(report(Some(true), 200, 18), Checkpoint);
    assert_eq!(report(Some(true), 200, 1), TrueDependence);
    assert_eq!(report(Some(true), 20, 0), crate::AdviceKind::Accumulate);
    assert_eq!(report(Some(false), 200, 18), Checkpoint);
    assert_eq!(report(None, 200, 1), TrueDependence);
}

/// A run with nothing to run says so, rather than shares of its setup.
#[test]
fn an_empty_run_has_no_time_shares() {
    let mut all = ThreadStats::default();
    all.merge(ThreadStats {
        busy: Duration::from_micros(10),
        idle: Duration::from_micros(1),
        ..ThreadStats::default()
    });
    let wall = Duration::from_micros(12);
    let r = all.into_report("l".into(), Location::caller(), RunMode::Parallel, 2, wall);
    let text = r.to_string();
    assert!(text.contains("time: no iterations to run"), "{text}");
    assert!(!text.contains("busy"), "{text}");
}

/// A profile-mode report's dependences are the model's: said so, beside a header
/// that counts no violations.
#[test]
fn profile_mode_dependences_read_as_predicted() {
    let (store, load) = (Location::caller(), Location::caller());
    let report = |mode: RunMode| {
        let mut ts = ten_epochs(0);
        ts.violation(&cause(store, load, None), 0, 0, Duration::from_micros(1));
        report_of(ts, mode).to_string()
    };
    assert!(report(RunMode::Profile).contains(": predicted 1 violations"));
    assert!(!report(RunMode::Parallel).contains("predicted"));
}

/// A thread that joined a loop twice (a worker that left and came back) counts once
/// among the threads that ran epochs.
#[test]
fn a_thread_that_joined_twice_counts_once() {
    let me = ThreadStats::of_this_thread;
    let other = std::thread::spawn(ThreadStats::of_this_thread)
        .join()
        .unwrap();
    let ran = |mut ts: ThreadStats| {
        ts.epochs = 3;
        ts
    };
    let mut all = ThreadStats::default();
    all.merge(ran(me()));
    all.merge(ran(me()));
    all.merge(me()); // joined a third time, ran nothing
    let mut part = ThreadStats::default();
    part.merge(ran(other));
    part.merge(ran(me()));
    all.merge(part);
    let wall = Duration::from_micros(100);
    let report = all.into_report("l".into(), Location::caller(), RunMode::Parallel, 2, wall);
    assert_eq!(report.threads_ran, 2);
}

/// A synchronized load's line says which epoch its waits were for: the one before
/// (until homefree) or one further back, the nearest of the run.
#[test]
fn a_synchronized_load_says_how_far_back_its_epochs_waited() {
    let load = Location::caller();
    let wait = |behind: u64| crate::epoch::LoadWait {
        load,
        waited: Duration::from_micros(5),
        behind,
        gave_up: false,
        after_call: false,
    };
    let line = |behinds: &[u64]| {
        let mut ts = ten_epochs(10);
        for &b in behinds {
            ts.synced_wait(wait(b));
        }
        let report = report_of(ts, RunMode::Parallel);
        let s = report.synchronized[0];
        (s.behind, s.waits, report.to_string())
    };
    let (behind, waits, text) = line(&[3, 3, 5]);
    assert_eq!((behind, waits), (3, 3));
    assert!(
        text.contains("3 epochs waited there until the epoch 3 back had committed"),
        "{text}"
    );
    let (behind, _, text) = line(&[3, 1]);
    assert_eq!(behind, 1);
    assert!(
        text.contains("2 epochs waited there until homefree"),
        "{text}"
    );
}
