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
//!   writes), or at two calls when the epochs that store the location loaded it
//!   first (`x.set(x.get() + 1)`; profile mode sees every access, a parallel run the
//!   storing epoch's own read when it made it speculatively): every epoch changes
//!   one location that the next reads, a running total or a counter. If the loop
//!   uses it only after it ends, an *accumulation* (`total += x`) is applied at
//!   commit and never violates.
//! - a load late in its epoch (more than half the epoch between the point a violation
//!   rolls back to, its start or the checkpoint before the load, and the load: in
//!   profile mode by the epoch's time, in a parallel run by its tracked accesses): a
//!   *checkpoint* just before it keeps that work when it is violated.
//! - otherwise a *true dependence*: a value an earlier iteration makes and this one
//!   needs early, or soon after a checkpoint that already keeps the work before it.
//!   No annotation removes it.
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
        self.write_predicted(f, "")
    }
}

impl Advice {
    /// The advice as `Display` writes it, `of_what` after the word "predicted" (the
    /// summary of a loop run many times says which run the prediction is of).
    pub(crate) fn write_predicted(&self, f: &mut impl fmt::Write, of_what: &str) -> fmt::Result {
        write!(f, "{}", self.text)?;
        if let Some(s) = self.predicted_speedup_2 {
            let after = match self.kind {
                AdviceKind::TrueDependence => "without it",
                _ => "then",
            };
            write!(f, " ({after}: {s:.2}x on 2 cores, predicted{of_what})")?;
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

/// Where a violated load sits in its epoch, as far as a run can tell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LoadPlace {
    /// Its sub-thread segment: 0 before the first `checkpoint!()`.
    pub(crate) segment: u32,
    /// How much of its epoch lies between the point a violation rolls back to (the
    /// epoch's start, or the checkpoint before the load) and the load: what a
    /// checkpoint just before it would keep. Profile mode: a share of the epoch's
    /// time; a parallel run: of its tracked accesses; `None` when not known.
    pub(crate) share: Option<f64>,
}

/// The fix for the dependence `store` → `load` of the loop at `at`, the load at
/// `place`. `rare`: the dependence violated few of the epochs that ran
/// speculatively (a parallel run's count), so a call that reads and writes is not
/// one location every epoch updates but iterations that now and then meet on one
/// (an account, a bucket).
pub(crate) fn advise(
    store: SourceLocation,
    load: SourceLocation,
    at: SourceLocation,
    place: LoadPlace,
    rare: bool,
) -> Advice {
    let segment = place.segment;
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
    } else if let Some(share) = place.share.filter(|&s| s >= LATE_LOAD) {
        let percent = 100.0 * share.min(1.0);
        let place = if segment == 0 {
            format!("comes {percent:.0}% of the way through its epoch")
        } else {
            format!(
                "comes {percent:.0}% of its epoch after the `checkpoint!()` before it \
                 (segment {segment})"
            )
        };
        (
            AdviceKind::Checkpoint,
            format!(
                "the load at {load} {place}: a `checkpoint!()` just before it keeps the \
                 work before it when the store at {store} violates it"
            ),
        )
    } else if place.share.is_some() && segment > 0 {
        // A checkpoint already stands before the load, with little work between:
        // another one would keep next to nothing (an outside probe was advised the
        // checkpoint it had, with the same speedup "then" as now).
        (
            AdviceKind::TrueDependence,
            format!(
                "the load at {load} already comes soon after a `checkpoint!()` (segment \
                 {segment}): a violation by the store at {store} throws away little work, \
                 and what it costs is the wait for the earlier iteration's value; if the \
                 loop only adds to it or counts with it and uses it after it ends, make it \
                 an accumulation (`x += ...`); if each iteration needs the one before's \
                 value, no annotation removes it"
            ),
        )
    } else if place.share.is_some() {
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
        let (how_far, before) = if segment == 0 {
            (
                "how far into its iteration".to_string(),
                "before the load".to_string(),
            )
        } else {
            (
                format!("how far after the `checkpoint!()` before it (segment {segment})"),
                "between that checkpoint and the load".to_string(),
            )
        };
        (
            AdviceKind::TrueDependence,
            format!(
                "a value an earlier iteration stores at {store} and this one loads at {load} \
                 ({how_far} is not known here: too few tracked accesses an epoch to tell; \
                 `TLS_MODE=profile` times it): if the loop only adds to it or counts with it \
                 and uses it after it ends, make it an accumulation (`x += ...`); if much of \
                 the iteration's work comes {before}, a `checkpoint!()` just before it keeps \
                 that work; if each iteration needs the one before's value from its start, \
                 no annotation removes it"
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

    /// A load in segment 0 at `share`.
    fn at(share: Option<f64>) -> LoadPlace {
        LoadPlace { segment: 0, share }
    }

    #[test]
    fn each_shape_gets_its_fix() {
        let at_ = here();
        let update = here();
        let (load, store) = (here(), here());
        let kind = |store, load, place, rare| advise(store, load, at_, place, rare).kind;
        // One call that reads and writes: a running total; unless few epochs met
        // there (iterations that update the same account now and then).
        assert_eq!(
            kind(update, update, at(Some(0.9)), false),
            AdviceKind::Accumulate
        );
        assert_eq!(
            kind(update, update, at(Some(0.9)), true),
            AdviceKind::TrueDependence
        );
        // A late load in the loop's own file: a checkpoint before it.
        assert_eq!(
            kind(store, load, at(Some(0.8)), false),
            AdviceKind::Checkpoint
        );
        // An early one: a true dependence; and one whose position is unknown.
        assert_eq!(
            kind(store, load, at(Some(0.1)), false),
            AdviceKind::TrueDependence
        );
        assert_eq!(
            kind(store, load, at(None), false),
            AdviceKind::TrueDependence
        );
        // A store in another file: code the loop calls, also when one call there
        // reads and writes (a log's append, a pool's take).
        let elsewhere = crate::report::tests_location();
        assert_eq!(
            kind(elsewhere, load, at(Some(0.9)), false),
            AdviceKind::EscapeOrDefer
        );
        assert_eq!(
            kind(elsewhere, elsewhere, at(Some(0.9)), false),
            AdviceKind::EscapeOrDefer
        );
        // Not placed: not called early.
        let text = advise(store, load, at_, at(None), false).text;
        assert!(
            !text.contains("early") && text.contains("not known"),
            "{text}"
        );
        let text = advise(store, load, at_, at(Some(0.8)), false).text;
        assert!(
            text.contains(&load.to_string()) && text.contains("80%"),
            "{text}"
        );
    }

    #[test]
    fn a_load_soon_after_a_checkpoint_is_not_advised_another() {
        let at_ = here();
        let (load, store) = (here(), here());
        let after = |share| LoadPlace { segment: 1, share };
        // Right after the checkpoint: the checkpoint is there already.
        let a = advise(store, load, at_, after(Some(0.0)), false);
        assert_eq!(a.kind, AdviceKind::TrueDependence);
        assert!(
            a.text.contains("already") && a.text.contains("segment 1"),
            "{}",
            a.text
        );
        // Far after it: one just before the load keeps the work between the two.
        let a = advise(store, load, at_, after(Some(0.7)), false);
        assert_eq!(a.kind, AdviceKind::Checkpoint);
        assert!(
            a.text.contains("after the `checkpoint!()` before it"),
            "{}",
            a.text
        );
        // Not placed: says where it is not known from.
        let a = advise(store, load, at_, after(None), false);
        assert_eq!(a.kind, AdviceKind::TrueDependence);
        assert!(
            a.text
                .contains("how far after the `checkpoint!()` before it (segment 1)"),
            "{}",
            a.text
        );
    }
}
