//! Several terminals at once on one database (`run --terminals N`), in mode
//! `sequential` and in mode `tls` (also with violations injected into the epochs):
//! the database stays consistent (conditions 1-4), no transaction's effect is lost
//! or doubled (orders, history rows and payment counts grow by exactly what the
//! terminals committed), every acknowledged order exists, and nothing is left pinned
//! or locked. (A file of its own: injection is process-wide.)

mod common;
use common::assert_idle;

use std::collections::HashSet;
use std::sync::Mutex;

use tpcc::driver::{self, Limit, RunOptions};
use tpcc::engine::sequential;
use tpcc::engine::{Engine, Mode, Sync};
use tpcc::schema::Scale;
use tpcc::workload::TxnKind;

const TERMINALS: usize = 4;
const TRANSACTIONS: u64 = 800;

fn orders(s: &tpcc::engine::Summary) -> u64 {
    s.districts.values().map(|d| d.orders).sum()
}

fn run(mode: Mode, inject: u32) {
    let context = format!("{mode}, {} per million injected", inject);
    let dir = tempfile::tempdir().unwrap();
    let mut first = sequential::create(&dir.path().join("tpcc.db"), Sync::Off, 1, mode).unwrap();
    let meta = driver::load(&mut first, 1, Scale::SMALL, 41, false).unwrap();
    first.set_threads(Some(2));
    let before = first.summary().unwrap();
    // The terminals; `first` stays out of the run, to check the database after it.
    let mut terminals: Vec<Box<dyn Engine + Send>> = (0..TERMINALS)
        .map(|_| Box::new(first.another_terminal().unwrap()) as Box<dyn Engine + Send>)
        .collect();
    let opts = RunOptions {
        limit: Limit::Transactions(TRANSACTIONS),
        seed: 42,
        progress: false,
    };
    let acked = Mutex::new(Vec::new());
    tls_runtime::inject_violations(inject);
    let report = driver::run_terminals(&mut terminals, meta, &opts, &mut |w, d, o| {
        acked.lock().unwrap().push((w, d, o));
        Ok(())
    })
    .unwrap();
    tls_runtime::inject_violations(0);
    assert_eq!(report.count(), TRANSACTIONS, "{context}");

    let after = first.summary().unwrap();
    after.check().unwrap();
    let new_orders = report.count_of(TxnKind::NewOrder) - report.rolled_back;
    let payments = report.count_of(TxnKind::Payment);
    assert_eq!(
        orders(&after),
        orders(&before) + new_orders,
        "{context}: orders"
    );
    assert_eq!(
        after.history,
        before.history + payments,
        "{context}: history"
    );
    assert_eq!(
        after.sum_c_payment_cnt,
        before.sum_c_payment_cnt + payments,
        "{context}: payment counts"
    );
    let acked = acked.into_inner().unwrap();
    assert_eq!(
        acked.len() as u64,
        new_orders,
        "{context}: acknowledgements"
    );
    assert_eq!(
        acked.iter().collect::<HashSet<_>>().len(),
        acked.len(),
        "{context}: an order id was acknowledged twice"
    );
    for &(w, d, o) in &acked {
        assert!(
            first.order_exists(w, d, o).unwrap(),
            "{context}: order {w}/{d}/{o} lost"
        );
    }
    assert_idle(&mut first, &context);
    eprintln!(
        "{context}: {} New Orders, {} payments, {} run again",
        new_orders, payments, report.retried
    );
}

#[test]
fn terminals_at_once_keep_the_database_consistent() {
    run(Mode::Sequential, 0);
    run(Mode::Tls, 0);
    // One tracked access in five rolls its epoch back, while other terminals hold
    // and wait for locks.
    run(Mode::Tls, 200_000);
}
