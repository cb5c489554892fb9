//! Profile mode's advice: the dependences the model predicts on 2 cores, each with the
//! fix that fits it (`crate::advice`) and the speedup the model predicts once the fix
//! is applied to the recorded epochs:
//!
//! - a checkpoint: one before the first read at the load's line in every epoch;
//! - an accumulation: the accesses at the load's and the store's calls leave the
//!   epochs (an accumulation is applied at commit, untracked). A load and a store at
//!   two calls count as one when the epochs that load a location store it afterwards
//!   (`x.set(x.get() + 1)`);
//! - an escape or a delay to commit: the accesses on the store's and the load's
//!   lines leave the epochs (escaped code runs untracked);
//! - a true dependence: the reads at the load's line leave the epochs, which is what
//!   the loop would get without it, the most any change of the body could give.

use super::calibration::costs;
use super::model::{IN_ORDER_RATIO, Site};
use super::predict::predict_chunked;
use super::recorder::{AccessKind, EpochProfile, Event};
use crate::advice::{AdviceKind, LoadPlace, advise};
use crate::report::{Dependence, SourceLocation};
use std::time::Duration;

/// How many of the predicted dependences get advice (the report's top ones).
const ADVISED: usize = 3;

/// The dependences the model predicts for the loop at `at` on 2 cores, most lost
/// time first, the top ones with advice and its predicted gain.
pub(crate) fn predicted_dependences(
    items: &[EpochProfile],
    chunk: Option<usize>,
    at: &'static std::panic::Location<'static>,
) -> Vec<Dependence> {
    let costs = costs();
    let sequential: f64 = items.iter().map(|e| e.dur + e.commit_work).sum();
    let sim = predict_chunked(items, 2, &costs, chunk);
    let mut deps: Vec<_> = sim.deps.into_iter().collect();
    deps.sort_by(|a, b| {
        b.1.lost
            .total_cmp(&a.1.lost)
            .then(b.1.count.cmp(&a.1.count))
            .then_with(|| a.0.0.to_string().cmp(&b.0.0.to_string()))
            .then_with(|| a.0.1.to_string().cmp(&b.0.1.to_string()))
    });
    deps.into_iter()
        .enumerate()
        .map(|(rank, ((store, load), d))| {
            let n = d.count.max(1);
            let share = d.load_share_sum / n as f64;
            let advice = (rank < ADVISED).then(|| {
                let mut a = advise(
                    SourceLocation(store),
                    SourceLocation(load),
                    SourceLocation(at),
                    LoadPlace {
                        segment: d.segment,
                        share: Some(share),
                    },
                    // The replay's counts, not the run's: `rewrites` tells one location
                    // every epoch updates from iterations that meet now and then.
                    false,
                    store != load && rewrites(items, store, load),
                );
                let fixed = apply(items, a.kind, store, load);
                let t = predict_chunked(&fixed, 2, &costs, chunk).time;
                let s = if t > 0.0 { sequential / t } else { 1.0 };
                a.predicted_speedup_2 = Some(s.max(IN_ORDER_RATIO));
                a
            });
            Dependence {
                store: SourceLocation(store),
                load: SourceLocation(load),
                count: d.count,
                wasted: Duration::from_nanos(d.lost as u64),
                segment: d.segment,
                load_access: (d.load_index_sum / n) as u32,
                advice,
            }
        })
        .collect()
}

