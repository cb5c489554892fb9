//! Mode `by-hand` (the loops split between threads by hand, no speculation) against
//! the same transactions run in order: the same answers and the same final database
//! at every thread count, also when orders name one stock row on several lines
//! (those lines must stay on one thread, in order), with nothing left pinned or
//! locked afterwards.

mod common;
use common::{assert_idle, mix};

use tpcc::driver;
use tpcc::engine::kv::KvEngine;
use tpcc::engine::memory::MemoryKv;
use tpcc::engine::sequential;
use tpcc::engine::{Engine, Mode, Sync};
use tpcc::schema::Scale;
use tpcc::workload::Terminal;

const SEED: u64 = 29;

#[test]
fn by_hand_gives_the_sequential_result_at_every_thread_count() {
    let mut reference = KvEngine::new(MemoryKv::new(), Mode::Sequential);
    let meta = driver::load(&mut reference, 1, Scale::SMALL, SEED, false).unwrap();
    let expected = mix(&mut reference, meta, 600, SEED + 1);
    for threads in [1, 2, 4] {
        let mut m = KvEngine::new(MemoryKv::new(), Mode::ByHand);
        let meta = driver::load(&mut m, 1, Scale::SMALL, SEED, false).unwrap();
        m.set_threads(Some(threads));
        assert_eq!(
            mix(&mut m, meta, 600, SEED + 1),
            expected,
            "memory, {threads} threads"
        );

        let dir = tempfile::tempdir().unwrap();
        let mut b =
            sequential::create(&dir.path().join("tpcc.db"), Sync::Off, 1, Mode::ByHand).unwrap();
        let meta = driver::load(&mut b, 1, Scale::SMALL, SEED, false).unwrap();
        b.set_threads(Some(threads));
        assert_eq!(
            mix(&mut b, meta, 600, SEED + 1),
            expected,
            "btree, {threads} threads"
        );
        assert_idle(&mut b, &format!("{threads} threads"));
    }
}

/// Orders whose lines name the previous line's stock row two times in three: the
/// split must keep each stock row's lines on one thread, in loop order.
#[test]
fn repeated_stock_rows_give_the_sequential_result() {
    let mut reference = KvEngine::new(MemoryKv::new(), Mode::Sequential);
    let meta = driver::load(&mut reference, 1, Scale::SMALL, SEED, false).unwrap();
    let mut t = Terminal::new(meta, SEED + 7);
    let inputs: Vec<_> = (0..150)
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
        .collect();
    let expected: Vec<_> = inputs
        .iter()
        .map(|i| reference.new_order(i).unwrap())
        .collect();
    let expected_db = reference.summary().unwrap();
    for threads in [2, 4] {
        let dir = tempfile::tempdir().unwrap();
        let mut b =
            sequential::create(&dir.path().join("tpcc.db"), Sync::Off, 1, Mode::ByHand).unwrap();
        driver::load(&mut b, 1, Scale::SMALL, SEED, false).unwrap();
        b.set_threads(Some(threads));
        let got: Vec<_> = inputs.iter().map(|i| b.new_order(i).unwrap()).collect();
        assert_eq!(got, expected, "{threads} threads");
        assert_eq!(b.summary().unwrap(), expected_db, "{threads} threads");
        assert_idle(&mut b, &format!("{threads} threads"));
    }
}
