//! What to do about a dependence: the fix that fits it, in the book's words.
//!
//! A report ranks the store → load pairs that cost time; this module names, for each,
//! the change that removes or shrinks it, from what the runtime knows of the pair:
//!
//! - the store outside the file of the loop body: shared state of code the body
//!   calls (an allocator, a pool, a cache, a log), also when that code reads and
//!   writes it in one call. *Escape* the call, with the undo that reverses it, or
//!   *delay* it to commit.
//! - the load and the store at one call in the body (an `update` that reads and
//!   writes): every epoch changes one location that the next reads, a running total
//!   or a counter. If the loop uses it only after it ends, an *accumulation*
//!   (`total += x`) is applied at commit and never violates.
//! - a load late in its epoch (past the middle: in profile mode, by the share of the
//!   epoch's time run before it; in a parallel run, by the share of its tracked
//!   accesses made before it): a *checkpoint* just before it keeps the work before it
//!   when it is violated.
//! - otherwise a *true dependence*: a value an earlier iteration makes and this one
//!   needs early. No annotation removes it.
//!
//! In profile mode the model also replays the loop with the fix applied and gives the
//! speedup it predicts on 2 cores (`profile/advise.rs`); a parallel run names the fix
//! only.

use crate::report::SourceLocation;
use core::fmt;

/// The kind of fix a dependence calls for (see [`Advice`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdviceKind {
    /// A `checkpoint!()` just before the load.
    Checkpoint,
    /// An accumulation (`total += x`) instead of a read-modify-write by every epoch.
    Accumulate,
    /// `#[escape]` the call that changes shared state (with `#[on_violation]` undoing
    /// it), or delay it with `#[on_commit]`.
    EscapeOrDefer,
    /// A true dependence: no annotation removes it.
    TrueDependence,
}

impl AdviceKind {
    /// The kind's name in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            AdviceKind::Checkpoint => "checkpoint",
            AdviceKind::Accumulate => "accumulate",
            AdviceKind::EscapeOrDefer => "escape or on_commit",
            AdviceKind::TrueDependence => "true dependence",
        }
    }
}

/// The fix that fits one dependence of a report ([`crate::Dependence::advice`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    /// Which fix.
    pub kind: AdviceKind,
    /// What to write and where, in words.
    pub text: String,
    /// In profile mode: the speedup on 2 cores the model predicts with the fix applied
    /// (for a true dependence: with the dependence gone, the most any change of the
    /// body could give). `None` in a parallel run (`TLS_MODE=profile` computes it).
    pub predicted_speedup_2: Option<f64>,
}

impl fmt::Display for Advice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.text)?;
        if let Some(s) = self.predicted_speedup_2 {
            match self.kind {
                AdviceKind::TrueDependence => {
                    write!(f, " (without it: {s:.2}x on 2 cores, predicted)")?
                }
                _ => write!(f, " (then: {s:.2}x on 2 cores, predicted)")?,
            }
        }
        Ok(())
    }
}

/// The advice for a load and a store that every epoch makes on one location, at two
/// calls (`x.set(x.get() + 1)`): profile mode sees that they hit one location.
pub(crate) fn read_modify_write(store: SourceLocation, load: SourceLocation) -> Advice {
    Advice {
        kind: AdviceKind::Accumulate,
        text: format!(
            "every epoch loads one location at {load} and stores it at {store} (a running \
             total, a counter): if the loop uses its value only after it ends, make it an \
             accumulation (`total += x` in the `#[tls_loop]` body), applied at commit \
             without violations; if the body uses the value, it is a true dependence, \
             which no annotation removes"
        ),
        predicted_speedup_2: None,
    }
}

/// A load this far through its epoch or later is worth a checkpoint.
pub(crate) const LATE_LOAD: f64 = 0.5;

