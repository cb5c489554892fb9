//! The earlier forms of mode `tls` that the book's New Order journey runs
//! (`TPCC_JOURNEY`: rows tracked by page, a checkpoint before the order-line insert)
//! give the answers and final database of the transactions run in order, also with
//! violations injected at random tracked accesses (rolled back to the checkpoint as
//! well as to the start), and leave nothing pinned or locked. Page tracking does make
//! New Order's items conflict: the journey's first step is not a straw man. (One test
//! in a file of its own: injection is process-wide.)

mod common;
use common::{assert_idle, mix};

use tpcc::engine::Mode;
use tpcc::engine::kv::journey::{Grain, Journey};

const SEED: u64 = 41;

fn steps() -> [Journey; 3] {
    let at = |grain, checkpoint| Journey { grain, checkpoint };
    [
        at(Grain::Page, false),
        at(Grain::Page, true),
        at(Grain::Row, true),
    ]
}

/// 400 transactions of the mix in `journey` at `threads`: the answers and database,
/// and the violations plus synchronized waits the loops saw.
fn run(journey: Journey, threads: usize) -> ((u64, tpcc::engine::Summary), u64) {
    let dir = tempfile::tempdir().unwrap();
    let (mut b, meta) = common::btree(dir.path(), Mode::Tls, SEED);
    b.set_threads(Some(threads));
    b.set_journey(journey);
    let conflicts = std::cell::Cell::new(0);
    let result = {
        let opts = tpcc::driver::RunOptions {
            limit: tpcc::driver::Limit::Transactions(400),
            seed: SEED + 1,
            progress: false,
        };
        let report = tpcc::driver::run(&mut b, meta, &opts, &mut |_, _, _| {
            if let Some(r) = tls_runtime::last_report() {
                let waits: u64 = r.synchronized.iter().map(|s| s.waits).sum();
                conflicts.set(conflicts.get() + r.violations + waits);
            }
            Ok(())
        })
        .unwrap();
        let summary = tpcc::engine::Engine::summary(&mut b).unwrap();
        summary.check().unwrap();
        (report.digest, summary)
    };
    assert_idle(&mut b, &format!("{journey:?}, {threads} threads"));
    (result, conflicts.get())
}

#[test]
fn every_step_gives_the_sequential_result() {
    let (mut reference, meta) = common::memory(Mode::Sequential, SEED);
    let expected = mix(&mut reference, meta, 400, SEED + 1);
    for journey in steps() {
        for threads in [1, 2, 4] {
            let (got, conflicts) = run(journey, threads);
            assert_eq!(got, expected, "{journey:?}, {threads} threads");
            if journey.grain == Grain::Page && threads > 1 {
                // Every item inserts into its order's page: with two threads, later
                // items meet earlier ones there.
                assert!(conflicts > 0, "{journey:?}, {threads} threads: no conflict");
            }
        }
    }
    // One tracked access in four rolls its epoch back, to its start or to the
    // checkpoint.
    tls_runtime::inject_violations(250_000);
    for journey in steps() {
        let (got, conflicts) = run(journey, 2);
        assert_eq!(got, expected, "{journey:?}, injected");
        assert!(conflicts > 0, "{journey:?}: no violation was injected");
    }
    tls_runtime::inject_violations(0);
}
