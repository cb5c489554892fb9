//! Every engine against the spec's consistency conditions, and the engines against each
//! other on the same seeded sequence.

use tempfile::TempDir;
use tpcc::driver::{self, Limit, RunOptions};
use tpcc::engine::kv::KvEngine;
use tpcc::engine::memory::MemoryKv;
use tpcc::engine::{self, Engine, Mode, Sync};
use tpcc::schema::{Meta, Scale};
use tpcc::workload::{Terminal, TxnInput, TxnKind, TxnOutput};

const SEED: u64 = 11;

/// A loaded engine plus the directory its files live in.
struct Loaded {
    engine: Box<dyn Engine>,
    meta: Meta,
    _dir: Option<TempDir>,
}

fn load(kind: &str, warehouses: u16) -> Option<Loaded> {
    let (mut engine, dir): (Box<dyn Engine>, _) = match kind {
        "memory" => (
            Box::new(KvEngine::new(MemoryKv::new(), Mode::Sequential)),
            None,
        ),
        "sqlite" | "sequential" | "tls" => {
            let dir = tempfile::tempdir().unwrap();
            let mode = kind.parse::<Mode>().unwrap();
            match engine::create(
                &dir.path().join("tpcc.db"),
                mode,
                Sync::Off,
                warehouses,
                Scale::SMALL,
            ) {
                Ok(e) => (e, Some(dir)),
                Err(e) => panic!("creating {kind}: {e:#}"),
            }
        }
        _ => unreachable!(),
    };
    let meta = driver::load(engine.as_mut(), warehouses, Scale::SMALL, SEED, false).unwrap();
    Some(Loaded {
        engine,
        meta,
        _dir: dir,
    })
}

fn assert_consistent(engine: &mut dyn Engine, context: &str) {
    let s = engine.summary().unwrap();
    if let Err(e) = s.check() {
        panic!("{context}: {e}");
    }
}

const ENGINES: [&str; 4] = ["memory", "sqlite", "sequential", "tls"];

#[test]
fn load_follows_the_population_rules() {
    for kind in ENGINES {
        let Some(mut l) = load(kind, 2) else { continue };
        let s = l.engine.summary().unwrap();
        s.check().unwrap();
        let scale = Scale::SMALL;
        assert_eq!(s.items, u64::from(scale.items), "{kind}");
        assert_eq!(s.stock, 2 * u64::from(scale.items), "{kind}");
        assert_eq!(s.customers, 2 * 10 * u64::from(scale.customers), "{kind}");
        assert_eq!(s.history, s.customers, "{kind}");
        assert_eq!(
            s.w_ytd.values().copied().collect::<Vec<_>>(),
            [30_000_000; 2]
        );
        assert_eq!(s.districts.len(), 20);
        for d in s.districts.values() {
            assert_eq!(d.orders, u64::from(scale.orders()));
            assert_eq!(d.new_orders, u64::from(scale.new_orders()));
            assert_eq!(d.min_no_o_id, scale.first_new_order());
            assert_eq!(d.d_next_o_id, scale.orders() + 1);
            // 5 to 15 lines per order: the mean is 10.
            let mean = d.order_lines as f64 / d.orders as f64;
            assert!((8.0..12.0).contains(&mean), "{mean}");
        }
        assert_eq!(s.sum_c_balance, -1000 * s.customers as i64);
        assert_eq!(l.meta.warehouses, 2);
        assert_eq!(l.engine.meta().unwrap(), l.meta);
    }
}

