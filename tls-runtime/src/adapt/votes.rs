//! A participant's tally of the epochs it committed, for the adaptive policy: how many,
//! how many rolled back, and the useful work they took, handed to the loop run's
//! [`Window`] (and to the site's automatic chunking) a window at a time.

use super::window::{HOPELESS, Tally, in_order_ns};
use super::{LoopSite, WINDOW, Window};
use crate::report::ThreadStats;
use std::time::{Duration, Instant};

/// A committed epoch, as a participant's tally counts it.
pub(crate) struct Committed {
    /// It lost a good part of its work to a rollback.
    pub(crate) rolled_back: bool,
    /// Its iterations.
    pub(crate) items: usize,
    /// Its attempts' run time less what rollbacks threw away, whichever thread ran
    /// them.
    pub(crate) useful: Duration,
    /// The tracked accesses it made, its attempts together.
    pub(crate) accesses: u32,
}

/// A participant's tally of the epochs it committed, for the adaptive policy, handed
/// to the site a window at a time so that commits do not all write one shared line.
pub(crate) struct Votes {
    epochs: u32,
    rolled_back: u32,
    items: u64,
    /// The work the epochs took, each by its own clock (see [`Votes::epoch`]).
    epoch_time: Duration,
    /// The tracked accesses the epochs made (see [`Tally::accesses`]).
    accesses: u64,
    /// When the window started, and the thread's blocked (waiting, idle, or waiting
    /// at synchronized loads) and wasted time then.
    since: Instant,
    blocked_before: Duration,
    wasted_before: Duration,
    tune_chunk: bool,
    /// A worker, not the loop's caller.
    helper: bool,
    /// The window generation this tally belongs to.
    generation: u32,
}

impl Votes {
    pub(crate) fn new(tune_chunk: bool, helper: bool) -> Self {
        Votes {
            epochs: 0,
            rolled_back: 0,
            items: 0,
            epoch_time: Duration::ZERO,
            accesses: 0,
            since: Instant::now(),
            blocked_before: Duration::ZERO,
            wasted_before: Duration::ZERO,
            tune_chunk,
            helper,
            generation: 0,
        }
    }

    /// Counts a committed epoch ([`Committed`]).
    ///
    /// Automatic chunking sizes epochs from the epochs' own times: this thread's
    /// clock would credit it with the epochs another thread ran and finished while
    /// it was busy with a long one, then committed here in a burst (a tally full of
    /// items in no time: chunks sized for iterations a hundredth of their length,
    /// a loop of 2,000 independent iterations of 2 to 18 us cut into 8 epochs).
    pub(crate) fn epoch(
        &mut self,
        epoch: Committed,
        site: &LoopSite,
        window: &Window,
        ts: &ThreadStats,
    ) {
        let Committed {
            rolled_back,
            items,
            useful,
            accesses,
        } = epoch;
        let generation = window.generation();
        if generation != self.generation {
            // A new window opened since this tally started: start over, counting
            // from this epoch on (its start may predate the window by one epoch).
            self.generation = generation;
            self.epochs = 0;
            self.rolled_back = 0;
            self.items = 0;
            self.epoch_time = Duration::ZERO;
            self.accesses = 0;
            self.since = Instant::now();
            self.blocked_before = ts.wait + ts.idle + ts.synced_wait;
            self.wasted_before = ts.wasted;
        }
        self.epochs += 1;
        self.rolled_back += u32::from(rolled_back);
        self.items += items as u64;
        self.epoch_time += useful;
        self.accesses += u64::from(accesses);
        if self.epochs >= WINDOW || (self.epochs.is_power_of_two() && self.far_behind(site)) {
            self.flush(site, window, ts);
        }
    }

    /// Whether this thread's epochs since its last vote took [`HOPELESS`] times
    /// what the in-order loop takes for a whole vote's ([`WINDOW`] epochs), where
    /// the site knows that: its vote may let the window be judged before it is
    /// full (`Window::hopeless`), rather than [`WINDOW`] slow epochs later.
    /// Asked after 1, 2 and 4 epochs only (it reads the clock).
    fn far_behind(&self, site: &LoopSite) -> bool {
        in_order_ns(site, self.items, self.epochs, WINDOW)
            .is_some_and(|vote| self.since.elapsed().as_nanos() as f64 > HOPELESS * vote)
    }

    pub(crate) fn flush(&mut self, site: &LoopSite, window: &Window, ts: &ThreadStats) {
        if self.epochs > 0 {
            let time = self.since.elapsed();
            let blocked = (ts.wait + ts.idle + ts.synced_wait).saturating_sub(self.blocked_before);
            let wasted = ts.wasted.saturating_sub(self.wasted_before);
            let busy = time.saturating_sub(blocked);
            let useful = busy.saturating_sub(wasted);
            let tally = Tally {
                epochs: self.epochs,
                items: self.items,
                rolled_back: self.rolled_back,
                useful,
                work: self.epoch_time,
                accesses: self.accesses,
            };
            window.vote(site, tally, self.helper);
            if self.tune_chunk {
                site.tune_chunk(self.epochs, self.items, self.rolled_back, self.epoch_time);
            }
            self.blocked_before = ts.wait + ts.idle + ts.synced_wait;
            self.wasted_before = ts.wasted;
            self.epochs = 0;
            self.rolled_back = 0;
            self.items = 0;
            self.epoch_time = Duration::ZERO;
            self.accesses = 0;
            self.since = Instant::now();
        }
    }
}
