//! Transaction inputs (clauses 2.4.1, 2.5.1, 2.6.1, 2.7.1, 2.8.1), their outputs, and
//! the terminal that draws them in the standard mix.
//!
//! Inputs depend only on the seed and the loaded database's [`Meta`], never on an
//! engine's answers, so every engine runs exactly the same sequence.

use crate::random::{NuRandC, TpccRng, last_name};
use crate::schema::{DISTRICTS, MAX_OL_CNT, Meta};

/// The five transaction types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnKind {
    /// New Order (clause 2.4).
    NewOrder,
    /// Payment (clause 2.5).
    Payment,
    /// Order Status (clause 2.6).
    OrderStatus,
    /// Delivery (clause 2.7).
    Delivery,
    /// Stock Level (clause 2.8).
    StockLevel,
}

impl TxnKind {
    /// All five, in the spec's order.
    pub const ALL: [TxnKind; 5] = [
        TxnKind::NewOrder,
        TxnKind::Payment,
        TxnKind::OrderStatus,
        TxnKind::Delivery,
        TxnKind::StockLevel,
    ];

    /// The snake-case name used in reports and JSON keys.
    pub fn name(self) -> &'static str {
        match self {
            TxnKind::NewOrder => "new_order",
            TxnKind::Payment => "payment",
            TxnKind::OrderStatus => "order_status",
            TxnKind::Delivery => "delivery",
            TxnKind::StockLevel => "stock_level",
        }
    }

    /// Index into per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One order line requested by a New Order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrderLineInput {
    /// Item id; an unused id (`items + 1`) requests the rollback.
    pub i_id: u32,
    /// Supplying warehouse.
    pub supply_w_id: u16,
    /// Quantity in `1..=10`.
    pub quantity: u8,
}

/// Input of New Order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrderInput {
    /// Home warehouse.
    pub w_id: u16,
    /// District.
    pub d_id: u8,
    /// Customer.
    pub c_id: u32,
    /// Lines (5 to 15).
    pub lines: [OrderLineInput; MAX_OL_CNT],
    /// How many of `lines` are used.
    pub ol_cnt: u8,
    /// Entry date.
    pub entry_d: i64,
}

impl NewOrderInput {
    /// The used order lines.
    pub fn lines(&self) -> &[OrderLineInput] {
        &self.lines[..usize::from(self.ol_cnt)]
    }

    /// Whether every line is supplied by the home warehouse (`O_ALL_LOCAL`).
    pub fn all_local(&self) -> bool {
        self.lines().iter().all(|l| l.supply_w_id == self.w_id)
    }
}

/// How Payment and Order Status find their customer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustomerSelector {
    /// By `C_ID`.
    Id(u32),
    /// By `C_LAST`: the middle one (rounded up) of the matches sorted by `C_FIRST`.
    LastName(String),
}

/// Input of Payment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentInput {
    /// Home warehouse.
    pub w_id: u16,
    /// District of the home warehouse.
    pub d_id: u8,
    /// Customer's warehouse (remote in 15% of payments when W > 1).
    pub c_w_id: u16,
    /// Customer's district.
    pub c_d_id: u8,
    /// The customer.
    pub customer: CustomerSelector,
    /// Amount in cents (`1.00..=5000.00`).
    pub h_amount: i64,
    /// Payment date.
    pub h_date: i64,
}

/// Input of Order Status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusInput {
    /// Warehouse.
    pub w_id: u16,
    /// District.
    pub d_id: u8,
    /// The customer.
    pub customer: CustomerSelector,
}

/// Input of Delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveryInput {
    /// Warehouse.
    pub w_id: u16,
    /// Carrier in `1..=10`.
    pub carrier_id: u8,
    /// Delivery date.
    pub delivery_d: i64,
}

/// Input of Stock Level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StockLevelInput {
    /// Warehouse.
    pub w_id: u16,
    /// District.
    pub d_id: u8,
    /// Threshold in `10..=20`.
    pub threshold: i32,
}

