//! The in-order cost a window is judged against: the cap on what its iterations are
//! credited with, and the measuring stretches that take the cost (split from
//! `tests.rs`, whose clock and tallies they use).

use super::*;
use crate::adapt::site::{MAX_MEASURED_ITEMS, MEASURE_AFTER, MEASURES};
use crate::adapt::window::MEASURE_FOR;

#[test]
fn a_window_is_credited_with_at_most_twice_the_in_order_cost_of_its_iterations() {
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    // The site ran in order: 1,000 iterations in 100 us, 100 ns each.
    site.note_in_order(Duration::from_micros(100), 1000);
    assert_eq!(site.in_order_per_item(), Some(100.0));
    // A window of 1 ms in which both threads were busy all along (2 ms of epoch
    // time) but committed 16 one-iteration epochs: 1.6 us of the plain loop's work.
    // Counted by the epochs' own time it "paid" twice over; it did not.
    let window = |items: u64| {
        clock.open(&w);
        w.helper_joined_at(clock.0.get());
        clock.advance(Duration::from_millis(1));
        let now = clock.0.get();
        w.vote_at(
            &site,
            tally(WINDOW, items / 2, 0, Duration::from_millis(1)),
            true,
            now,
        );
        w.vote_at(
            &site,
            tally(WINDOW, items / 2, 0, Duration::from_millis(1)),
            false,
            now,
        );
    };
    window(16);
    window(16);
    assert!(site.in_order(), "overhead judged as work");
    // Iterations worth their time are judged as before: 10,000 iterations of
    // 100 ns in the 2 ms of work (the site's measuring stretches taken).
    let (site, w2) = (LoopSite::new(), Window::new(2));
    for _ in 0..MEASURES {
        site.note_measured(Duration::from_micros(100), 1000);
    }
    clock.open(&w2);
    w2.helper_joined_at(clock.0.get());
    clock.advance(Duration::from_millis(1));
    let now = clock.0.get();
    let full = tally(WINDOW, 5000, 0, Duration::from_millis(1));
    w2.vote_at(&site, full, true, now);
    w2.vote_at(&site, full, false, now);
    assert!(!site.in_order());
    // A stretch too short to measure leaves the measurement as it was.
    site.note_in_order(Duration::from_micros(10), 4);
    assert_eq!(site.in_order_per_item(), Some(100.0));
}

