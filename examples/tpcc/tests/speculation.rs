//! Mode `tls` (the transactions' loops as speculative epochs) against the same
//! transactions run in order: the same answers and the same final database at every
//! thread count, also when orders name one item twice (a true dependence between two
//! epochs of one loop), with nothing left pinned or locked afterwards.

mod common;
use common::{assert_idle, mix, orders_with_repeated_items};

use std::path::Path;

use tpcc::driver;
use tpcc::engine::kv::KvEngine;
use tpcc::engine::memory::MemoryKv;
use tpcc::engine::sequential::BTreeStore;
use tpcc::engine::{Engine, Mode};
use tpcc::schema::Meta;
use tpcc::workload::{NewOrderOutput, Terminal};

const SEED: u64 = 23;

fn memory(mode: Mode) -> (KvEngine<MemoryKv>, Meta) {
    common::memory(mode, SEED)
}

fn btree(dir: &Path, mode: Mode) -> (KvEngine<BTreeStore>, Meta) {
    common::btree(dir, mode, SEED)
}

#[test]
fn tls_gives_the_sequential_result_at_every_thread_count() {
    common::gives_the_sequential_result(Mode::Tls, SEED);
}

fn new_orders(e: &mut dyn Engine, inputs: &[tpcc::workload::NewOrderInput]) -> Vec<NewOrderOutput> {
    inputs.iter().map(|i| e.new_order(i).unwrap()).collect()
}

#[test]
fn repeated_items_give_the_sequential_result() {
    let (mut reference, meta) = memory(Mode::Sequential);
    let inputs = orders_with_repeated_items(meta, SEED + 7, 150);
    let expected = new_orders(&mut reference, &inputs);
    let expected_db = reference.summary().unwrap();
    for threads in [2, 4] {
        let dir = tempfile::tempdir().unwrap();
        let (mut b, _) = btree(dir.path(), Mode::Tls);
        b.set_threads(Some(threads));
        let mut violations = 0;
        let got: Vec<_> = inputs
            .iter()
            .map(|i| {
                let out = b.new_order(i).unwrap();
                violations += tls_runtime::last_report().map_or(0, |r| r.violations);
                out
            })
            .collect();
        eprintln!("{threads} threads: {violations} violations");
        assert_eq!(got, expected, "{threads} threads");
        assert_eq!(b.summary().unwrap(), expected_db, "{threads} threads");
        assert_idle(&mut b, &format!("{threads} threads"));
    }
}

#[test]
fn sequential_and_tls_alternate_on_one_database() {
    let (mut reference, meta) = memory(Mode::Sequential);
    let expected = mix(&mut reference, meta, 400, SEED + 1);
    let dir = tempfile::tempdir().unwrap();
    let (mut b, meta) = btree(dir.path(), Mode::Sequential);
    b.set_threads(Some(2));
    // The same sequence, with the mode switched every 50 transactions.
    let mut t = Terminal::new(meta, SEED + 1);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for k in 0..400 {
        if k % 50 == 0 {
            let mode = if k % 100 == 0 {
                Mode::Tls
            } else {
                Mode::Sequential
            };
            b.set_mode(mode).unwrap();
        }
        let input = t.next(driver::now_micros());
        let out = tpcc::engine::execute(&mut b, &input).unwrap();
        std::hash::Hash::hash(&out, &mut hasher);
    }
    assert_eq!(std::hash::Hasher::finish(&hasher), expected.0, "answers");
    assert_eq!(b.summary().unwrap(), expected.1, "final database");
    assert!(b.set_mode(Mode::Sqlite).is_err());
    assert_idle(&mut b, "alternating");
}