/// One transaction to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnInput {
    /// New Order.
    NewOrder(NewOrderInput),
    /// Payment.
    Payment(PaymentInput),
    /// Order Status.
    OrderStatus(OrderStatusInput),
    /// Delivery.
    Delivery(DeliveryInput),
    /// Stock Level.
    StockLevel(StockLevelInput),
}

impl TxnInput {
    /// The transaction's type.
    pub fn kind(&self) -> TxnKind {
        match self {
            TxnInput::NewOrder(_) => TxnKind::NewOrder,
            TxnInput::Payment(_) => TxnKind::Payment,
            TxnInput::OrderStatus(_) => TxnKind::OrderStatus,
            TxnInput::Delivery(_) => TxnKind::Delivery,
            TxnInput::StockLevel(_) => TxnKind::StockLevel,
        }
    }

    /// Where the transaction runs, in a few words for an error message (the whole
    /// input, a New Order's fifteen lines included, is a kilobyte of `Debug`).
    pub fn brief(&self) -> String {
        let (w, d) = match self {
            TxnInput::NewOrder(i) => (i.w_id, Some(i.d_id)),
            TxnInput::Payment(i) => (i.w_id, Some(i.d_id)),
            TxnInput::OrderStatus(i) => (i.w_id, Some(i.d_id)),
            TxnInput::Delivery(i) => (i.w_id, None),
            TxnInput::StockLevel(i) => (i.w_id, Some(i.d_id)),
        };
        match d {
            Some(d) => format!("{} in warehouse {w}, district {d}", self.kind().name()),
            None => format!("{} in warehouse {w}", self.kind().name()),
        }
    }
}

/// Output of New Order: enough to compare engines and to acknowledge the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NewOrderOutput {
    /// The order id assigned (meaningless when rolled back).
    pub o_id: u32,
    /// Whether the transaction rolled back on the unused item.
    pub rolled_back: bool,
    /// Total in cents after discount and taxes.
    pub total: i64,
    /// How many lines were "brand" (`B`).
    pub brand_lines: u8,
}

/// Output of Payment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PaymentOutput {
    /// The customer paid for.
    pub c_id: u32,
    /// The customer's balance afterwards, in cents.
    pub c_balance: i64,
}

/// Output of Order Status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OrderStatusOutput {
    /// The customer.
    pub c_id: u32,
    /// Their most recent order (0 when they have none).
    pub o_id: u32,
    /// Lines of that order.
    pub lines: u8,
    /// Sum of the lines' amounts in cents.
    pub amount: i64,
}

/// Output of Delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeliveryOutput {
    /// Districts in which an order was delivered (the others were skipped: no new order).
    pub delivered: u8,
}

/// Output of Stock Level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StockLevelOutput {
    /// Distinct recently ordered items whose stock is below the threshold.
    pub low_stock: u32,
}

/// Output of any transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnOutput {
    /// New Order.
    NewOrder(NewOrderOutput),
    /// Payment.
    Payment(PaymentOutput),
    /// Order Status.
    OrderStatus(OrderStatusOutput),
    /// Delivery.
    Delivery(DeliveryOutput),
    /// Stock Level.
    StockLevel(StockLevelOutput),
}

/// New Order's total (clause 2.4.2.2): `sum(OL_AMOUNT) * (1 - C_DISCOUNT) * (1 + W_TAX +
/// D_TAX)`, in integers so that every engine gets the same cents.
pub fn new_order_total(sum_amount: i64, c_discount: i32, w_tax: i32, d_tax: i32) -> i64 {
    let scaled = i128::from(sum_amount)
        * i128::from(10_000 - c_discount)
        * i128::from(10_000 + w_tax + d_tax);
    (scaled / 100_000_000) as i64
}