/// Runs `n` transactions of one kind, then checks the conditions.
fn run_kind(kind: TxnKind, n: usize) {
    for engine_kind in ENGINES {
        let Some(mut l) = load(engine_kind, 2) else {
            continue;
        };
        let mut t = Terminal::new(l.meta, SEED + 1);
        let before = l.engine.summary().unwrap();
        let mut outputs = Vec::new();
        for _ in 0..n {
            let input = match kind {
                TxnKind::NewOrder => TxnInput::NewOrder(t.new_order(1)),
                TxnKind::Payment => TxnInput::Payment(t.payment(1)),
                TxnKind::OrderStatus => TxnInput::OrderStatus(t.order_status()),
                TxnKind::Delivery => TxnInput::Delivery(t.delivery(1)),
                TxnKind::StockLevel => TxnInput::StockLevel(t.stock_level()),
            };
            outputs.push(engine::execute(l.engine.as_mut(), &input).unwrap());
        }
        let context = format!("{engine_kind} after {n} {}", kind.name());
        assert_consistent(l.engine.as_mut(), &context);
        let after = l.engine.summary().unwrap();
        // Each kind changes what it should, and only that.
        match kind {
            TxnKind::NewOrder => {
                let committed = outputs
                    .iter()
                    .filter(|o| matches!(o, TxnOutput::NewOrder(r) if !r.rolled_back))
                    .count() as u64;
                assert!(committed > 0 && committed < n as u64 + 1);
                assert_eq!(after.total_orders(), before.total_orders() + committed);
                assert!(after.sum_s_order_cnt > before.sum_s_order_cnt);
            }
            TxnKind::Payment => {
                assert_eq!(after.history, before.history + n as u64);
                assert_eq!(after.sum_c_payment_cnt, before.sum_c_payment_cnt + n as u64);
                let paid: i64 =
                    after.w_ytd.values().sum::<i64>() - before.w_ytd.values().sum::<i64>();
                assert!(paid >= 100 * n as i64);
                assert_eq!(
                    after.sum_c_balance,
                    before.sum_c_balance - paid,
                    "{context}"
                );
            }
            TxnKind::OrderStatus | TxnKind::StockLevel => {
                assert_eq!(
                    after, before,
                    "{context}: read-only transaction changed data"
                );
            }
            TxnKind::Delivery => {
                let delivered: u64 = outputs
                    .iter()
                    .map(|o| match o {
                        TxnOutput::Delivery(d) => u64::from(d.delivered),
                        _ => 0,
                    })
                    .sum();
                let no = |s: &tpcc::engine::Summary| -> u64 {
                    s.districts.values().map(|d| d.new_orders).sum()
                };
                assert_eq!(no(&before) - no(&after), delivered);
                assert_eq!(
                    after.sum_c_delivery_cnt,
                    before.sum_c_delivery_cnt + delivered
                );
            }
        }
    }
}

#[test]
fn new_order_keeps_the_database_consistent() {
    run_kind(TxnKind::NewOrder, 300);
}

#[test]
fn payment_keeps_the_database_consistent() {
    run_kind(TxnKind::Payment, 300);
}

#[test]
fn order_status_changes_nothing() {
    run_kind(TxnKind::OrderStatus, 100);
}

#[test]
fn delivery_keeps_the_database_consistent() {
    // 40 deliveries of 20 districts exhaust the 18 undelivered orders per district, so
    // the "no new order: skip" path runs too.
    run_kind(TxnKind::Delivery, 40);
}

#[test]
fn stock_level_changes_nothing() {
    run_kind(TxnKind::StockLevel, 100);
}

#[test]
fn engines_agree_on_the_same_seeded_sequence() {
    let mut results = Vec::new();
    for kind in ENGINES {
        let Some(mut l) = load(kind, 2) else { continue };
        let opts = RunOptions {
            limit: Limit::Transactions(1500),
            seed: SEED + 2,
            progress: false,
        };
        let mut acked = 0;
        let report = driver::run(l.engine.as_mut(), l.meta, &opts, &mut |_, _, _| {
            acked += 1;
            Ok(())
        })
        .unwrap();
        let summary = l.engine.summary().unwrap();
        summary.check().unwrap();
        assert!(report.count_of(TxnKind::NewOrder) > 500);
        assert_eq!(
            acked + report.rolled_back,
            report.count_of(TxnKind::NewOrder)
        );
        results.push((kind, report.digest, summary));
    }
    assert!(results.len() >= 2, "need two engines to compare");
    let (k0, d0, s0) = &results[0];
    for (k, d, s) in &results[1..] {
        assert_eq!(s, s0, "{k} and {k0} ended with different totals");
        assert_eq!(d, d0, "{k} and {k0} answered differently");
    }
}

#[test]
fn rollback_leaves_no_trace() {
    for kind in ENGINES {
        let Some(mut l) = load(kind, 1) else { continue };
        let before = l.engine.summary().unwrap();
        let mut t = Terminal::new(l.meta, 5);
        let mut input = t.new_order(1);
        let last = usize::from(input.ol_cnt) - 1;
        input.lines[last].i_id = l.meta.scale.items + 1;
        let out = l.engine.new_order(&input).unwrap();
        assert!(out.rolled_back, "{kind}");
        assert_eq!(l.engine.summary().unwrap(), before, "{kind}");
        // The order id is reused by the next New Order in that district.
        input.lines[last].i_id = 1;
        let again = l.engine.new_order(&input).unwrap();
        assert!(!again.rolled_back);
        assert_eq!(again.o_id, out.o_id, "{kind}");
        assert!(
            l.engine
                .order_exists(input.w_id, input.d_id, again.o_id)
                .unwrap()
        );
        assert!(
            !l.engine
                .order_exists(input.w_id, input.d_id, again.o_id + 1)
                .unwrap()
        );
    }
}

