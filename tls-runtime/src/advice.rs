//! What to do about a dependence: the fix that fits it, in the book's words.
//!
//! A report ranks the store → load pairs that cost time; this module names, for each,
//! the change that removes or shrinks it, from what the runtime knows of the pair (the
//! calls' source lines, where the load sits in its epoch, whether one location is read
//! then written; not whether the body uses the value it reads, so each text says when
//! its fix does not apply):
//!
//! - one call that reads and writes a location in every epoch, in code the loop body
//!   calls rather than in the body's file: that code's own state (an allocator, a
//!   pool, a cache, a log). *Escape* the call, with the undo that reverses it, or
//!   *delay* it to commit. Not for a store in called code that the body reads by
//!   another call (a helper that publishes a value the next iteration gets): that is
//!   no state an undo can restore (an outside probe that escaped one, as an earlier
//!   version of this advice said, got wrong results).
//! - a location the body's own code reads and writes at one call (an `update`): a
//!   running total or a counter. If the loop uses it only after it ends, an
//!   *accumulation* (`total += x`) is applied at commit and never violates. Read
//!   early in the epoch (at one call, or at two when the epochs that store it loaded
//!   it first, `x.set(x.get() + 1)`: profile mode sees every access, a parallel run
//!   the storing epoch's own read when it made it speculatively) it is more likely an
//!   id or a counter the iteration goes on with: advised as a true dependence, with
//!   the accumulation as the way out where the value is not used. Two calls whose
//!   load a parallel run cannot place (few tracked accesses an epoch) are advised
//!   the accumulation, with its "if".
//! - a load late in its epoch (more than half the epoch between the point a violation
//!   rolls back to, its start or the checkpoint before the load, and the load: in
//!   profile mode by the epoch's time, in a parallel run by its tracked accesses): a
//!   *checkpoint* just before it, or before the body's call that leads to it when the
//!   load is in code the body calls, keeps that work when it is violated (two calls
//!   on one location late in the epoch get it too, with the accumulation named as
//!   the way out where the loop needs the value only at its end: a value read and
//!   then overwritten with another looks the same).
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
/// (an account, a bucket). `rewrite`: the load and the store are two calls on one
/// location that the epochs which store it loaded first (`x.set(x.get() + 1)`), as
/// far as the run can tell (profile mode sees every access; a parallel run, the
/// storing epoch's own read when it made it speculatively).
///
/// Only what the runtime sees decides: the calls' source lines (whether in the loop
/// body's file or in code the body calls), where the load sits in its epoch, and
/// whether one location is read and then written. Where the body uses the value it
/// reads is not seen, so each text says when its fix does not apply. The advice
/// never names an escape for data the body reads itself: escaped code writes
/// speculative containers for real, and an undo for such a write cannot be had
/// (an outside probe, told to escape a helper that stored a value the next
/// iteration read, got wrong results).
pub(crate) fn advise(
    store: SourceLocation,
    load: SourceLocation,
    at: SourceLocation,
    place: LoadPlace,
    rare: bool,
    rewrite: bool,
) -> Advice {
    let segment = place.segment;
    let in_body = |l: SourceLocation| l.file() == at.file();
    let late = place.share.filter(|&s| s >= LATE_LOAD);
    let early = place.share.is_some_and(|s| s < LATE_LOAD);
    // One location read then written by the epochs, in the body's own code: one call
    // (`update`) or two (`x.set(x.get() + 1)`).
    let one_call = store == load;
    let in_body_rewrite = rewrite && in_body(store) && in_body(load);
    // The calls that read and write it, as the texts name them.
    let calls = if one_call {
        format!("at {load}")
    } else {
        format!("at {load} and then at {store}")
    };
    let (kind, text) = if one_call && !in_body(store) {
        // One call in code the body calls reads and writes its own state (a log's
        // append, a pool's take, an allocation), which an accumulation in the body
        // cannot replace.
        (
            AdviceKind::EscapeOrDefer,
            format!(
                "one call at {store}, in code the loop calls rather than in its body, reads \
                 and writes a location of speculative data in every epoch (an allocator's, a \
                 pool's, an id generator's or a log's bookkeeping). Escaping that call as it \
                 is gives wrong results: an escaped call writes speculative data at once, out \
                 of loop order, and nothing rolls it back. Two fixes fit, each where its \
                 condition holds: keep that state in ordinary data (behind a lock, not in a \
                 speculative container) and escape the call (`#[escape]`, with \
                 `#[on_violation]` undoing it), where the loop's result does not depend on \
                 which value the call hands out (any free slot, any address); or delay it to \
                 commit (`#[on_commit]`), where the body does not use what it returns (a log \
                 append) and reads no speculative data after it (such reads wait for the \
                 call). Where the result depends on the value handed out (ids in loop order), \
                 it is a true dependence"
            ),
        )
    } else if one_call && rare {
        (
            AdviceKind::TrueDependence,
            format!(
                "iterations now and then read and write the same location at {load} (few \
                 epochs were violated there): where an iteration uses the value it reads \
                 (an account's balance), those iterations depend on each other, re-running \
                 the later one is what it costs, and it is cheap while it stays rare; where \
                 the loop only adds to it and uses it after it ends (a histogram's counts), \
                 {ACCUMULATION} removes it"
            ),
        )
    } else if (one_call || in_body_rewrite) && early {
        // Read early and written: an id or a counter the iteration goes on with, more
        // often than a total (whose addend is computed first).
        (
            AdviceKind::TrueDependence,
            format!(
                "every epoch reads and writes one location {calls}, early in its epoch (a \
                 counter, an id): if the iteration uses the value it reads, each depends on \
                 the one before and no annotation removes it; if the loop only adds to it \
                 and uses it after it ends, {ACCUMULATION} removes it"
            ),
        )
    } else if one_call || (in_body_rewrite && place.share.is_none()) {
        // Two calls whose load a parallel run cannot place: a late one gets a
        // checkpoint below, which holds whatever the body does with the value; here
        // no place for one is known.
        (
            AdviceKind::Accumulate,
            format!(
                "epochs read and write one location {calls} (a running total, a counter, a \
                 histogram's bucket): if the loop uses its value only after it ends, make it \
                 {ACCUMULATION}, applied at commit without violations; if the body uses the \
                 value it reads, it is a true dependence, which no annotation removes"
            ),
        )
    } else if let Some(share) = late {
        let percent = 100.0 * share.min(1.0);
        let place = if segment == 0 {
            format!("comes {percent:.0}% of the way through its epoch")
        } else {
            format!(
                "comes {percent:.0}% of its epoch after the `checkpoint!()` before it \
                 (segment {segment})"
            )
        };
        // `checkpoint!()` goes at the top level of the `#[tls_loop]` body only, and
        // the runtime knows the load's own line, not the body's call that led to it
        // (a load in a function of the body's own file looks like one in the body).
        let split = "if that call is most of the iteration, split it so that the \
                     checkpoint can go between its parts";
        let before = if in_body(load) {
            format!(
                "just before it, in the loop body (if the load is in a function the body \
                 calls, before the body's call that leads to it; {split})"
            )
        } else {
            format!(
                "in the loop body, just before the call that leads to it (the load is in \
                 code the body calls; {split})"
            )
        };
        // Two calls on one location (`x.set(x.get() + 1)`) may also be a total the
        // loop needs only at its end; the checkpoint holds either way.
        let or_else = if in_body_rewrite {
            format!(
                "; epochs load that location and then store it at {store}: if the loop uses \
                 its value only after it ends, {ACCUMULATION} removes the dependence \
                 altogether"
            )
        } else {
            String::new()
        };
        (
            AdviceKind::Checkpoint,
            format!(
                "the load at {load} {place}: a `checkpoint!()` {before} keeps the work \
                 before it when the store at {store} violates it{or_else}"
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
                 {ACCUMULATION}; if each iteration needs the one before's value, no \
                 annotation removes it"
            ),
        )
    } else if place.share.is_some() {
        (
            AdviceKind::TrueDependence,
            format!(
                "a value an earlier iteration stores at {store} and this one loads early, at \
                 {load}: if the loop only adds to it or counts with it and uses it after it \
                 ends, make it {ACCUMULATION}; if each iteration needs the one before's \
                 value, no annotation removes it (reading it later, with a `checkpoint!()` \
                 just before, keeps the work before the read)"
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
                 and uses it after it ends, make it {ACCUMULATION}; if much of the \
                 iteration's work comes {before}, a `checkpoint!()` just before it keeps \
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

/// How the advice words an accumulation: the forms `#[tls_loop]` accepts (a whole
/// variable declared outside the loop; a bucket `counts[b] += 1` is refused, as an
/// outside probe found, so a histogram pushes its bucket or records its change).
const ACCUMULATION: &str = "an accumulation into a variable declared outside the loop, in \
     the `#[tls_loop]` body (`total += x`; for one of many buckets, `hits.push(b)` and \
     count after the loop, or `acc.record(move |c| c[b] += 1)` with an `Accumulator`)";

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
        let kind = |store, load, place, rare| advise(store, load, at_, place, rare, false).kind;
        // One call that reads and writes: a running total; unless few epochs met
        // there (iterations that update the same account now and then), or it comes
        // early in the epoch (an id the iteration goes on with).
        assert_eq!(
            kind(update, update, at(Some(0.9)), false),
            AdviceKind::Accumulate
        );
        assert_eq!(
            kind(update, update, at(None), false),
            AdviceKind::Accumulate
        );
        assert_eq!(
            kind(update, update, at(Some(0.9)), true),
            AdviceKind::TrueDependence
        );
        assert_eq!(
            kind(update, update, at(Some(0.05)), false),
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
        // One call in another file that reads and writes: code the loop calls (a log's
        // append, a pool's take).
        let elsewhere = crate::report::tests_location();
        assert_eq!(
            kind(elsewhere, elsewhere, at(Some(0.9)), false),
            AdviceKind::EscapeOrDefer
        );
        // Its text says what escaping the call as it is would do (two outside probes
        // escaped a pool's take, an id generator and a log append as advised, their
        // state in speculative containers, and got wrong results) and when each fix
        // fits.
        let text = advise(elsewhere, elsewhere, at_, at(Some(0.9)), false, false).text;
        for needed in [
            "as it is gives wrong results",
            "ordinary data",
            "does not depend on which value",
            "does not use what it returns",
            "true dependence",
        ] {
            assert!(text.contains(needed), "{needed}: {text}");
        }
        // A store in called code that the body's late load reads (a helper that
        // publishes a value): a checkpoint, never an escape, which would write the
        // container for real with no undo to be had.
        assert_eq!(
            kind(elsewhere, load, at(Some(0.9)), false),
            AdviceKind::Checkpoint
        );
        // Not placed: not called early.
        let text = advise(store, load, at_, at(None), false, false).text;
        assert!(
            !text.contains("early") && text.contains("not known"),
            "{text}"
        );
        let text = advise(store, load, at_, at(Some(0.8)), false, false).text;
        assert!(
            text.contains(&load.to_string()) && text.contains("80%"),
            "{text}"
        );
        // A load on a line of the body's file may be in a function the body calls,
        // where `checkpoint!()` cannot go (an outside probe's getter method): the text
        // says where it goes then.
        assert!(
            text.contains("before the body's call that leads to it"),
            "{text}"
        );
    }

    /// `x.set(x.get() + 1)`: two calls on one location: a checkpoint when the load
    /// comes late (with the accumulation named: a value read and then overwritten
    /// with another looks the same), a counter the iteration uses when early, an
    /// accumulation (with its "if") when where it comes is not known. In code the
    /// body calls (a helper's getter and setter), never an accumulation: the late
    /// load gets a checkpoint at the body's call.
    #[test]
    fn a_read_modify_write_in_two_calls_depends_on_where_the_load_is() {
        let at_ = here();
        let (load, store) = (here(), here());
        let two_calls = |store, load, place| advise(store, load, at_, place, false, true);
        let late = two_calls(store, load, at(Some(0.9)));
        assert_eq!(late.kind, AdviceKind::Checkpoint);
        assert!(late.text.contains("accumulation"), "{}", late.text);
        assert_eq!(
            two_calls(store, load, at(Some(0.0))).kind,
            AdviceKind::TrueDependence
        );
        assert_eq!(
            two_calls(store, load, at(None)).kind,
            AdviceKind::Accumulate
        );
        let (get, set) = (
            crate::report::tests_location(),
            crate::report::tests_location_2(),
        );
        let a = two_calls(set, get, at(Some(0.99)));
        assert_eq!(a.kind, AdviceKind::Checkpoint);
        assert!(
            a.text.contains("just before the call that leads to it"),
            "{}",
            a.text
        );
        // Every accumulation advised is one `#[tls_loop]` accepts: no `counts[b] += 1`.
        let texts = [
            two_calls(store, load, at(Some(0.9))).text,
            advise(load, load, at_, at(Some(0.9)), true, false).text,
        ];
        for t in texts {
            assert!(!t.contains("counts[b] +="), "{t}");
            assert!(t.contains("hits.push(b)"), "{t}");
        }
    }

    #[test]
    fn a_load_soon_after_a_checkpoint_is_not_advised_another() {
        let at_ = here();
        let (load, store) = (here(), here());
        let after = |share| LoadPlace { segment: 1, share };
        // Right after the checkpoint: the checkpoint is there already.
        let a = advise(store, load, at_, after(Some(0.0)), false, false);
        assert_eq!(a.kind, AdviceKind::TrueDependence);
        assert!(
            a.text.contains("already") && a.text.contains("segment 1"),
            "{}",
            a.text
        );
        // Far after it: one just before the load keeps the work between the two.
        let a = advise(store, load, at_, after(Some(0.7)), false, false);
        assert_eq!(a.kind, AdviceKind::Checkpoint);
        assert!(
            a.text.contains("after the `checkpoint!()` before it"),
            "{}",
            a.text
        );
        // Not placed: says where it is not known from.
        let a = advise(store, load, at_, after(None), false, false);
        assert_eq!(a.kind, AdviceKind::TrueDependence);
        assert!(
            a.text
                .contains("how far after the `checkpoint!()` before it (segment 1)"),
            "{}",
            a.text
        );
    }
}