#[test]
fn a_site_of_short_iterations_measures_the_plain_loops_cost_once_and_is_judged_by_it() {
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    site.chunk.store(250, Relaxed);
    // A window of `MEASURE_AFTER` in which both threads were busy all along and
    // committed `items` iterations.
    let window = |site: &LoopSite, w: &Window, items: u64| {
        clock.open(w);
        w.helper_joined_at(clock.0.get());
        clock.advance(MEASURE_AFTER);
        let now = clock.0.get();
        let half = tally(WINDOW, items / 2, 0, MEASURE_AFTER);
        w.vote_at(site, half, true, now);
        w.vote_at(site, half, false, now);
    };
    // 100 ns of epoch time an iteration.
    let items = 2 * MEASURE_AFTER.as_nanos() as u64 / 100;
    window(&site, &w, items);
    // It paid by the threads' busy time, but nothing says what the plain loop
    // costs: a stretch of about 20 us of it measures that, once (it ends on the
    // clock, within a bound of iterations).
    assert!(site.in_order());
    assert_eq!(site.held_back(), HeldBack::Measuring);
    assert_eq!(site.in_order_budget(), MAX_MEASURED_ITEMS);
    site.note_measured(Duration::from_micros(4), 200); // 20 ns an iteration
    assert!(site.ran_in_order(200), "the measurement is one stretch");
    assert_eq!(
        site.backoff.load(Relaxed),
        MIN_BACKOFF,
        "nothing failed yet"
    );
    // Judged against it, the same windows do not pay (the two threads did in a
    // window what the plain loop does in 0.4 of it): one more chance, then in
    // order for the backoff's epochs of the site's chunk.
    window(&site, &w, items);
    assert!(!site.in_order(), "a second chance after a window that paid");
    window(&site, &w, items);
    assert!(site.in_order());
    assert_eq!(site.held_back(), HeldBack::DidNotPay);
    assert_eq!(site.in_order_budget(), MIN_BACKOFF * 250);
    // Iterations of a fifth of a millisecond ask for no measurement, and neither
    // does a site that has speculated less than `MEASURE_AFTER` (a first run of a
    // few milliseconds).
    let (site, w) = (LoopSite::new(), Window::new(2));
    window(&site, &w, 2 * MEASURE_AFTER.as_micros() as u64 / 200);
    assert!(!site.in_order());
    assert_eq!(site.in_order_per_item(), None);
    let (site, w) = (LoopSite::new(), Window::new(2));
    clock.open(&w);
    w.helper_joined_at(clock.0.get());
    clock.advance(MEASURE_AFTER / 2);
    let half = tally(WINDOW, items / 4, 0, MEASURE_AFTER / 2);
    w.vote_at(&site, half, true, clock.0.get());
    w.vote_at(&site, half, false, clock.0.get());
    assert!(!site.in_order(), "measured before it had speculated long");
    // A measuring stretch of long iterations counts once it lasted `MEASURE_FOR`,
    // however few iterations it ran.
    site.note_measured(MEASURE_FOR, 1);
    assert_eq!(
        site.in_order_per_item(),
        Some(MEASURE_FOR.as_nanos() as f64)
    );
    let site = LoopSite::new();
    site.note_measured(MEASURE_FOR / 2, 1);
    assert_eq!(site.in_order_per_item(), None);
    // Of the measuring stretches, the least cost stands (a disturbed one reads
    // long), and a site takes `MEASURES` of them.
    let site = LoopSite::new();
    site.speculated(MEASURE_AFTER.as_nanos() as f64);
    assert!(site.wants_measure());
    site.note_measured(Duration::from_micros(20), 1000);
    site.note_measured(Duration::from_micros(80), 1000);
    assert_eq!(site.in_order_per_item(), Some(20.0));
    site.note_measured(Duration::from_micros(10), 1000);
    assert!(site.in_order_per_item().is_some_and(|ns| ns < 20.0));
    assert!(!site.wants_measure());
}

#[test]
fn a_window_slower_than_the_in_order_loop_does_not_pay_whatever_its_threads_did() {
    let clock = Clock::new();
    // Windows of 1 ms in which both threads were busy all along (2 ms of epoch
    // time, which passes `MIN_GAIN` even capped at `OVERHEAD_BOUND` times the
    // in-order cost) and committed `items` iterations, on a site that measured
    // 10 ns an iteration in order.
    let window = |site: &LoopSite, w: &Window, items: u64| {
        clock.open(w);
        w.helper_joined_at(clock.0.get());
        clock.advance(Duration::from_millis(1));
        let now = clock.0.get();
        let half = tally(WINDOW, items / 2, 0, Duration::from_millis(1));
        w.vote_at(site, half, true, now);
        w.vote_at(site, half, false, now);
    };
    let measured = || {
        let site = LoopSite::new();
        for _ in 0..MEASURES {
            site.note_measured(Duration::from_micros(10), 1000);
        }
        site
    };
    // 14 ns an iteration: the plain loop would have taken 0.7 ms. One more chance,
    // then in order.
    let (site, w) = (measured(), Window::new(2));
    window(&site, &w, 71_400);
    assert!(!site.in_order(), "a second chance after a window that paid");
    window(&site, &w, 71_400);
    assert!(site.in_order());
    assert_eq!(site.held_back(), HeldBack::DidNotPay);
    // 8 ns an iteration: faster than the plain loop; speculation goes on.
    let (site, w) = (measured(), Window::new(2));
    for _ in 0..4 {
        window(&site, &w, 125_000);
        assert!(!site.in_order());
    }
}

