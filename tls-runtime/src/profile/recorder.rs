//! Recording one epoch in profile mode: each tracked access and checkpoint with its
//! time, and the epoch's duration (CPU time where the platform tells it).
//!
//! Nothing here depends on the rest of the crate but the CPU clock
//! (`cpu_clock.rs`): the epoch context holds a [`Recorder`] (as
//! `crate::profile::Recorder`) without profile mode reaching back into the epoch.

use crate::cpu_clock::{cpu_clock_cost, thread_cpu_ns};
use std::panic::Location;
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AccessKind {
    Read,
    Write,
    Checkpoint,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Event {
    /// Nanoseconds since the epoch started, recording overhead removed.
    pub(super) at: f64,
    pub(super) loc: usize,
    pub(super) kind: AccessKind,
    /// The source line of the access (the checkpoint's: none), for advice that names
    /// it.
    pub(super) site: Option<&'static Location<'static>>,
}

impl Event {
    /// A placeholder (see [`Recorder::new`]).
    const NONE: Event = Event {
        at: 0.0,
        loc: 0,
        kind: AccessKind::Checkpoint,
        site: None,
    };
}

/// What one epoch did, as profile mode saw it.
#[derive(Debug, Clone, Default)]
pub(crate) struct EpochProfile {
    /// The epoch's own work, in ns (its commit-time actions taken out).
    pub(super) dur: f64,
    pub(super) events: Vec<Event>,
    /// Time its commit-time actions (`on_commit`, accumulations) took, in ns: work
    /// that the runtime runs in loop order, one epoch after another, so the model
    /// serializes it.
    pub(super) commit_work: f64,
}

impl EpochProfile {
    /// Adds commit-time work measured outside the epoch's recording.
    pub(super) fn add_commit_work(&mut self, ns: f64) {
        self.commit_work += ns;
    }
}

/// What recording one event adds to an epoch's time, by kind, in ns: taken out of
/// the recorded times, so that an epoch's length is its work with plain accesses.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EventCosts {
    /// A read noted (its clock read and entry), beyond the plain read it makes.
    pub(crate) read: f64,
    /// The same for a write.
    pub(crate) write: f64,
    /// A checkpoint noted (a clock read).
    pub(crate) checkpoint: f64,
}

/// Records one epoch's accesses (lives in its `EpochCx` in profile mode).
#[derive(Debug)]
pub(crate) struct Recorder {
    start: Instant,
    cpu_start: Option<f64>,
    events: Vec<Event>,
    costs: EventCosts,
    /// What the events so far added (`costs` summed over them).
    overhead: f64,
    /// Commit-time actions run inside the epoch (once it published), in ns.
    deferred: f64,
}

impl Recorder {
    /// A recorder for an epoch of about `events` events: room for them is made (and
    /// its memory touched) before the epoch's clock starts, so that neither the
    /// growth of the list nor the first touch of its pages is taken for the epoch's
    /// work (a loop of 100 reads per 2 us iteration recorded 5 to 7 us an iteration
    /// while its list grew inside the recording).
    pub(super) fn new(costs: EventCosts, events: usize) -> Self {
        let mut list = Vec::with_capacity(events.max(4));
        list.resize(list.capacity(), Event::NONE);
        list.clear();
        // The CPU clock first: reading it is a system call in some VMs (most of a
        // microsecond), which must not count in the epoch's wall time. Its own cost
        // in the CPU time is taken out in `finish`.
        let cpu_start = thread_cpu_ns();
        Recorder {
            start: Instant::now(),
            cpu_start,
            events: list,
            costs,
            overhead: 0.0,
            deferred: 0.0,
        }
    }

    fn now(&self) -> f64 {
        // Take what recording the events so far added out of the time; never
        // before the event before (what is taken out is a mean, and two events back
        // to back can take less), as the model reads events in time order.
        let raw = self.start.elapsed().as_nanos() as f64;
        let last = self.events.last().map_or(0.0, |e| e.at);
        (raw - self.overhead).max(last)
    }

    pub(crate) fn access(&mut self, loc: usize, write: bool, site: &'static Location<'static>) {
        let at = self.now();
        let (kind, cost) = if write {
            (AccessKind::Write, self.costs.write)
        } else {
            (AccessKind::Read, self.costs.read)
        };
        self.overhead += cost;
        self.events.push(Event {
            at,
            loc,
            kind,
            site: Some(site),
        });
    }

    /// Forgets the events so far, keeping their room (for the calibration, which
    /// records many more events than an epoch does and must not measure a list
    /// larger than a core's caches).
    pub(super) fn clear(&mut self) {
        self.events.clear();
    }

    /// Notes that a commit-time action ran inside the epoch for `ns`.
    pub(crate) fn deferred(&mut self, ns: f64) {
        self.deferred += ns;
    }

    pub(super) fn checkpoint(&mut self) {
        let at = self.now();
        self.overhead += self.costs.checkpoint;
        self.events.push(Event {
            at,
            loc: 0,
            kind: AccessKind::Checkpoint,
            site: None,
        });
    }

    pub(super) fn finish(mut self) -> EpochProfile {
        let wall = self.now();
        // Prefer CPU time, and place the events proportionally within it.
        let cpu = match (self.cpu_start, thread_cpu_ns()) {
            (Some(a), Some(b)) if b > a => (b - a - self.overhead - cpu_clock_cost()).max(0.0),
            _ => wall,
        };
        if wall > 0.0 && cpu < wall {
            let k = cpu / wall;
            for e in &mut self.events {
                e.at *= k;
            }
        }
        EpochProfile {
            dur: (cpu.min(wall) - self.deferred).max(0.0),
            events: self.events,
            commit_work: self.deferred,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What noting an event costs is taken out of the times of the events after it
    /// and of the epoch's length, by kind: here a read costs far more than the epoch
    /// lasts and a write nothing, so every event after the read keeps the time of
    /// the one before it (times never go back), while the writes before it move on
    /// with the clock; the epoch's length is 0.
    #[test]
    fn the_cost_of_noting_events_is_taken_out_of_later_times() {
        let site = Location::caller();
        let costs = EventCosts {
            read: 1e9,
            write: 0.0,
            checkpoint: 0.0,
        };
        let mut r = Recorder::new(costs, 8);
        r.access(1, true, site);
        let t = Instant::now();
        while t.elapsed().as_micros() < 50 {}
        r.access(2, true, site);
        r.access(3, false, site);
        r.access(4, true, site);
        r.checkpoint();
        let at: Vec<f64> = r.events.iter().map(|e| e.at).collect();
        assert!(
            at[1] >= at[0] + 50_000.0,
            "writes cost nothing here: {at:?}"
        );
        assert!(at[2] >= at[1], "{at:?}");
        assert_eq!(at[3], at[2], "after the read: {at:?}");
        assert_eq!(at[4], at[2], "after the read: {at:?}");
        assert_eq!(r.finish().dur, 0.0);
        // Room was made before the clock started.
        let r = Recorder::new(EventCosts::default(), 100);
        assert!(r.events.capacity() >= 100 && r.events.is_empty());
    }

    /// Each in-order run profile mode makes has a serial of its own, so that reader
    /// records one leaves are dead to the next.
    #[test]
    fn profiled_runs_have_serials_of_their_own() {
        let (a, b) = (super::super::run_serial(), super::super::run_serial());
        assert_ne!(a, b);
        assert!(a > u32::MAX / 2 && b > u32::MAX / 2);
    }
}
