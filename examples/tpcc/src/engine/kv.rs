//! TPC-C on an ordered key/value store with transactions: the transactions written once
//! against [`KvStore`], so our B-tree database and the in-memory reference store run
//! the same code.
//!
//! The transaction path allocates nothing: keys are stack arrays, and rows are read into
//! and built in buffers the engine keeps.

use anyhow::{Context, Result, anyhow, bail};

use super::{Engine, Mode, Summary};
use crate::codec::{self, Corrupt, TextReader, off};
use crate::load::LoadSink;
use crate::schema::{
    Customer, DISTRICTS, District, History, Item, Meta, NewOrder, Order, OrderLine, Stock,
    Warehouse,
};
use crate::workload::{
    CustomerSelector, DeliveryInput, DeliveryOutput, NewOrderInput, NewOrderOutput,
    OrderStatusInput, OrderStatusOutput, PaymentInput, PaymentOutput, StockLevelInput,
    StockLevelOutput, bad_credit_data, middle_of, new_order_total, new_stock_quantity,
};

/// The tables and indexes a key/value engine keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    /// WAREHOUSE by `w_id`.
    Warehouse,
    /// DISTRICT by `(w_id, d_id)`.
    District,
    /// CUSTOMER by `(w_id, d_id, c_id)`.
    Customer,
    /// Index: customer by `(w_id, d_id, c_last, c_first, c_id)`.
    CustomerByLast,
    /// HISTORY by `(c_w_id, c_d_id, c_id, c_payment_cnt)`.
    History,
    /// NEW-ORDER by `(w_id, d_id, o_id)`.
    NewOrder,
    /// ORDER by `(w_id, d_id, o_id)`.
    Order,
    /// Index: order by `(w_id, d_id, c_id, !o_id)`.
    OrderByCustomer,
    /// ORDER-LINE by `(w_id, d_id, o_id, ol_number)`.
    OrderLine,
    /// ITEM by `i_id`.
    Item,
    /// STOCK by `(w_id, i_id)`.
    Stock,
    /// The metadata record.
    Meta,
}

impl Table {
    /// Every table, in the order of [`Table::index`].
    pub const ALL: [Table; 12] = [
        Table::Warehouse,
        Table::District,
        Table::Customer,
        Table::CustomerByLast,
        Table::History,
        Table::NewOrder,
        Table::Order,
        Table::OrderByCustomer,
        Table::OrderLine,
        Table::Item,
        Table::Stock,
        Table::Meta,
    ];

    /// Position in [`Table::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name a store files the table under.
    pub fn name(self) -> &'static str {
        match self {
            Table::Warehouse => "warehouse",
            Table::District => "district",
            Table::Customer => "customer",
            Table::CustomerByLast => "customer_by_last",
            Table::History => "history",
            Table::NewOrder => "new_order",
            Table::Order => "orders",
            Table::OrderByCustomer => "orders_by_customer",
            Table::OrderLine => "order_line",
            Table::Item => "item",
            Table::Stock => "stock",
            Table::Meta => "tpcc_meta",
        }
    }

    /// Whether the table is a secondary index.
    pub fn is_index(self) -> bool {
        matches!(self, Table::CustomerByLast | Table::OrderByCustomer)
    }
}

/// An ordered, transactional key/value store with one key space per [`Table`].
pub trait KvStore {
    /// An open transaction; it borrows the store.
    type Txn<'a>: KvTxn
    where
        Self: 'a;
    /// Starts a transaction.
    fn begin(&mut self) -> Result<Self::Txn<'_>>;
    /// Makes everything committed so far durable and cheap to recover (after a load).
    fn checkpoint(&mut self) -> Result<()> {
        Ok(())
    }
}