/// New `S_QUANTITY` after ordering `quantity` (clause 2.4.2.2): restock by 91 when the
/// stock would fall below 10.
pub fn new_stock_quantity(s_quantity: i32, quantity: u8) -> i32 {
    let q = i32::from(quantity);
    if s_quantity >= q + 10 {
        s_quantity - q
    } else {
        s_quantity - q + 91
    }
}

/// The new `C_DATA` of a bad-credit customer (clause 2.5.2.2): the payment's ids and
/// amount, then the old data, cut to 500 characters. Written into `out` to reuse it.
pub fn bad_credit_data(input: &PaymentInput, c_id: u32, old: &str, out: &mut String) {
    use std::fmt::Write;
    out.clear();
    let _ = write!(
        out,
        "{} {} {} {} {} {}.{:02} ",
        c_id,
        input.c_d_id,
        input.c_w_id,
        input.d_id,
        input.w_id,
        input.h_amount / 100,
        input.h_amount % 100
    );
    let room = crate::schema::C_DATA_MAX.saturating_sub(out.len());
    // C_DATA is ASCII, so cutting at a byte index is cutting at a character.
    out.push_str(&old[..old.len().min(room)]);
}

/// Position of the chosen customer among `n` last-name matches sorted by first name:
/// `n / 2` rounded up, counted from one (clause 2.5.2.2), as a zero-based index.
pub fn middle_of(n: usize) -> usize {
    n.div_ceil(2) - 1
}

/// A terminal: draws transactions in the standard mix from a seeded stream.
#[derive(Clone, Debug)]
pub struct Terminal {
    rng: TpccRng,
    c: NuRandC,
    meta: Meta,
    /// The home warehouse of every transaction, if the terminal has one.
    home: Option<u16>,
}

impl Terminal {
    /// A terminal for a database described by `meta`, with its own `seed`. It draws
    /// each transaction's home warehouse at random, standing for the terminals of
    /// every warehouse; see [`Terminal::bind_home`].
    pub fn new(meta: Meta, seed: u64) -> Self {
        let mut rng = TpccRng::new(seed);
        let c = NuRandC::for_run(&mut rng, meta.c_last_load);
        Self {
            rng,
            c,
            meta,
            home: None,
        }
    }

    /// Makes `w` the home warehouse of every transaction this terminal draws, as the
    /// specification's terminals have one for the whole run. The random draw of the
    /// home still happens (and is ignored), so the terminal makes the same sequence of
    /// draws as an unbound one with the same seed (the values that depend on the home,
    /// such as a remote supplying warehouse, differ).
    ///
    /// Panics if `w` is not a warehouse of the database.
    pub fn bind_home(&mut self, w: u16) {
        assert!(
            (1..=self.meta.warehouses).contains(&w),
            "warehouse {w} is not in 1..={}",
            self.meta.warehouses
        );
        self.home = Some(w);
    }

    /// The kind of the next transaction: 45% New Order, 43% Payment, 4% each of the
    /// other three (clause 5.2.3 minimums, with New Order taking the rest).
    pub fn next_kind(&mut self) -> TxnKind {
        match self.rng.uniform(1, 100) {
            1..=45 => TxnKind::NewOrder,
            46..=88 => TxnKind::Payment,
            89..=92 => TxnKind::OrderStatus,
            93..=96 => TxnKind::Delivery,
            _ => TxnKind::StockLevel,
        }
    }

    /// Draws the next transaction of the mix; `now` stamps its dates.
    pub fn next(&mut self, now: i64) -> TxnInput {
        match self.next_kind() {
            TxnKind::NewOrder => TxnInput::NewOrder(self.new_order(now)),
            TxnKind::Payment => TxnInput::Payment(self.payment(now)),
            TxnKind::OrderStatus => TxnInput::OrderStatus(self.order_status()),
            TxnKind::Delivery => TxnInput::Delivery(self.delivery(now)),
            TxnKind::StockLevel => TxnInput::StockLevel(self.stock_level()),
        }
    }

