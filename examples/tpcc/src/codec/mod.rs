//! Keys and rows as bytes, for key/value engines.
//!
//! Keys are big-endian integers (and zero-padded names), so the byte order of keys is the
//! numeric order of the spec's primary keys and range scans walk rows in key order.
//! Values are a compact little-endian layout: the fixed-width columns a transaction
//! updates sit at fixed offsets and are patched in place, and the text columns follow
//! with a length prefix. Nothing here panics on malformed bytes: reads are checked and
//! fail with [`Corrupt`].

use std::fmt;

use crate::schema::{
    Customer, District, History, Item, Meta, Order, OrderLine, Scale, Stock, Warehouse,
};

/// A stored row or key did not have the expected shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt(pub &'static str);

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "corrupt {} record", self.0)
    }
}

impl std::error::Error for Corrupt {}

/// Result of decoding.
pub type DecodeResult<T> = Result<T, Corrupt>;

// ---- keys -------------------------------------------------------------------------------

/// WAREHOUSE key: `w_id`.
pub fn warehouse_key(w: u16) -> [u8; 2] {
    w.to_be_bytes()
}

/// DISTRICT key: `(w_id, d_id)`.
pub fn district_key(w: u16, d: u8) -> [u8; 3] {
    let w = w.to_be_bytes();
    [w[0], w[1], d]
}

fn wd_u32(w: u16, d: u8, x: u32) -> [u8; 7] {
    let mut k = [0u8; 7];
    k[..2].copy_from_slice(&w.to_be_bytes());
    k[2] = d;
    k[3..].copy_from_slice(&x.to_be_bytes());
    k
}

/// CUSTOMER key: `(w_id, d_id, c_id)`.
pub fn customer_key(w: u16, d: u8, c: u32) -> [u8; 7] {
    wd_u32(w, d, c)
}

/// ORDER key: `(w_id, d_id, o_id)`.
pub fn order_key(w: u16, d: u8, o: u32) -> [u8; 7] {
    wd_u32(w, d, o)
}

/// NEW-ORDER key: `(w_id, d_id, o_id)`.
pub fn new_order_key(w: u16, d: u8, o: u32) -> [u8; 7] {
    wd_u32(w, d, o)
}

/// ORDER-LINE key: `(w_id, d_id, o_id, ol_number)`.
pub fn order_line_key(w: u16, d: u8, o: u32, n: u8) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..7].copy_from_slice(&wd_u32(w, d, o));
    k[7] = n;
    k
}

/// ITEM key: `i_id`.
pub fn item_key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// STOCK key: `(w_id, i_id)`.
pub fn stock_key(w: u16, i: u32) -> [u8; 6] {
    let mut k = [0u8; 6];
    k[..2].copy_from_slice(&w.to_be_bytes());
    k[2..].copy_from_slice(&i.to_be_bytes());
    k
}

/// HISTORY key: `(c_w_id, c_d_id, c_id, c_payment_cnt)`. HISTORY has no primary key in
/// the spec; the customer's payment count after the payment makes each row unique
/// without a shared counter.
pub fn history_key(w: u16, d: u8, c: u32, payment_cnt: u32) -> [u8; 11] {
    let mut k = [0u8; 11];
    k[..7].copy_from_slice(&wd_u32(w, d, c));
    k[7..].copy_from_slice(&payment_cnt.to_be_bytes());
    k
}

/// Width of a name in the last-name index: `C_LAST` and `C_FIRST` are at most 16
/// characters, zero-padded so that padded order is the names' byte order.
pub const NAME: usize = 16;
/// Length of a customer-by-last-name key.
pub const CUSTOMER_BY_LAST_LEN: usize = 3 + 2 * NAME + 4;

/// Customer-by-last-name index key: `(w_id, d_id, c_last, c_first, c_id)`; a scan of
/// one `(w_id, d_id, c_last)` prefix yields the customers sorted by first name.
pub fn customer_by_last_key(
    w: u16,
    d: u8,
    last: &str,
    first: &str,
    c: u32,
) -> [u8; CUSTOMER_BY_LAST_LEN] {
    let mut k = [0u8; CUSTOMER_BY_LAST_LEN];
    k[..3].copy_from_slice(&district_key(w, d));
    put_name(&mut k[3..3 + NAME], last);
    put_name(&mut k[3 + NAME..3 + 2 * NAME], first);
    k[3 + 2 * NAME..].copy_from_slice(&c.to_be_bytes());
    k
}

