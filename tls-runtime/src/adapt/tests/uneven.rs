//! Loops whose iterations cost very differently: the in-order cost a window is judged
//! against, and the windows a worker busy with a long epoch has not voted in yet
//! (split from `tests.rs`, whose clock and tallies they use).

use super::*;
use crate::adapt::site::MEASURES;
use crate::adapt::window::{WAIT_FOR_VOTE, in_order_estimate_ns};

/// A site whose measuring stretches found `per_item_ns` an iteration.
fn measured_site(per_item_ns: u64) -> LoopSite {
    let site = LoopSite::new();
    for _ in 0..MEASURES {
        site.note_measured(Duration::from_nanos(per_item_ns * 1000), 1000);
    }
    assert_eq!(site.in_order_per_item(), Some(per_item_ns as f64));
    site
}

/// A tally of `epochs` epochs of `items` iterations in all, its thread busy for
/// `busy` and its epochs' own work `work`, with `accesses` tracked accesses.
fn tally_of(epochs: u32, items: u64, busy: Duration, work: Duration, accesses: u64) -> Tally {
    Tally {
        work,
        accesses,
        ..tally(epochs, items, 0, busy)
    }
}

/// Two windows of 1 ms, each thread committing `per_thread` in it; whether the site
/// then runs in order.
fn two_windows(site: &LoopSite, per_thread: Tally) -> bool {
    let (clock, w) = (Clock::new(), Window::new(2));
    for _ in 0..2 {
        clock.open(&w);
        w.helper_joined_at(clock.0.get());
        clock.advance(Duration::from_millis(1));
        let now = clock.0.get();
        w.vote_at(site, per_thread, true, now);
        w.vote_at(site, per_thread, false, now);
        w.helper_left();
    }
    site.in_order()
}

#[test]
fn the_in_order_estimate_takes_the_dear_iterations_from_the_epochs_work() {
    use crate::adapt::window::ACCESS_BOUND_NS;
    // Iterations alike: the measured cost per iteration (the epochs' work, with
    // tracking, less the bound for each access, is below it).
    assert_eq!(in_order_estimate_ns(100, 3000.0, 330_000.0, 300), 300_000.0);
    // Three iterations in a hundred 100 times dearer, one tracked write each:
    // measured on cheap ones, the cost per iteration says 300 us; the epochs' work
    // (3 x 300 us more) less the bound per access says about what the in-order
    // loop would take.
    let est = in_order_estimate_ns(100, 3000.0, 1_230_000.0, 100);
    assert_eq!(est, 1_230_000.0 - 100.0 * ACCESS_BOUND_NS);
    // Tracking far dearer than the work: 64 tracked reads an iteration of 75 ns in
    // order, 5 us in epochs (their lines passing between the CPUs), and a loop of
    // iterations of 0.2 to 20 us reading a shared table every 20 ns: the
    // measured cost decides.
    assert_eq!(in_order_estimate_ns(16, 75.0, 80_000.0, 16 * 64), 1200.0);
    assert_eq!(
        in_order_estimate_ns(100, 5000.0, 1_250_000.0, 25_000),
        500_000.0
    );
    // Iterations of 8 ns writing one element each, 28 ns in epochs.
    assert_eq!(in_order_estimate_ns(1000, 8.0, 28_000.0, 1000), 8000.0);
}

#[test]
fn windows_holding_a_few_dear_iterations_are_judged_by_their_work() {
    // 3 us iterations measured; in each 1 ms window every thread committed 40
    // iterations (one tracked write each) in 0.95 ms of work, a few of them 100
    // times dearer than the rest. The in-order loop would have taken about 1.9 ms
    // for the window's work; by iterations times 3 us it would have taken 0.24 ms,
    // and the window looked four times slower than in order.
    let busy = Duration::from_micros(950);
    let site = measured_site(3000);
    assert!(!two_windows(&site, tally_of(WINDOW, 40, busy, busy, 40)));
    // The same windows with a tracked access every 100 ns of their work: what
    // tracking costs could be most of it, and they are judged by the measured
    // cost, which they do not beat.
    let site = measured_site(3000);
    assert!(two_windows(&site, tally_of(WINDOW, 40, busy, busy, 9_500)));
    assert_eq!(site.held_back(), HeldBack::DidNotPay);
}

