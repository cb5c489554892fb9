//! What the speculation tests share. (Each test file uses some of it.)
#![allow(dead_code)]

use std::path::Path;

use tpcc::driver::{self, Limit, RunOptions};
use tpcc::engine::kv::KvEngine;
use tpcc::engine::memory::MemoryKv;
use tpcc::engine::sequential::{self, BTreeStore};
use tpcc::engine::{Engine, Mode, Summary, Sync};
use tpcc::schema::{Meta, Scale};
use tpcc::workload::{NewOrderInput, Terminal};

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

/// `n` New Orders of the terminal seeded with `seed` whose lines name the line
/// before's item (and supply warehouse, so its stock row) two times in three: a later
/// line reads the stock row an earlier one writes.
pub(crate) fn orders_with_repeated_items(meta: Meta, seed: u64, n: usize) -> Vec<NewOrderInput> {
    let mut t = Terminal::new(meta, seed);
    (0..n)
        .map(|k| {
            let mut input = t.new_order(1_000_000 + k as i64);
            for i in 1..usize::from(input.ol_cnt) {
                if (i + k) % 3 != 0 {
                    input.lines[i].i_id = input.lines[i - 1].i_id;
                    input.lines[i].supply_w_id = input.lines[i - 1].supply_w_id;
                }
            }
            input
        })
        .collect()
}

/// The in-memory store in `mode`, loaded with the small population from `seed`.
pub(crate) fn memory(mode: Mode, seed: u64) -> (KvEngine<MemoryKv>, Meta) {
    let mut e = KvEngine::new(MemoryKv::new(), mode);
    let meta = driver::load(&mut e, 1, Scale::SMALL, seed, false).unwrap();
    (e, meta)
}

/// Our database in `mode`, in `dir`, loaded with the small population from `seed`.
pub(crate) fn btree(dir: &Path, mode: Mode, seed: u64) -> (KvEngine<BTreeStore>, Meta) {
    let mut e = sequential::create(&dir.join("tpcc.db"), Sync::Off, 1, Scale::SMALL, mode).unwrap();
    let meta = driver::load(&mut e, 1, Scale::SMALL, seed, false).unwrap();
    (e, meta)
}

/// Checks that 600 transactions of the mix give, in `mode` at 1, 2 and 4 threads per
/// loop, on both stores, the answers and final database of the in-memory store run in
/// order, leaving nothing pinned or locked.
pub(crate) fn gives_the_sequential_result(mode: Mode, seed: u64) {
    let (mut reference, meta) = memory(Mode::Sequential, seed);
    let expected = mix(&mut reference, meta, 600, seed + 1);
    for threads in [1, 2, 4] {
        let (mut m, meta) = memory(mode, seed);
        m.set_threads(Some(threads));
        assert_eq!(
            mix(&mut m, meta, 600, seed + 1),
            expected,
            "{mode}, memory, {threads} threads"
        );

        let dir = tempfile::tempdir().unwrap();
        let (mut b, meta) = btree(dir.path(), mode, seed);
        b.set_threads(Some(threads));
        assert_eq!(
            mix(&mut b, meta, 600, seed + 1),
            expected,
            "{mode}, btree, {threads} threads"
        );
        assert_idle(&mut b, &format!("{mode}, {threads} threads"));
    }
}
