//! The bulk load: one prepared insert per table inside the load transaction, then
//! the indexes, the metadata and the switch to WAL.

use anyhow::Result;
use rusqlite::params;

use super::schema::{FORMAT, INDEXES};
use super::{SqliteEngine, ascii};
use crate::load::LoadSink;
use crate::schema::{
    Customer, District, History, Item, Meta, NewOrder, Order, OrderLine, Stock, Warehouse,
};

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
