//! What the speculation tests share.

use tpcc::driver::{self, Limit, RunOptions};
use tpcc::engine::{Engine, Summary};
use tpcc::schema::Meta;

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
