//! What the speculation tests share. (Each test file uses some of it.)
#![allow(dead_code)]

use tpcc::driver::{self, Limit, RunOptions};
use tpcc::engine::kv::KvEngine;
use tpcc::engine::sequential::BTreeStore;
use tpcc::engine::{Engine, Summary};
use tpcc::schema::Meta;

/// Checks that nothing is left pinned or locked on `e`'s database and that its trees
/// are intact.
pub(crate) fn assert_idle(e: &mut KvEngine<BTreeStore>, context: &str) {
    let db = e.store_mut().database();
    assert_eq!(
        db.pins_and_locks(),
        (0, 0),
        "{context}: pins and locks left"
    );
    db.check_integrity().unwrap();
}

/// Runs `n` transactions of the standard mix seeded with `seed`: the digest of every
/// answer, and the final database, checked against conditions 1 to 4.
pub(crate) fn mix(engine: &mut dyn Engine, meta: Meta, n: u64, seed: u64) -> (u64, Summary) {
    let opts = RunOptions {
        limit: Limit::Transactions(n),
        seed,
        progress: false,
    };
    let report = driver::run(engine, meta, &opts, &mut |_, _, _| Ok(())).unwrap();
    let summary = engine.summary().unwrap();
    summary.check().unwrap();
    (report.digest, summary)
}