/// One transaction of a [`KvStore`]. Dropping it without `commit` aborts it.
pub trait KvTxn {
    /// Commits (durably, as far as the store's sync setting says).
    fn commit(self) -> Result<()>;
    /// Undoes every change of the transaction.
    fn abort(self) -> Result<()>;
    /// Reads `key` into `out` (replacing its contents); `false` if absent.
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    /// Like `get`, for a row the transaction is about to update (stores with locks
    /// take the exclusive lock at once).
    fn get_for_update(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    /// Inserts a new key; an existing key is an error.
    fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()>;
    /// Replaces the value of an existing key.
    fn update(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()>;
    /// Deletes an existing key.
    fn delete(&mut self, table: Table, key: &[u8]) -> Result<()>;
    /// Calls `f` on each entry with `from <= key < to` (`to = None`: no upper bound), in
    /// key order, until it returns `false`.
    fn scan<F>(&mut self, table: Table, from: &[u8], to: Option<&[u8]>, f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<bool>;
}

/// TPC-C over a [`KvStore`].
pub struct KvEngine<S: KvStore> {
    store: S,
    mode: Mode,
    bufs: Bufs,
    /// Rows the loader handed over since the last batch boundary: their bytes, and
    /// per row its table, key length and value length.
    load_bytes: Vec<u8>,
    load_rows: Vec<(Table, u32, u32)>,
}

/// Buffers reused by every transaction, so the transaction path does not allocate.
#[derive(Default)]
struct Bufs {
    row: Vec<u8>,
    row2: Vec<u8>,
    out: Vec<u8>,
    ids: Vec<u32>,
    text: String,
    c_data: String,
}

impl<S: KvStore> KvEngine<S> {
    /// Wraps an opened store; `mode` is what the engine reports itself as.
    pub fn new(store: S, mode: Mode) -> Self {
        Self {
            store,
            mode,
            bufs: Bufs {
                row: Vec::with_capacity(1024),
                row2: Vec::with_capacity(1024),
                out: Vec::with_capacity(1024),
                ids: Vec::with_capacity(64),
                text: String::with_capacity(64),
                c_data: String::with_capacity(512),
            },
            load_bytes: Vec::new(),
            load_rows: Vec::new(),
        }
    }

    /// The store underneath.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Queues the row in `bufs.out` under `key` for the next load batch.
    fn load_insert(&mut self, table: Table, key: &[u8]) -> Result<()> {
        self.load_bytes.extend_from_slice(key);
        self.load_bytes.extend_from_slice(&self.bufs.out);
        self.load_rows
            .push((table, key.len() as u32, self.bufs.out.len() as u32));
        Ok(())
    }

    /// Runs `body` in a transaction; on error the transaction is aborted.
    fn txn<T>(
        &mut self,
        body: impl FnOnce(&mut S::Txn<'_>, &mut Bufs) -> Result<Decision<T>>,
    ) -> Result<T> {
        let mut tx = self.store.begin()?;
        match body(&mut tx, &mut self.bufs) {
            Ok(Decision::Commit(v)) => {
                tx.commit()?;
                Ok(v)
            }
            Ok(Decision::Abort(v)) => {
                tx.abort()?;
                Ok(v)
            }
            Err(e) => {
                // The original error matters more than a failure to abort.
                let _ = tx.abort();
                Err(e)
            }
        }
    }
}

impl Bufs {
    fn must_get<T: KvTxn>(
        &mut self,
        tx: &mut T,
        table: Table,
        key: &[u8],
        what: impl FnOnce() -> String,
    ) -> Result<()> {
        if tx.get(table, key, &mut self.row)? {
            Ok(())
        } else {
            Err(anyhow!("{} not found", what()))
        }
    }

    fn must_get_for_update<T: KvTxn>(
        &mut self,
        tx: &mut T,
        table: Table,
        key: &[u8],
        what: impl FnOnce() -> String,
    ) -> Result<()> {
        if tx.get_for_update(table, key, &mut self.row)? {
            Ok(())
        } else {
            Err(anyhow!("{} not found", what()))
        }
    }

    /// The customer id a selector names, using the last-name index if needed.
    fn customer_id<T: KvTxn>(
        &mut self,
        tx: &mut T,
        w: u16,
        d: u8,
        sel: &CustomerSelector,
    ) -> Result<u32> {
        match sel {
            CustomerSelector::Id(c) => Ok(*c),
            CustomerSelector::LastName(last) => {
                let (from, to) = codec::customer_by_last_range(w, d, last);
                self.ids.clear();
                let ids = &mut self.ids;
                tx.scan(Table::CustomerByLast, &from, Some(&to), |k, _| {
                    ids.push(codec::customer_by_last_id(k)?);
                    Ok(true)
                })?;
                if self.ids.is_empty() {
                    bail!("no customer named {last} in district ({w}, {d})");
                }
                Ok(self.ids[middle_of(self.ids.len())])
            }
        }
    }

    fn new_order_body<T: KvTxn>(
        &mut self,
        tx: &mut T,
        input: &NewOrderInput,
    ) -> Result<Decision<NewOrderOutput>> {
        let (w, d) = (input.w_id, input.d_id);
        self.must_get(tx, Table::Warehouse, &codec::warehouse_key(w), || {
            format!("warehouse {w}")
        })?;
        let w_tax = codec::get_i32(&self.row, off::W_TAX, "warehouse")?;

        let dk = codec::district_key(w, d);
        self.must_get_for_update(tx, Table::District, &dk, || format!("district ({w}, {d})"))?;
        let d_tax = codec::get_i32(&self.row, off::D_TAX, "district")?;
        let o_id = codec::get_u32(&self.row, off::D_NEXT_O_ID, "district")?;
        codec::set_u32(&mut self.row, off::D_NEXT_O_ID, o_id + 1);
        tx.update(Table::District, &dk, &self.row)?;

        let c = input.c_id;
        self.must_get(tx, Table::Customer, &codec::customer_key(w, d, c), || {
            format!("customer ({w}, {d}, {c})")
        })?;
        let c_discount = codec::get_i32(&self.row, off::C_DISCOUNT, "customer")?;
        // C_LAST and C_CREDIT are part of the transaction's output.
        let mut t = TextReader::new(&self.row, off::C_TEXT, "customer");
        t.skip_short(2)?;
        let _c_last = t.short()?;

        codec::encode_order(
            &Order {
                o_id,
                o_d_id: d,
                o_w_id: w,
                o_c_id: c,
                o_entry_d: input.entry_d,
                o_carrier_id: None,
                o_ol_cnt: input.ol_cnt,
                o_all_local: input.all_local(),
            },
            &mut self.out,
        );
        tx.insert(Table::Order, &codec::order_key(w, d, o_id), &self.out)?;
        tx.insert(
            Table::OrderByCustomer,
            &codec::order_by_customer_key(w, d, c, o_id),
            &[],
        )?;
        tx.insert(Table::NewOrder, &codec::new_order_key(w, d, o_id), &[])?;

        let mut sum_amount = 0i64;
        let mut brand_lines = 0u8;
        for (n, l) in input.lines().iter().enumerate() {
            if !tx.get(Table::Item, &codec::item_key(l.i_id), &mut self.row)? {
                // The unused item id: the spec's 1% of New Orders that roll back.
                return Ok(Decision::Abort(NewOrderOutput {
                    o_id,
                    rolled_back: true,
                    total: 0,
                    brand_lines: 0,
                }));
            }
            let i_price = codec::get_i64(&self.row, off::I_PRICE, "item")?;
            let mut t = TextReader::new(&self.row, off::I_TEXT, "item");
            let _i_name = t.short()?;
            let i_original = codec::has_original(t.short()?);

            let sk = codec::stock_key(l.supply_w_id, l.i_id);
            let (sw, si) = (l.supply_w_id, l.i_id);
            self.must_get_for_update(tx, Table::Stock, &sk, || format!("stock ({sw}, {si})"))?;
            let s = &mut self.row;
            let q = codec::get_i32(s, off::S_QUANTITY, "stock")?;
            let ytd = codec::get_i32(s, off::S_YTD, "stock")?;
            let cnt = codec::get_i32(s, off::S_ORDER_CNT, "stock")?;
            let remote = codec::get_i32(s, off::S_REMOTE_CNT, "stock")?;
            let dist_at = off::S_DIST + 24 * usize::from(d - 1);
            let dist_info: [u8; 24] = s
                .get(dist_at..dist_at + 24)
                .and_then(|b| b.try_into().ok())
                .ok_or(Corrupt("stock"))?;
            let s_original = codec::has_original(TextReader::new(s, off::S_DATA, "stock").short()?);
            codec::set_i32(s, off::S_QUANTITY, new_stock_quantity(q, l.quantity));
            codec::set_i32(s, off::S_YTD, ytd + i32::from(l.quantity));
            codec::set_i32(s, off::S_ORDER_CNT, cnt + 1);
            codec::set_i32(s, off::S_REMOTE_CNT, remote + i32::from(l.supply_w_id != w));
            tx.update(Table::Stock, &sk, &self.row)?;

            brand_lines += u8::from(i_original && s_original);
            let amount = i64::from(l.quantity) * i_price;
            sum_amount += amount;
            codec::encode_order_line_parts(
                l.i_id,
                l.supply_w_id,
                None,
                l.quantity,
                amount,
                &dist_info,
                &mut self.out,
            );
            tx.insert(
                Table::OrderLine,
                &codec::order_line_key(w, d, o_id, n as u8 + 1),
                &self.out,
            )?;
        }
        Ok(Decision::Commit(NewOrderOutput {
            o_id,
            rolled_back: false,
            total: new_order_total(sum_amount, c_discount, w_tax, d_tax),
            brand_lines,
        }))
    }

    fn payment_body<T: KvTxn>(
        &mut self,
        tx: &mut T,
        input: &PaymentInput,
    ) -> Result<PaymentOutput> {
        let (w, d) = (input.w_id, input.d_id);
        let wk = codec::warehouse_key(w);
        self.must_get_for_update(tx, Table::Warehouse, &wk, || format!("warehouse {w}"))?;
        let w_ytd = codec::get_i64(&self.row, off::W_YTD, "warehouse")?;
        codec::set_i64(&mut self.row, off::W_YTD, w_ytd + input.h_amount);
        tx.update(Table::Warehouse, &wk, &self.row)?;
        // H_DATA = W_NAME, four spaces, D_NAME.
        self.text.clear();
        self.text
            .push_str(TextReader::new(&self.row, off::W_TEXT, "warehouse").short_str()?);
        self.text.push_str("    ");

        let dk = codec::district_key(w, d);
        self.must_get_for_update(tx, Table::District, &dk, || format!("district ({w}, {d})"))?;
        let d_ytd = codec::get_i64(&self.row, off::D_YTD, "district")?;
        codec::set_i64(&mut self.row, off::D_YTD, d_ytd + input.h_amount);
        tx.update(Table::District, &dk, &self.row)?;
        self.text
            .push_str(TextReader::new(&self.row, off::D_TEXT, "district").short_str()?);

        let (cw, cd) = (input.c_w_id, input.c_d_id);
        let c_id = self.customer_id(tx, cw, cd, &input.customer)?;
        let ck = codec::customer_key(cw, cd, c_id);
        self.must_get_for_update(tx, Table::Customer, &ck, || {
            format!("customer ({cw}, {cd}, {c_id})")
        })?;
        let r = &mut self.row;
        let c_balance = codec::get_i64(r, off::C_BALANCE, "customer")? - input.h_amount;
        let ytd = codec::get_i64(r, off::C_YTD_PAYMENT, "customer")? + input.h_amount;
        let cnt = codec::get_u32(r, off::C_PAYMENT_CNT, "customer")? + 1;
        codec::set_i64(r, off::C_BALANCE, c_balance);
        codec::set_i64(r, off::C_YTD_PAYMENT, ytd);
        codec::set_u32(r, off::C_PAYMENT_CNT, cnt);
        let bad_credit = r.get(off::C_CREDIT..off::C_CREDIT + 2) == Some(b"BC");
        if bad_credit {
            let mut t = TextReader::new(&self.row, off::C_TEXT, "customer");
            t.skip_short(codec::C_SHORT_COLUMNS)?;
            bad_credit_data(input, c_id, t.long_str()?, &mut self.c_data);
            codec::replace_c_data(&mut self.row, &self.c_data)?;
        }
        tx.update(Table::Customer, &ck, &self.row)?;

        codec::encode_history_parts(
            (c_id, cd, cw),
            (d, w),
            input.h_date,
            input.h_amount,
            &self.text,
            &mut self.out,
        );
        tx.insert(
            Table::History,
            &codec::history_key(cw, cd, c_id, cnt),
            &self.out,
        )?;
        Ok(PaymentOutput { c_id, c_balance })
    }
}

impl Bufs {
    fn order_status_body<T: KvTxn>(
        &mut self,
        tx: &mut T,
        input: &OrderStatusInput,
    ) -> Result<OrderStatusOutput> {
        let (w, d) = (input.w_id, input.d_id);
        let c_id = self.customer_id(tx, w, d, &input.customer)?;
        self.must_get(
            tx,
            Table::Customer,
            &codec::customer_key(w, d, c_id),
            || format!("customer ({w}, {d}, {c_id})"),
        )?;
        let _c_balance = codec::get_i64(&self.row, off::C_BALANCE, "customer")?;
        let mut t = TextReader::new(&self.row, off::C_TEXT, "customer");
        let _names = (t.short()?, t.short()?, t.short()?);

        // The customer's newest order is the first key of their index range.
        let mut o_id = 0;
        tx.scan(
            Table::OrderByCustomer,
            &codec::order_by_customer_key(w, d, c_id, u32::MAX),
            Some(&codec::order_by_customer_key(w, d, c_id + 1, u32::MAX)),
            |k, _| {
                o_id = codec::order_by_customer_o_id(k)?;
                Ok(false)
            },
        )?;
        let mut out = OrderStatusOutput {
            c_id,
            o_id,
            lines: 0,
            amount: 0,
        };
        if o_id == 0 {
            return Ok(out);
        }
        self.must_get(tx, Table::Order, &codec::order_key(w, d, o_id), || {
            format!("order ({w}, {d}, {o_id})")
        })?;
        let _order = codec::decode_order(&self.row)?;
        tx.scan(
            Table::OrderLine,
            &codec::order_line_key(w, d, o_id, 0),
            Some(&codec::order_line_key(w, d, o_id + 1, 0)),
            |_, v| {
                out.lines += 1;
                out.amount += codec::get_i64(v, off::OL_AMOUNT, "order line")?;
                Ok(true)
            },
        )?;
        Ok(out)
    }

    fn delivery_body<T: KvTxn>(
        &mut self,
        tx: &mut T,
        input: &DeliveryInput,
    ) -> Result<DeliveryOutput> {
        let w = input.w_id;
        let mut delivered = 0;
        for d in 1..=DISTRICTS {
            let mut oldest = None;
            tx.scan(
                Table::NewOrder,
                &codec::new_order_key(w, d, 0),
                Some(&codec::new_order_key(w, d + 1, 0)),
                |k, _| {
                    oldest = Some(codec::split_wd_u32(k)?.2);
                    Ok(false)
                },
            )?;
            // No undelivered order in this district: skipped, as the spec allows.
            let Some(o_id) = oldest else { continue };
            tx.delete(Table::NewOrder, &codec::new_order_key(w, d, o_id))?;

            let ok = codec::order_key(w, d, o_id);
            self.must_get_for_update(tx, Table::Order, &ok, || {
                format!("order ({w}, {d}, {o_id})")
            })?;
            let (c_id, _, _, ol_cnt) = codec::decode_order(&self.row)?;
            self.row[off::O_CARRIER_ID] = input.carrier_id;
            tx.update(Table::Order, &ok, &self.row)?;

            let mut amount = 0i64;
            for n in 1..=ol_cnt {
                let lk = codec::order_line_key(w, d, o_id, n);
                self.must_get_for_update(tx, Table::OrderLine, &lk, || {
                    format!("order line ({w}, {d}, {o_id}, {n})")
                })?;
                amount += codec::get_i64(&self.row, off::OL_AMOUNT, "order line")?;
                codec::get_i64(&self.row, off::OL_DELIVERY_D, "order line")?;
                codec::set_i64(&mut self.row, off::OL_DELIVERY_D, input.delivery_d);
                tx.update(Table::OrderLine, &lk, &self.row)?;
            }

            let ck = codec::customer_key(w, d, c_id);
            self.must_get_for_update(tx, Table::Customer, &ck, || {
                format!("customer ({w}, {d}, {c_id})")
            })?;
            let r = &mut self.row;
            let balance = codec::get_i64(r, off::C_BALANCE, "customer")?;
            let count = codec::get_u32(r, off::C_DELIVERY_CNT, "customer")?;
            codec::set_i64(r, off::C_BALANCE, balance + amount);
            codec::set_u32(r, off::C_DELIVERY_CNT, count + 1);
            tx.update(Table::Customer, &ck, &self.row)?;
            delivered += 1;
        }
        Ok(DeliveryOutput { delivered })
    }

    fn stock_level_body<T: KvTxn>(
        &mut self,
        tx: &mut T,
        input: &StockLevelInput,
    ) -> Result<StockLevelOutput> {
        let (w, d) = (input.w_id, input.d_id);
        self.must_get(tx, Table::District, &codec::district_key(w, d), || {
            format!("district ({w}, {d})")
        })?;
        let next = codec::get_u32(&self.row, off::D_NEXT_O_ID, "district")?;
        self.ids.clear();
        let ids = &mut self.ids;
        tx.scan(
            Table::OrderLine,
            &codec::order_line_key(w, d, next.saturating_sub(20), 0),
            Some(&codec::order_line_key(w, d, next, 0)),
            |_, v| {
                ids.push(codec::get_u32(v, off::OL_I_ID, "order line")?);
                Ok(true)
            },
        )?;
        self.ids.sort_unstable();
        self.ids.dedup();
        let mut low_stock = 0;
        for i in 0..self.ids.len() {
            let item = self.ids[i];
            if tx.get(Table::Stock, &codec::stock_key(w, item), &mut self.row2)?
                && codec::get_i32(&self.row2, off::S_QUANTITY, "stock")? < input.threshold
            {
                low_stock += 1;
            }
        }
        Ok(StockLevelOutput { low_stock })
    }

    fn summary_body<T: KvTxn>(&mut self, tx: &mut T) -> Result<Summary> {
        let mut s = Summary::default();
        tx.scan(Table::Warehouse, &[], None, |k, v| {
            let w = u16::from_be_bytes(k.try_into().map_err(|_| Corrupt("warehouse key"))?);
            s.w_ytd
                .insert(w, codec::get_i64(v, off::W_YTD, "warehouse")?);
            Ok(true)
        })?;
        tx.scan(Table::District, &[], None, |k, v| {
            let d = s.districts.entry(codec::split_wd(k)?).or_default();
            d.d_ytd = codec::get_i64(v, off::D_YTD, "district")?;
            d.d_next_o_id = codec::get_u32(v, off::D_NEXT_O_ID, "district")?;
            Ok(true)
        })?;
        tx.scan(Table::Order, &[], None, |k, v| {
            let (w, dd, o) = codec::split_wd_u32(k)?;
            let d = s.districts.entry((w, dd)).or_default();
            d.orders += 1;
            d.max_o_id = d.max_o_id.max(o);
            d.sum_ol_cnt += u64::from(codec::decode_order(v)?.3);
            Ok(true)
        })?;
        tx.scan(Table::NewOrder, &[], None, |k, _| {
            let (w, dd, o) = codec::split_wd_u32(k)?;
            let d = s.districts.entry((w, dd)).or_default();
            if d.new_orders == 0 {
                d.min_no_o_id = o;
            }
            d.new_orders += 1;
            d.min_no_o_id = d.min_no_o_id.min(o);
            d.max_no_o_id = d.max_no_o_id.max(o);
            Ok(true)
        })?;
        tx.scan(Table::OrderLine, &[], None, |k, _| {
            s.districts
                .entry(codec::split_wd(k)?)
                .or_default()
                .order_lines += 1;
            Ok(true)
        })?;
        tx.scan(Table::Customer, &[], None, |_, v| {
            s.customers += 1;
            s.sum_c_balance += codec::get_i64(v, off::C_BALANCE, "customer")?;
            s.sum_c_ytd_payment += codec::get_i64(v, off::C_YTD_PAYMENT, "customer")?;
            s.sum_c_payment_cnt += u64::from(codec::get_u32(v, off::C_PAYMENT_CNT, "customer")?);
            s.sum_c_delivery_cnt += u64::from(codec::get_u32(v, off::C_DELIVERY_CNT, "customer")?);
            Ok(true)
        })?;
        tx.scan(Table::History, &[], None, |_, _| {
            s.history += 1;
            Ok(true)
        })?;
        tx.scan(Table::Stock, &[], None, |_, v| {
            s.stock += 1;
            s.sum_s_quantity += i64::from(codec::get_i32(v, off::S_QUANTITY, "stock")?);
            s.sum_s_order_cnt += i64::from(codec::get_i32(v, off::S_ORDER_CNT, "stock")?);
            Ok(true)
        })?;
        tx.scan(Table::Item, &[], None, |_, _| {
            s.items += 1;
            Ok(true)
        })?;
        Ok(s)
    }
}

impl<S: KvStore> LoadSink for KvEngine<S> {
    fn insert_item(&mut self, r: &Item) -> Result<()> {
        codec::encode_item(r, &mut self.bufs.out);
        self.load_insert(Table::Item, &codec::item_key(r.i_id))
    }

    fn insert_warehouse(&mut self, r: &Warehouse) -> Result<()> {
        codec::encode_warehouse(r, &mut self.bufs.out);
        self.load_insert(Table::Warehouse, &codec::warehouse_key(r.w_id))
    }

    fn insert_stock(&mut self, r: &Stock) -> Result<()> {
        codec::encode_stock(r, &mut self.bufs.out);
        self.load_insert(Table::Stock, &codec::stock_key(r.s_w_id, r.s_i_id))
    }

    fn insert_district(&mut self, r: &District) -> Result<()> {
        codec::encode_district(r, &mut self.bufs.out);
        self.load_insert(Table::District, &codec::district_key(r.d_w_id, r.d_id))
    }

    fn insert_customer(&mut self, r: &Customer) -> Result<()> {
        codec::encode_customer(r, &mut self.bufs.out);
        self.load_insert(
            Table::Customer,
            &codec::customer_key(r.c_w_id, r.c_d_id, r.c_id),
        )?;
        self.bufs.out.clear();
        self.load_insert(
            Table::CustomerByLast,
            &codec::customer_by_last_key(r.c_w_id, r.c_d_id, &r.c_last, &r.c_first, r.c_id),
        )
    }

    fn insert_history(&mut self, r: &History) -> Result<()> {
        codec::encode_history(r, &mut self.bufs.out);
        // The loader's history row is the customer's first payment.
        self.load_insert(
            Table::History,
            &codec::history_key(r.h_c_w_id, r.h_c_d_id, r.h_c_id, 1),
        )
    }

    fn insert_order(&mut self, r: &Order) -> Result<()> {
        codec::encode_order(r, &mut self.bufs.out);
        self.load_insert(Table::Order, &codec::order_key(r.o_w_id, r.o_d_id, r.o_id))?;
        self.bufs.out.clear();
        self.load_insert(
            Table::OrderByCustomer,
            &codec::order_by_customer_key(r.o_w_id, r.o_d_id, r.o_c_id, r.o_id),
        )
    }

    fn insert_order_line(&mut self, r: &OrderLine) -> Result<()> {
        codec::encode_order_line(r, &mut self.bufs.out);
        self.load_insert(
            Table::OrderLine,
            &codec::order_line_key(r.ol_w_id, r.ol_d_id, r.ol_o_id, r.ol_number),
        )
    }

    fn insert_new_order(&mut self, r: &NewOrder) -> Result<()> {
        self.bufs.out.clear();
        self.load_insert(
            Table::NewOrder,
            &codec::new_order_key(r.no_w_id, r.no_d_id, r.no_o_id),
        )
    }

    fn batch_boundary(&mut self) -> Result<()> {
        if self.load_rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin()?;
        let mut at = 0;
        for &(table, k, v) in &self.load_rows {
            let (k, v) = (k as usize, v as usize);
            let bytes = &self.load_bytes[at..at + k + v];
            tx.insert(table, &bytes[..k], &bytes[k..])
                .with_context(|| format!("loading {}", table.name()))?;
            at += k + v;
        }
        tx.commit()?;
        self.load_rows.clear();
        self.load_bytes.clear();
        Ok(())
    }

    fn finish(&mut self, meta: &Meta) -> Result<()> {
        self.bufs.out = codec::encode_meta(meta);
        self.load_insert(Table::Meta, codec::META_KEY)?;
        self.batch_boundary()?;
        self.store.checkpoint()
    }
}

impl<S: KvStore> Engine for KvEngine<S> {
    fn mode(&self) -> Mode {
        self.mode
    }

    fn meta(&mut self) -> Result<Meta> {
        let found = self.txn(|tx, b| {
            let found = tx.get(Table::Meta, codec::META_KEY, &mut b.row)?;
            Ok(Decision::Commit(found))
        })?;
        if !found {
            bail!("not a completely loaded TPC-C database (no metadata record)");
        }
        codec::decode_meta(&self.bufs.row).map_err(anyhow::Error::msg)
    }

    fn new_order(&mut self, input: &NewOrderInput) -> Result<NewOrderOutput> {
        self.txn(|tx, b| b.new_order_body(tx, input))
    }

    fn payment(&mut self, input: &PaymentInput) -> Result<PaymentOutput> {
        self.txn(|tx, b| b.payment_body(tx, input).map(Decision::Commit))
    }

    fn order_status(&mut self, input: &OrderStatusInput) -> Result<OrderStatusOutput> {
        self.txn(|tx, b| b.order_status_body(tx, input).map(Decision::Commit))
    }

    fn delivery(&mut self, input: &DeliveryInput) -> Result<DeliveryOutput> {
        self.txn(|tx, b| b.delivery_body(tx, input).map(Decision::Commit))
    }

    fn stock_level(&mut self, input: &StockLevelInput) -> Result<StockLevelOutput> {
        self.txn(|tx, b| b.stock_level_body(tx, input).map(Decision::Commit))
    }

    fn summary(&mut self) -> Result<Summary> {
        self.txn(|tx, b| b.summary_body(tx).map(Decision::Commit))
            .context("scanning the database")
    }

    fn order_exists(&mut self, w_id: u16, d_id: u8, o_id: u32) -> Result<bool> {
        self.txn(|tx, b| {
            let found = tx.get(
                Table::Order,
                &codec::order_key(w_id, d_id, o_id),
                &mut b.row,
            )?;
            Ok(Decision::Commit(found))
        })
    }
}

/// What a transaction body decided.
enum Decision<T> {
    Commit(T),
    Abort(T),
}
