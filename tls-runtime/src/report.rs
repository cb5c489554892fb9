//! What a speculative loop did: counts, where the time went, and the dependences that
//! caused violations, ranked by the time they wasted.

use crate::advice::Advice;
use core::fmt;
use core::panic::Location;
use std::cell::RefCell;
use std::time::Duration;

/// A place in the source, shown as `file:line:col`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceLocation(pub &'static Location<'static>);

impl SourceLocation {
    /// The file.
    pub fn file(&self) -> &'static str {
        self.0.file()
    }
    /// The line (1-based).
    pub fn line(&self) -> u32 {
        self.0.line()
    }
    /// The column (1-based).
    pub fn column(&self) -> u32 {
        self.0.column()
    }
}

impl fmt::Debug for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file(), self.line(), self.column())
    }
}

/// How a loop was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// Epochs ran speculatively on several threads.
    Parallel,
    /// The loop ran in order on the calling thread (one thread, `TLS_MODE=sequential`,
    /// or nested inside another loop's epoch).
    Sequential,
    /// `TLS_MODE=profile`: in order, recorded, with a predicted speedup.
    Profile,
}

impl RunMode {
    /// The word before a dependence's violations: in profile mode the loop ran in
    /// order, so they are the model's, not violations that happened (the header
    /// counts none).
    pub(crate) fn violations_are(self) -> &'static str {
        if self == RunMode::Profile {
            "predicted "
        } else {
            ""
        }
    }
}

/// One load/store pair that caused violations.
#[derive(Debug, Clone, PartialEq)]
pub struct Dependence {
    /// The store in the earlier epoch.
    pub store: SourceLocation,
    /// The load in the later epoch that it invalidated.
    pub load: SourceLocation,
    /// How many violations it caused: one per rollback, so an epoch violated again
    /// after its re-run counts again (a count can exceed the epochs that ran).
    pub count: u64,
    /// The work discarded by those violations.
    pub wasted: Duration,
    /// The sub-thread segment the load was in (0 = before the first checkpoint).
    pub segment: u32,
    /// How many speculative accesses the epoch had made before the load, on average:
    /// a load late in the epoch is a candidate for a checkpoint before it.
    pub load_access: u32,
    /// The fix that fits this dependence (in profile mode with the speedup the model
    /// predicts after it).
    pub advice: Option<Advice>,
}

/// A load at which epochs waited until an earlier epoch had committed and then read,
/// keeping the work they did before it: a synchronized load, one that violated most
/// of the epochs that ran it ([`LoopReport::synchronized`]), which waits for the
/// epoch its violating stores came from ([`SyncedLoad::behind`]), or a load that
/// follows an `on_commit` call of the same epoch ([`LoopReport::waits_after_on_commit`]),
/// which waits until homefree (every earlier epoch committed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyncedLoad {
    /// The load's source line.
    pub load: SourceLocation,
    /// Epochs that waited there in this run.
    pub waits: u64,
    /// Time they waited, summed: counted in `busy`, or in `wasted` for attempts
    /// rolled back all the same, so it can exceed either.
    pub waited: Duration,
    /// Of `waits`, those that gave up after 2 ms (the epoch then ran again once
    /// homefree): an earlier epoch still had that much work to do, or its thread was
    /// not running (more threads than cores, a busy machine).
    pub gave_up: u64,
    /// How many epochs back the epoch waited for was, the nearest over the run: 1
    /// for the one before (until homefree, as for a chain of iterations or a load
    /// after an `on_commit` call), 3 where iteration i reads what i - 3 stored (the
    /// two epochs between ran alongside). 0 when no epoch waited.
    pub behind: u64,
}

impl SyncedLoad {
    pub(crate) fn new(load: SourceLocation) -> Self {
        SyncedLoad {
            load,
            waits: 0,
            waited: Duration::ZERO,
            gave_up: 0,
            behind: 0,
        }
    }

    /// Adds `other`'s waits (of the same load) to these.
    pub(crate) fn add(&mut self, other: &SyncedLoad) {
        self.waits += other.waits;
        self.waited += other.waited;
        self.gave_up += other.gave_up;
        self.behind = match (self.behind, other.behind) {
            (0, b) | (b, 0) => b,
            (a, b) => a.min(b),
        };
    }

    /// Until when its epochs waited, for a report line.
    pub(crate) fn until(&self) -> String {
        if self.behind <= 1 {
            "until homefree".to_owned()
        } else {
            format!("until the epoch {} back had committed", self.behind)
        }
    }
}

/// The words on synchronized waits that gave up, for a report line.
pub(crate) fn gave_up(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(
            "; {n} gave up after 2 ms (an earlier epoch still had long work to do, or its thread was not running: more threads than cores, a busy machine)"
        )
    }
}

