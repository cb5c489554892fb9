//! The five TPC-C transactions in SQL, plus the summary and order lookups the
//! driver and the consistency checks need.

use anyhow::{Result, anyhow, bail};
use rusqlite::{Connection, OptionalExtension, params};

use super::schema::STOCK_UPDATE;
use super::{SqliteEngine, ascii};
use crate::engine::api::{Engine, Mode, Summary};
use crate::schema::{DISTRICTS, Meta, Scale};
use crate::workload::{
    CustomerSelector, DeliveryInput, DeliveryOutput, NewOrderInput, NewOrderOutput,
    OrderStatusInput, OrderStatusOutput, PaymentInput, PaymentOutput, StockLevelInput,
    StockLevelOutput, bad_credit_data, middle_of, new_order_total,
};

impl SqliteEngine {
    /// Finds a customer id: directly, or the middle of the last-name matches by first name.
    fn customer_id(&mut self, w_id: u16, d_id: u8, sel: &CustomerSelector) -> Result<u32> {
        match sel {
            CustomerSelector::Id(c) => Ok(*c),
            CustomerSelector::LastName(last) => {
                self.ids.clear();
                let mut stmt = self.conn.prepare_cached(
                    "SELECT c_id FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_last = ?3 \
                     ORDER BY c_first, c_id",
                )?;
                let mut rows = stmt.query(params![w_id, d_id, last])?;
                while let Some(r) = rows.next()? {
                    self.ids.push(r.get(0)?);
                }
                if self.ids.is_empty() {
                    bail!("no customer named {last} in district ({w_id}, {d_id})");
                }
                Ok(self.ids[middle_of(self.ids.len())])
            }
        }
    }
}

