//! Mode `tls` with violations injected into its speculative epochs
//! (`tls_runtime::inject_violations`): every epoch may be rolled back at any tracked
//! access and run again, on any thread. The answers and the final database must still
//! be those of the transactions run in order, and no rolled-back epoch may leave a
//! write, a pin or a lock behind. (A file of its own: injection is process-wide.)

mod common;
use common::{assert_idle, mix};

use tpcc::driver::{self, Limit, RunOptions};
use tpcc::engine::kv::KvEngine;
use tpcc::engine::memory::MemoryKv;
use tpcc::engine::sequential;
use tpcc::engine::{Engine, Mode, Sync};
use tpcc::schema::Scale;

const SEED: u64 = 31;

#[test]
fn injected_violations_change_nothing() {
    let mut reference = KvEngine::new(MemoryKv::new(), Mode::Sequential);
    let meta = driver::load(&mut reference, 1, Scale::SMALL, SEED, false).unwrap();
    let expected = mix(&mut reference, meta, 500, SEED + 1);

    // One tracked access in four rolls its epoch back.
    tls_runtime::inject_violations(250_000);
    for threads in [2, 4] {
        let dir = tempfile::tempdir().unwrap();
        let mut b = sequential::create(
            &dir.path().join("tpcc.db"),
            Sync::Off,
            1,
            Scale::SMALL,
            Mode::Tls,
        )
        .unwrap();
        let meta = driver::load(&mut b, 1, Scale::SMALL, SEED, false).unwrap();
        b.set_threads(Some(threads));
        let mut violations = 0;
        let opts = RunOptions {
            limit: Limit::Transactions(500),
            seed: SEED + 1,
            progress: false,
        };
        let mut digest_check = || {
            let report = driver::run(&mut b, meta, &opts, &mut |_, _, _| {
                violations += tls_runtime::last_report().map_or(0, |r| r.violations);
                Ok(())
            })
            .unwrap();
            report.digest
        };
        let digest = digest_check();
        let summary = b.summary().unwrap();
        summary.check().unwrap();
        assert_eq!((digest, summary), expected, "{threads} threads");
        assert!(
            violations > 0,
            "{threads} threads: no violation was injected"
        );
        assert_idle(&mut b, &format!("{threads} threads"));
    }
    tls_runtime::inject_violations(0);
}
