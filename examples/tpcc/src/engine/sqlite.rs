//! The SQLite baseline: bundled SQLite through rusqlite, WAL journal, every statement
//! prepared once and cached, an in-core page cache.
//!
//! The statements are the ones a careful SQLite user would write: composite keys are
//! clustered (`WITHOUT ROWID`), and a read followed by a write of the same row is one
//! `UPDATE ... RETURNING`, so the baseline is fast rather than naive.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use rusqlite::{Connection, OptionalExtension, params};

use super::{Engine, Mode, Summary, Sync};
use crate::load::LoadSink;
use crate::schema::{
    Customer, DISTRICTS, District, History, Item, Meta, NewOrder, Order, OrderLine, Scale, Stock,
    Warehouse,
};
use crate::workload::{
    CustomerSelector, DeliveryInput, DeliveryOutput, NewOrderInput, NewOrderOutput,
    OrderStatusInput, OrderStatusOutput, PaymentInput, PaymentOutput, StockLevelInput,
    StockLevelOutput, bad_credit_data, middle_of, new_order_total,
};

/// Schema version stored in `tpcc_meta`; bump when the tables change.
const FORMAT: i64 = 1;

const SCHEMA: &str = "
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
const INDEXES: &str = "
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
const STOCK_UPDATE: [&str; DISTRICTS as usize] = [
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

/// A TPC-C database in one SQLite file.
pub struct SqliteEngine {
    conn: Connection,
    /// Reused buffers, so the transaction path does not allocate.
    ids: Vec<u32>,
    text: String,
    c_data: String,
    /// Set only while loading: the sync setting to switch to once the load commits.
    pending_sync: Option<Sync>,
}

fn sync_pragma(sync: Sync) -> &'static str {
    match sync {
        Sync::Off => "OFF",
        Sync::Normal => "NORMAL",
        Sync::Full => "FULL",
    }
}

impl SqliteEngine {
    fn configure(conn: &Connection, sync: Sync) -> Result<()> {
        conn.set_prepared_statement_cache_capacity(64);
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            bail!("SQLite refused WAL mode (got {mode})");
        }
        // The database is meant to be in core, as in the CMU study: a cache of up to
        // 1 GiB holds the whole spec-scale warehouse. The WAL is checkpointed after
        // 65,536 pages (256 MiB), the log volume after which btree-db checkpoints too;
        // SQLite's default of 1,000 pages would charge a checkpoint to one New Order in
        // every hundred or so, which btree-db does not pay either.
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {}; PRAGMA cache_size = -1048576; PRAGMA temp_store = MEMORY; \
             PRAGMA wal_autocheckpoint = 65536;",
            sync_pragma(sync)
        ))?;
        Ok(())
    }

    /// Creates the schema in a new file and starts the load transaction.
    pub fn create(path: &Path, sync: Sync) -> Result<Self> {
        let conn =
            Connection::open(path).with_context(|| format!("creating {}", path.display()))?;
        // A fresh file needs no journal while it is being filled: if the load dies, the
        // file is discarded anyway. WAL is switched on when the load commits.
        conn.execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -1048576;",
        )?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch("BEGIN")?;
        let mut engine = Self::wrap(conn);
        engine.pending_sync = Some(sync);
        Ok(engine)
    }

    /// Opens a loaded database.
    pub fn open(path: &Path, sync: Sync) -> Result<Self> {
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .with_context(|| format!("opening {}", path.display()))?;
        Self::configure(&conn, sync).with_context(|| format!("opening {}", path.display()))?;
        let format: Option<i64> = conn
            .query_row(
                "SELECT value FROM tpcc_meta WHERE name = 'format'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| anyhow!("{} is not a loaded TPC-C database: {e}", path.display()))?;
        match format {
            Some(FORMAT) => {}
            Some(f) => bail!(
                "{} has TPC-C schema version {f}, this build reads {FORMAT}",
                path.display()
            ),
            None => bail!(
                "{} is not a completely loaded TPC-C database",
                path.display()
            ),
        }
        Ok(Self::wrap(conn))
    }

    fn wrap(conn: Connection) -> Self {
        Self {
            conn,
            ids: Vec::with_capacity(16),
            text: String::with_capacity(64),
            c_data: String::with_capacity(512),
            pending_sync: None,
        }
    }

    fn begin(&self) -> Result<()> {
        self.conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(())
    }

    fn commit(&self) -> Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }

    fn rollback(&self) -> Result<()> {
        self.conn.prepare_cached("ROLLBACK")?.execute([])?;
        Ok(())
    }

    /// Runs `f` in a transaction, rolling back if it fails.
    fn in_txn<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.begin()?;
        match f(self) {
            Ok(v) => {
                self.commit()?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.rollback();
                Err(e)
            }
        }
    }

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

    fn meta_value(&self, name: &str) -> Result<i64> {
        self.conn
            .query_row("SELECT value FROM tpcc_meta WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .with_context(|| format!("reading {name} from tpcc_meta"))
    }
}