#[test]
fn a_site_whose_iterations_change_cost_measures_them_again() {
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    // A window of `MEASURE_AFTER` in which both threads were busy all along and
    // committed `items` iterations.
    let window = |items: u64| {
        clock.open(&w);
        w.helper_joined_at(clock.0.get());
        clock.advance(MEASURE_AFTER);
        let now = clock.0.get();
        let half = tally(WINDOW, items / 2, 0, MEASURE_AFTER);
        w.vote_at(&site, half, true, now);
        w.vote_at(&site, half, false, now);
    };
    // 100 ns of epoch time an iteration, 40 ns in order, measured twice.
    for _ in 0..MEASURES {
        window(2 * MEASURE_AFTER.as_nanos() as u64 / 100);
        assert_eq!(site.held_back(), HeldBack::Measuring);
        site.note_measured(Duration::from_micros(20), 500);
        assert!(site.ran_in_order(500));
    }
    assert_eq!(site.in_order_per_item(), Some(40.0));
    assert!(!site.wants_measure());
    // The loop is called on other data: 5 us of epoch time an iteration. Judged
    // against 40 ns, the window would not pay (the plain loop would have run its
    // 4,000 iterations in 0.16 ms); the measurement is forgotten instead, the
    // window judged by the threads' time, and the new iterations measured.
    window(2 * MEASURE_AFTER.as_nanos() as u64 / 5000);
    assert!(site.in_order());
    assert_eq!(site.held_back(), HeldBack::Measuring);
    site.note_measured(Duration::from_micros(30), 10);
    assert_eq!(site.in_order_per_item(), Some(3000.0));
    // In-order stretches average their cost in, unless one is far off the
    // average: it replaces it (one far above, only once the next says so too).
    let site = LoopSite::new();
    site.note_in_order(Duration::from_micros(60), 1000);
    site.note_in_order(Duration::from_micros(80), 1000);
    assert_eq!(site.in_order_per_item(), Some(65.0));
    site.note_in_order(Duration::from_micros(230), 100);
    assert_eq!(
        site.in_order_per_item(),
        Some(65.0),
        "one stretch far above"
    );
    site.note_in_order(Duration::from_micros(250), 100);
    assert_eq!(site.in_order_per_item(), Some(2300.0));
    site.note_in_order(Duration::from_micros(1), 1000);
    assert_eq!(site.in_order_per_item(), Some(1.0), "far below: at once");
}

/// An in-order stretch descheduled for part of it reads far above what the loop's
/// iterations cost: alone, it does not become the site's in-order cost (windows
/// judged against a cost twenty times too high "paid" at a tenth of the plain
/// loop's speed); two in a row do, as iterations that really got dearer show.
#[test]
fn one_descheduled_stretch_does_not_become_the_in_order_cost() {
    let site = LoopSite::new();
    // 32 iterations of 20 us, then the same with a 4 ms tick lost in them.
    site.note_in_order(Duration::from_micros(640), 32);
    assert_eq!(site.in_order_per_item(), Some(20_000.0));
    site.note_in_order(Duration::from_micros(640 + 4000), 32);
    assert_eq!(site.in_order_per_item(), Some(20_000.0));
    // A stretch as expected in between: the far one is forgotten.
    site.note_in_order(Duration::from_micros(640), 32);
    site.note_in_order(Duration::from_micros(640 + 4000), 32);
    assert_eq!(site.in_order_per_item(), Some(20_000.0));
    // Two in a row: the cheaper of the two stands.
    site.note_in_order(Duration::from_micros(640 + 8000), 32);
    assert_eq!(site.in_order_per_item(), Some(145_000.0));
}

