//! What one thread saw while in a loop ([`ThreadStats`]), merged into the loop's
//! totals as threads leave it, and the report those totals make (`into_report`):
//! where each violated load sat, and the advice for each dependence.

use super::{Dependence, LoopReport, RunMode, SourceLocation, SyncedLoad};
use crate::advice::{LoadPlace, advise};
use crate::epoch::Cause;
use core::panic::Location;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct DepAcc {
    count: u64,
    wasted: Duration,
    segment: u32,
    load_access_sum: u64,
    /// The loads' tracked accesses since their segment's start, summed.
    in_segment_sum: u64,
    /// Violations whose storing epoch had loaded the location at the same load
    /// (`Cause::rewrite`), and those of which that is known.
    rewrites: u64,
    rewrites_known: u64,
}

impl DepAcc {
    /// Adds `v` into `self` (a thread's one violation, or another thread's totals).
    fn add(&mut self, v: &DepAcc) {
        self.count += v.count;
        self.wasted += v.wasted;
        self.segment = self.segment.min(v.segment);
        self.load_access_sum += v.load_access_sum;
        self.in_segment_sum += v.in_segment_sum;
        self.rewrites += v.rewrites;
        self.rewrites_known += v.rewrites_known;
    }
}

/// Violations whose storing epoch's own read is known (it read the location while
/// speculative: a homefree epoch's reads, as at a synchronized load, leave no
/// record) that must be seen before a parallel run calls a two-call dependence a
/// read-modify-write (`x.set(x.get() + 1)`).
const REWRITES_SEEN: u64 = 2;

/// What one thread saw while in a loop; merged into the loop's totals when it leaves.
#[derive(Debug, Default)]
pub(crate) struct ThreadStats {
    pub(crate) epochs: u64,
    pub(crate) items: u64,
    pub(crate) violations: u64,
    pub(crate) rollbacks: u64,
    pub(crate) squashed: u64,
    pub(crate) in_order_epochs: u64,
    pub(crate) in_order_no_workers: u64,
    pub(crate) in_order_measuring: u64,
    pub(crate) stuck_zombies: u64,
    /// Tracked accesses of the committed epochs (for where in its epoch a load is).
    pub(crate) accesses: u64,
    pub(crate) busy: Duration,
    pub(crate) wasted: Duration,
    pub(crate) unwinding: Duration,
    pub(crate) unwinds: u64,
    pub(crate) wait: Duration,
    pub(crate) idle: Duration,
    pub(crate) present: Duration,
    pub(crate) deps: HashMap<(SourceLocation, SourceLocation), DepAcc>,
    /// Waits at synchronized loads: count and time, per load.
    pub(crate) synced: HashMap<SourceLocation, SyncedLoad>,
    /// Waits at loads after an `on_commit` call of the same epoch, per load.
    pub(crate) call_waits: HashMap<SourceLocation, SyncedLoad>,
    /// Their time, all loads together: not work, for the adaptive policy's windows.
    pub(crate) synced_wait: Duration,
    /// Threads merged in that ran anything (see [`LoopReport::threads_ran`]): each
    /// thread once, however often it joined the loop (a worker that leaves a loop
    /// and joins it again merges its figures twice; counted per merge, a 2-thread
    /// loop's report said 5 to 16 threads ran).
    pub(crate) threads_ran: usize,
    /// The thread these figures are of, where known (`None`: counted as a thread of
    /// its own).
    pub(crate) thread: Option<std::thread::ThreadId>,
    /// The known threads counted in `threads_ran`.
    pub(crate) ran_on: Vec<std::thread::ThreadId>,
}

impl ThreadStats {
    /// Empty figures of the calling thread.
    pub(crate) fn of_this_thread() -> Self {
        ThreadStats {
            thread: Some(std::thread::current().id()),
            ..ThreadStats::default()
        }
    }

