//! The adaptive policy's tests: windows replayed on a clock of their own.

use super::site::{HeldBack, MAX_NAMED_SITES, MIN_BACKOFF, Verdict, site_for};
use super::window::{MIN_WINDOW, Tally, WAIT_FOR_HELPERS};
use super::{LoopSite, WINDOW, Window};
use core::panic::Location;
use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// A vote's tally.
fn tally(epochs: u32, items: u64, rolled_back: u32, useful: Duration) -> Tally {
    Tally {
        epochs,
        items,
        rolled_back,
        useful,
        // Not known: judged by busy time and the measured cost alone.
        work: Duration::ZERO,
        accesses: 0,
    }
}

/// Plenty of useful work: these votes are judged by rollbacks alone.
const D: Duration = Duration::from_secs(3600);

/// A clock of the test's own, so that no verdict depends on how the machine
/// schedules the test.
struct Clock(Cell<Instant>);

impl Clock {
    fn new() -> Self {
        Clock(Cell::new(Instant::now()))
    }

    fn advance(&self, d: Duration) {
        self.0.set(self.0.get() + d);
    }

    /// Lets a window reach the length it is judged on.
    fn age(&self) {
        self.advance(MIN_WINDOW + Duration::from_micros(50));
    }

    fn open(&self, w: &Window) {
        w.open_at(self.0.get());
    }

    fn vote(
        &self,
        w: &Window,
        site: &LoopSite,
        epochs: u32,
        rolled_back: u32,
        useful: Duration,
        helper: bool,
    ) {
        w.vote_at(
            site,
            tally(epochs, 0, rolled_back, useful),
            helper,
            self.0.get(),
        );
    }
}

#[test]
fn speculation_without_gain_switches_to_in_order() {
    let clock = Clock::new();
    // One window of 20 ms in which the two threads committed `gained` ms of work.
    let window = |site: &LoopSite, w: &Window, gained: u64| {
        clock.open(w);
        clock.advance(Duration::from_millis(20));
        clock.vote(w, site, WINDOW, 0, Duration::from_millis(gained / 2), true);
        clock.vote(
            w,
            site,
            WINDOW,
            0,
            Duration::from_millis(gained - gained / 2),
            false,
        );
    };
    let (site, w) = (LoopSite::new(), Window::new(2));
    // 10 ms of committed work in a 20 ms window: half the in-order speed. A new
    // site gets a second window, and so does a probe after an in-order stretch
    // (its first window starts from in-order execution); a second slow window of
    // the probe doubles the next stretch.
    window(&site, &w, 10);
    assert!(!site.in_order(), "a new site gets a second window");
    window(&site, &w, 10);
    assert!(site.in_order());
    assert_eq!(site.in_order_budget(), MIN_BACKOFF);
    site.ran_in_order(MIN_BACKOFF);
    assert!(!site.in_order());
    window(&site, &w, 10);
    assert!(!site.in_order(), "a probe gets a second window");
    window(&site, &w, 10);
    assert!(site.in_order(), "two slow windows of a probe");
    assert_eq!(site.in_order_budget(), 2 * MIN_BACKOFF);
    // A probe whose first window was slow and whose second paid speculates on.
    site.ran_in_order(2 * MIN_BACKOFF);
    window(&site, &w, 10);
    window(&site, &w, 36);
    assert!(!site.in_order(), "the probe's second window paid");
    window(&site, &w, 10);
    assert!(!site.in_order(), "one slow window after one that paid");
    // After a window that paid, one slow window may be the machine; two in a
    // row are the loop.
    let (site, w) = (LoopSite::new(), Window::new(2));
    for gained in [36, 10] {
        window(&site, &w, gained);
        assert!(!site.in_order());
    }
    window(&site, &w, 10);
    assert!(site.in_order(), "two slow windows in a row");
    // A slow window followed by a good one forgets the first.
    let (site, w) = (LoopSite::new(), Window::new(2));
    for gained in [36, 6, 36, 6] {
        window(&site, &w, gained);
    }
    assert!(!site.in_order());
    let (site, w) = (LoopSite::new(), Window::new(2));
    window(&site, &w, 36);
    assert!(!site.in_order());
}

