//! Modes `sequential` and `tls`: TPC-C on our B-tree database (`btree-db`), one
//! transaction at a time, through the key/value transaction code of [`super::kv`]
//! (which, in mode `tls`, runs the transactions' loops as speculative epochs).

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use btree_db::{Database, Options, SyncMode, TableId};

use super::api::{Mode, Sync};
use super::kv::journey::Journey;
use super::kv::{KvEngine, KvOps, KvStore, KvTxn, SharedKv, Table};
use crate::schema::Scale;

/// Buffer-pool pages per warehouse: a spec-scale warehouse takes about 30,000 pages of
/// 4 KiB, and the run grows it; the database is meant to be in core, like SQLite's.
const POOL_PAGES_PER_WAREHOUSE: usize = 60_000;
/// Smallest pool.
const MIN_POOL_PAGES: usize = 16_384;
const PAGE_SIZE: usize = 4096;

fn options(sync: Sync, pool_pages: usize) -> Options {
    Options {
        page_size: PAGE_SIZE,
        pool_pages,
        sync: match sync {
            Sync::Off => SyncMode::Off,
            Sync::Normal => SyncMode::Normal,
            Sync::Full => SyncMode::Full,
        },
        ..Options::default()
    }
}

/// Pages of buffer pool for `warehouses` warehouses of the population `scale`: the
/// spec's per warehouse, in proportion to the population (STOCK, one row per item,
/// is about a third of a warehouse's pages; the customers' rows, orders and order
/// lines the rest). Sized by warehouses alone, a pool of tiny warehouses took the
/// spec's memory all the same: an outside probe's 100 warehouses of 100 items and 10
/// customers ran the machine out of memory (the pool's frames are made at open).
fn pool_pages(warehouses: u16, scale: Scale) -> usize {
    let share = (f64::from(scale.items) / f64::from(Scale::SPEC.items)
        + 2.0 * f64::from(scale.customers) / f64::from(Scale::SPEC.customers))
        / 3.0;
    let per_warehouse = (POOL_PAGES_PER_WAREHOUSE as f64 * share).ceil() as usize;
    (usize::from(warehouses) * per_warehouse).max(MIN_POOL_PAGES)
}

/// Creates an empty database at `path`, sized for `warehouses` warehouses of the
/// population `scale`, with every table; `mode` is `sequential` or `tls`.
pub fn create(
    path: &Path,
    sync: Sync,
    warehouses: u16,
    scale: Scale,
    mode: Mode,
) -> Result<KvEngine<BTreeStore>> {
    let pool = pool_pages(warehouses, scale);
    let db = Database::open(path, options(sync, pool))
        .with_context(|| format!("creating {}", path.display()))?;
    let mut ids = Vec::with_capacity(Table::ALL.len());
    for t in Table::ALL {
        let id = match t {
            Table::CustomerByLast => db.create_index(t.name(), ids[Table::Customer.index()]),
            Table::OrderByCustomer => db.create_index(t.name(), ids[Table::Order.index()]),
            _ => db.create_table(t.name()),
        }
        .with_context(|| format!("creating table {}", t.name()))?;
        ids.push(id);
    }
    let mut engine = KvEngine::new(BTreeStore::new(db, ids)?, mode);
    engine.set_journey(Journey::from_env()?);
    Ok(engine)
}

/// Opens a loaded database at `path`, running crash recovery; `mode` is `sequential`
/// or `tls`.
pub fn open(path: &Path, sync: Sync, mode: Mode) -> Result<KvEngine<BTreeStore>> {
    // Size the pool to hold the whole file, with room to grow.
    let len = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    let pages = usize::try_from(len / PAGE_SIZE as u64).unwrap_or(usize::MAX / 2);
    let pool = pages.saturating_add(pages / 2).max(MIN_POOL_PAGES);
    let db = Database::open(path, options(sync, pool))
        .with_context(|| format!("opening {}", path.display()))?;
    let mut ids = Vec::with_capacity(Table::ALL.len());
    for t in Table::ALL {
        ids.push(db.table(t.name()).map_err(|e| {
            anyhow!(
                "{} is not a TPC-C database ({e}); create one with `tpcc load`",
                path.display()
            )
        })?);
    }
    let mut engine = KvEngine::new(BTreeStore::new(db, ids)?, mode);
    engine.set_journey(Journey::from_env()?);
    Ok(engine)
}

/// A [`KvStore`] over a `btree-db` database: one B-link tree per [`Table`].
pub struct BTreeStore {
    db: Arc<Database>,
    tables: [TableId; Table::ALL.len()],
    /// Scan buffers, reused by every transaction.
    key: Vec<u8>,
    value: Vec<u8>,
}

impl BTreeStore {
    fn new(db: Arc<Database>, ids: Vec<TableId>) -> Result<Self> {
        let tables = ids
            .try_into()
            .map_err(|_| anyhow!("wrong number of tables"))?;
        Ok(Self {
            db,
            tables,
            key: Vec::with_capacity(64),
            value: Vec::with_capacity(1024),
        })
    }

    /// The database underneath.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }
}

impl KvStore for BTreeStore {
    type Txn<'a> = BTreeTxn<'a>;