/// The report of one run of a speculative loop (see [`last_report`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LoopReport {
    /// The loop's name (`#[tls_loop(name = ...)]`), else its source location.
    pub name: String,
    /// Where the loop is.
    pub location: SourceLocation,
    /// How it ran.
    pub mode: RunMode,
    /// Threads that could run epochs (the caller included).
    pub threads: usize,
    /// Threads that ran at least one epoch or in-order stretch: fewer than `threads`
    /// when workers were busy with other loops, or did not start or wake in time (a
    /// process's first loop, a busy machine). A loop that ran on one thread alone
    /// had no chance to violate, whatever its dependences.
    pub threads_ran: usize,
    /// Epochs committed.
    pub epochs: u64,
    /// Iterations run (an epoch runs one iteration, or several when chunked).
    pub items: u64,
    /// Violations that caused a rollback.
    pub violations: u64,
    /// Rollbacks: one per violation, and the re-runs no violation caused (an escaped
    /// call's failed argument check, a synchronized load's wait that gave up, a read
    /// after an `on_commit` call whose wait gave up), so it may exceed `violations`.
    pub rollbacks: u64,
    /// Epochs squashed because an earlier one ended the loop.
    pub squashed: u64,
    /// Epochs run in order by the adaptive fallback: because speculation did not pay
    /// (a window gained too little, or most of its epochs rolled back), or because
    /// no worker joined in time (`in_order_no_workers` of them).
    pub in_order_epochs: u64,
    /// Of `in_order_epochs`, those run in order because no worker thread joined in
    /// time: the workers were still starting (a process's first loops) or busy with
    /// other loops. They say nothing about the loop itself.
    pub in_order_no_workers: u64,
    /// Of `in_order_epochs`, those run in order to measure what an iteration costs
    /// without speculation: twice per loop site whose iterations take under 100 us in
    /// their epochs (stretches of about 20 us, once the site has speculated for
    /// 10 ms), so that the site can tell whether tracking them costs more than a
    /// second thread gains.
    pub in_order_measuring: u64,
    /// Violated epochs the loop waited on for longer than `TLS_ZOMBIE_WARN_MS` (2 s by
    /// default) because they reached no tracked access, checkpoint or poll: *zombies*
    /// stuck in plain code on the stale data they read (each one is also named on
    /// stderr when it happens). The loop cannot end before they reach one.
    pub stuck_zombies: u64,
    /// Wall-clock time of the loop.
    pub wall: Duration,
    /// Time spent running epoch work that committed, summed over threads.
    pub busy: Duration,
    /// Time spent on work discarded by rollbacks.
    pub wasted: Duration,
    /// The part of `wasted` that rollbacks spent unwinding the violated epochs' stacks
    /// from the access that found the violation back to the runtime: the fixed cost of
    /// each rollback (microseconds on some machines), whatever work it discarded.
    pub unwinding: Duration,
    /// Rollbacks that unwound a running epoch (the others re-ran an epoch that had
    /// already finished, with nothing to unwind): `unwinding` divided by this is the
    /// fixed cost of one.
    pub unwinds: u64,
    /// Time finished epochs waited to become homefree.
    pub wait: Duration,
    /// Time threads in the loop had no epoch to run.
    pub idle: Duration,
    /// The dependences that caused violations, most wasted time first, each with the
    /// fix that fits it. In profile mode (nothing runs speculatively), the ones the
    /// model predicts on 2 cores, the top ones with the speedup predicted after the fix.
    pub dependences: Vec<Dependence>,
    /// Loads that violated a dense stretch of the epochs running them, where epochs
    /// of this loop site now wait (until the epoch [`SyncedLoad::behind`] back has
    /// committed) instead of speculating (the loads a site synchronizes are learned
    /// from its violations, and released after a while or once they no longer
    /// violate the epochs that try them without waiting), most time waited first.
    pub synchronized: Vec<SyncedLoad>,
    /// Loads that came after an `on_commit` call in the same epoch, where the epoch
    /// waited until homefree for the call to run first (the call may write what the
    /// load reads): no dependence was seen, and there is none to remove; a long
    /// wait says to read before the call, or to make the call after the read. Most
    /// time waited first.
    pub waits_after_on_commit: Vec<SyncedLoad>,
    /// In profile mode: the predicted speedup over the sequential loop for 1, 2, 4,
    /// 8, 16, 32 and 64 cores.
    pub predicted_speedup: Option<Vec<(usize, f64)>>,
}

/// The end of the "held back" line: the epochs run in order to measure the plain
/// loop's cost, if any.
pub(crate) fn measuring_note(epochs: u64) -> String {
    if epochs == 0 {
        String::new()
    } else {
        format!(", {epochs} to measure what an iteration costs without speculation")
    }
}

