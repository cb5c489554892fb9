//! A loop site whose runs are shorter than one window of the adaptive policy (a
//! transaction's items loop of ten iterations, run once per transaction) is judged
//! across its runs: a short chain falls back to running in order. Results stay
//! sequential throughout. (That a short loop that pays keeps speculating depends on
//! the machine giving the worker a core; the window's sums carried between runs are
//! unit-tested in `adapt/tests/uneven.rs`.)

mod common;
use common::spin_from;
use tls_runtime::{Control, Loop, LoopSite, Spec, SpecVec, last_report};

const ITEMS: usize = 10;
const RUNS: u64 = 300;

/// Runs the 10-iteration loop `RUNS` times on `site`: a chain (each iteration reads
/// what the one before wrote, first thing) or independent iterations; checks each
/// run against the plain loop and returns the epochs the later half of the runs ran
/// in order.
fn short_runs(site: &'static LoopSite, chain: bool) -> u64 {
    let mut in_order_later = 0;
    for run in 0..RUNS {
        let shared = Spec::new(run);
        let out = SpecVec::from(vec![0u64; ITEMS]);
        Loop::new().threads(2).site(site).run(0..ITEMS, |i| {
            let seed = if chain { shared.get() } else { i as u64 };
            let x = spin_from(8, seed);
            if chain {
                shared.set(x);
            }
            out.set(i, x);
            Control::<()>::Continue
        });
        let mut want = Vec::with_capacity(ITEMS);
        let mut s = run;
        for i in 0..ITEMS {
            let x = spin_from(8, if chain { s } else { i as u64 });
            s = x;
            want.push(x);
        }
        assert_eq!(out.into_vec(), want, "run {run}");
        assert_eq!(shared.into_inner(), if chain { s } else { run });
        let r = last_report().expect("a report");
        if run >= RUNS / 2 {
            in_order_later += r.in_order_epochs;
        }
    }
    in_order_later
}

#[test]
fn a_short_chain_run_again_and_again_falls_back_to_in_order() {
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    // Each run is 10 epochs, under a window's 16 on two threads: judged on one run
    // alone, no window would ever fill and the chain would speculate in every run.
    // (Whether the worker joins or not, a chain does not pay: judged on its work or
    // as the caller running alone, it runs in order.)
    let in_order = short_runs(site, true);
    assert!(
        in_order > 0,
        "the later runs of a short chain never ran in order"
    );
}