/// Reads a count column (SQLite integers are signed).
fn count(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<u64> {
    r.get::<_, i64>(i).map(|v| v.max(0) as u64)
}

impl Engine for SqliteEngine {
    fn mode(&self) -> Mode {
        Mode::Sqlite
    }

    fn meta(&mut self) -> Result<Meta> {
        Ok(Meta {
            warehouses: u16::try_from(self.meta_value("warehouses")?)?,
            scale: Scale {
                items: u32::try_from(self.meta_value("items")?)?,
                customers: u32::try_from(self.meta_value("customers")?)?,
            },
            c_last_load: u32::try_from(self.meta_value("c_last_load")?)?,
        })
    }

    fn new_order(&mut self, input: &NewOrderInput) -> Result<NewOrderOutput> {
        self.begin()?;
        match new_order_body(&self.conn, input) {
            Ok(out) => {
                if out.rolled_back {
                    self.rollback()?;
                } else {
                    self.commit()?;
                }
                Ok(out)
            }
            Err(e) => {
                let _ = self.rollback();
                Err(e)
            }
        }
    }

    fn payment(&mut self, input: &PaymentInput) -> Result<PaymentOutput> {
        self.in_txn(|e| {
            let w_name_len = {
                let mut stmt = e.conn.prepare_cached(
                    "UPDATE warehouse SET w_ytd = w_ytd + ?2 WHERE w_id = ?1 RETURNING w_name, \
                     w_street_1, w_street_2, w_city, w_state, w_zip",
                )?;
                let mut rows = stmt.query(params![input.w_id, input.h_amount])?;
                let r = rows
                    .next()?
                    .ok_or_else(|| anyhow!("no warehouse {}", input.w_id))?;
                e.text.clear();
                e.text.push_str(r.get_ref(0)?.as_str()?);
                e.text.len()
            };
            {
                let mut stmt = e.conn.prepare_cached(
                    "UPDATE district SET d_ytd = d_ytd + ?3 WHERE d_w_id = ?1 AND d_id = ?2 \
                     RETURNING d_name, d_street_1, d_street_2, d_city, d_state, d_zip",
                )?;
                let mut rows = stmt.query(params![input.w_id, input.d_id, input.h_amount])?;
                let r = rows
                    .next()?
                    .ok_or_else(|| anyhow!("no district ({}, {})", input.w_id, input.d_id))?;
                e.text.truncate(w_name_len);
                e.text.push_str("    ");
                e.text.push_str(r.get_ref(0)?.as_str()?);
            }
            let c_id = e.customer_id(input.c_w_id, input.c_d_id, &input.customer)?;
            let (credit_bad, c_balance) = {
                let mut stmt = e.conn.prepare_cached(
                    "UPDATE customer SET c_balance = c_balance - ?4, \
                     c_ytd_payment = c_ytd_payment + ?4, c_payment_cnt = c_payment_cnt + 1 \
                     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3 \
                     RETURNING c_first, c_middle, c_last, c_street_1, c_street_2, c_city, \
                     c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, \
                     c_balance",
                )?;
                let mut rows =
                    stmt.query(params![input.c_w_id, input.c_d_id, c_id, input.h_amount])?;
                let r = rows.next()?.ok_or_else(|| {
                    anyhow!("no customer ({}, {}, {c_id})", input.c_w_id, input.c_d_id)
                })?;
                let credit = r.get_ref(10)?.as_str()?;
                (credit == "BC", r.get::<_, i64>(13)?)
            };
            if credit_bad {
                let mut stmt = e.conn.prepare_cached(
                    "SELECT c_data FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                )?;
                let mut rows = stmt.query(params![input.c_w_id, input.c_d_id, c_id])?;
                let r = rows.next()?.ok_or_else(|| anyhow!("customer vanished"))?;
                bad_credit_data(input, c_id, r.get_ref(0)?.as_str()?, &mut e.c_data);
                drop(rows);
                e.conn
                    .prepare_cached(
                        "UPDATE customer SET c_data = ?4 WHERE c_w_id = ?1 AND c_d_id = ?2 \
                         AND c_id = ?3",
                    )?
                    .execute(params![input.c_w_id, input.c_d_id, c_id, e.c_data])?;
            }
            e.conn
                .prepare_cached("INSERT INTO history VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?
                .execute(params![
                    c_id,
                    input.c_d_id,
                    input.c_w_id,
                    input.d_id,
                    input.w_id,
                    input.h_date,
                    input.h_amount,
                    e.text
                ])?;
            Ok(PaymentOutput { c_id, c_balance })
        })
    }

    fn order_status(&mut self, input: &OrderStatusInput) -> Result<OrderStatusOutput> {
        self.in_txn(|e| {
            let c_id = e.customer_id(input.w_id, input.d_id, &input.customer)?;
            {
                let mut stmt = e.conn.prepare_cached(
                    "SELECT c_balance, c_first, c_middle, c_last FROM customer \
                     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                )?;
                let mut rows = stmt.query(params![input.w_id, input.d_id, c_id])?;
                rows.next()?.ok_or_else(|| {
                    anyhow!("no customer ({}, {}, {c_id})", input.w_id, input.d_id)
                })?;
            }
            let o_id: Option<u32> = e
                .conn
                .prepare_cached(
                    "SELECT o_id, o_entry_d, o_carrier_id FROM orders \
                     WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_c_id = ?3 ORDER BY o_id DESC LIMIT 1",
                )?
                .query_row(params![input.w_id, input.d_id, c_id], |r| r.get(0))
                .optional()?;
            let mut out = OrderStatusOutput {
                c_id,
                o_id: o_id.unwrap_or(0),
                lines: 0,
                amount: 0,
            };
            if let Some(o_id) = o_id {
                let mut stmt = e.conn.prepare_cached(
                    "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d \
                     FROM order_line WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3",
                )?;
                let mut rows = stmt.query(params![input.w_id, input.d_id, o_id])?;
                while let Some(r) = rows.next()? {
                    out.lines += 1;
                    out.amount += r.get::<_, i64>(3)?;
                }
            }
            Ok(out)
        })
    }

    fn delivery(&mut self, input: &DeliveryInput) -> Result<DeliveryOutput> {
        self.in_txn(|e| {
            let mut delivered = 0;
            for d_id in 1..=DISTRICTS {
                let no: Option<u32> = e
                    .conn
                    .prepare_cached(
                        "SELECT no_o_id FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 \
                         ORDER BY no_o_id LIMIT 1",
                    )?
                    .query_row(params![input.w_id, d_id], |r| r.get(0))
                    .optional()?;
                // No undelivered order in this district: skipped, as the spec allows.
                let Some(o_id) = no else { continue };
                e.conn
                    .prepare_cached(
                        "DELETE FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 AND no_o_id = ?3",
                    )?
                    .execute(params![input.w_id, d_id, o_id])?;
                let c_id: u32 = e
                    .conn
                    .prepare_cached(
                        "UPDATE orders SET o_carrier_id = ?4 WHERE o_w_id = ?1 AND o_d_id = ?2 \
                         AND o_id = ?3 RETURNING o_c_id",
                    )?
                    .query_row(params![input.w_id, d_id, o_id, input.carrier_id], |r| {
                        r.get(0)
                    })?;
                let mut amount = 0i64;
                {
                    let mut stmt = e.conn.prepare_cached(
                        "UPDATE order_line SET ol_delivery_d = ?4 WHERE ol_w_id = ?1 \
                         AND ol_d_id = ?2 AND ol_o_id = ?3 RETURNING ol_amount",
                    )?;
                    let mut rows =
                        stmt.query(params![input.w_id, d_id, o_id, input.delivery_d])?;
                    while let Some(r) = rows.next()? {
                        amount += r.get::<_, i64>(0)?;
                    }
                }
                e.conn
                    .prepare_cached(
                        "UPDATE customer SET c_balance = c_balance + ?4, \
                         c_delivery_cnt = c_delivery_cnt + 1 \
                         WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                    )?
                    .execute(params![input.w_id, d_id, c_id, amount])?;
                delivered += 1;
            }
            Ok(DeliveryOutput { delivered })
        })
    }

    fn stock_level(&mut self, input: &StockLevelInput) -> Result<StockLevelOutput> {
        self.in_txn(|e| {
            let next: u32 = e
                .conn
                .prepare_cached("SELECT d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2")?
                .query_row(params![input.w_id, input.d_id], |r| r.get(0))?;
            let low_stock: u32 = e
                .conn
                .prepare_cached(
                    "SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock \
                     WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id >= ?3 AND ol_o_id < ?4 \
                     AND s_w_id = ?1 AND s_i_id = ol_i_id AND s_quantity < ?5",
                )?
                .query_row(
                    params![
                        input.w_id,
                        input.d_id,
                        next.saturating_sub(20),
                        next,
                        input.threshold
                    ],
                    |r| r.get(0),
                )?;
            Ok(StockLevelOutput { low_stock })
        })
    }

    /// The summary, read in one transaction: its queries see one snapshot of the
    /// file. As separate statements, a `check` beside a running `run` saw orders
    /// committed between two of them and reported conditions 2 and 4 as failed.
    fn summary(&mut self) -> Result<Summary> {
        self.conn.execute_batch("BEGIN")?;
        let read = read_summary(&self.conn);
        let end = self
            .conn
            .execute_batch(if read.is_ok() { "COMMIT" } else { "ROLLBACK" });
        let s = read?;
        end?;
        Ok(s)
    }
    fn order_exists(&mut self, w_id: u16, d_id: u8, o_id: u32) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached("SELECT 1 FROM orders WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_id = ?3")?
            .query_row(params![w_id, d_id, o_id], |_| Ok(()))
            .optional()?
            .is_some())
    }
}

/// New Order's statements, inside the caller's transaction.
fn new_order_body(conn: &Connection, input: &NewOrderInput) -> Result<NewOrderOutput> {
    let (w_id, d_id) = (input.w_id, input.d_id);
    let w_tax: i32 = conn
        .prepare_cached("SELECT w_tax FROM warehouse WHERE w_id = ?1")?
        .query_row([w_id], |r| r.get(0))
        .optional()?
        .ok_or_else(|| anyhow!("no warehouse {w_id}"))?;
    let (d_tax, o_id): (i32, u32) = conn
        .prepare_cached(
            "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = ?1 AND d_id = ?2 \
             RETURNING d_tax, d_next_o_id - 1",
        )?
        .query_row(params![w_id, d_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .ok_or_else(|| anyhow!("no district ({w_id}, {d_id})"))?;
    let c_discount: i32 = {
        let mut stmt = conn.prepare_cached(
            "SELECT c_discount, c_last, c_credit FROM customer \
             WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
        )?;
        let mut rows = stmt.query(params![w_id, d_id, input.c_id])?;
        let r = rows
            .next()?
            .ok_or_else(|| anyhow!("no customer ({w_id}, {d_id}, {})", input.c_id))?;
        r.get(0)?
    };
    conn.prepare_cached("INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6, ?7)")?
        .execute(params![
            o_id,
            d_id,
            w_id,
            input.c_id,
            input.entry_d,
            input.ol_cnt,
            input.all_local()
        ])?;
    conn.prepare_cached("INSERT INTO new_order VALUES (?1, ?2, ?3)")?
        .execute(params![o_id, d_id, w_id])?;

    let mut item =
        conn.prepare_cached("SELECT i_price, i_name, i_data FROM item WHERE i_id = ?1")?;
    let mut stock = conn.prepare_cached(STOCK_UPDATE[usize::from(d_id - 1)])?;
    let mut line = conn.prepare_cached(
        "INSERT INTO order_line VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?8, ?9)",
    )?;
    let mut sum_amount = 0i64;
    let mut brand_lines = 0u8;
    for (n, l) in input.lines().iter().enumerate() {
        let (i_price, i_original) = {
            let mut rows = item.query([l.i_id])?;
            match rows.next()? {
                Some(r) => (
                    r.get::<_, i64>(0)?,
                    r.get_ref(2)?.as_str()?.contains(crate::random::ORIGINAL),
                ),
                // The unused item id: the spec's 1% of New Orders that roll back.
                None => {
                    return Ok(NewOrderOutput {
                        o_id,
                        rolled_back: true,
                        total: 0,
                        brand_lines: 0,
                    });
                }
            }
        };
        let mut dist_info = [0u8; 24];
        let s_original = {
            let mut rows = stock.query(params![
                l.supply_w_id,
                l.i_id,
                l.quantity,
                i32::from(l.supply_w_id != w_id)
            ])?;
            let r = rows
                .next()?
                .ok_or_else(|| anyhow!("no stock ({}, {})", l.supply_w_id, l.i_id))?;
            let dist = r.get_ref(0)?.as_bytes()?;
            let k = dist.len().min(24);
            dist_info[..k].copy_from_slice(&dist[..k]);
            r.get_ref(1)?.as_str()?.contains(crate::random::ORIGINAL)
        };
        brand_lines += u8::from(i_original && s_original);
        let amount = i64::from(l.quantity) * i_price;
        sum_amount += amount;
        line.execute(params![
            o_id,
            d_id,
            w_id,
            n as u32 + 1,
            l.i_id,
            l.supply_w_id,
            l.quantity,
            amount,
            ascii(&dist_info)
        ])?;
    }
    Ok(NewOrderOutput {
        o_id,
        rolled_back: false,
        total: new_order_total(sum_amount, c_discount, w_tax, d_tax),
        brand_lines,
    })
}

/// The database's totals (see `Engine::summary`), from the open connection `c`.
fn read_summary(c: &Connection) -> Result<Summary> {
    let mut s = Summary::default();
    {
        let mut stmt = c.prepare("SELECT w_id, w_ytd FROM warehouse")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            s.w_ytd.insert(r.get(0)?, r.get(1)?);
        }
    }
    {
        let mut stmt = c.prepare("SELECT d_w_id, d_id, d_ytd, d_next_o_id FROM district")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let d = s.districts.entry((r.get(0)?, r.get(1)?)).or_default();
            d.d_ytd = r.get(2)?;
            d.d_next_o_id = r.get(3)?;
        }
    }
    {
        let mut stmt = c.prepare(
            "SELECT o_w_id, o_d_id, COUNT(*), MAX(o_id), SUM(o_ol_cnt) FROM orders GROUP BY 1, 2",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let d = s.districts.entry((r.get(0)?, r.get(1)?)).or_default();
            d.orders = count(r, 2)?;
            d.max_o_id = r.get(3)?;
            d.sum_ol_cnt = count(r, 4)?;
        }
    }
    {
        let mut stmt = c.prepare(
            "SELECT no_w_id, no_d_id, COUNT(*), MIN(no_o_id), MAX(no_o_id) FROM new_order \
             GROUP BY 1, 2",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let d = s.districts.entry((r.get(0)?, r.get(1)?)).or_default();
            d.new_orders = count(r, 2)?;
            d.min_no_o_id = r.get(3)?;
            d.max_no_o_id = r.get(4)?;
        }
    }
    {
        let mut stmt =
            c.prepare("SELECT ol_w_id, ol_d_id, COUNT(*) FROM order_line GROUP BY 1, 2")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let d = s.districts.entry((r.get(0)?, r.get(1)?)).or_default();
            d.order_lines = count(r, 2)?;
        }
    }
    (
        s.customers,
        s.sum_c_balance,
        s.sum_c_ytd_payment,
        s.sum_c_payment_cnt,
        s.sum_c_delivery_cnt,
    ) = c.query_row(
        "SELECT COUNT(*), TOTAL(c_balance), TOTAL(c_ytd_payment), TOTAL(c_payment_cnt), \
         TOTAL(c_delivery_cnt) FROM customer",
        [],
        |r| {
            Ok((
                count(r, 0)?,
                r.get::<_, f64>(1)? as i64,
                r.get::<_, f64>(2)? as i64,
                r.get::<_, f64>(3)? as u64,
                r.get::<_, f64>(4)? as u64,
            ))
        },
    )?;
    s.history = c.query_row("SELECT COUNT(*) FROM history", [], |r| count(r, 0))?;
    (s.stock, s.sum_s_quantity, s.sum_s_order_cnt) = c.query_row(
        "SELECT COUNT(*), TOTAL(s_quantity), TOTAL(s_order_cnt) FROM stock",
        [],
        |r| {
            Ok((
                count(r, 0)?,
                r.get::<_, f64>(1)? as i64,
                r.get::<_, f64>(2)? as i64,
            ))
        },
    )?;
    s.items = c.query_row("SELECT COUNT(*) FROM item", [], |r| count(r, 0))?;
    Ok(s)
}