/// The range `[from, to)` of index keys with this last name.
pub fn customer_by_last_range(
    w: u16,
    d: u8,
    last: &str,
) -> ([u8; CUSTOMER_BY_LAST_LEN], [u8; CUSTOMER_BY_LAST_LEN]) {
    let from = customer_by_last_key(w, d, last, "", 0);
    let mut to = from;
    to[3 + NAME..].fill(0xff);
    (from, to)
}

/// The customer id at the end of a customer-by-last-name key.
pub fn customer_by_last_id(key: &[u8]) -> DecodeResult<u32> {
    key.get(3 + 2 * NAME..)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or(Corrupt("customer index"))
}

fn put_name(out: &mut [u8], name: &str) {
    let n = name.len().min(out.len());
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
}

/// Order-by-customer index key: `(w_id, d_id, c_id, !o_id)`. The order id is stored
/// inverted so that a customer's most recent order is the first key of their range.
pub fn order_by_customer_key(w: u16, d: u8, c: u32, o: u32) -> [u8; 11] {
    let mut k = [0u8; 11];
    k[..7].copy_from_slice(&wd_u32(w, d, c));
    k[7..].copy_from_slice(&(!o).to_be_bytes());
    k
}

/// The order id at the end of an order-by-customer key.
pub fn order_by_customer_o_id(key: &[u8]) -> DecodeResult<u32> {
    key.get(7..11)
        .and_then(|b| b.try_into().ok())
        .map(|b| !u32::from_be_bytes(b))
        .ok_or(Corrupt("order index"))
}

/// Reads the big-endian fields `(w_id, d_id, x)` at the start of a key.
pub fn split_wd_u32(key: &[u8]) -> DecodeResult<(u16, u8, u32)> {
    if key.len() < 7 {
        return Err(Corrupt("key"));
    }
    Ok((
        u16::from_be_bytes([key[0], key[1]]),
        key[2],
        u32::from_be_bytes([key[3], key[4], key[5], key[6]]),
    ))
}

/// Reads `(w_id, d_id)` at the start of a key.
pub fn split_wd(key: &[u8]) -> DecodeResult<(u16, u8)> {
    if key.len() < 3 {
        return Err(Corrupt("key"));
    }
    Ok((u16::from_be_bytes([key[0], key[1]]), key[2]))
}

/// Key of the one metadata record.
pub const META_KEY: &[u8] = b"tpcc";
/// Version of this encoding; bump when a layout changes.
pub const FORMAT: u32 = 1;

// ---- fixed-offset access ------------------------------------------------------------------

/// Reads a little-endian integer of `N` bytes at `at`.
#[inline]
fn le<const N: usize>(v: &[u8], at: usize, what: &'static str) -> DecodeResult<[u8; N]> {
    v.get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or(Corrupt(what))
}

/// Reads an `i32` at `at`.
#[inline]
pub fn get_i32(v: &[u8], at: usize, what: &'static str) -> DecodeResult<i32> {
    le::<4>(v, at, what).map(i32::from_le_bytes)
}

/// Reads a `u32` at `at`.
#[inline]
pub fn get_u32(v: &[u8], at: usize, what: &'static str) -> DecodeResult<u32> {
    le::<4>(v, at, what).map(u32::from_le_bytes)
}

/// Reads an `i64` at `at`.
#[inline]
pub fn get_i64(v: &[u8], at: usize, what: &'static str) -> DecodeResult<i64> {
    le::<8>(v, at, what).map(i64::from_le_bytes)
}

/// Writes `x` at `at` (the caller has checked the row's length by reading it).
#[inline]
pub fn set_i32(v: &mut [u8], at: usize, x: i32) {
    v[at..at + 4].copy_from_slice(&x.to_le_bytes());
}

/// Writes `x` at `at`.
#[inline]
pub fn set_u32(v: &mut [u8], at: usize, x: u32) {
    v[at..at + 4].copy_from_slice(&x.to_le_bytes());
}

