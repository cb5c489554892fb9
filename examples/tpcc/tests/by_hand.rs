//! Mode `by-hand` (the loops split between threads by hand, no speculation) against
//! the same transactions run in order: the same answers and the same final database
//! at every thread count, also when orders name one stock row on several lines
//! (those lines must stay on one thread, in order), with nothing left pinned or
//! locked afterwards.

mod common;
use common::{assert_idle, orders_with_repeated_items};

use tpcc::engine::{Engine, Mode};

const SEED: u64 = 29;

#[test]
fn by_hand_gives_the_sequential_result_at_every_thread_count() {
    common::gives_the_sequential_result(Mode::ByHand, SEED);
}

/// Orders whose lines name the previous line's stock row two times in three: the
/// split must keep each stock row's lines on one thread, in loop order.
#[test]
fn repeated_stock_rows_give_the_sequential_result() {
    let (mut reference, meta) = common::memory(Mode::Sequential, SEED);
    let inputs = orders_with_repeated_items(meta, SEED + 7, 150);
    let expected: Vec<_> = inputs
        .iter()
        .map(|i| reference.new_order(i).unwrap())
        .collect();
    let expected_db = reference.summary().unwrap();
    for threads in [2, 4] {
        let dir = tempfile::tempdir().unwrap();
        let (mut b, _) = common::btree(dir.path(), Mode::ByHand, SEED);
        b.set_threads(Some(threads));
        let got: Vec<_> = inputs.iter().map(|i| b.new_order(i).unwrap()).collect();
        assert_eq!(got, expected, "{threads} threads");
        assert_eq!(b.summary().unwrap(), expected_db, "{threads} threads");
        assert_idle(&mut b, &format!("{threads} threads"));
    }
}