#[test]
fn a_window_without_workers_waits_for_them_then_runs_in_order() {
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    clock.open(&w);
    clock.age();
    clock.vote(&w, &site, 2 * WINDOW, 0, Duration::from_micros(100), false);
    assert!(!site.in_order(), "too early to judge without the workers");
    clock.advance(WAIT_FOR_HELPERS);
    clock.vote(&w, &site, 2 * WINDOW, 0, Duration::from_millis(1), false);
    assert!(site.in_order(), "the caller alone gained nothing");
    // ... which does not lengthen the next in-order stretch, and is reported as the
    // workers' absence, not the loop's fault.
    assert_eq!(site.in_order_budget(), MIN_BACKOFF);
    assert_eq!(site.backoff.load(Relaxed), MIN_BACKOFF);
    assert_eq!(site.held_back(), HeldBack::NoWorkers);
    // A window that loses, once the workers are back, is the loop's own verdict.
    site.ran_in_order(MIN_BACKOFF);
    site.judge(Verdict::Lost);
    assert_eq!(site.held_back(), HeldBack::DidNotPay);
}

#[test]
fn the_first_worker_to_join_restarts_the_window() {
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(2));
    clock.open(&w);
    clock.advance(Duration::from_micros(700));
    // The caller ran alone while the worker woke; the worker's arrival starts the
    // window over, and the caller's lone epochs are not counted.
    clock.vote(&w, &site, WINDOW, 0, Duration::from_micros(700), false);
    let generation = w.generation();
    w.helper_joined_at(clock.0.get());
    assert_ne!(w.generation(), generation);
    assert_eq!(w.epochs.load(Relaxed), 0);
    assert_eq!(w.useful_ns.load(Relaxed), 0);
    // A second worker's arrival does not start the window over again.
    let generation = w.generation();
    w.helper_joined_at(clock.0.get());
    assert_eq!(w.generation(), generation);
    // A full window past WAIT_FOR_HELPERS, before the worker's first vote (it
    // hands its tally over every WINDOW epochs, and may have been descheduled): a
    // worker is in the loop, so this is no window "without workers".
    clock.advance(WAIT_FOR_HELPERS + Duration::from_micros(100));
    clock.vote(&w, &site, 2 * WINDOW, 0, Duration::from_micros(1100), false);
    assert_eq!(w.epochs.load(Relaxed), 0, "judged");
    assert!(!site.in_order(), "judged alone with a worker in the loop");
    assert_ne!(site.held_back(), HeldBack::NoWorkers);
    // From then on, the window is judged on what both threads do in it.
    let (site, w) = (LoopSite::new(), Window::new(2));
    clock.open(&w);
    w.helper_joined_at(clock.0.get());
    clock.advance(Duration::from_millis(2));
    clock.vote(&w, &site, WINDOW, 0, Duration::from_micros(1900), true);
    clock.vote(&w, &site, WINDOW, 0, Duration::from_micros(1900), false);
    assert!(!site.in_order());
    assert_eq!(w.epochs.load(Relaxed), 0, "judged and reopened");
}

#[test]
fn short_windows_are_not_judged() {
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(1));
    clock.open(&w);
    clock.vote(&w, &site, 4 * WINDOW, 4 * WINDOW, D, true);
    assert!(!site.in_order(), "judged before MIN_WINDOW");
    clock.age();
    clock.vote(&w, &site, WINDOW, WINDOW, D, true);
    assert!(site.in_order());
}

#[test]
fn mostly_rolled_back_windows_switch_to_in_order_and_back() {
    let (clock, site, w) = (Clock::new(), LoopSite::new(), Window::new(1));
    clock.open(&w);
    clock.age();
    clock.vote(&w, &site, 8, 2, D, true);
    assert!(!site.in_order(), "a quarter rolled back still pays");
    clock.vote(&w, &site, 4, 3, D, true);
    assert!(!site.in_order(), "the window is not full yet");
    clock.age();
    clock.vote(&w, &site, 4, 3, D, true);
    assert!(site.in_order());
    assert_eq!(site.in_order_budget(), MIN_BACKOFF);
    assert!(!site.ran_in_order(MIN_BACKOFF - 1));
    assert!(site.in_order());
    assert!(site.ran_in_order(1), "probe speculation after the backoff");
    assert!(!site.in_order());
    // A failed probe doubles the next in-order stretch.
    clock.age();
    clock.vote(&w, &site, WINDOW, WINDOW, D, true);
    assert!(site.in_order());
    assert_eq!(site.in_order_budget(), 2 * MIN_BACKOFF);
    site.ran_in_order(2 * MIN_BACKOFF - 1);
    assert!(site.in_order());
    site.ran_in_order(1);
    assert!(!site.in_order());
    // A good window resets the backoff.
    clock.age();
    clock.vote(&w, &site, WINDOW, 0, D, true);
    assert_eq!(site.backoff.load(Relaxed), MIN_BACKOFF);
}