#[test]
fn overhead_on_short_iterations_is_judged_by_the_in_order_cost_still() {
    // 100 ns iterations, one an epoch, each epoch 125 us of tracking (a thousand
    // tracked accesses whose lines move between the CPUs): both threads busy all
    // along on 16 iterations, 1.6 us of the plain loop's work.
    let busy = Duration::from_millis(1);
    let site = measured_site(100);
    assert!(two_windows(
        &site,
        tally_of(WINDOW, 8, busy, busy, 8 * 1000)
    ));
    assert_eq!(site.held_back(), HeldBack::DidNotPay);
}

/// A worker in the run, and a window both threads voted in, judged: the next one
/// starts without votes.
fn after_a_judged_window() -> (Clock, LoopSite, Window) {
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    clock.open(&w);
    w.helper_joined_at(clock.0.get());
    clock.advance(Duration::from_millis(1));
    clock.vote(&w, &site, WINDOW, 0, Duration::from_micros(950), true);
    clock.vote(&w, &site, WINDOW, 0, Duration::from_micros(950), false);
    assert_eq!(w.epochs.load(Relaxed), 0, "judged");
    (clock, site, w)
}

#[test]
fn a_worker_in_the_run_that_has_not_voted_is_waited_for() {
    let (clock, site, w) = after_a_judged_window();
    assert!(!site.in_order());
    // The worker is in a long epoch; the caller fills the window alone, and waits
    // past WAIT_FOR_HELPERS: no verdict, the worker's vote will come.
    clock.advance(WAIT_FOR_HELPERS * 3);
    clock.vote(&w, &site, 2 * WINDOW, 0, Duration::from_millis(3), false);
    assert_eq!(
        w.epochs.load(Relaxed),
        2 * WINDOW,
        "judged without the worker in it"
    );
    assert!(!site.in_order());
    // It comes: the window is judged on both threads' work.
    clock.vote(&w, &site, WINDOW, 0, Duration::from_millis(3), true);
    assert_eq!(w.epochs.load(Relaxed), 0, "judged");
    assert!(!site.in_order());
    // A worker in the run that does not vote for WAIT_FOR_VOTE (the OS took it off
    // its CPU) is not waited for longer.
    clock.advance(WAIT_FOR_VOTE);
    clock.vote(&w, &site, 2 * WINDOW, 0, Duration::from_millis(10), false);
    assert!(site.in_order());
    assert_eq!(site.held_back(), HeldBack::NoWorkers);
    let (clock, site, w) = after_a_judged_window();
    // A worker that left the run is not waited for: the caller alone gained
    // nothing, and the site runs in order for want of workers.
    w.helper_left();
    clock.advance(WAIT_FOR_HELPERS * 2);
    clock.vote(&w, &site, 2 * WINDOW, 0, Duration::from_millis(2), false);
    assert!(site.in_order());
    assert_eq!(site.held_back(), HeldBack::NoWorkers);
}

#[test]
fn a_window_is_credited_with_its_epochs_work_where_busy_time_misses_it() {
    // No in-order cost known. Each thread committed epochs holding 0.95 ms of work
    // in the 1 ms window, but its busy time counts only from its first commit in
    // the window (after a long epoch, a burst of commits): 0.3 ms.
    let (busy, work) = (Duration::from_micros(300), Duration::from_micros(950));
    let site = LoopSite::new();
    assert!(!two_windows(&site, tally_of(WINDOW, 40, busy, work, 40)));
    // Judged by busy time alone, the windows did not pay.
    let site = LoopSite::new();
    assert!(two_windows(&site, tally_of(WINDOW, 40, busy, busy, 40)));
}

