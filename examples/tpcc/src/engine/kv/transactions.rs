//! The five TPC-C transactions as key/value operations, written once for every
//! [`KvStore`](super::KvStore).
//!
//! One file, a little over 600 lines, on purpose: `scripts/figures.sh changed-lines`
//! measures what speculation cost this engine as the lines changed in its files since
//! the sequential engine, and lines moved out to a new file would count as changed.

use anyhow::{Context, Result, anyhow, bail};

use super::by_hand;
use super::journey::Grain;
use super::spec::with_spec_rows;
use super::speculative::{
    deliver_districts, low_stock, new_order_items, new_order_items_checkpointed,
};
use super::{Bufs, Decision, KvEngine, KvOps, KvStore, KvTxn, Table};
use crate::codec::{self, Corrupt, TextReader, off};
use crate::engine::api::{Engine, Mode, Summary};
use crate::schema::{DISTRICTS, Meta, Order};
use crate::workload::{
    CustomerSelector, DeliveryInput, DeliveryOutput, NewOrderInput, NewOrderOutput, OrderLineInput,
    OrderStatusInput, OrderStatusOutput, PaymentInput, PaymentOutput, StockLevelInput,
    StockLevelOutput, TxnKind, bad_credit_data, middle_of, new_order_total, new_stock_quantity,
};

/// What the stock part of a New Order line hands to its order-line insert.
#[derive(Clone)]
pub(super) struct ItemLine {
    /// The line's amount.
    pub(super) amount: i64,
    /// 1 for a brand line.
    pub(super) brand: u8,
    dist_info: [u8; 24],
}