    /// Counts the unwinding a rollback took (none when the epoch had finished).
    pub(crate) fn unwound(&mut self, took: Duration) {
        if !took.is_zero() {
            self.unwinding += took;
            self.unwinds += 1;
        }
    }

    /// Counts a wait at a load until an earlier epoch committed: a synchronized one,
    /// or one after an `on_commit` call (until homefree).
    pub(crate) fn synced_wait(&mut self, w: crate::epoch::LoadWait) {
        let load = SourceLocation(w.load);
        let waits = if w.after_call {
            &mut self.call_waits
        } else {
            &mut self.synced
        };
        waits
            .entry(load)
            .or_insert_with(|| SyncedLoad::new(load))
            .add(&SyncedLoad {
                load,
                waits: 1,
                waited: w.waited,
                gave_up: u64::from(w.gave_up),
                behind: w.behind,
            });
        self.synced_wait += w.waited;
    }

    /// Counts a violation of `cause`'s load in `segment`, `in_segment` tracked
    /// accesses after the segment's start, that discarded `wasted` of work.
    pub(crate) fn violation(
        &mut self,
        cause: &Cause,
        segment: u32,
        in_segment: u32,
        wasted: Duration,
    ) {
        self.violations += 1;
        let one = DepAcc {
            count: 1,
            wasted,
            segment,
            load_access_sum: u64::from(cause.load_ordinal),
            in_segment_sum: u64::from(in_segment),
            rewrites: u64::from(cause.rewrite == Some(true)),
            rewrites_known: u64::from(cause.rewrite.is_some()),
        };
        self.add_dependence(
            (SourceLocation(cause.store), SourceLocation(cause.load)),
            &one,
        );
    }

    /// Adds `v` into the totals of the dependence `key`.
    fn add_dependence(&mut self, key: (SourceLocation, SourceLocation), v: &DepAcc) {
        self.deps
            .entry(key)
            .or_insert(DepAcc {
                segment: v.segment,
                ..DepAcc::default()
            })
            .add(v);
    }

    /// Adds `other` into `self`.
    pub(crate) fn merge(&mut self, other: ThreadStats) {
        let ran = other.epochs + other.squashed + other.rollbacks > 0
            || other.busy + other.wasted > Duration::ZERO;
        // `other` is one thread's figures, or (having merged some) a sum of them:
        // its threads of unknown identity count as they are, known ones once.
        let mut known = other.ran_on;
        if other.threads_ran > 0 {
            self.threads_ran += other.threads_ran - known.len();
        } else if ran {
            match other.thread {
                Some(id) => known.push(id),
                None => self.threads_ran += 1,
            }
        }
        for id in known {
            if !self.ran_on.contains(&id) {
                self.ran_on.push(id);
                self.threads_ran += 1;
            }
        }
        self.epochs += other.epochs;
        self.items += other.items;
        self.violations += other.violations;
        self.rollbacks += other.rollbacks;
        self.squashed += other.squashed;
        self.in_order_epochs += other.in_order_epochs;
        self.in_order_no_workers += other.in_order_no_workers;
        self.in_order_measuring += other.in_order_measuring;
        self.stuck_zombies += other.stuck_zombies;
        self.accesses += other.accesses;
        self.busy += other.busy;
        self.wasted += other.wasted;
        self.unwinding += other.unwinding;
        self.unwinds += other.unwinds;
        self.wait += other.wait;
        self.idle += other.idle;
        self.present += other.present;
        for (k, v) in other.deps {
            self.add_dependence(k, &v);
        }
        self.synced_wait += other.synced_wait;
        for (mine, theirs) in [
            (&mut self.synced, other.synced),
            (&mut self.call_waits, other.call_waits),
        ] {
            for (load, s) in theirs {
                mine.entry(load)
                    .or_insert_with(|| SyncedLoad::new(load))
                    .add(&s);
            }
        }
    }