    fn home(&mut self) -> u16 {
        let drawn = self.rng.uniform(1, u32::from(self.meta.warehouses)) as u16;
        self.home.unwrap_or(drawn)
    }

    fn district(&mut self) -> u8 {
        self.rng.uniform(1, u32::from(DISTRICTS)) as u8
    }

    /// A warehouse other than `home` (or `home` itself when there is only one).
    fn remote(&mut self, home: u16) -> u16 {
        let w = self.meta.warehouses;
        if w == 1 {
            return home;
        }
        let r = self.rng.uniform(1, u32::from(w) - 1) as u16;
        if r >= home { r + 1 } else { r }
    }

    fn customer_id(&mut self) -> u32 {
        self.rng
            .nurand(1023, 1, self.meta.scale.customers, self.c.c_id)
    }

    /// 60% by last name, 40% by id (clauses 2.5.1.2 and 2.6.1.2).
    fn customer(&mut self) -> CustomerSelector {
        if self.rng.uniform(1, 100) <= 60 {
            let n = self
                .rng
                .nurand(255, 0, self.meta.scale.last_name_max(), self.c.c_last);
            let mut name = String::with_capacity(16);
            last_name(n, &mut name);
            CustomerSelector::LastName(name)
        } else {
            CustomerSelector::Id(self.customer_id())
        }
    }

    /// New Order input (clause 2.4.1).
    pub fn new_order(&mut self, now: i64) -> NewOrderInput {
        let w_id = self.home();
        let d_id = self.district();
        let c_id = self.customer_id();
        let ol_cnt = self.rng.uniform(5, 15) as u8;
        let rollback = self.rng.uniform(1, 100) == 1;
        let items = self.meta.scale.items;
        let mut lines = [OrderLineInput::default(); MAX_OL_CNT];
        for (n, line) in lines[..usize::from(ol_cnt)].iter_mut().enumerate() {
            let last = n + 1 == usize::from(ol_cnt);
            line.i_id = if last && rollback {
                items + 1
            } else {
                self.rng.nurand(8191, 1, items, self.c.ol_i_id)
            };
            line.supply_w_id = if self.rng.uniform(1, 100) == 1 {
                self.remote(w_id)
            } else {
                w_id
            };
            line.quantity = self.rng.uniform(1, 10) as u8;
        }
        NewOrderInput {
            w_id,
            d_id,
            c_id,
            lines,
            ol_cnt,
            entry_d: now,
        }
    }

    /// Payment input (clause 2.5.1).
    pub fn payment(&mut self, now: i64) -> PaymentInput {
        let w_id = self.home();
        let d_id = self.district();
        let (c_w_id, c_d_id) = if self.rng.uniform(1, 100) <= 85 || self.meta.warehouses == 1 {
            (w_id, d_id)
        } else {
            (self.remote(w_id), self.district())
        };
        let customer = self.customer();
        PaymentInput {
            w_id,
            d_id,
            c_w_id,
            c_d_id,
            customer,
            h_amount: self.rng.uniform_i64(100, 500_000),
            h_date: now,
        }
    }

    /// Order Status input (clause 2.6.1).
    pub fn order_status(&mut self) -> OrderStatusInput {
        let w_id = self.home();
        let d_id = self.district();
        OrderStatusInput {
            w_id,
            d_id,
            customer: self.customer(),
        }
    }

    /// Delivery input (clause 2.7.1).
    pub fn delivery(&mut self, now: i64) -> DeliveryInput {
        DeliveryInput {
            w_id: self.home(),
            carrier_id: self.rng.uniform(1, 10) as u8,
            delivery_d: now,
        }
    }

    /// Stock Level input (clause 2.8.1).
    pub fn stock_level(&mut self) -> StockLevelInput {
        let w_id = self.home();
        let d_id = self.district();
        StockLevelInput {
            w_id,
            d_id,
            threshold: self.rng.uniform(10, 20) as i32,
        }
    }
}

#[cfg(test)]
#[path = "workload_tests.rs"]
mod tests;