/// The fix for the dependence `store` → `load` of the loop at `at`; `load_share` is
/// how far through its epoch the load comes, when known (profile mode: the share of
/// the epoch's time; a parallel run: of its tracked accesses). `rare`: the
/// dependence violated few of the epochs that ran speculatively (a parallel run's
/// count), so a call that reads and writes is not one location every epoch updates
/// but iterations that now and then meet on one (an account, a bucket).
pub(crate) fn advise(
    store: SourceLocation,
    load: SourceLocation,
    at: SourceLocation,
    load_share: Option<f64>,
    rare: bool,
) -> Advice {
    // Code the loop calls first: an `update` inside a log's or a pool's method is
    // that code's state, which an accumulation in the body cannot replace.
    let (kind, text) = if store.file() != at.file() {
        (
            AdviceKind::EscapeOrDefer,
            format!(
                "the store at {store} is in code the loop calls, not in its body: if that \
                 is state of its own (an allocator, a pool, a cache, a log), escape the call \
                 (`#[escape]`, with `#[on_violation]` undoing it) or delay it to commit \
                 (`#[on_commit]`)"
            ),
        )
    } else if store == load && rare {
        (
            AdviceKind::TrueDependence,
            format!(
                "iterations now and then read and write the same location at {load} (few \
                 epochs were violated there): where an iteration uses the value it reads \
                 (an account's balance), those iterations depend on each other, re-running \
                 the later one is what it costs, and it is cheap while it stays rare; where \
                 the loop only adds to it and uses it after it ends (a histogram's counts), \
                 an accumulation on a variable outside the loop (`counts[b] += 1` in the \
                 `#[tls_loop]` body) removes it"
            ),
        )
    } else if store == load {
        (
            AdviceKind::Accumulate,
            format!(
                "epochs read and write the same location at {load} (a running total, a \
                 counter, a histogram's bucket): if the loop uses its value only after it \
                 ends, make it an accumulation (`total += x`, `counts[b] += 1` on a variable \
                 outside the loop, in the `#[tls_loop]` body), applied at commit without \
                 violations"
            ),
        )
    } else if let Some(share) = load_share.filter(|&s| s >= LATE_LOAD) {
        (
            AdviceKind::Checkpoint,
            format!(
                "the load at {load} comes {:.0}% of the way through its epoch: a \
                 `checkpoint!()` just before it keeps the work before it when the store \
                 at {store} violates it",
                100.0 * share.min(1.0)
            ),
        )
    } else if load_share.is_some() {
        (
            AdviceKind::TrueDependence,
            format!(
                "a value an earlier iteration stores at {store} and this one loads early, at \
                 {load}: if the loop only adds to it or counts with it and uses it after it \
                 ends, make it an accumulation (`x += ...`); if each iteration needs the one \
                 before's value, no annotation removes it (reading it later, with a \
                 `checkpoint!()` just before, keeps the work before the read)"
            ),
        )
    } else {
        // A parallel run places a load by its tracked accesses: with few of them an
        // epoch, where the load comes in time is not known (a load after most of the
        // work may be the first access). Say so rather than call it early.
        (
            AdviceKind::TrueDependence,
            format!(
                "a value an earlier iteration stores at {store} and this one loads at {load} \
                 (how far into its iteration is not known here: too few tracked accesses an \
                 epoch to tell; `TLS_MODE=profile` times it): if the loop only adds to it or \
                 counts with it and uses it after it ends, make it an accumulation (`x += \
                 ...`); if the load comes after most of the iteration's work, a \
                 `checkpoint!()` just before it keeps that work; if each iteration needs the \
                 one before's value from its start, no annotation removes it"
            ),
        )
    };
    Advice {
        kind,
        text,
        predicted_speedup_2: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::panic::Location;

    #[track_caller]
    fn here() -> SourceLocation {
        SourceLocation(Location::caller())
    }

    #[test]
    fn each_shape_gets_its_fix() {
        let at = here();
        let update = here();
        let (load, store) = (here(), here());
        // One call that reads and writes: a running total; unless few epochs met
        // there (iterations that update the same account now and then).
        assert_eq!(
            advise(update, update, at, Some(0.9), false).kind,
            AdviceKind::Accumulate
        );
        assert_eq!(
            advise(update, update, at, Some(0.9), true).kind,
            AdviceKind::TrueDependence
        );
        // A late load in the loop's own file: a checkpoint before it.
        assert_eq!(
            advise(store, load, at, Some(0.8), false).kind,
            AdviceKind::Checkpoint
        );
        // An early one: a true dependence; and one whose position is unknown.
        assert_eq!(
            advise(store, load, at, Some(0.1), false).kind,
            AdviceKind::TrueDependence
        );
        assert_eq!(
            advise(store, load, at, None, false).kind,
            AdviceKind::TrueDependence
        );
        // A store in another file: code the loop calls, also when one call there
        // reads and writes (a log's append, a pool's take).
        let elsewhere = crate::report::tests_location();
        assert_eq!(
            advise(elsewhere, load, at, Some(0.9), false).kind,
            AdviceKind::EscapeOrDefer
        );
        assert_eq!(
            advise(elsewhere, elsewhere, at, Some(0.9), false).kind,
            AdviceKind::EscapeOrDefer
        );
        // Not placed: not called early.
        let text = advise(store, load, at, None, false).text;
        assert!(
            !text.contains("early") && text.contains("not known"),
            "{text}"
        );
        let text = advise(store, load, at, Some(0.8), false).text;
        assert!(
            text.contains(&load.to_string()) && text.contains("80%"),
            "{text}"
        );
    }
}