/// Records the customers the loader creates, ignoring every other row.
#[derive(Default)]
struct Customers(Vec<(u16, u8, String, String, u32)>);

impl tpcc::load::LoadSink for Customers {
    fn insert_item(&mut self, _: &tpcc::schema::Item) -> anyhow::Result<()> {
        Ok(())
    }
    fn insert_warehouse(&mut self, _: &tpcc::schema::Warehouse) -> anyhow::Result<()> {
        Ok(())
    }
    fn insert_stock(&mut self, _: &tpcc::schema::Stock) -> anyhow::Result<()> {
        Ok(())
    }
    fn insert_district(&mut self, _: &tpcc::schema::District) -> anyhow::Result<()> {
        Ok(())
    }
    fn insert_customer(&mut self, c: &tpcc::schema::Customer) -> anyhow::Result<()> {
        self.0.push((
            c.c_w_id,
            c.c_d_id,
            c.c_last.clone(),
            c.c_first.clone(),
            c.c_id,
        ));
        Ok(())
    }
    fn insert_history(&mut self, _: &tpcc::schema::History) -> anyhow::Result<()> {
        Ok(())
    }
    fn insert_order(&mut self, _: &tpcc::schema::Order) -> anyhow::Result<()> {
        Ok(())
    }
    fn insert_order_line(&mut self, _: &tpcc::schema::OrderLine) -> anyhow::Result<()> {
        Ok(())
    }
    fn insert_new_order(&mut self, _: &tpcc::schema::NewOrder) -> anyhow::Result<()> {
        Ok(())
    }
    fn batch_boundary(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &Meta) -> anyhow::Result<()> {
        Ok(())
    }
}

#[test]
fn selection_by_last_name_picks_the_middle_customer() {
    use tpcc::workload::{CustomerSelector, OrderStatusInput, PaymentInput, middle_of};
    // The loader is deterministic: replay it to know every customer's names.
    let mut customers = Customers::default();
    tpcc::load::populate(&mut customers, 1, Scale::SMALL, SEED, 0, &mut |_| {}).unwrap();
    let expected = |name: &str| {
        let mut same: Vec<_> = customers
            .0
            .iter()
            .filter(|c| c.0 == 1 && c.1 == 3 && c.2 == name)
            .map(|c| (c.3.clone(), c.4))
            .collect();
        same.sort();
        (same.len(), same[middle_of(same.len())].1)
    };
    let mut name = String::new();
    let mut sizes = Vec::new();
    for kind in ENGINES {
        let Some(mut l) = load(kind, 1) else { continue };
        for n in 0..=Scale::SMALL.last_name_max() {
            name.clear();
            tpcc::random::last_name(n, &mut name);
            let (count, c_id) = expected(&name);
            sizes.push(count);
            let os = OrderStatusInput {
                w_id: 1,
                d_id: 3,
                customer: CustomerSelector::LastName(name.clone()),
            };
            assert_eq!(
                l.engine.order_status(&os).unwrap().c_id,
                c_id,
                "{kind} {name}"
            );
            let p = PaymentInput {
                w_id: 1,
                d_id: 3,
                c_w_id: 1,
                c_d_id: 3,
                customer: CustomerSelector::LastName(name.clone()),
                h_amount: 1234,
                h_date: 1,
            };
            let out = l.engine.payment(&p).unwrap();
            assert_eq!(out.c_id, c_id, "{kind} {name}");
        }
        let missing = PaymentInput {
            w_id: 1,
            d_id: 3,
            c_w_id: 1,
            c_d_id: 3,
            customer: CustomerSelector::LastName("NOSUCHNAME".into()),
            h_amount: 1234,
            h_date: 1,
        };
        let before = l.engine.summary().unwrap();
        assert!(l.engine.payment(&missing).is_err(), "{kind}");
        assert_eq!(
            l.engine.summary().unwrap(),
            before,
            "{kind}: failed payment left changes"
        );
    }
    // The population has names shared by several customers (odd and even counts).
    assert!(sizes.iter().any(|&n| n >= 3));
    assert!(sizes.iter().any(|&n| n % 2 == 0 && n > 0));
}