    fn begin(&mut self) -> Result<BTreeTxn<'_>> {
        Ok(BTreeTxn {
            tx: self.db.begin(),
            tables: &self.tables,
            key: &mut self.key,
            value: &mut self.value,
        })
    }

    fn checkpoint(&mut self) -> Result<()> {
        self.db.checkpoint().context("checkpoint")
    }

    fn another(&self) -> Result<Self> {
        Ok(Self {
            db: Arc::clone(&self.db),
            tables: self.tables,
            key: Vec::with_capacity(64),
            value: Vec::with_capacity(1024),
        })
    }
}

/// A transaction of [`BTreeStore`].
pub struct BTreeTxn<'a> {
    tx: btree_db::Txn<'a>,
    tables: &'a [TableId; Table::ALL.len()],
    key: &'a mut Vec<u8>,
    value: &'a mut Vec<u8>,
}

impl BTreeTxn<'_> {
    #[inline]
    fn id(&self, t: Table) -> TableId {
        self.tables[t.index()]
    }
}

impl<'a> KvTxn for BTreeTxn<'a> {
    type Shared<'s>
        = BTreeShared<'s, 'a>
    where
        Self: 's;

    fn commit(self) -> Result<()> {
        Ok(self.tx.commit()?)
    }

    fn abort(self) -> Result<()> {
        Ok(self.tx.abort()?)
    }

    fn share(&mut self) -> BTreeShared<'_, 'a> {
        BTreeShared {
            tx: self.tx.share(),
            tables: self.tables,
        }
    }
}

/// A [`BTreeTxn`] lent to the threads of a speculative loop.
pub struct BTreeShared<'s, 'a> {
    tx: btree_db::SharedTxn<'s, 'a>,
    tables: &'s [TableId; Table::ALL.len()],
}

impl SharedKv for BTreeShared<'_, '_> {
    type Found = btree_db::LeafHint;

    fn get(&self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        Ok(self.tx.get_into(self.tables[table.index()], key, out)?)
    }

    fn get_for_update(&self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        Ok(self
            .tx
            .get_for_update(self.tables[table.index()], key, out)?)
    }

    fn insert(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.tx.insert(self.tables[table.index()], key, value)?)
    }

    fn update(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.tx.update(self.tables[table.index()], key, value)?)
    }

    fn get_for_update_at(
        &self,
        table: Table,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(bool, btree_db::LeafHint)> {
        Ok(self
            .tx
            .get_for_update_at(self.tables[table.index()], key, out)?)
    }

    fn update_at(
        &self,
        table: Table,
        key: &[u8],
        value: &[u8],
        at: btree_db::LeafHint,
    ) -> Result<()> {
        Ok(self
            .tx
            .update_at(self.tables[table.index()], key, value, at)?)
    }

    fn delete(&self, table: Table, key: &[u8]) -> Result<()> {
        if self.tx.delete(self.tables[table.index()], key)? {
            Ok(())
        } else {
            Err(anyhow!("delete of a missing key in {}", table.name()))
        }
    }

    fn scan<F>(&self, table: Table, from: &[u8], to: Option<&[u8]>, mut f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<bool>,
    {
        // The store's errors and `f`'s travel through the scan as one type.
        let mut failed = None;
        let scanned = self
            .tx
            .scan(self.tables[table.index()], from, to, |k, v| match f(k, v) {
                Ok(more) => Ok(more),
                Err(e) => {
                    failed = Some(e);
                    Ok(false)
                }
            });
        match failed {
            Some(e) => Err(e),
            None => Ok(scanned?),
        }
    }
}

impl KvOps for BTreeTxn<'_> {
    #[inline]
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        Ok(self.tx.get_into(self.id(table), key, out)?)
    }

    #[inline]
    fn get_for_update(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        Ok(self.tx.get_for_update(self.id(table), key, out)?)
    }

    #[inline]
    fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.tx.insert(self.id(table), key, value)?)
    }

    #[inline]
    fn update(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.tx.update(self.id(table), key, value)?)
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> Result<()> {
        if self.tx.delete(self.id(table), key)? {
            Ok(())
        } else {
            Err(anyhow!("delete of a missing key in {}", table.name()))
        }
    }

    fn scan<F>(&mut self, table: Table, from: &[u8], to: Option<&[u8]>, mut f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<bool>,
    {
        let id = self.id(table);
        let hi = to.map_or(Bound::Unbounded, Bound::Excluded);
        let mut cursor = self.tx.scan(id, Bound::Included(from), hi)?;
        while cursor.next_into(self.key, self.value)? {
            if !f(self.key, self.value)? {
                break;
            }
        }
        cursor.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool follows the population, not the warehouse count alone.
    #[test]
    fn the_pool_is_sized_by_the_population() {
        assert_eq!(pool_pages(1, Scale::SPEC), POOL_PAGES_PER_WAREHOUSE);
        assert_eq!(pool_pages(10, Scale::SPEC), 10 * POOL_PAGES_PER_WAREHOUSE);
        let tiny = Scale {
            items: 100,
            customers: 10,
        };
        assert_eq!(pool_pages(1, tiny), MIN_POOL_PAGES);
        assert!(pool_pages(100, tiny) * PAGE_SIZE < 200 << 20);
    }
}
