//! A whole loop run in one in-order stretch (its site judged not to pay beforehand):
//! how it ends (a panic of the body or of the items iterator, `break`, `return`)
//! matches the plain loop, and the stretch's mark does not outlive it.

use super::*;
use crate::{Control, Loop, LoopOutcome, RunMode, SpecVec, last_report};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A new site, judged so often not to pay that its next stretch is longer than the
/// loops below.
fn site_in_order() -> &'static LoopSite {
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    for _ in 0..12 {
        site.judge(Verdict::Lost);
    }
    assert!(site.in_order() && site.in_order_budget() >= 1000);
    site
}

/// Runs 100 iterations on a site in order, the body given each index, writing
/// `i + 1` to element `i` first; returns the outcome or the panic's message, what
/// the vector holds, and the loop's report.
fn run(
    items: impl Iterator<Item = usize> + Send,
    body: impl Fn(usize) -> Control<&'static str> + Sync,
) -> (
    Result<LoopOutcome<&'static str>, String>,
    Vec<u64>,
    crate::LoopReport,
) {
    let out = SpecVec::from(vec![0u64; 100]);
    let ran = catch_unwind(AssertUnwindSafe(|| {
        Loop::new()
            .threads(2)
            .site(site_in_order())
            .run(items, |i| {
                out.set(i, i as u64 + 1);
                body(i)
            })
    }));
    let ran = ran.map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    });
    let report = last_report().expect("the loop left a report");
    (ran, out.into_vec(), report)
}

/// What the plain loop leaves when it stops after iteration `last`.
fn written_through(last: u64) -> Vec<u64> {
    (0..100)
        .map(|i| if i <= last { i + 1 } else { 0 })
        .collect()
}

#[test]
fn a_stretch_ends_as_the_plain_loop_does() {
    let (ran, out, r) = run(0..100, |i| {
        assert!(i != 37, "body at {i}");
        Control::Continue
    });
    assert_eq!(ran.err().as_deref(), Some("body at 37"));
    assert_eq!(out, written_through(37));
    assert_eq!((r.items, r.in_order_epochs), (38, 38), "{r}");

    let items = (0..100).inspect(|&i| assert!(i != 50, "items at {i}"));
    let (ran, out, r) = run(items, |_| Control::Continue);
    assert_eq!(ran.err().as_deref(), Some("items at 50"));
    assert_eq!(out, written_through(49));
    assert_eq!(r.in_order_epochs, 50, "{r}");

    let (ran, out, _) = run(0..100, |i| {
        if i == 60 {
            Control::Break
        } else {
            Control::Continue
        }
    });
    assert!(matches!(ran, Ok(LoopOutcome::Broke)));
    assert_eq!(out, written_through(60));

    let (ran, out, _) = run(0..100, |i| {
        if i == 70 {
            Control::Return("returned")
        } else {
            Control::Continue
        }
    });
    assert_eq!(ran.ok().and_then(LoopOutcome::returned), Some("returned"));
    assert_eq!(out, written_through(70));

    let (ran, out, r) = run(0..100, |_| Control::Continue);
    assert!(matches!(ran, Ok(LoopOutcome::Completed)));
    assert_eq!(out, written_through(99));
    assert_eq!((r.items, r.in_order_epochs), (100, 100), "{r}");
}

/// A loop started after a stretch that panicked is a loop of its own (a mark left
/// raised would run it as part of an iteration: in order, with no report).
#[test]
fn a_panicking_stretch_leaves_no_mark() {
    let (ran, _, _) = run(0..100, |i| {
        assert!(i != 5, "body at {i}");
        Control::Continue
    });
    assert!(ran.is_err());
    let out = SpecVec::from(vec![0u64; 10]);
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    Loop::new()
        .threads(2)
        .site(site)
        .name("after")
        .run(0..10usize, |i| {
            out.set(i, 1);
            Control::<()>::Continue
        });
    let r = last_report().expect("the loop left a report");
    assert_eq!(
        (r.name.as_str(), r.mode, r.items),
        ("after", RunMode::Parallel, 10)
    );
    assert_eq!(out.into_vec(), vec![1; 10]);
}