/// Whether the epochs that load at `load` store the location they loaded at `store`
/// afterwards, most of them, and the epochs that store at `store` loaded what they
/// store, most of them: a read-modify-write in two calls. Only of one location per
/// epoch (a total, a counter): a loop over many locations that happens to store some
/// of what it loaded is not one; nor is a location most epochs overwrite without
/// reading it, which the few that read it need (an outside test: a value stored by
/// every iteration and read by one in eight was advised as an accumulation).
fn rewrites(items: &[EpochProfile], store: Site, load: Site) -> bool {
    let (mut loads, mut rewritten, mut stores) = (0usize, 0usize, 0usize);
    for e in items {
        if e.events
            .iter()
            .any(|ev| ev.kind == AccessKind::Write && ev.site == Some(store))
        {
            stores += 1;
        }
        let mut loaded = e
            .events
            .iter()
            .enumerate()
            .filter(|(_, ev)| ev.kind == AccessKind::Read && ev.site == Some(load));
        let Some((i, first)) = loaded.next() else {
            continue;
        };
        loads += 1;
        let loc = first.loc;
        if loaded.any(|(_, ev)| ev.loc != loc) {
            continue;
        }
        if e.events[i..]
            .iter()
            .any(|ev| ev.kind == AccessKind::Write && ev.loc == loc && ev.site == Some(store))
        {
            rewritten += 1;
        }
    }
    loads > 0 && rewritten * 10 >= loads * 9 && rewritten * 10 >= stores * 9
}

fn same_line(a: Option<Site>, b: Site) -> bool {
    a.is_some_and(|a| a.file() == b.file() && a.line() == b.line())
}

/// The recorded epochs as they would be with the fix of `kind` applied.
fn apply(items: &[EpochProfile], kind: AdviceKind, store: Site, load: Site) -> Vec<EpochProfile> {
    items
        .iter()
        .map(|e| {
            let mut e = e.clone();
            match kind {
                AdviceKind::Checkpoint => {
                    if let Some(i) = e
                        .events
                        .iter()
                        .position(|ev| ev.kind == AccessKind::Read && same_line(ev.site, load))
                    {
                        let at = e.events[i].at;
                        e.events.insert(
                            i,
                            Event {
                                at,
                                loc: 0,
                                kind: AccessKind::Checkpoint,
                                site: None,
                            },
                        );
                    }
                }
                AdviceKind::Accumulate => e
                    .events
                    .retain(|ev| ev.site != Some(load) && ev.site != Some(store)),
                AdviceKind::EscapeOrDefer => e
                    .events
                    .retain(|ev| !same_line(ev.site, load) && !same_line(ev.site, store)),
                AdviceKind::TrueDependence => e
                    .events
                    .retain(|ev| !(ev.kind == AccessKind::Read && same_line(ev.site, load))),
            }
            e
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::Location;

    #[track_caller]
    fn site() -> Site {
        Location::caller()
    }

    fn access(at: f64, loc: usize, kind: AccessKind, site: Site) -> Event {
        Event {
            at,
            loc,
            kind,
            site: Some(site),
        }
    }

    #[test]
    fn a_read_modify_write_in_two_calls_is_of_one_location() {
        let (load, store) = (site(), site());
        // `x.set(x.get() + 1)` on one location per epoch: an accumulation.
        let total: Vec<_> = (0..20)
            .map(|_| EpochProfile {
                dur: 1000.0,
                events: vec![
                    access(10.0, 7, AccessKind::Read, load),
                    access(900.0, 7, AccessKind::Write, store),
                ],
                commit_work: 0.0,
            })
            .collect();
        assert!(rewrites(&total, store, load));
        // Many locations loaded at the line, one of them stored later: not one.
        let many: Vec<_> = (0..20)
            .map(|i| EpochProfile {
                dur: 1000.0,
                events: (0..10)
                    .flat_map(|k| {
                        [
                            access(f64::from(k) * 90.0, k as usize, AccessKind::Read, load),
                            access(
                                f64::from(k) * 90.0 + 1.0,
                                (k as usize + i) % 10,
                                AccessKind::Write,
                                store,
                            ),
                        ]
                    })
                    .collect(),
                commit_work: 0.0,
            })
            .collect();
        assert!(!rewrites(&many, store, load));
        // Every epoch stores the location at its end, one in eight reads it first:
        // a value the readers need, not a total.
        let overwritten: Vec<_> = (0..80)
            .map(|i| {
                let mut events = Vec::new();
                if i % 8 == 0 {
                    events.push(access(300.0, 7, AccessKind::Read, load));
                }
                events.push(access(990.0, 7, AccessKind::Write, store));
                EpochProfile {
                    dur: 1000.0,
                    events,
                    commit_work: 0.0,
                }
            })
            .collect();
        assert!(!rewrites(&overwritten, store, load));
    }
}
