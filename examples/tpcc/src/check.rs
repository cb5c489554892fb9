//! The spec's consistency conditions 1 to 4 (clause 3.3.2), evaluated on aggregates that
//! each engine computes from its own rows.

use std::collections::BTreeMap;
use std::fmt::Write;

/// Aggregates of one district.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DistrictSummary {
    /// `D_YTD`.
    pub d_ytd: i64,
    /// `D_NEXT_O_ID`.
    pub d_next_o_id: u32,
    /// Rows in ORDER.
    pub orders: u64,
    /// `max(O_ID)` (0 when there is no order).
    pub max_o_id: u32,
    /// `sum(O_OL_CNT)`.
    pub sum_ol_cnt: u64,
    /// Rows in NEW-ORDER.
    pub new_orders: u64,
    /// `min(NO_O_ID)` (0 when there is no new order).
    pub min_no_o_id: u32,
    /// `max(NO_O_ID)` (0 when there is no new order).
    pub max_no_o_id: u32,
    /// Rows in ORDER-LINE.
    pub order_lines: u64,
}

/// Whole-database aggregates: what the consistency conditions need, plus totals that
/// two engines running the same sequence must agree on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Summary {
    /// `W_YTD` per warehouse id.
    pub w_ytd: BTreeMap<u16, i64>,
    /// Per `(w_id, d_id)`.
    pub districts: BTreeMap<(u16, u8), DistrictSummary>,
    /// Rows in CUSTOMER.
    pub customers: u64,
    /// `sum(C_BALANCE)`.
    pub sum_c_balance: i64,
    /// `sum(C_YTD_PAYMENT)`.
    pub sum_c_ytd_payment: i64,
    /// `sum(C_PAYMENT_CNT)`.
    pub sum_c_payment_cnt: u64,
    /// `sum(C_DELIVERY_CNT)`.
    pub sum_c_delivery_cnt: u64,
    /// Rows in HISTORY.
    pub history: u64,
    /// `sum(S_QUANTITY)`.
    pub sum_s_quantity: i64,
    /// `sum(S_ORDER_CNT)`.
    pub sum_s_order_cnt: i64,
    /// Rows in ITEM.
    pub items: u64,
    /// Rows in STOCK.
    pub stock: u64,
}

impl Summary {
    /// Checks consistency conditions 1 to 4; the error lists every violation found.
    pub fn check(&self) -> Result<(), String> {
        let mut problems = String::new();
        if self.w_ytd.is_empty() {
            problems.push_str("no warehouse found\n");
        }
        for (&w, &w_ytd) in &self.w_ytd {
            let sum: i64 = self
                .districts
                .range((w, 0)..=(w, u8::MAX))
                .map(|(_, d)| d.d_ytd)
                .sum();
            if sum != w_ytd {
                let _ = writeln!(
                    problems,
                    "condition 1: warehouse {w}: W_YTD = {w_ytd} but sum(D_YTD) = {sum}"
                );
            }
        }
        for (&(w, d), s) in &self.districts {
            if !self.w_ytd.contains_key(&w) {
                let _ = writeln!(problems, "district ({w}, {d}) has no warehouse");
            }
            if s.d_next_o_id != s.max_o_id + 1 {
                let _ = writeln!(
                    problems,
                    "condition 2: district ({w}, {d}): D_NEXT_O_ID - 1 = {} but max(O_ID) = {}",
                    i64::from(s.d_next_o_id) - 1,
                    s.max_o_id
                );
            }
            if s.new_orders > 0 && s.max_no_o_id != s.max_o_id {
                let _ = writeln!(
                    problems,
                    "condition 2: district ({w}, {d}): max(NO_O_ID) = {} but max(O_ID) = {}",
                    s.max_no_o_id, s.max_o_id
                );
            }
            if s.new_orders > 0
                && u64::from(s.max_no_o_id) - u64::from(s.min_no_o_id) + 1 != s.new_orders
            {
                let _ = writeln!(
                    problems,
                    "condition 3: district ({w}, {d}): max(NO_O_ID) - min(NO_O_ID) + 1 = {} but \
                     NEW-ORDER has {} rows",
                    u64::from(s.max_no_o_id) - u64::from(s.min_no_o_id) + 1,
                    s.new_orders
                );
            }
            if s.sum_ol_cnt != s.order_lines {
                let _ = writeln!(
                    problems,
                    "condition 4: district ({w}, {d}): sum(O_OL_CNT) = {} but ORDER-LINE has {} rows",
                    s.sum_ol_cnt, s.order_lines
                );
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// A hash of every aggregate: equal digests mean equal summaries (to compare
    /// engines that ran in different processes).
    pub fn digest(&self) -> u64 {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        self.hash(&mut h);
        h.finish()
    }

    /// Total orders over all districts.
    pub fn total_orders(&self) -> u64 {
        self.districts.values().map(|d| d.orders).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consistent() -> Summary {
        let mut s = Summary::default();
        s.w_ytd.insert(1, 300);
        for d in 1..=3u8 {
            s.districts.insert(
                (1, d),
                DistrictSummary {
                    d_ytd: 100,
                    d_next_o_id: 11,
                    orders: 10,
                    max_o_id: 10,
                    sum_ol_cnt: 50,
                    new_orders: 3,
                    min_no_o_id: 8,
                    max_no_o_id: 10,
                    order_lines: 50,
                },
            );
        }
        s
    }

    #[test]
    fn each_condition_can_fail() {
        assert_eq!(consistent().check(), Ok(()));

        let mut s = consistent();
        s.w_ytd.insert(1, 301);
        assert!(s.check().unwrap_err().contains("condition 1"));

        let mut s = consistent();
        s.districts.get_mut(&(1, 2)).unwrap().d_next_o_id = 12;
        assert!(s.check().unwrap_err().contains("condition 2"));

        let mut s = consistent();
        s.districts.get_mut(&(1, 2)).unwrap().max_no_o_id = 9;
        assert!(s.check().unwrap_err().contains("condition 2"));

        let mut s = consistent();
        s.districts.get_mut(&(1, 2)).unwrap().new_orders = 2;
        assert!(s.check().unwrap_err().contains("condition 3"));

        let mut s = consistent();
        s.districts.get_mut(&(1, 3)).unwrap().order_lines = 49;
        assert!(s.check().unwrap_err().contains("condition 4"));

        assert!(Summary::default().check().is_err());
    }
}
