//! Tests of the workload generator (`workload.rs`).

use super::*;
use crate::schema::Scale;

fn meta(warehouses: u16) -> Meta {
    Meta {
        warehouses,
        scale: Scale::SPEC,
        c_last_load: 117,
    }
}

#[test]
fn mix_follows_the_standard_proportions() {
    let mut t = Terminal::new(meta(1), 42);
    let n = 100_000;
    let mut counts = [0u32; 5];
    for _ in 0..n {
        counts[t.next_kind().index()] += 1;
    }
    let pct = |k: TxnKind| f64::from(counts[k.index()]) * 100.0 / f64::from(n);
    assert!((pct(TxnKind::NewOrder) - 45.0).abs() < 1.0, "{counts:?}");
    assert!((pct(TxnKind::Payment) - 43.0).abs() < 1.0, "{counts:?}");
    for k in [TxnKind::OrderStatus, TxnKind::Delivery, TxnKind::StockLevel] {
        assert!((pct(k) - 4.0).abs() < 0.5, "{counts:?}");
    }
}

#[test]
fn same_seed_same_sequence() {
    let mut a = Terminal::new(meta(3), 5);
    let mut b = Terminal::new(meta(3), 5);
    let mut c = Terminal::new(meta(3), 6);
    let sa: Vec<_> = (0..500).map(|_| a.next(0)).collect();
    let sb: Vec<_> = (0..500).map(|_| b.next(0)).collect();
    let sc: Vec<_> = (0..500).map(|_| c.next(0)).collect();
    assert_eq!(sa, sb);
    assert_ne!(sa, sc);
}

#[test]
fn new_order_inputs_follow_the_spec() {
    let mut t = Terminal::new(meta(4), 9);
    let n = 20_000;
    let (mut rollbacks, mut remote_lines, mut lines) = (0, 0, 0);
    for _ in 0..n {
        let no = t.new_order(0);
        assert!((5..=15).contains(&no.ol_cnt));
        assert!((1..=10).contains(&no.d_id) && (1..=4).contains(&no.w_id));
        assert!((1..=3000).contains(&no.c_id));
        for (i, l) in no.lines().iter().enumerate() {
            assert!((1..=10).contains(&l.quantity));
            if l.i_id == 100_001 {
                assert_eq!(i + 1, no.lines().len(), "unused item only on the last line");
                rollbacks += 1;
            } else {
                assert!((1..=100_000).contains(&l.i_id));
            }
            remote_lines += usize::from(l.supply_w_id != no.w_id);
            lines += 1;
        }
    }
    // About 1% of orders roll back and 1% of lines are remote.
    assert!((100..=300).contains(&rollbacks), "{rollbacks}");
    let remote_pct = remote_lines as f64 * 100.0 / lines as f64;
    assert!((0.7..1.3).contains(&remote_pct), "{remote_pct}");
}

#[test]
fn payment_selects_by_last_name_60_percent() {
    let mut t = Terminal::new(meta(2), 11);
    let n = 20_000;
    let mut by_name = 0;
    let mut remote = 0;
    for _ in 0..n {
        let p = t.payment(0);
        assert!((100..=500_000).contains(&p.h_amount));
        if let CustomerSelector::LastName(name) = &p.customer {
            by_name += 1;
            assert!(name.len() >= 9);
        }
        remote += usize::from(p.c_w_id != p.w_id);
    }
    let pct = by_name as f64 * 100.0 / f64::from(n);
    assert!((58.0..62.0).contains(&pct), "{pct}");
    let remote_pct = remote as f64 * 100.0 / f64::from(n);
    assert!((13.5..16.5).contains(&remote_pct), "{remote_pct}");
}

#[test]
fn helpers_compute_the_spec_formulas() {
    assert_eq!(new_stock_quantity(50, 5), 45);
    assert_eq!(new_stock_quantity(14, 5), 100);
    assert_eq!(new_stock_quantity(15, 5), 10);
    // 100.00 with 10% discount, 5% + 5% tax: 100 * 0.9 * 1.1 = 99.00
    assert_eq!(new_order_total(10_000, 1000, 500, 500), 9_900);
    assert_eq!(middle_of(1), 0);
    assert_eq!(middle_of(2), 0);
    assert_eq!(middle_of(3), 1);
    assert_eq!(middle_of(4), 1);
    let p = PaymentInput {
        w_id: 1,
        d_id: 2,
        c_w_id: 3,
        c_d_id: 4,
        customer: CustomerSelector::Id(5),
        h_amount: 12_345,
        h_date: 0,
    };
    let mut out = String::new();
    bad_credit_data(&p, 5, &"x".repeat(600), &mut out);
    assert!(out.starts_with("5 4 3 2 1 123.45 x"));
    assert_eq!(out.len(), 500);
}

#[test]
fn a_bound_terminal_keeps_its_home_and_the_rest_of_its_stream() {
    let mut free = Terminal::new(meta(3), 11);
    let mut bound = Terminal::new(meta(3), 11);
    bound.bind_home(2);
    for now in 0..500 {
        let (a, b) = (free.next(now), bound.next(now));
        let home = match &b {
            TxnInput::NewOrder(i) => i.w_id,
            TxnInput::Payment(i) => i.w_id,
            TxnInput::OrderStatus(i) => i.w_id,
            TxnInput::Delivery(i) => i.w_id,
            TxnInput::StockLevel(i) => i.w_id,
        };
        assert_eq!(home, 2);
        assert_eq!(
            std::mem::discriminant(&a),
            std::mem::discriminant(&b),
            "the same mix, drawn from the same stream"
        );
    }
}