/// Writes `x` at `at`.
#[inline]
pub fn set_i64(v: &mut [u8], at: usize, x: i64) {
    v[at..at + 8].copy_from_slice(&x.to_le_bytes());
}

/// Offsets of the fixed columns in each row layout.
#[allow(missing_docs)]
pub mod off {
    pub const W_TAX: usize = 0;
    pub const W_YTD: usize = 4;
    pub const W_TEXT: usize = 12;

    pub const D_TAX: usize = 0;
    pub const D_YTD: usize = 4;
    pub const D_NEXT_O_ID: usize = 12;
    pub const D_TEXT: usize = 16;

    pub const C_DISCOUNT: usize = 0;
    pub const C_CREDIT_LIM: usize = 4;
    pub const C_BALANCE: usize = 12;
    pub const C_YTD_PAYMENT: usize = 20;
    pub const C_PAYMENT_CNT: usize = 28;
    pub const C_DELIVERY_CNT: usize = 32;
    pub const C_SINCE: usize = 36;
    pub const C_CREDIT: usize = 44;
    pub const C_TEXT: usize = 46;

    pub const O_C_ID: usize = 0;
    pub const O_ENTRY_D: usize = 4;
    pub const O_CARRIER_ID: usize = 12;
    pub const O_OL_CNT: usize = 13;
    pub const O_ALL_LOCAL: usize = 14;
    pub const O_LEN: usize = 15;

    pub const OL_I_ID: usize = 0;
    pub const OL_SUPPLY_W_ID: usize = 4;
    pub const OL_DELIVERY_D: usize = 6;
    pub const OL_QUANTITY: usize = 14;
    pub const OL_AMOUNT: usize = 15;
    pub const OL_DIST_INFO: usize = 23;
    pub const OL_LEN: usize = 47;

    pub const I_IM_ID: usize = 0;
    pub const I_PRICE: usize = 4;
    pub const I_TEXT: usize = 12;

    pub const S_QUANTITY: usize = 0;
    pub const S_YTD: usize = 4;
    pub const S_ORDER_CNT: usize = 8;
    pub const S_REMOTE_CNT: usize = 12;
    pub const S_DIST: usize = 16;
    pub const S_DATA: usize = 256;
}

/// `OL_DELIVERY_D` of an undelivered line.
pub const NULL_DATE: i64 = i64::MIN;

/// Walks the length-prefixed text columns of a row.
#[derive(Clone, Copy, Debug)]
pub struct TextReader<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> TextReader<'a> {
    /// Starts reading `row` at `at`, naming the table in errors.
    pub fn new(row: &'a [u8], at: usize, what: &'static str) -> Self {
        Self {
            bytes: row,
            at,
            what,
        }
    }

    /// The next column with a one-byte length.
    pub fn short(&mut self) -> DecodeResult<&'a [u8]> {
        let len = usize::from(*self.bytes.get(self.at).ok_or(Corrupt(self.what))?);
        self.take(1, len)
    }

    /// The next column with a two-byte length.
    pub fn long(&mut self) -> DecodeResult<&'a [u8]> {
        let len = u16::from_le_bytes(le::<2>(self.bytes, self.at, self.what)?);
        self.take(2, usize::from(len))
    }

    /// The next short column as text.
    pub fn short_str(&mut self) -> DecodeResult<&'a str> {
        let what = self.what;
        self.short()
            .and_then(|b| std::str::from_utf8(b).map_err(|_| Corrupt(what)))
    }

    /// The next long column as text.
    pub fn long_str(&mut self) -> DecodeResult<&'a str> {
        let what = self.what;
        self.long()
            .and_then(|b| std::str::from_utf8(b).map_err(|_| Corrupt(what)))
    }

    /// Skips `n` short columns.
    pub fn skip_short(&mut self, n: usize) -> DecodeResult<()> {
        for _ in 0..n {
            self.short()?;
        }
        Ok(())
    }

    /// Where the next column starts.
    pub fn position(&self) -> usize {
        self.at
    }

    fn take(&mut self, prefix: usize, len: usize) -> DecodeResult<&'a [u8]> {
        let start = self.at + prefix;
        let b = self
            .bytes
            .get(start..start + len)
            .ok_or(Corrupt(self.what))?;
        self.at = start + len;
        Ok(b)
    }
}

