//! How fast two of the machine's CPUs pass a cache line: what a loop on one lent
//! transaction pays on nearly every row operation, and what a virtual machine's host
//! can change under a run.
//!
//! The threads of a speculative (or hand-split) loop share the transaction's lock
//! sets, the overlay's shards, the log's tail and the pages one writes and the other
//! reads, so each operation moves lines between their cores. On the 2-vCPU
//! development machine a line's round trip between two spinning threads took about
//! 120 ns when the host ran the two vCPUs near each other and about 410 ns when it did
//! not, and the host changed that every few seconds; two-thread loops took half as
//! long again or twice as long in the far placement, while one thread did not care.
//! `compare` and the speculation bench time it before and after a run so that a
//! reader can tell which placement a figure was measured in.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Round trips timed per probe.
const TRIPS: u64 = 1000;

/// Below this round trip (ns) the two CPUs count as near.
pub const NEAR_NS: u64 = 250;

/// The p50, in nanoseconds, of 1,000 round trips of one cache line between this
/// thread and another, both spinning; `None` where the process may use fewer than two
/// CPUs (two spinning threads would then take a time slice per round trip).
///
/// Both threads spin for the whole probe (about 0.1 to 0.5 ms), so a caller whose
/// process has threads busy or spinning (a speculation runtime's idle workers spin
/// for `TLS_SPIN_US` after a loop) should let them settle first.
pub fn cache_line_round_trip_ns() -> Option<u64> {
    if !std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2) {
        return None;
    }
    let line = AtomicU64::new(0);
    let wait_for = |v: u64| {
        let mut spins = 0u32;
        while line.load(Ordering::Acquire) != v {
            spins += 1;
            // The other thread is not running (the machine's other CPUs are busy):
            // give it this CPU rather than spin out a time slice per round trip.
            if spins.is_multiple_of(1 << 16) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    };
    let mut trips = std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..TRIPS {
                wait_for(2 * i + 1);
                line.store(2 * i + 2, Ordering::Release);
            }
        });
        (0..TRIPS)
            .map(|i| {
                let t = Instant::now();
                line.store(2 * i + 1, Ordering::Release);
                wait_for(2 * i + 2);
                t.elapsed().as_nanos() as u64
            })
            .collect::<Vec<u64>>()
    });
    trips.sort_unstable();
    Some(trips[trips.len() / 2])
}

/// The round trip timed before and after a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Before the run, ns.
    pub before_ns: u64,
    /// After the run, ns.
    pub after_ns: u64,
}

impl Placement {
    /// Times the round trip around `run`; `None` for the placement where it cannot be
    /// timed (see [`cache_line_round_trip_ns`]).
    pub fn around<T>(run: impl FnOnce() -> T) -> (T, Option<Placement>) {
        let before = cache_line_round_trip_ns();
        let out = run();
        let placement = before
            .zip(cache_line_round_trip_ns())
            .map(|(before_ns, after_ns)| Placement {
                before_ns,
                after_ns,
            });
        (out, placement)
    }

    /// `near` or `far` when both timings agree, `changed` when they do not.
    pub fn verdict(&self) -> &'static str {
        match (self.before_ns < NEAR_NS, self.after_ns < NEAR_NS) {
            (true, true) => "near",
            (false, false) => "far",
            _ => "changed",
        }
    }

    /// One line for a person.
    pub fn describe(&self) -> String {
        let what = match self.verdict() {
            "near" => "near each other".to_string(),
            "far" => format!(
                "far apart (over {NEAR_NS} ns): loops that share a transaction across \
                 threads run slower than where lines move fast"
            ),
            _ => "moved during the run (the host placed them differently before and after)"
                .to_string(),
        };
        format!(
            "cache-line round trip between two threads: {} ns before the run, {} ns after \
             (p50 of {TRIPS}): the CPUs were {what}",
            self.before_ns, self.after_ns
        )
    }

    /// As JSON: `{"before_ns", "after_ns", "placement"}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "before_ns": self.before_ns,
            "after_ns": self.after_ns,
            "placement": self.verdict(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_needs_both_timings_on_one_side() {
        let p = |before_ns, after_ns| Placement {
            before_ns,
            after_ns,
        };
        assert_eq!(p(120, 130).verdict(), "near");
        assert_eq!(p(410, 390).verdict(), "far");
        assert_eq!(p(120, 410).verdict(), "changed");
        assert_eq!(p(410, 120).verdict(), "changed");
        assert_eq!(p(NEAR_NS, NEAR_NS - 1).verdict(), "changed");
        let j = p(120, 410).to_json();
        assert_eq!(j["before_ns"], 120);
        assert_eq!(j["after_ns"], 410);
        assert_eq!(j["placement"], "changed");
        assert!(p(410, 400).describe().contains("far apart"));
    }

    #[test]
    fn a_round_trip_is_timed_where_two_cpus_are_available() {
        let two = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
        match cache_line_round_trip_ns() {
            Some(ns) => assert!(two && ns > 0, "{ns} ns"),
            None => assert!(!two),
        }
    }
}