#[test]
fn a_stretch_carried_from_a_run_that_also_paid_is_cut_short_at_the_next_run() {
    // A run whose first windows paid and whose later ones failed (the loop turned
    // into a chain on the way): the failed probes doubled its stretch.
    let site = LoopSite::new();
    site.run_starts();
    site.judge(Verdict::Paid);
    for _ in 0..8 {
        site.judge(Verdict::Lost);
        site.ran_in_order(site.in_order_budget() - 1);
        assert!(site.in_order());
        site.ran_in_order(1);
    }
    site.judge(Verdict::Lost);
    let carried = site.in_order_budget();
    assert!(carried > 4 * MIN_BACKOFF, "{carried}");
    // The next run starts: it probes after MIN_BACKOFF epochs, not `carried`.
    site.run_starts();
    assert!(site.in_order());
    assert_eq!(site.in_order_budget(), MIN_BACKOFF);
    assert_eq!(site.held_back(), HeldBack::DidNotPay);
    // A run that never paid: its stretch runs on into the next.
    let site = LoopSite::new();
    site.run_starts();
    for _ in 0..8 {
        site.judge(Verdict::Lost);
        site.ran_in_order(site.in_order_budget());
    }
    site.judge(Verdict::Lost);
    let carried = site.in_order_budget();
    site.run_starts();
    assert_eq!(site.in_order_budget(), carried);
    // Nor is a stretch held back for want of workers (it ends when one comes).
    let site = LoopSite::new();
    site.judge(Verdict::Paid);
    for _ in 0..8 {
        site.judge(Verdict::Lost);
        site.ran_in_order(site.in_order_budget());
    }
    site.judge(Verdict::Alone);
    let carried = site.in_order_budget();
    assert!(carried > MIN_BACKOFF, "{carried}");
    site.run_starts();
    assert_eq!(site.held_back(), HeldBack::NoWorkers);
    assert_eq!(site.in_order_budget(), carried);
}

#[test]
fn a_window_goes_on_across_runs_too_short_to_fill_it() {
    // Runs of 10 epochs (5 a thread) on two threads, a window being 16: each run's
    // unfilled window is carried to the next run, without the time between runs.
    let runs = |site: &LoopSite, busy_per_run: Duration| {
        let clock = Clock::new();
        // Nine runs: four windows judged, and half of one left over.
        for _ in 0..9 {
            let w = Window::new(2);
            w.resume_from_at(site, clock.0.get());
            w.helper_joined_at(clock.0.get());
            clock.advance(Duration::from_micros(100));
            let now = clock.0.get();
            let half = tally(5, 5, 0, busy_per_run / 2);
            w.vote_at(site, half, true, now);
            w.vote_at(site, half, false, now);
            w.helper_left();
            w.carry_to_at(site, now);
            // A second between runs: counted, it would make every window slow.
            clock.advance(Duration::from_secs(1));
        }
    };
    // Both threads busy in every run: the windows pay, however long the gaps.
    let site = LoopSite::new();
    runs(&site, Duration::from_micros(190));
    assert!(!site.in_order());
    assert!(site.take_partial().is_some_and(|p| p.epochs == 10));
    // One thread's worth of work in every run (a chain): judged across the runs, the
    // site runs in order.
    let site = LoopSite::new();
    runs(&site, Duration::from_micros(100));
    assert!(site.in_order());
    assert_eq!(site.held_back(), HeldBack::DidNotPay);
    // A run that ends with its window judged leaves nothing to carry.
    let (site, w) = (LoopSite::new(), Window::new(2));
    w.carry_to_at(&site, Instant::now());
    assert!(site.take_partial().is_none());
}

#[test]
fn short_in_order_stretches_are_pooled_not_picked_by_their_length() {
    // Runs of 10 iterations of 1 us, each its own in-order stretch; one in three
    // slowed by the OS to 40 us. Counted alone only once they reached MEASURE_FOR,
    // the slowed ones alone would set the cost: 4 us an iteration.
    let site = LoopSite::new();
    for run in 0..30 {
        let spent = if run % 3 == 1 { 40 } else { 10 };
        site.note_in_order(Duration::from_micros(spent), 10);
    }
    let per_item = site.in_order_per_item().expect("measured");
    assert!((1000.0..=2600.0).contains(&per_item), "{per_item}");
    // A stretch of long iterations still needs no pool to count.
    let site = LoopSite::new();
    site.note_measured(Duration::from_micros(300), 3);
    assert_eq!(site.in_order_per_item(), Some(100_000.0));
}