impl SqliteEngine {
    fn finish_load(&mut self, meta: &Meta) -> Result<()> {
        self.conn.execute_batch(INDEXES)?;
        let mut stmt = self
            .conn
            .prepare("INSERT INTO tpcc_meta (name, value) VALUES (?1, ?2)")?;
        for (name, value) in [
            ("format", FORMAT),
            ("warehouses", i64::from(meta.warehouses)),
            ("items", i64::from(meta.scale.items)),
            ("customers", i64::from(meta.scale.customers)),
            ("c_last_load", i64::from(meta.c_last_load)),
        ] {
            stmt.execute(params![name, value])?;
        }
        drop(stmt);
        self.conn.execute_batch("COMMIT; ANALYZE;")?;
        Self::configure(&self.conn, self.pending_sync.take().unwrap_or_default())?;
        Ok(())
    }
}

impl LoadSink for SqliteEngine {
    fn insert_item(&mut self, r: &Item) -> Result<()> {
        self.conn
            .prepare_cached("INSERT INTO item VALUES (?1, ?2, ?3, ?4, ?5)")?
            .execute(params![r.i_id, r.i_im_id, r.i_name, r.i_price, r.i_data])?;
        Ok(())
    }

    fn insert_warehouse(&mut self, r: &Warehouse) -> Result<()> {
        self.conn
            .prepare_cached("INSERT INTO warehouse VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")?
            .execute(params![
                r.w_id,
                r.w_name,
                r.w_street_1,
                r.w_street_2,
                r.w_city,
                r.w_state,
                r.w_zip,
                r.w_tax,
                r.w_ytd
            ])?;
        Ok(())
    }

    fn insert_stock(&mut self, r: &Stock) -> Result<()> {
        let d = |i: usize| ascii(&r.s_dist[i]);
        self.conn
            .prepare_cached(
                "INSERT INTO stock VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, \
                 ?14, ?15, ?16, ?17)",
            )?
            .execute(params![
                r.s_i_id,
                r.s_w_id,
                r.s_quantity,
                d(0),
                d(1),
                d(2),
                d(3),
                d(4),
                d(5),
                d(6),
                d(7),
                d(8),
                d(9),
                r.s_ytd,
                r.s_order_cnt,
                r.s_remote_cnt,
                r.s_data
            ])?;
        Ok(())
    }

    fn insert_district(&mut self, r: &District) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO district VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(params![
                r.d_id,
                r.d_w_id,
                r.d_name,
                r.d_street_1,
                r.d_street_2,
                r.d_city,
                r.d_state,
                r.d_zip,
                r.d_tax,
                r.d_ytd,
                r.d_next_o_id
            ])?;
        Ok(())
    }

    fn insert_customer(&mut self, r: &Customer) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO customer VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, \
                 ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
            )?
            .execute(params![
                r.c_id,
                r.c_d_id,
                r.c_w_id,
                r.c_first,
                r.c_middle,
                r.c_last,
                r.c_street_1,
                r.c_street_2,
                r.c_city,
                r.c_state,
                r.c_zip,
                r.c_phone,
                r.c_since,
                ascii(&r.c_credit),
                r.c_credit_lim,
                r.c_discount,
                r.c_balance,
                r.c_ytd_payment,
                r.c_payment_cnt,
                r.c_delivery_cnt,
                r.c_data
            ])?;
        Ok(())
    }

    fn insert_history(&mut self, r: &History) -> Result<()> {
        self.conn
            .prepare_cached("INSERT INTO history VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?
            .execute(params![
                r.h_c_id, r.h_c_d_id, r.h_c_w_id, r.h_d_id, r.h_w_id, r.h_date, r.h_amount,
                r.h_data
            ])?;
        Ok(())
    }

    fn insert_order(&mut self, r: &Order) -> Result<()> {
        self.conn
            .prepare_cached("INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?
            .execute(params![
                r.o_id,
                r.o_d_id,
                r.o_w_id,
                r.o_c_id,
                r.o_entry_d,
                r.o_carrier_id,
                r.o_ol_cnt,
                r.o_all_local
            ])?;
        Ok(())
    }

    fn insert_order_line(&mut self, r: &OrderLine) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO order_line VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute(params![
                r.ol_o_id,
                r.ol_d_id,
                r.ol_w_id,
                r.ol_number,
                r.ol_i_id,
                r.ol_supply_w_id,
                r.ol_delivery_d,
                r.ol_quantity,
                r.ol_amount,
                ascii(&r.ol_dist_info)
            ])?;
        Ok(())
    }

    fn insert_new_order(&mut self, r: &NewOrder) -> Result<()> {
        self.conn
            .prepare_cached("INSERT INTO new_order VALUES (?1, ?2, ?3)")?
            .execute(params![r.no_o_id, r.no_d_id, r.no_w_id])?;
        Ok(())
    }

    fn batch_boundary(&mut self) -> Result<()> {
        // One transaction for the whole load is fastest for SQLite.
        Ok(())
    }

    fn finish(&mut self, meta: &Meta) -> Result<()> {
        self.finish_load(meta)
    }
}

/// Reads a count column (SQLite integers are signed).
fn count(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<u64> {
    r.get::<_, i64>(i).map(|v| v.max(0) as u64)
}

/// Views a fixed-width ASCII column as text.
fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or("")
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

    fn summary(&mut self) -> Result<Summary> {
        let mut s = Summary::default();
        let c = &self.conn;
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
