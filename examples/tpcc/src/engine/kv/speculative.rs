//! The transactions' loops run as speculative epochs (mode `tls`): each a
//! `#[tls_loop]` function whose body is the sequential one, on the tracked rows
//! ([`SpecRows`]) and with buffers of its own per iteration.

use anyhow::Result;
use tls_runtime::{LoopSite, checkpoint, tls_loop};

use super::journey::Grain;
use super::spec::SpecRows;
use super::{Bufs, KvOps, SharedKv, Table};
use crate::codec::{self, off};
use crate::engine::api::Mode;
use crate::schema::DISTRICTS;
use crate::workload::{DeliveryInput, NewOrderInput, StockLevelInput};

/// New Order's loop sites, one per tracking grain of the book's journey (see
/// `journey.rs`): what the loop learns about itself tracked by page (a load to
/// synchronize) must not carry over to a run tracked by row in the same process.
static NEW_ORDER_SITES: [[LoopSite; 2]; 2] = [
    [LoopSite::new(), LoopSite::new()],
    [LoopSite::new(), LoopSite::new()],
];

/// The site of New Order's loop for `rows`' grain, with or without the checkpoint.
fn new_order_site<S: SharedKv>(rows: &SpecRows<'_, '_, S>, checkpoint: bool) -> &'static LoopSite {
    let grain = match rows.grain() {
        Grain::Row => 0,
        Grain::Page => 1,
    };
    &NEW_ORDER_SITES[grain][usize::from(checkpoint)]
}

// ANCHOR: new_order_items
/// New Order's items loop run as speculative epochs: the same body as
/// `Bufs::new_order_items`, on the tracked rows, with per-epoch buffers.
#[tls_loop(name = "new_order items", threads = rows.threads(), site = new_order_site(rows, false))]
pub(super) fn new_order_items<S: SharedKv>(
    rows: &SpecRows<'_, '_, S>,
    input: &NewOrderInput,
    o_id: u32,
) -> Result<Option<(i64, u8)>> {
    let mut sum_amount = 0i64;
    let mut brand_lines = 0u8;
    for (n, l) in input.lines().iter().enumerate() {
        let (mut tx, mut b) = (rows, Bufs::for_epoch(Mode::Tls));
        let Some((amount, brand)) = b.new_order_line(&mut tx, input, o_id, n, l)? else {
            return Ok(None);
        };
        sum_amount += amount;
        brand_lines += brand;
    }
    Ok(Some((sum_amount, brand_lines)))
}
// ANCHOR_END: new_order_items

// ANCHOR: new_order_items_checkpointed
/// New Order's items loop with a checkpoint before the order-line insert (the book's
/// journey, `TPCC_JOURNEY=...,checkpoint`): a violation of the insert re-runs only the
/// insert.
#[tls_loop(name = "new_order items", threads = rows.threads(), site = new_order_site(rows, true))]
pub(super) fn new_order_items_checkpointed<S: SharedKv>(
    rows: &SpecRows<'_, '_, S>,
    input: &NewOrderInput,
    o_id: u32,
) -> Result<Option<(i64, u8)>> {
    let mut sum_amount = 0i64;
    let mut brand_lines = 0u8;
    for (n, l) in input.lines().iter().enumerate() {
        let (mut tx, mut b) = (rows, Bufs::for_epoch(Mode::Tls));
        let Some(line) = b.new_order_stock(&mut tx, input, l)? else {
            return Ok(None);
        };
        checkpoint!();
        let (mut tx2, mut b2) = (rows, Bufs::for_epoch(Mode::Tls));
        b2.insert_order_line(&mut tx2, input, o_id, n, l, &line)?;
        sum_amount += line.amount;
        brand_lines += line.brand;
    }
    Ok(Some((sum_amount, brand_lines)))
}
// ANCHOR_END: new_order_items_checkpointed

// ANCHOR: deliver_districts
/// Delivery's districts loop as speculative epochs: the sequential body
/// (`Bufs::deliver_district`) on the tracked rows.
#[tls_loop(name = "delivery districts", threads = rows.threads())]
pub(super) fn deliver_districts<S: SharedKv>(
    rows: &SpecRows<'_, '_, S>,
    input: &DeliveryInput,
) -> Result<u8> {
    let mut delivered = 0u8;
    for d in 1..=DISTRICTS {
        let (mut tx, mut b) = (rows, Bufs::for_epoch(Mode::Tls));
        if b.deliver_district(&mut tx, input, d)? {
            delivered += 1;
        }
    }
    Ok(delivered)
}
// ANCHOR_END: deliver_districts

/// Stock Level's items loop run as speculative epochs: the body of
/// `low_stock_in_order` (in `transactions.rs`) on the tracked rows.
#[tls_loop(name = "stock_level items", threads = rows.threads())]
pub(super) fn low_stock<S: SharedKv>(
    rows: &SpecRows<'_, '_, S>,
    items: &[u32],
    input: &StockLevelInput,
) -> Result<u32> {
    let mut low_stock = 0;
    for &item in items {
        let (mut tx, mut b) = (rows, Bufs::for_epoch(Mode::Tls));
        if tx.get(
            Table::Stock,
            &codec::stock_key(input.w_id, item),
            &mut b.row,
        )? && codec::get_i32(&b.row, off::S_QUANTITY, "stock")? < input.threshold
        {
            low_stock += 1;
        }
    }
    Ok(low_stock)
}