#[test]
fn loop_names_made_per_run_keep_the_site_table_bounded() {
    let here = Location::caller();
    let extra: Vec<*const LoopSite> = (0..MAX_NAMED_SITES + 20)
        .map(|run| site_for(here, &format!("batch {run}")) as *const LoopSite)
        .skip(MAX_NAMED_SITES)
        .collect();
    assert!(
        extra.iter().all(|&s| s == extra[0]),
        "names past the bound share one site"
    );
    // A name seen before keeps its own site.
    assert_eq!(
        site_for(here, "batch 0") as *const LoopSite,
        site_for(here, "batch 0") as *const LoopSite
    );
}

#[test]
fn a_worker_that_arrives_ends_a_stretch_held_back_for_want_of_one() {
    let site = LoopSite::new();
    // Held back because no worker had joined: a worker that comes ends the stretch.
    site.judge(Verdict::Alone);
    assert!(site.in_order() && !site.stretch_cut_short());
    site.worker_arrived();
    assert!(site.stretch_cut_short());
    assert!(
        site.ran_in_order(1),
        "speculation resumes before the budget is spent"
    );
    assert!(!site.in_order() && !site.stretch_cut_short());
    // Held back because speculation did not pay: the loop's own verdict stands.
    site.judge(Verdict::Lost);
    site.worker_arrived();
    assert!(!site.stretch_cut_short());
    assert!(!site.ran_in_order(1));
    assert!(site.in_order());
    // An arrival from an earlier stretch does not cut the next one short.
    site.ran_in_order(u64::MAX);
    site.judge(Verdict::Alone);
    site.worker_arrived();
    site.ran_in_order(1);
    site.judge(Verdict::Alone);
    assert!(!site.stretch_cut_short());
}