impl fmt::Display for LoopReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = (self.busy + self.wasted + self.wait + self.idle).as_secs_f64();
        let pct = |d: Duration| {
            if total > 0.0 {
                100.0 * d.as_secs_f64() / total
            } else {
                0.0
            }
        };
        // An unnamed loop is named by its location: say it once.
        let location = self.location.to_string();
        let named = if self.name == location {
            String::new()
        } else {
            format!("{} ", printable(&self.name))
        };
        let ran_on = if self.threads_ran > 0 && self.threads_ran < self.threads {
            format!(", {} of them ran epochs", self.threads_ran)
        } else {
            String::new()
        };
        writeln!(
            f,
            "loop {named}at {location} ({:?}, {}{ran_on}): {} in {}, {:.3?}",
            self.mode,
            counted(self.threads as u64, "thread"),
            counted(self.items, "iteration"),
            counted(self.epochs, "epoch"),
            self.wall
        )?;
        writeln!(
            f,
            "  violations {}  rollbacks {}  squashed {}  in order {}",
            self.violations, self.rollbacks, self.squashed, self.in_order_epochs
        )?;
        if self.in_order_epochs > 0 {
            writeln!(
                f,
                "  held back: {} epochs in order because speculation did not pay, {} \
                 because no worker thread was free (starting, or busy with other loops){}",
                self.in_order_epochs - self.in_order_no_workers - self.in_order_measuring,
                self.in_order_no_workers,
                measuring_note(self.in_order_measuring)
            )?;
        }
        if self.items == 0 && self.epochs == 0 {
            // The shares of a run with nothing to run are of its setup alone (an
            // outside probe's empty loop read as "busy 90.9%").
            writeln!(f, "  time: no iterations to run")?;
        } else {
            writeln!(
                f,
                "  time: busy {:.1}%  violated {:.1}%  waiting {:.1}%  idle {:.1}%",
                pct(self.busy),
                pct(self.wasted),
                pct(self.wait),
                pct(self.idle)
            )?;
        }
        if self.stuck_zombies > 0 {
            writeln!(
                f,
                "  stuck zombies: {} violated epochs reached no tracked access, checkpoint \
                 or poll for a long while (see the stderr message; call `poll()` in such code)",
                self.stuck_zombies
            )?;
        }
        for s in &self.synchronized {
            writeln!(
                f,
                "  synchronized load {}: {} epochs waited there {} ({:.3?}), \
                 instead of reading early and rolling back{}",
                s.load,
                s.waits,
                s.until(),
                s.waited,
                gave_up(s.gave_up)
            )?;
        }
        for s in &self.waits_after_on_commit {
            writeln!(
                f,
                "  load after an on_commit call {}: {} epochs waited there {} ({:.3?}) for \
                 the call to run first{}",
                s.load,
                s.waits,
                s.until(),
                s.waited,
                gave_up(s.gave_up)
            )?;
        }
        if let Some(p) = &self.predicted_speedup {
            write!(f, "  predicted speedup:")?;
            for (cores, s) in p {
                write!(f, "  {cores} cores {s:.2}x")?;
            }
            writeln!(f)?;
        }
        let predicted = self.mode.violations_are();
        for (i, d) in self.dependences.iter().enumerate() {
            writeln!(
                f,
                "  #{} store {} -> load {}: {predicted}{} violations, {:.3?} wasted (segment {}, \
                 access {})",
                i + 1,
                d.store,
                d.load,
                d.count,
                d.wasted,
                d.segment,
                d.load_access
            )?;
            if let Some(a) = &d.advice {
                writeln!(f, "     advice ({}): {a}", a.kind.name())?;
            } else if crate::inject::is_injected(d.store) {
                writeln!(f, "     {}", crate::inject::INJECTED)?;
            }
        }
        Ok(())
    }
}

thread_local! {
    static LAST: RefCell<Option<LoopReport>> = const { RefCell::new(None) };
}

/// The report of the most recent speculative loop started on this thread.
pub fn last_report() -> Option<LoopReport> {
    LAST.with(|l| l.borrow().clone())
}

/// Takes this thread's last report (the calibration loop of profile mode).
pub(crate) fn take_last() -> Option<LoopReport> {
    LAST.with(|l| l.borrow_mut().take())
}

/// Keeps `report` as this thread's last (see `sink::set_last`, which also sends it
/// where `TLS_REPORT` says).
pub(crate) fn keep_last(report: LoopReport) {
    LAST.with(|l| *l.borrow_mut() = Some(report));
}

/// A location in this file, for tests that need one outside their own.
#[cfg(test)]
pub(crate) fn tests_location() -> SourceLocation {
    SourceLocation(Location::caller())
}

/// Another location in this file (a getter's and a setter's, with
/// [`tests_location`]).
#[cfg(test)]
pub(crate) fn tests_location_2() -> SourceLocation {
    SourceLocation(Location::caller())
}

/// `n` and `word`, plural unless `n` is 1 ("1 thread", "2 threads").
fn counted(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// A loop name as a terminal line shows it: control characters (a newline, an
/// escape sequence) written as escapes, so that a name cannot break the report's
/// layout or drive the terminal. Other characters, any script's, stay as they are.
pub(crate) fn printable(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(name);
    }
    name.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

mod stats;
#[cfg(test)]
mod tests;

pub(crate) use stats::ThreadStats;
