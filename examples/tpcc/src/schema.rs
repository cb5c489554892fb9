//! The nine TPC-C tables (clause 1.3) as Rust rows, the population scale and the
//! database's metadata.
//!
//! Money is fixed point in cents (`i64`) and rates (taxes, discounts) in units of
//! 1/10,000, which is exactly the spec's `numeric(12,2)` and `numeric(4,4)`: both engines
//! compute with the same integers, so their results can be compared for equality.
//! Timestamps are microseconds since the Unix epoch.

/// Districts per warehouse (fixed by the spec).
pub const DISTRICTS: u8 = 10;
/// Most order lines of one order.
pub const MAX_OL_CNT: usize = 15;
/// Length of `C_DATA` after a bad-credit payment prepends to it.
pub const C_DATA_MAX: usize = 500;

/// How many rows the loader creates. The spec's values are [`Scale::SPEC`]; tests use
/// a smaller population with the same rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    /// Rows in ITEM, and STOCK rows per warehouse (spec: 100,000).
    pub items: u32,
    /// Customers, and initial orders, per district (spec: 3,000).
    pub customers: u32,
}

impl Scale {
    /// The spec's population.
    pub const SPEC: Scale = Scale {
        items: 100_000,
        customers: 3_000,
    };

    /// A small population for tests: same rules, about 60 times fewer rows.
    pub const SMALL: Scale = Scale {
        items: 2_000,
        customers: 60,
    };

    /// Initial orders per district (one per customer).
    pub fn orders(&self) -> u32 {
        self.customers
    }

    /// Initial undelivered orders per district: the last 30% (spec: 900 of 3,000).
    pub fn new_orders(&self) -> u32 {
        self.customers * 3 / 10
    }

    /// The first undelivered order id at load time (spec: 2,101).
    pub fn first_new_order(&self) -> u32 {
        self.orders() - self.new_orders() + 1
    }

    /// Customers per district named in order, one per last-name number (spec: the
    /// first 1,000 of 3,000). A smaller population keeps the spec's one in three, so
    /// that names still repeat and lookups by name still find several customers.
    pub fn named_customers(&self) -> u32 {
        (self.customers / 3).min(1000)
    }

    /// Largest last-name number in use (spec: 999).
    pub fn last_name_max(&self) -> u32 {
        self.named_customers() - 1
    }

    /// Checks that the loader can follow the spec's rules at this scale.
    pub fn validate(&self) -> Result<(), String> {
        // The upper bounds keep ids and counts far from overflow; the spec needs 100,000
        // and 3,000.
        if !(100..=10_000_000).contains(&self.items) {
            return Err(format!(
                "items must be between 100 and 10,000,000, got {}",
                self.items
            ));
        }
        if !(10..=1_000_000).contains(&self.customers) {
            return Err(format!(
                "customers per district must be between 10 and 1,000,000, got {}",
                self.customers
            ));
        }
        Ok(())
    }
}

/// What a loaded database records about itself, so `run` and `check` need no flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Number of warehouses.
    pub warehouses: u16,
    /// Population scale.
    pub scale: Scale,
    /// The loader's NURand constant for last names (the run's must differ by clause 2.1.6.1).
    pub c_last_load: u32,
}

/// A WAREHOUSE row.
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)] // Fields are the spec's columns, named as in the spec.
pub struct Warehouse {
    pub w_id: u16,
    pub w_name: String,
    pub w_street_1: String,
    pub w_street_2: String,
    pub w_city: String,
    pub w_state: String,
    pub w_zip: String,
    pub w_tax: i32,
    pub w_ytd: i64,
}

/// A DISTRICT row.
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct District {
    pub d_id: u8,
    pub d_w_id: u16,
    pub d_name: String,
    pub d_street_1: String,
    pub d_street_2: String,
    pub d_city: String,
    pub d_state: String,
    pub d_zip: String,
    pub d_tax: i32,
    pub d_ytd: i64,
    pub d_next_o_id: u32,
}

/// A CUSTOMER row.
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct Customer {
    pub c_id: u32,
    pub c_d_id: u8,
    pub c_w_id: u16,
    pub c_first: String,
    pub c_middle: String,
    pub c_last: String,
    pub c_street_1: String,
    pub c_street_2: String,
    pub c_city: String,
    pub c_state: String,
    pub c_zip: String,
    pub c_phone: String,
    pub c_since: i64,
    pub c_credit: [u8; 2],
    pub c_credit_lim: i64,
    pub c_discount: i32,
    pub c_balance: i64,
    pub c_ytd_payment: i64,
    pub c_payment_cnt: u32,
    pub c_delivery_cnt: u32,
    pub c_data: String,
}

/// A HISTORY row.
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct History {
    pub h_c_id: u32,
    pub h_c_d_id: u8,
    pub h_c_w_id: u16,
    pub h_d_id: u8,
    pub h_w_id: u16,
    pub h_date: i64,
    pub h_amount: i64,
    pub h_data: String,
}

/// A NEW-ORDER row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct NewOrder {
    pub no_o_id: u32,
    pub no_d_id: u8,
    pub no_w_id: u16,
}

/// An ORDER row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Order {
    pub o_id: u32,
    pub o_d_id: u8,
    pub o_w_id: u16,
    pub o_c_id: u32,
    pub o_entry_d: i64,
    /// `None` until delivered.
    pub o_carrier_id: Option<u8>,
    pub o_ol_cnt: u8,
    pub o_all_local: bool,
}

/// An ORDER-LINE row.
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct OrderLine {
    pub ol_o_id: u32,
    pub ol_d_id: u8,
    pub ol_w_id: u16,
    pub ol_number: u8,
    pub ol_i_id: u32,
    pub ol_supply_w_id: u16,
    /// `None` until delivered.
    pub ol_delivery_d: Option<i64>,
    pub ol_quantity: u8,
    pub ol_amount: i64,
    pub ol_dist_info: [u8; 24],
}

/// An ITEM row.
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct Item {
    pub i_id: u32,
    pub i_im_id: u32,
    pub i_name: String,
    pub i_price: i64,
    pub i_data: String,
}

/// A STOCK row.
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct Stock {
    pub s_i_id: u32,
    pub s_w_id: u16,
    pub s_quantity: i32,
    /// `S_DIST_01` .. `S_DIST_10`.
    pub s_dist: [[u8; 24]; 10],
    pub s_ytd: i32,
    pub s_order_cnt: i32,
    pub s_remote_cnt: i32,
    pub s_data: String,
}