fn put_short(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len().min(255);
    out.push(n as u8);
    out.extend_from_slice(&s[..n]);
}

fn put_long(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len().min(usize::from(u16::MAX));
    out.extend_from_slice(&(n as u16).to_le_bytes());
    out.extend_from_slice(&s[..n]);
}

/// Whether `hay` contains `ORIGINAL`.
#[inline]
pub fn has_original(hay: &[u8]) -> bool {
    hay.windows(8).any(|w| w == b"ORIGINAL")
}

// ---- whole rows -----------------------------------------------------------------------------

/// Encodes a WAREHOUSE row into `out` (cleared first).
pub fn encode_warehouse(r: &Warehouse, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&r.w_tax.to_le_bytes());
    out.extend_from_slice(&r.w_ytd.to_le_bytes());
    for s in [
        &r.w_name,
        &r.w_street_1,
        &r.w_street_2,
        &r.w_city,
        &r.w_state,
        &r.w_zip,
    ] {
        put_short(out, s.as_bytes());
    }
}

/// Encodes a DISTRICT row.
pub fn encode_district(r: &District, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&r.d_tax.to_le_bytes());
    out.extend_from_slice(&r.d_ytd.to_le_bytes());
    out.extend_from_slice(&r.d_next_o_id.to_le_bytes());
    for s in [
        &r.d_name,
        &r.d_street_1,
        &r.d_street_2,
        &r.d_city,
        &r.d_state,
        &r.d_zip,
    ] {
        put_short(out, s.as_bytes());
    }
}

/// Encodes a CUSTOMER row.
pub fn encode_customer(r: &Customer, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&r.c_discount.to_le_bytes());
    out.extend_from_slice(&r.c_credit_lim.to_le_bytes());
    out.extend_from_slice(&r.c_balance.to_le_bytes());
    out.extend_from_slice(&r.c_ytd_payment.to_le_bytes());
    out.extend_from_slice(&r.c_payment_cnt.to_le_bytes());
    out.extend_from_slice(&r.c_delivery_cnt.to_le_bytes());
    out.extend_from_slice(&r.c_since.to_le_bytes());
    out.extend_from_slice(&r.c_credit);
    for s in [
        &r.c_first,
        &r.c_middle,
        &r.c_last,
        &r.c_street_1,
        &r.c_street_2,
        &r.c_city,
        &r.c_state,
        &r.c_zip,
        &r.c_phone,
    ] {
        put_short(out, s.as_bytes());
    }
    put_long(out, r.c_data.as_bytes());
}

/// Text columns of a customer before `C_DATA`.
pub const C_SHORT_COLUMNS: usize = 9;

/// Replaces `C_DATA`, the last column, of an encoded customer row.
pub fn replace_c_data(row: &mut Vec<u8>, data: &str) -> DecodeResult<()> {
    let mut t = TextReader::new(row, off::C_TEXT, "customer");
    t.skip_short(C_SHORT_COLUMNS)?;
    let at = t.position();
    row.truncate(at);
    put_long(row, data.as_bytes());
    Ok(())
}

/// Encodes a HISTORY row.
pub fn encode_history(r: &History, out: &mut Vec<u8>) {
    encode_history_parts(
        (r.h_c_id, r.h_c_d_id, r.h_c_w_id),
        (r.h_d_id, r.h_w_id),
        r.h_date,
        r.h_amount,
        &r.h_data,
        out,
    );
}

/// Encodes a HISTORY row from its columns: the customer `(c_id, d_id, w_id)`, the
/// paying district `(d_id, w_id)`, date, amount and data.
pub fn encode_history_parts(
    (c_id, c_d_id, c_w_id): (u32, u8, u16),
    (d_id, w_id): (u8, u16),
    date: i64,
    amount: i64,
    data: &str,
    out: &mut Vec<u8>,
) {
    out.clear();
    out.extend_from_slice(&c_id.to_le_bytes());
    out.push(c_d_id);
    out.extend_from_slice(&c_w_id.to_le_bytes());
    out.push(d_id);
    out.extend_from_slice(&w_id.to_le_bytes());
    out.extend_from_slice(&date.to_le_bytes());
    out.extend_from_slice(&amount.to_le_bytes());
    put_short(out, data.as_bytes());
}

