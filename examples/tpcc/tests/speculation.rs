//! Mode `tls` (the transactions' loops as speculative epochs) against the same
//! transactions run in order: the same answers and the same final database at every
//! thread count, also when orders name one item twice (a true dependence between two
//! epochs of one loop), with nothing left pinned or locked afterwards.

mod common;
use common::{assert_idle, mix};

use std::path::Path;

use tpcc::driver;
use tpcc::engine::kv::KvEngine;
use tpcc::engine::memory::MemoryKv;
use tpcc::engine::sequential::{self, BTreeStore};
use tpcc::engine::{Engine, Mode, Sync};
use tpcc::schema::{Meta, Scale};
use tpcc::workload::{NewOrderOutput, Terminal};

const SEED: u64 = 23;

fn memory(mode: Mode) -> (KvEngine<MemoryKv>, Meta) {
    let mut e = KvEngine::new(MemoryKv::new(), mode);
    let meta = driver::load(&mut e, 1, Scale::SMALL, SEED, false).unwrap();
    (e, meta)
}

fn btree(dir: &Path, mode: Mode) -> (KvEngine<BTreeStore>, Meta) {
    let mut e = sequential::create(&dir.join("tpcc.db"), Sync::Off, 1, mode).unwrap();
    let meta = driver::load(&mut e, 1, Scale::SMALL, SEED, false).unwrap();
    (e, meta)
}

#[test]
fn tls_gives_the_sequential_result_at_every_thread_count() {
    let (mut reference, meta) = memory(Mode::Sequential);
    let expected = mix(&mut reference, meta, 600, SEED + 1);
    for threads in [1, 2, 4] {
        let (mut m, meta) = memory(Mode::Tls);
        m.set_threads(Some(threads));
        assert_eq!(
            mix(&mut m, meta, 600, SEED + 1),
            expected,
            "memory, {threads} threads"
        );

        let dir = tempfile::tempdir().unwrap();
        let (mut b, meta) = btree(dir.path(), Mode::Tls);
        b.set_threads(Some(threads));
        assert_eq!(
            mix(&mut b, meta, 600, SEED + 1),
            expected,
            "btree, {threads} threads"
        );
        assert_idle(&mut b, &format!("{threads} threads"));
    }
}

/// New Orders whose lines name one item several times: a later epoch reads the stock
/// row an earlier one writes, so it must see that write (or be violated and re-run).
fn orders_with_repeated_items(meta: Meta, n: usize) -> Vec<tpcc::workload::NewOrderInput> {
    let mut t = Terminal::new(meta, SEED + 7);
    (0..n)
        .map(|k| {
            let mut input = t.new_order(1_000_000 + k as i64);
            let lines = usize::from(input.ol_cnt);
            for i in 1..lines {
                if (i + k) % 3 != 0 {
                    input.lines[i].i_id = input.lines[i - 1].i_id;
                    input.lines[i].supply_w_id = input.lines[i - 1].supply_w_id;
                }
            }
            input
        })
        .collect()
}

fn new_orders(e: &mut dyn Engine, inputs: &[tpcc::workload::NewOrderInput]) -> Vec<NewOrderOutput> {
    inputs.iter().map(|i| e.new_order(i).unwrap()).collect()
}

#[test]
fn repeated_items_give_the_sequential_result() {
    let (mut reference, meta) = memory(Mode::Sequential);
    let inputs = orders_with_repeated_items(meta, 150);
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
