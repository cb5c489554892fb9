//! The SQLite schema: tables with clustered composite keys, the secondary indexes
//! built after the load, and New Order's stock update per district.

use crate::schema::DISTRICTS;

/// Schema version stored in `tpcc_meta`; bump when the tables change.
pub(super) const FORMAT: i64 = 1;

pub(super) const SCHEMA: &str = "
CREATE TABLE warehouse (
    w_id INTEGER NOT NULL PRIMARY KEY, w_name TEXT NOT NULL, w_street_1 TEXT NOT NULL,
    w_street_2 TEXT NOT NULL, w_city TEXT NOT NULL, w_state TEXT NOT NULL, w_zip TEXT NOT NULL,
    w_tax INTEGER NOT NULL, w_ytd INTEGER NOT NULL);
CREATE TABLE district (
    d_id INTEGER NOT NULL, d_w_id INTEGER NOT NULL, d_name TEXT NOT NULL,
    d_street_1 TEXT NOT NULL, d_street_2 TEXT NOT NULL, d_city TEXT NOT NULL,
    d_state TEXT NOT NULL, d_zip TEXT NOT NULL, d_tax INTEGER NOT NULL, d_ytd INTEGER NOT NULL,
    d_next_o_id INTEGER NOT NULL,
    PRIMARY KEY (d_w_id, d_id)) WITHOUT ROWID;
CREATE TABLE customer (
    c_id INTEGER NOT NULL, c_d_id INTEGER NOT NULL, c_w_id INTEGER NOT NULL,
    c_first TEXT NOT NULL, c_middle TEXT NOT NULL, c_last TEXT NOT NULL,
    c_street_1 TEXT NOT NULL, c_street_2 TEXT NOT NULL, c_city TEXT NOT NULL,
    c_state TEXT NOT NULL, c_zip TEXT NOT NULL, c_phone TEXT NOT NULL, c_since INTEGER NOT NULL,
    c_credit TEXT NOT NULL, c_credit_lim INTEGER NOT NULL, c_discount INTEGER NOT NULL,
    c_balance INTEGER NOT NULL, c_ytd_payment INTEGER NOT NULL, c_payment_cnt INTEGER NOT NULL,
    c_delivery_cnt INTEGER NOT NULL, c_data TEXT NOT NULL,
    PRIMARY KEY (c_w_id, c_d_id, c_id)) WITHOUT ROWID;
CREATE TABLE history (
    h_c_id INTEGER NOT NULL, h_c_d_id INTEGER NOT NULL, h_c_w_id INTEGER NOT NULL,
    h_d_id INTEGER NOT NULL, h_w_id INTEGER NOT NULL, h_date INTEGER NOT NULL,
    h_amount INTEGER NOT NULL, h_data TEXT NOT NULL);
CREATE TABLE new_order (
    no_o_id INTEGER NOT NULL, no_d_id INTEGER NOT NULL, no_w_id INTEGER NOT NULL,
    PRIMARY KEY (no_w_id, no_d_id, no_o_id)) WITHOUT ROWID;
CREATE TABLE orders (
    o_id INTEGER NOT NULL, o_d_id INTEGER NOT NULL, o_w_id INTEGER NOT NULL,
    o_c_id INTEGER NOT NULL, o_entry_d INTEGER NOT NULL, o_carrier_id INTEGER,
    o_ol_cnt INTEGER NOT NULL, o_all_local INTEGER NOT NULL,
    PRIMARY KEY (o_w_id, o_d_id, o_id)) WITHOUT ROWID;
CREATE TABLE order_line (
    ol_o_id INTEGER NOT NULL, ol_d_id INTEGER NOT NULL, ol_w_id INTEGER NOT NULL,
    ol_number INTEGER NOT NULL, ol_i_id INTEGER NOT NULL, ol_supply_w_id INTEGER NOT NULL,
    ol_delivery_d INTEGER, ol_quantity INTEGER NOT NULL, ol_amount INTEGER NOT NULL,
    ol_dist_info TEXT NOT NULL,
    PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)) WITHOUT ROWID;
CREATE TABLE item (
    i_id INTEGER NOT NULL PRIMARY KEY, i_im_id INTEGER NOT NULL, i_name TEXT NOT NULL,
    i_price INTEGER NOT NULL, i_data TEXT NOT NULL);
CREATE TABLE stock (
    s_i_id INTEGER NOT NULL, s_w_id INTEGER NOT NULL, s_quantity INTEGER NOT NULL,
    s_dist_01 TEXT NOT NULL, s_dist_02 TEXT NOT NULL, s_dist_03 TEXT NOT NULL,
    s_dist_04 TEXT NOT NULL, s_dist_05 TEXT NOT NULL, s_dist_06 TEXT NOT NULL,
    s_dist_07 TEXT NOT NULL, s_dist_08 TEXT NOT NULL, s_dist_09 TEXT NOT NULL,
    s_dist_10 TEXT NOT NULL, s_ytd INTEGER NOT NULL, s_order_cnt INTEGER NOT NULL,
    s_remote_cnt INTEGER NOT NULL, s_data TEXT NOT NULL,
    PRIMARY KEY (s_w_id, s_i_id)) WITHOUT ROWID;
CREATE TABLE tpcc_meta (name TEXT NOT NULL PRIMARY KEY, value INTEGER NOT NULL);
";

/// Secondary indexes, built after the bulk load (cheaper than maintaining them row by row).
pub(super) const INDEXES: &str = "
CREATE INDEX customer_by_last ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE INDEX orders_by_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
";

macro_rules! stock_update {
    ($d:literal) => {
        concat!(
            "UPDATE stock SET s_quantity = CASE WHEN s_quantity >= ?3 + 10 \
             THEN s_quantity - ?3 ELSE s_quantity - ?3 + 91 END, s_ytd = s_ytd + ?3, \
             s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + ?4 \
             WHERE s_w_id = ?1 AND s_i_id = ?2 RETURNING s_dist_",
            $d,
            ", s_data"
        )
    };
}

/// Stock update for New Order, one per district because the district picks the
/// `S_DIST_xx` column returned.
pub(super) const STOCK_UPDATE: [&str; DISTRICTS as usize] = [
    stock_update!("01"),
    stock_update!("02"),
    stock_update!("03"),
    stock_update!("04"),
    stock_update!("05"),
    stock_update!("06"),
    stock_update!("07"),
    stock_update!("08"),
    stock_update!("09"),
    stock_update!("10"),
];