/// Encodes an ORDER row.
pub fn encode_order(r: &Order, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&r.o_c_id.to_le_bytes());
    out.extend_from_slice(&r.o_entry_d.to_le_bytes());
    out.push(r.o_carrier_id.unwrap_or(0));
    out.push(r.o_ol_cnt);
    out.push(u8::from(r.o_all_local));
}

/// Decodes the columns of an ORDER row that are not in its key.
pub fn decode_order(v: &[u8]) -> DecodeResult<(u32, i64, Option<u8>, u8)> {
    if v.len() < off::O_LEN {
        return Err(Corrupt("order"));
    }
    let carrier = v[off::O_CARRIER_ID];
    Ok((
        get_u32(v, off::O_C_ID, "order")?,
        get_i64(v, off::O_ENTRY_D, "order")?,
        (carrier != 0).then_some(carrier),
        v[off::O_OL_CNT],
    ))
}

/// Encodes an ORDER-LINE row.
pub fn encode_order_line(r: &OrderLine, out: &mut Vec<u8>) {
    encode_order_line_parts(
        r.ol_i_id,
        r.ol_supply_w_id,
        r.ol_delivery_d,
        r.ol_quantity,
        r.ol_amount,
        &r.ol_dist_info,
        out,
    );
}

/// Encodes an ORDER-LINE row from its columns (New Order builds lines without a struct).
pub fn encode_order_line_parts(
    i_id: u32,
    supply_w_id: u16,
    delivery_d: Option<i64>,
    quantity: u8,
    amount: i64,
    dist_info: &[u8; 24],
    out: &mut Vec<u8>,
) {
    out.clear();
    out.extend_from_slice(&i_id.to_le_bytes());
    out.extend_from_slice(&supply_w_id.to_le_bytes());
    out.extend_from_slice(&delivery_d.unwrap_or(NULL_DATE).to_le_bytes());
    out.push(quantity);
    out.extend_from_slice(&amount.to_le_bytes());
    out.extend_from_slice(dist_info);
}

/// Encodes an ITEM row.
pub fn encode_item(r: &Item, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&r.i_im_id.to_le_bytes());
    out.extend_from_slice(&r.i_price.to_le_bytes());
    put_short(out, r.i_name.as_bytes());
    put_short(out, r.i_data.as_bytes());
}

/// Encodes a STOCK row.
pub fn encode_stock(r: &Stock, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&r.s_quantity.to_le_bytes());
    out.extend_from_slice(&r.s_ytd.to_le_bytes());
    out.extend_from_slice(&r.s_order_cnt.to_le_bytes());
    out.extend_from_slice(&r.s_remote_cnt.to_le_bytes());
    for d in &r.s_dist {
        out.extend_from_slice(d);
    }
    put_short(out, r.s_data.as_bytes());
}

/// Encodes the metadata record.
pub fn encode_meta(m: &Meta) -> Vec<u8> {
    let mut v = Vec::with_capacity(18);
    v.extend_from_slice(&FORMAT.to_le_bytes());
    v.extend_from_slice(&m.warehouses.to_le_bytes());
    v.extend_from_slice(&m.scale.items.to_le_bytes());
    v.extend_from_slice(&m.scale.customers.to_le_bytes());
    v.extend_from_slice(&m.c_last_load.to_le_bytes());
    v
}

/// Decodes the metadata record, checking its format version.
pub fn decode_meta(v: &[u8]) -> Result<Meta, String> {
    let bad = |_| "corrupt TPC-C metadata record".to_string();
    let format = get_u32(v, 0, "meta").map_err(bad)?;
    if format != FORMAT {
        return Err(format!(
            "TPC-C data format {format}, this build reads {FORMAT}"
        ));
    }
    Ok(Meta {
        warehouses: le::<2>(v, 4, "meta").map(u16::from_le_bytes).map_err(bad)?,
        scale: Scale {
            items: get_u32(v, 6, "meta").map_err(bad)?,
            customers: get_u32(v, 10, "meta").map_err(bad)?,
        },
        c_last_load: get_u32(v, 14, "meta").map_err(bad)?,
    })
}

#[cfg(test)]
mod tests;
