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

/// Terminals, loop threads and transactions of a run.
struct Shape {
    terminals: usize,
    threads: usize,
    transactions: u64,
}

const USUAL: Shape = Shape {
    terminals: 4,
    threads: 2,
    transactions: 800,
};

fn orders(s: &tpcc::engine::Summary) -> u64 {
    s.districts.values().map(|d| d.orders).sum()
}

fn run(mode: Mode, inject: u32, shape: Shape) {
    let context = format!(
        "{mode}, {} terminals, {} threads, {inject} per million injected",
        shape.terminals, shape.threads
    );
    let dir = tempfile::tempdir().unwrap();
    let mut first = sequential::create(
        &dir.path().join("tpcc.db"),
        Sync::Off,
        1,
        Scale::SMALL,
        mode,
    )
    .unwrap();
    let meta = driver::load(&mut first, 1, Scale::SMALL, 41, false).unwrap();
    first.set_threads(Some(shape.threads));
    let before = first.summary().unwrap();
    // The terminals; `first` stays out of the run, to check the database after it.
    let mut terminals: Vec<Box<dyn Engine + Send>> = (0..shape.terminals)
        .map(|_| Box::new(first.another_terminal().unwrap()) as Box<dyn Engine + Send>)
        .collect();
    let opts = RunOptions {
        limit: Limit::Transactions(shape.transactions),
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
    assert_eq!(report.count(), shape.transactions, "{context}");

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
    run(Mode::Sequential, 0, USUAL);
    run(Mode::Tls, 0, USUAL);
    // One tracked access in five rolls its epoch back, while other terminals hold
    // and wait for locks.
    run(Mode::Tls, 200_000, USUAL);
}

/// Eight terminals on one warehouse, each transaction's loops on eight threads (on
/// a small machine, far more threads than cores, so every loop is slow and holds
/// its locks long). Two Deliveries of one warehouse used to deadlock whenever they
/// overlapped: each had scanned the district's oldest new order (a shared lock)
/// and waited to delete it, the speculative loop leaving that wait until the
/// epoch's commit, and a Delivery lost all 50 of its retries in nearly every such
/// run. They take turns now.
#[test]
fn eight_terminals_on_eight_threads_each_finish() {
    for _ in 0..2 {
        run(
            Mode::Tls,
            0,
            Shape {
                terminals: 8,
                threads: 8,
                transactions: 1500,
            },
        );
    }
}