impl Bufs {
    fn must_get<T: KvOps>(
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

    #[track_caller]
    fn must_get_for_update<T: KvOps>(
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
    fn customer_id<T: KvOps>(
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

        let start = self.loop_start();
        // ANCHOR: new_order_call
        let lines = match self.loops {
            Mode::Tls => with_spec_rows(
                &tx.share(),
                &[Table::Stock, Table::OrderLine],
                &[],
                self.threads,
                self.journey.grain,
                |rows| {
                    if self.journey.checkpoint {
                        new_order_items_checkpointed(rows, input, o_id)
                    } else {
                        new_order_items(rows, input, o_id)
                    }
                },
            )?,
            Mode::ByHand => by_hand::new_order_items(&tx.share(), input, o_id, self.parts())?,
            _ => self.new_order_items(tx, input, o_id)?,
        };
        // ANCHOR_END: new_order_call
        self.loop_end(TxnKind::NewOrder, start);
        let Some((sum_amount, brand_lines)) = lines else {
            // The unused item id: the spec's 1% of New Orders that roll back.
            return Ok(Decision::Abort(NewOrderOutput {
                o_id,
                rolled_back: true,
                total: 0,
                brand_lines: 0,
            }));
        };
        Ok(Decision::Commit(NewOrderOutput {
            o_id,
            rolled_back: false,
            total: new_order_total(sum_amount, c_discount, w_tax, d_tax),
            brand_lines,
        }))
    }

    /// New Order's items loop, in order: the sum of the line amounts and the number
    /// of brand lines, or `None` at the unused item.
    fn new_order_items<T: KvOps>(
        &mut self,
        tx: &mut T,
        input: &NewOrderInput,
        o_id: u32,
    ) -> Result<Option<(i64, u8)>> {
        let mut sum_amount = 0i64;
        let mut brand_lines = 0u8;
        for (n, l) in input.lines().iter().enumerate() {
            let Some((amount, brand)) = self.new_order_line(tx, input, o_id, n, l)? else {
                return Ok(None);
            };
            sum_amount += amount;
            brand_lines += brand;
        }
        Ok(Some((sum_amount, brand_lines)))
    }

    /// One order line of New Order (the body of its items loop): reads the item,
    /// updates its stock, inserts the line. Returns the line's amount and whether it
    /// is a brand line, or `None` for the unused item id.
    pub(super) fn new_order_line<T: KvOps>(
        &mut self,
        tx: &mut T,
        input: &NewOrderInput,
        o_id: u32,
        n: usize,
        l: &OrderLineInput,
    ) -> Result<Option<(i64, u8)>> {
        let Some(line) = self.new_order_stock(tx, input, l)? else {
            return Ok(None);
        };
        self.insert_order_line(tx, input, o_id, n, l, &line)?;
        Ok(Some((line.amount, line.brand)))
    }

    /// The first part of an order line: reads the item and updates its stock (`None`
    /// for the unused item id).
    pub(super) fn new_order_stock<T: KvOps>(
        &mut self,
        tx: &mut T,
        input: &NewOrderInput,
        l: &OrderLineInput,
    ) -> Result<Option<ItemLine>> {
        let d = input.d_id;
        if !tx.get(Table::Item, &codec::item_key(l.i_id), &mut self.row)? {
            return Ok(None);
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
        codec::set_i32(
            s,
            off::S_REMOTE_CNT,
            remote + i32::from(l.supply_w_id != input.w_id),
        );
        tx.update(Table::Stock, &sk, &self.row)?;
        Ok(Some(ItemLine {
            amount: i64::from(l.quantity) * i_price,
            brand: u8::from(i_original && s_original),
            dist_info,
        }))
    }

    /// The second part of an order line: inserts line `n` of order `o_id`.
    pub(super) fn insert_order_line<T: KvOps>(
        &mut self,
        tx: &mut T,
        input: &NewOrderInput,
        o_id: u32,
        n: usize,
        l: &OrderLineInput,
        line: &ItemLine,
    ) -> Result<()> {
        codec::encode_order_line_parts(
            l.i_id,
            l.supply_w_id,
            None,
            l.quantity,
            line.amount,
            &line.dist_info,
            &mut self.out,
        );
        tx.insert(
            Table::OrderLine,
            &codec::order_line_key(input.w_id, input.d_id, o_id, n as u8 + 1),
            &self.out,
        )
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
        // A warehouse's Deliveries take turns (an exclusive lock on a NEW-ORDER key
        // of district 0, which no order has): scans lock only the rows they return,
        // so another Delivery could take the next order as the oldest past this
        // one's uncommitted delete, and deliver out of order if this one aborted.
        let key = codec::new_order_key(input.w_id, 0, 0);
        tx.get_for_update(Table::NewOrder, &key, &mut self.row)?;
        let start = self.loop_start();
        let delivered = if self.loops == Mode::ByHand {
            by_hand::deliver_districts(&tx.share(), input, self.parts())?
        } else if self.loops == Mode::Tls {
            // ANCHOR: delivery_call
            with_spec_rows(
                &tx.share(),
                &[
                    Table::NewOrder,
                    Table::Order,
                    Table::OrderLine,
                    Table::Customer,
                ],
                // One district's NEW-ORDER rows: the (w_id, d_id) key prefix.
                &[(Table::NewOrder, 3)],
                self.threads,
                self.journey.grain,
                |rows| deliver_districts(rows, input),
            )?
            // ANCHOR_END: delivery_call
        } else {
            let mut delivered = 0;
            for d in 1..=DISTRICTS {
                if self.deliver_district(tx, input, d)? {
                    delivered += 1;
                }
            }
            delivered
        };
        self.loop_end(TxnKind::Delivery, start);
        Ok(DeliveryOutput { delivered })
    }

    /// Delivery in district `d`: delivers its oldest undelivered order; `false` if it
    /// has none (the district is skipped, as the spec allows).
    pub(super) fn deliver_district<T: KvOps>(
        &mut self,
        tx: &mut T,
        input: &DeliveryInput,
        d: u8,
    ) -> Result<bool> {
        let w = input.w_id;
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
        let Some(o_id) = oldest else { return Ok(false) };
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
        Ok(true)
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
        let start = self.loop_start();
        let low_stock = if self.loops == Mode::ByHand {
            by_hand::low_stock(&tx.share(), &self.ids, input, self.parts())?
        } else if self.loops == Mode::Tls {
            with_spec_rows(&tx.share(), &[], &[], self.threads, Grain::Row, |rows| {
                low_stock(rows, &self.ids, input)
            })?
        } else {
            low_stock_in_order(tx, &self.ids, input, &mut self.row2)?
        };
        self.loop_end(TxnKind::StockLevel, start);
        Ok(StockLevelOutput { low_stock })
    }
}

/// Stock Level's items loop, in order: how many of `items` have less stock than the
/// threshold.
pub(super) fn low_stock_in_order<T: KvOps>(
    tx: &mut T,
    items: &[u32],
    input: &StockLevelInput,
    row: &mut Vec<u8>,
) -> Result<u32> {
    let mut low_stock = 0;
    for &item in items {
        if tx.get(Table::Stock, &codec::stock_key(input.w_id, item), row)?
            && codec::get_i32(row, off::S_QUANTITY, "stock")? < input.threshold
        {
            low_stock += 1;
        }
    }
    Ok(low_stock)
}

impl<S: KvStore> Engine for KvEngine<S> {
    fn mode(&self) -> Mode {
        self.mode
    }

    fn loops_in_order(&mut self, in_order: bool) {
        self.bufs.loops = if in_order {
            Mode::Sequential
        } else {
            self.mode
        };
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
