//! The whole-database aggregates ([`Summary`]) the consistency conditions and the
//! engine comparison read: one scan per table.

use anyhow::Result;

use super::{Bufs, KvTxn, Table};
use crate::codec::{self, Corrupt, off};
use crate::engine::api::Summary;

impl Bufs {
    pub(super) fn summary_body<T: KvTxn>(&mut self, tx: &mut T) -> Result<Summary> {
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