#[test]
fn a_loop_whose_iterations_change_on_the_way_is_not_judged_by_the_old_ones() {
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    // Windows of 1 ms, both threads busy all along, committing `items` iterations
    // (`rolled_back` epochs of them rolled back).
    let window = |items: u64, rolled_back: u32| {
        clock.open(&w);
        w.helper_joined_at(clock.0.get());
        clock.advance(Duration::from_millis(1));
        let now = clock.0.get();
        let half = tally(WINDOW, items / 2, rolled_back, Duration::from_millis(1));
        w.vote_at(&site, half, true, now);
        w.vote_at(&site, half, false, now);
    };
    // A phase of tiny iterations, each depending on the last: 200 ns an iteration
    // in epochs, most of them rolled back; in order, 10 ns each.
    window(10_000, WINDOW);
    assert!(site.in_order());
    site.note_in_order(Duration::from_micros(10), 1000);
    assert!(site.ran_in_order(site.in_order_budget()));
    assert_eq!(site.in_order_per_item(), Some(10.0));
    // Then independent iterations of 5 us in epochs: judged against 10 ns, the
    // windows would not pay (the plain loop would have run their 400 iterations in
    // 4 us); that cost is of other iterations, and is forgotten.
    window(400, 0);
    window(400, 0);
    assert!(!site.in_order(), "judged by the old iterations' cost");
    assert_eq!(site.in_order_per_item(), None);
}

#[test]
fn a_window_faster_than_the_in_order_loop_pays_whatever_its_busy_time() {
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    // In order: 10 us an iteration.
    for _ in 0..MEASURES {
        site.note_measured(Duration::from_micros(100), 10);
    }
    // Windows of 1 ms committing 120 iterations (1.2 ms of in-order work) whose
    // epochs' own time adds up to 1.05 ms: a busy-time gain of 1.05, under
    // `MIN_GAIN`, in windows 1.2 times faster than in order.
    let window = |items: u64, busy: Duration| {
        clock.open(&w);
        w.helper_joined_at(clock.0.get());
        clock.advance(Duration::from_millis(1));
        let now = clock.0.get();
        let half = tally(WINDOW, items / 2, 0, busy / 2);
        w.vote_at(&site, half, true, now);
        w.vote_at(&site, half, false, now);
    };
    for _ in 0..4 {
        window(120, Duration::from_micros(1050));
        assert!(!site.in_order(), "faster than in order pays");
    }
    // Slower than in order (90 iterations in the same time) does not, whatever
    // the busy time.
    window(90, Duration::from_micros(1900));
    window(90, Duration::from_micros(1900));
    assert!(site.in_order());
}

/// A window that has already taken `HOPELESS` times what the in-order loop takes for
/// a full window's iterations is judged at once, before it fills: a dependence chain
/// on a busy machine, whose epochs were handed from thread to thread a scheduler
/// tick (4 ms) apart, spent about 65 ms a probe filling two windows it could not
/// pay in. One that runs as speculation does, one whose threads are busy, or one
/// whose in-order cost the site does not know, waits to be full.
#[test]
fn a_window_that_cannot_pay_is_judged_before_it_fills() {
    let one = |useful_us: u64| tally(1, 1, 0, Duration::from_micros(useful_us));
    // The in-order cost is not known: no early verdict, however slow.
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    clock.open(&w);
    w.helper_joined_at(clock.0.get());
    clock.advance(Duration::from_millis(40));
    w.vote_at(&site, one(25), true, clock.0.get());
    assert!(!site.in_order());

    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    site.note_in_order(Duration::from_micros(640), 32); // 20 us an iteration
    clock.open(&w);
    w.helper_joined_at(clock.0.get());
    // One epoch 100 us in: what a window of 16 takes in order is 320 us.
    clock.advance(Duration::from_micros(100));
    w.vote_at(&site, one(25), true, clock.0.get());
    assert!(!site.in_order(), "judged on its first epoch");
    // The next a tick later: even if the other 14 had committed unvoted by then,
    // the window could not have paid.
    clock.advance(Duration::from_millis(4));
    w.vote_at(&site, one(25), false, clock.0.get());
    assert!(site.in_order(), "not judged before it filled");
    assert_eq!(site.held_back(), HeldBack::DidNotPay);

    // As slow, but with both threads at work all along: iterations that now cost
    // far more than those measured in order, maybe paying. Judged when full.
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    site.note_in_order(Duration::from_micros(640), 32);
    clock.open(&w);
    w.helper_joined_at(clock.0.get());
    clock.advance(Duration::from_millis(4));
    w.vote_at(&site, one(4000), true, clock.0.get());
    w.vote_at(&site, one(4000), false, clock.0.get());
    assert!(
        !site.in_order(),
        "busy threads judged before the window filled"
    );
}