/// Waits up to a long bound (for a worker on a loaded machine) for `cond`.
fn wait_for(cond: impl Fn() -> bool) -> bool {
    let t = Instant::now();
    while !cond() {
        if t.elapsed() > Duration::from_secs(30) {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

#[test]
fn a_new_sites_first_run_speculates_from_its_first_epoch() {
    use crate::{Control, Loop};
    use std::sync::atomic::AtomicBool;
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    assert!(!site.in_order(), "a new site is not held back");
    let second_started = AtomicBool::new(false);
    let second_speculative = AtomicBool::new(false);
    // Epoch 0 runs until epoch 1 has started beside it: that happens only if the
    // site lets a worker speculate while the first epoch of its first run runs.
    Loop::new()
        .threads(2)
        .chunk(1)
        .site(site)
        .run(0..2u32, |i| {
            if i == 0 {
                assert!(
                    wait_for(|| second_started.load(Relaxed)),
                    "epoch 1 never started while epoch 0 ran"
                );
            } else {
                second_speculative.store(crate::is_speculative(), Relaxed);
                second_started.store(true, Relaxed);
            }
            Control::<()>::Continue
        });
    assert!(second_speculative.load(Relaxed));
    let r = crate::last_report().expect("a report");
    assert_eq!(r.in_order_epochs, 0, "{r}");
}

#[test]
fn a_stretch_held_back_for_want_of_a_worker_ends_when_one_comes() {
    use crate::{Control, Loop};
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    // The state a first run leaves when its worker is late: in order, for want of
    // a worker, for MIN_BACKOFF epochs.
    site.judge(Verdict::Alone);
    assert_eq!(site.in_order_budget(), MIN_BACKOFF);
    // If the first iteration runs in order, it waits for the worker to come for the
    // loop, and the stretch ends there; if the worker came first, the stretch ended
    // before any iteration (it runs as an epoch). Either way the second iteration
    // speculates: it would run in order if the stretch ran its budget.
    let second_in_epoch = std::sync::atomic::AtomicBool::new(false);
    Loop::new()
        .threads(2)
        .chunk(1)
        .site(site)
        .run(0..MIN_BACKOFF, |i| {
            let in_epoch = crate::epoch::current().is_some();
            if i == 0 && !in_epoch {
                assert!(
                    wait_for(|| site.stretch_cut_short()),
                    "no worker came for the loop"
                );
            }
            if i == 1 {
                second_in_epoch.store(in_epoch, Relaxed);
            }
            Control::<()>::Continue
        });
    assert!(second_in_epoch.load(Relaxed), "the stretch ran on");
    let r = crate::last_report().expect("a report");
    assert!(r.in_order_epochs < MIN_BACKOFF, "{r}");
    assert_eq!(r.in_order_no_workers, r.in_order_epochs, "{r}");
}

/// The chunk a site settles on for iterations of `per_item`, tuned over `windows`
/// windows of [`WINDOW`] epochs each with `rollbacks` rollbacks per window.
fn settled_chunk(per_item: Duration, rollbacks: u64, windows: usize) -> usize {
    let site = LoopSite::new();
    for _ in 0..windows {
        let chunk = site.chunk() as u64;
        let items = chunk * u64::from(WINDOW);
        for _ in 0..rollbacks {
            site.note_rollback();
        }
        site.tune_chunk(WINDOW, items, 0, per_item * items as u32);
    }
    site.chunk()
}

#[test]
fn a_loop_without_rollbacks_gets_the_longer_epochs_at_once() {
    use crate::rules::{QUIET_TARGET_EPOCH, TARGET_EPOCH};
    let per_item = Duration::from_micros(1);
    let quiet = QUIET_TARGET_EPOCH.as_micros() as usize;
    // One window from a new site's chunk of 1 reaches the quiet target.
    assert_eq!(settled_chunk(per_item, 0, 1), quiet);
    assert_eq!(settled_chunk(per_item, 0, 10), quiet);
    // Rollbacks keep the shorter target, reached by doubling (1, 2, 4, 8, 10).
    let short = TARGET_EPOCH.as_micros() as usize;
    assert_eq!(settled_chunk(per_item, 1, 3), 8);
    assert_eq!(settled_chunk(per_item, 1, 10), short);
}

#[test]
fn a_first_rollback_ends_the_longer_epochs_for_good() {
    use crate::rules::TARGET_EPOCH;
    let site = LoopSite::new();
    let per_item = Duration::from_micros(1);
    let window = |site: &LoopSite, rollbacks: u64| {
        let items = site.chunk() as u64 * u64::from(WINDOW);
        for _ in 0..rollbacks {
            site.note_rollback();
        }
        site.tune_chunk(WINDOW, items, 0, per_item * items as u32);
    };
    window(&site, 0);
    let short = TARGET_EPOCH.as_micros() as usize;
    assert!(site.chunk() > short);
    // Straight back to the short target, not halving a window at a time.
    window(&site, 3);
    assert_eq!(site.chunk(), short);
    // Quiet windows after that do not lengthen the epochs again.
    for _ in 0..5 {
        window(&site, 0);
        assert_eq!(site.chunk(), short);
    }
}

#[test]
fn a_run_of_known_length_leaves_every_thread_enough_epochs() {
    use crate::rules::{MIN_RUN_EPOCHS_PER_THREAD, run_chunk};
    assert_eq!(
        run_chunk(70, 8, 0, 2),
        70,
        "unknown length: the site's chunk"
    );
    let even = 20_000 / (2 * MIN_RUN_EPOCHS_PER_THREAD);
    assert_eq!(run_chunk(70, 8, 20_000, 2), 70.min(even));
    assert_eq!(
        run_chunk(70, 8, 2_000, 2),
        2_000 / (2 * MIN_RUN_EPOCHS_PER_THREAD)
    );
    // Never below the short target's chunk, nor above the site's.
    assert_eq!(run_chunk(70, 8, 100, 2), 8);
    assert_eq!(run_chunk(4, 8, 100, 2), 4);
    assert_eq!(
        run_chunk(70, 8, 20_000, 0),
        70.min(20_000 / MIN_RUN_EPOCHS_PER_THREAD)
    );
}

#[test]
fn a_site_cuts_a_short_run_but_not_below_its_short_chunk() {
    use crate::rules::TARGET_EPOCH;
    let site = LoopSite::new();
    let per_item = Duration::from_micros(1);
    site.tune_chunk(WINDOW, u64::from(WINDOW), 0, per_item * WINDOW);
    let short = TARGET_EPOCH.as_micros() as usize;
    assert!(site.chunk() > short);
    assert_eq!(site.chunk_for_run(0, 2), site.chunk());
    assert_eq!(site.chunk_for_run(40, 2), short);
}

#[test]
fn a_run_of_unknown_length_is_cut_as_long_as_the_last_run() {
    let site = LoopSite::new();
    let per_item = Duration::from_micros(1);
    site.tune_chunk(WINDOW, u64::from(WINDOW), 0, per_item * WINDOW);
    let long = site.chunk();
    assert_eq!(site.run_length(0), 0, "no run seen yet");
    assert_eq!(site.chunk_for_run(site.run_length(0), 2), long);
    site.ran_items(200);
    assert_eq!(site.run_length(0), 200);
    assert_eq!(site.run_length(50), 50, "the iterator's own bound first");
    assert!(site.chunk_for_run(site.run_length(0), 2) < long);
}

/// A thread that commits a burst of epochs its sibling ran (they finished while it
/// ran a long one) sizes the chunk from those epochs' own run times, not from the
/// moment it took to commit them.
#[test]
fn a_burst_of_commits_sizes_the_chunk_by_the_epochs_own_time() {
    use crate::rules::QUIET_TARGET_EPOCH;
    let (site, w) = (LoopSite::new(), Window::new(2));
    let ts = crate::report::ThreadStats::default();
    let mut votes = super::Votes::new(true, false);
    let per_item = Duration::from_micros(10);
    // One iteration an epoch, WINDOW of them committed at once: a full tally.
    for _ in 0..WINDOW {
        let epoch = super::votes::Committed {
            rolled_back: false,
            items: 1,
            useful: per_item,
            accesses: 1,
        };
        votes.epoch(epoch, &site, &w, &ts);
    }
    let want = (QUIET_TARGET_EPOCH.as_micros() / per_item.as_micros()) as usize;
    assert!(
        (want / 2..=want * 2).contains(&site.chunk()),
        "chunk {} for {per_item:?} iterations, want about {want}",
        site.chunk()
    );
}

/// An in-order stretch ends after `MAX_STRETCH` whatever its backoff: a verdict taken
/// while the machine was disturbed does not keep a loop in order for seconds.
#[test]
fn an_in_order_stretch_lasts_at_most_max_stretch() {
    use super::site::MAX_STRETCH;
    let site = LoopSite::new();
    let t0 = 1_000u64;
    // Enough failed probes for a long backoff.
    for _ in 0..12 {
        site.judge_at(Verdict::Lost, t0);
        while !site.ran_in_order_at(u64::MAX / 4, t0) {}
    }
    site.judge_at(Verdict::Lost, t0);
    assert!(site.in_order() && site.in_order_budget() >= 32_768);
    let max = MAX_STRETCH.as_nanos() as u64;
    assert!(
        !site.ran_in_order_at(1, t0 + max - 1),
        "still within the stretch"
    );
    assert!(site.in_order());
    assert!(site.ran_in_order_at(1, t0 + max), "over after MAX_STRETCH");
    assert!(!site.in_order());
}

/// While the site synchronizes a load, an epoch is one iteration: with several, an
/// epoch that reaches the load in its first iteration would wait for the whole epoch
/// before it.
#[test]
fn a_site_that_synchronizes_a_load_runs_one_iteration_an_epoch() {
    #[track_caller]
    fn here() -> &'static core::panic::Location<'static> {
        core::panic::Location::caller()
    }
    let site = LoopSite::new();
    site.note_rollback();
    let per_item = Duration::from_micros(1);
    site.tune_chunk(WINDOW, u64::from(WINDOW), 0, per_item * WINDOW);
    site.tune_chunk(WINDOW, u64::from(WINDOW) * 4, 0, per_item * WINDOW * 4);
    assert!(
        site.chunk() > 1,
        "short iterations are grouped: {}",
        site.chunk()
    );
    let load = here();
    for i in 0..super::SYNC_AFTER {
        site.synced.note_violation(load, 1, i, 1);
    }
    assert!(site.synced.contains(load));
    site.tune_chunk(WINDOW, u64::from(WINDOW) * 4, 0, per_item * WINDOW * 4);
    assert_eq!(site.chunk(), 1);
}

#[test]
fn a_site_waiting_for_its_own_calls_gets_one_iteration_an_epoch_only_where_that_pays() {
    // Iterations of 2 us: an epoch each pays.
    let site = LoopSite::new();
    site.tune_chunk(
        WINDOW,
        u64::from(WINDOW),
        0,
        Duration::from_micros(2) * WINDOW,
    );
    assert!(site.chunk_for_run(0, 2) > 1);
    site.synced.note_delayed_call_read();
    assert_eq!(site.chunk_for_run(0, 2), 1);
    // Iterations of 50 ns: one epoch each would cost many times the loop; the chunk
    // stays, and the waits make its later iterations plain code.
    let site = LoopSite::new();
    site.tune_chunk(
        WINDOW,
        200 * u64::from(WINDOW),
        0,
        Duration::from_micros(10) * WINDOW,
    );
    site.synced.note_delayed_call_read();
    assert!(
        site.chunk_for_run(0, 2) > 20,
        "{}",
        site.chunk_for_run(0, 2)
    );
}

mod in_order_cost;
mod in_order_stretch;
mod uneven;
