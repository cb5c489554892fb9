//! Mode `by-hand`: the three loops that `tls` runs as epochs, parallelized by hand
//! instead, the way a programmer who knows TPC-C would do it without speculation.
//!
//! It is the reference point for speculation on this database: the same loop bodies,
//! on the same lent transaction, with no tracking, no overlay and no rollback, split
//! so that no two threads ever touch the same row:
//!
//! - New Order's items by stock row (`(supply_w_id, i_id)`): lines that name the same
//!   stock row run on one thread, in loop order, and the others commute (each line
//!   reads only its own item and stock rows and inserts its own order line);
//! - Delivery's districts, each on one thread (a district's NEW-ORDER, ORDER,
//!   ORDER-LINE and CUSTOMER rows are its own);
//! - Stock Level's items, in contiguous runs (it only reads).
//!
//! So it gives the sequential answers and the sequential final database, by the
//! argument above rather than by any check: that argument is what this mode asks of
//! its programmer, and what speculation spares them. The split is static (a dynamic
//! schedule could balance uneven parts better, so speculation may beat it where the
//! parts are uneven; it is a reference point, not a strict ceiling); the parts run
//! on the threads `tls` uses (see [`run_parts`]). A part that fails does not stop
//! the others, and the error returned is the first in part order: the transaction
//! aborts either way, as it would in order.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::{Mutex, PoisonError};

use anyhow::Result;
use tls_runtime::{Control, Loop};

use super::transactions::low_stock_in_order;
use super::{Bufs, KvOps, SharedKv, Table};
use crate::engine::api::Mode;
use crate::schema::DISTRICTS;
use crate::workload::{DeliveryInput, NewOrderInput, StockLevelInput};

/// Row operations straight on the lent transaction.
struct Direct<'a, S>(&'a S);

impl<S: SharedKv> KvOps for Direct<'_, S> {
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.0.get(table, key, out)
    }

    fn get_for_update(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.0.get_for_update(table, key, out)
    }

    fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.0.insert(table, key, value)
    }

    fn update(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.0.update(table, key, value)
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> Result<()> {
        self.0.delete(table, key)
    }

    fn scan<F>(&mut self, table: Table, from: &[u8], to: Option<&[u8]>, f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<bool>,
    {
        self.0.scan(table, from, to, f)
    }
}

/// Runs `part(p)` for every part `p` in `0..parts`, each on its own thread, and
/// returns their results in part order.
///
/// The parts are handed to the speculation runtime's workers as a loop of one
/// iteration per part, so that mode `by-hand` starts its threads exactly as `tls`
/// does (idle workers spin for a while, so a transaction's loop finds them awake;
/// a pool whose threads sleep took about 9 us on average to start its part here).
/// Nothing in a part is tracked (it reaches the rows through [`Direct`]), so the
/// runtime has nothing to check or roll back: the loop is a plain parallel loop,
/// whose epochs still commit in order (which costs nothing here). That rests on the
/// runtime re-running an epoch only after a violation found at a tracked access, a
/// checkpoint or a poll, none of which a part reaches; a part that ran twice would
/// apply its untracked writes twice, so each part checks that it runs once.
fn run_parts<T: Send>(parts: usize, part: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    if parts <= 1 {
        return Ok(vec![part(0)?]);
    }
    let results: Mutex<Vec<Option<Result<T>>>> = Mutex::new((0..parts).map(|_| None).collect());
    Loop::new()
        .name("by-hand parts")
        .threads(parts)
        .chunk(1)
        .run(0..parts, |p| {
            let r = part(p);
            let mut results = results.lock().unwrap_or_else(PoisonError::into_inner);
            assert!(results[p].is_none(), "by-hand part {p} ran twice");
            results[p] = Some(r);
            Control::<()>::Continue
        });
    results
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .into_iter()
        .map(|r| r.expect("every part ran"))
        .collect()
}

/// Which part a stock row's lines go to.
fn part_of_stock(w: u16, i: u32, parts: usize) -> usize {
    let h = BuildHasherDefault::<DefaultHasher>::default().hash_one((w, i));
    (h % parts as u64) as usize
}

/// New Order's items, split by stock row: the sum of the line amounts and the number
/// of brand lines, or `None` if a line names the unused item id.
pub(super) fn new_order_items<S: SharedKv>(
    tx: &S,
    input: &NewOrderInput,
    o_id: u32,
    parts: usize,
) -> Result<Option<(i64, u8)>> {
    let lines = input.lines();
    let done = run_parts(parts, |p| {
        let (mut tx, mut b) = (Direct(tx), Bufs::new(Mode::ByHand));
        let mut sum = (0i64, 0u8);
        for (n, l) in lines.iter().enumerate() {
            if part_of_stock(l.supply_w_id, l.i_id, parts) != p {
                continue;
            }
            let Some((amount, brand)) = b.new_order_line(&mut tx, input, o_id, n, l)? else {
                return Ok(None);
            };
            sum = (sum.0 + amount, sum.1 + brand);
        }
        Ok(Some(sum))
    })?;
    // Any part that met the unused item makes the whole order roll back.
    Ok(done
        .into_iter()
        .try_fold((0, 0), |acc, s| s.map(|(a, b)| (acc.0 + a, acc.1 + b))))
}

/// Delivery's districts, district `d` on part `d mod parts`: how many had an order
/// to deliver.
pub(super) fn deliver_districts<S: SharedKv>(
    tx: &S,
    input: &DeliveryInput,
    parts: usize,
) -> Result<u8> {
    let done = run_parts(parts, |p| {
        let (mut tx, mut b) = (Direct(tx), Bufs::new(Mode::ByHand));
        let mut delivered = 0u8;
        for d in (1..=DISTRICTS).filter(|&d| usize::from(d) % parts == p) {
            if b.deliver_district(&mut tx, input, d)? {
                delivered += 1;
            }
        }
        Ok(delivered)
    })?;
    Ok(done.into_iter().sum())
}

/// Stock Level's items in `parts` contiguous runs: how many have less stock than the
/// threshold.
pub(super) fn low_stock<S: SharedKv>(
    tx: &S,
    items: &[u32],
    input: &StockLevelInput,
    parts: usize,
) -> Result<u32> {
    let per = items.len().div_ceil(parts.max(1)).max(1);
    let done = run_parts(parts, |p| {
        let mine = items.chunks(per).nth(p).unwrap_or(&[]);
        low_stock_in_order(&mut Direct(tx), mine, input, &mut Vec::with_capacity(512))
    })?;
    Ok(done.into_iter().sum())
}

impl Bufs {
    /// Threads a loop split by hand runs on: the loop threads set for the engine, else
    /// the runtime's default (`TLS_THREADS`, else all cores), as for mode `tls`.
    pub(super) fn parts(&self) -> usize {
        self.threads
            .unwrap_or_else(tls_runtime::default_threads)
            .max(1)
    }
}
