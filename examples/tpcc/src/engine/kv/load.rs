//! The bulk load: rows are queued as the loader hands them over and inserted in one
//! transaction per batch.

use anyhow::{Context, Result};

use super::{KvEngine, KvOps, KvStore, KvTxn, Table};
use crate::codec;
use crate::load::LoadSink;
use crate::schema::{
    Customer, District, History, Item, Meta, NewOrder, Order, OrderLine, Stock, Warehouse,
};

impl<S: KvStore> KvEngine<S> {
    /// Queues the row in `bufs.out` under `key` for the next load batch.
    fn load_insert(&mut self, table: Table, key: &[u8]) -> Result<()> {
        self.load_bytes.extend_from_slice(key);
        self.load_bytes.extend_from_slice(&self.bufs.out);
        self.load_rows
            .push((table, key.len() as u32, self.bufs.out.len() as u32));
        Ok(())
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