    /// The report of a loop with these totals.
    pub(crate) fn into_report(
        self,
        name: String,
        location: &'static Location<'static>,
        mode: RunMode,
        threads: usize,
        wall: Duration,
    ) -> LoopReport {
        // Tracked accesses per committed epoch: where a load sits in its epoch. With
        // few accesses per epoch the count says nothing about time (a load that is
        // the first statement of a body with one other access would sit "at 100%"),
        // so the position counts as unknown.
        let per_epoch = (self.epochs > 0)
            .then(|| self.accesses as f64 / self.epochs as f64)
            .filter(|&n| n >= 8.0);
        // A dependence that violated under one speculative epoch in five is
        // iterations that meet now and then, not a location every epoch updates. An
        // epoch that waited at the load (synchronized) would have been violated there:
        // it counts as one (a histogram's buckets, violated under most epochs at
        // first, then synchronized, looked rare).
        let speculative = self.epochs.saturating_sub(self.in_order_epochs).max(1);
        let synced = &self.synced;
        let mut dependences: Vec<Dependence> = self
            .deps
            .into_iter()
            .map(|((store, load), d)| {
                let n = d.count.max(1);
                let load_access = (d.load_access_sum / n) as u32;
                let place = LoadPlace {
                    segment: d.segment,
                    share: per_epoch.map(|per| (d.in_segment_sum / n) as f64 / per),
                };
                let waits = synced.get(&load).map_or(0, |s| s.waits);
                let rare = (d.count + waits) * 5 < speculative;
                // A load and a store at two calls that nearly every violation whose
                // storing epoch was speculative (a homefree one's reads leave no
                // record) saw it make on one location, in that order: `x.set(x.get()
                // + 1)`, as profile mode names it (`profile/advise.rs`, `rewrites`).
                let rewrite = !rare
                    && d.rewrites_known >= REWRITES_SEEN
                    && d.rewrites * 10 >= d.rewrites_known * 9;
                let advice = advise(store, load, SourceLocation(location), place, rare, rewrite);
                Dependence {
                    store,
                    load,
                    count: d.count,
                    wasted: d.wasted,
                    segment: d.segment,
                    load_access,
                    advice: (!crate::inject::is_injected(store)).then_some(advice),
                }
            })
            .collect();
        dependences.sort_by(|a, b| {
            b.wasted
                .cmp(&a.wasted)
                .then(b.count.cmp(&a.count))
                .then_with(|| a.store.to_string().cmp(&b.store.to_string()))
                .then_with(|| a.load.to_string().cmp(&b.load.to_string()))
        });
        let by_time = |waits: HashMap<SourceLocation, SyncedLoad>| {
            let mut v: Vec<SyncedLoad> = waits.into_values().collect();
            v.sort_by(|a, b| {
                b.waited
                    .cmp(&a.waited)
                    .then_with(|| a.load.to_string().cmp(&b.load.to_string()))
            });
            v
        };
        let synchronized = by_time(self.synced);
        let waits_after_on_commit = by_time(self.call_waits);
        LoopReport {
            name,
            location: SourceLocation(location),
            mode,
            threads,
            // Run in order, the loop ran on its caller's thread.
            threads_ran: match mode {
                RunMode::Parallel => self.threads_ran,
                _ => 1,
            },
            epochs: self.epochs,
            items: self.items,
            violations: self.violations,
            rollbacks: self.rollbacks,
            squashed: self.squashed,
            in_order_epochs: self.in_order_epochs,
            in_order_no_workers: self.in_order_no_workers,
            in_order_measuring: self.in_order_measuring,
            stuck_zombies: self.stuck_zombies,
            wall,
            busy: self.busy,
            wasted: self.wasted,
            unwinding: self.unwinding,
            unwinds: self.unwinds,
            wait: self.wait,
            idle: self.idle,
            dependences,
            synchronized,
            waits_after_on_commit,
            predicted_speedup: None,
        }
    }
}
