//! The database: options, catalog, open / recovery, checkpoints.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use crate::btree::{CATALOG_ROOT, META_PAGE, Modify, Outcome, Store};
use crate::buffer::{BufferPool, IdMap};
use crate::error::{Error, PageId, Result};
use crate::lock::{LockManager, LockMode, table_lock_name};
use crate::node;
use crate::page::{self, PageBuf};
use crate::pager::{FileHeader, Pager};
use crate::txn::{Txn, TxnScratch};
use crate::wal::{FIRST_LSN, Wal};

/// When a commit waits for its log records to reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Commit does not write the log; it is written when the log buffer fills,
    /// at checkpoints, and before dirty pages are written. A process crash
    /// may lose the latest commits but never leaves the database
    /// inconsistent; a power failure may (like SQLite's `synchronous=OFF`),
    /// because pages are written back without syncing the log first.
    Off,
    /// Commit writes its log records to the operating system (survives a
    /// process crash, not a power failure).
    #[default]
    Normal,
    /// Commit writes and `fdatasync`s the log (group commit shares one sync
    /// among concurrent committers).
    Full,
}

/// How to open a database.
#[derive(Clone, Debug)]
pub struct Options {
    /// Page size in bytes when creating a file: a power of two from 512 to
    /// 32768. An existing file keeps its own page size. Default 4096.
    pub page_size: usize,
    /// Buffer pool size in pages. Default 16384 (64 MiB at 4 KiB pages).
    pub pool_pages: usize,
    /// Commit durability.
    pub sync: SyncMode,
    /// How long a lock request waits before [`crate::Error::LockTimeout`].
    pub lock_timeout: Duration,
    /// Take a checkpoint automatically once this many log bytes were written
    /// since the last one (0 disables automatic checkpoints).
    pub checkpoint_log_bytes: u64,
    /// Size of one log segment file (at least 64 KiB). Checkpoints delete
    /// whole segments that recovery no longer needs. Default 64 MiB.
    pub log_segment_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: 4096,
            pool_pages: 16384,
            sync: SyncMode::Normal,
            lock_timeout: Duration::from_secs(5),
            checkpoint_log_bytes: 256 << 20,
            log_segment_bytes: 64 << 20,
        }
    }
}

/// Identifies a table or index; cheap to copy, valid for the life of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub(crate) u32);

impl TableId {
    /// The numeric id stored in the catalog.
    pub fn as_u32(self) -> u32 {
        self.0
    }
}

/// Whether a catalog entry is a table or a secondary index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableKind {
    /// A table.
    Table,
    /// A secondary index over the given table.
    Index {
        /// The indexed table.
        table: TableId,
    },
}

/// A catalog entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableInfo {
    /// Its id.
    pub id: TableId,
    /// Its name.
    pub name: String,
    /// Table or index.
    pub kind: TableKind,
    /// The B-link tree root page (it never moves).
    pub root: crate::PageId,
}

/// Size limits, which depend on the page size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The page size.
    pub page_size: usize,
    /// Longest key in bytes.
    pub max_key: usize,
    /// Longest key plus value in bytes.
    pub max_entry: usize,
}

/// Counters for benchmarks and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Pages read from the file.
    pub page_reads: u64,
    /// Pages written to the file.
    pub page_writes: u64,
    /// `get_page` calls served from the pool.
    pub pool_hits: u64,
    /// Bytes appended to the log.
    pub log_bytes: u64,
    /// Log flushes (writes of the log buffer).
    pub log_flushes: u64,
    /// Log syncs.
    pub log_syncs: u64,
    /// Checkpoints taken.
    pub checkpoints: u64,
    /// Transactions committed.
    pub commits: u64,
    /// Transactions aborted.
    pub aborts: u64,
    /// Deadlocks detected.
    pub deadlocks: u64,
}

/// The in-memory copy of the catalog.
#[derive(Default)]
pub(crate) struct Catalog {
    by_id: IdMap<u32, TableInfo>,
    by_name: HashMap<String, u32>,
}

fn encode_entry(info: &TableInfo) -> [u8; 9] {
    let mut v = [0u8; 9];
    v[0..4].copy_from_slice(&info.root.to_le_bytes());
    let (kind, parent) = match info.kind {
        TableKind::Table => (0u8, 0u32),
        TableKind::Index { table } => (1, table.0),
    };
    v[4] = kind;
    v[5..9].copy_from_slice(&parent.to_le_bytes());
    v
}

fn decode_entry(name: &[u8], v: &[u8]) -> Result<TableInfo> {
    let bad = Error::Corrupt {
        page: CATALOG_ROOT,
        reason: "bad catalog entry",
    };
    if v.len() != 9 {
        return Err(bad);
    }
    let root = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
    let parent = u32::from_le_bytes([v[5], v[6], v[7], v[8]]);
    let kind = match v[4] {
        0 => TableKind::Table,
        1 => TableKind::Index {
            table: TableId(parent),
        },
        _ => return Err(bad),
    };
    let name = String::from_utf8(name.to_vec()).map_err(|_| Error::Corrupt {
        page: CATALOG_ROOT,
        reason: "catalog name is not UTF-8",
    })?;
    Ok(TableInfo {
        id: TableId(root),
        name,
        kind,
        root,
    })
}

/// An open database. `Send + Sync`: share it between threads with `Arc`.
pub struct Database {
    pub(crate) store: Store,
    pub(crate) locks: LockManager,
    catalog: RwLock<Catalog>,
    ddl: Mutex<()>,
    pub(crate) options: Options,
    limits: Limits,
    pub(crate) next_txn: AtomicU64,
    /// Transactions that wrote: id -> a lower bound of their first LSN.
    active: Mutex<IdMap<u64, u64>>,
    checkpoint_lock: Mutex<()>,
    txn_cache: Mutex<Vec<TxnScratch>>,
    crashed: std::sync::atomic::AtomicBool,
    last_checkpoint: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) aborts: AtomicU64,
    pub(crate) deadlocks: AtomicU64,
    checkpoints: AtomicU64,
    #[allow(dead_code)]
    path: PathBuf,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Database {
    /// Opens the database file at `path`, creating it if missing, and runs
    /// crash recovery (redo, then undo of unfinished transactions). The log
    /// lives next to it in files named `<path>.wal.<n>`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Arc<Database>> {
        let path = path.as_ref().to_path_buf();
        let ps = options.page_size;
        if !(512..=32768).contains(&ps) || !ps.is_power_of_two() {
            return Err(Error::InvalidOptions(format!(
                "page_size {ps} is not a power of two in 512..=32768"
            )));
        }
        if options.log_segment_bytes < (64 << 10) {
            return Err(Error::InvalidOptions(
                "log_segment_bytes must be at least 64 KiB".into(),
            ));
        }
        if options.pool_pages < 16 {
            return Err(Error::InvalidOptions(
                "pool_pages must be at least 16".into(),
            ));
        }
        let (pager, header) = if path.exists() {
            Pager::open(&path)?
        } else {
            let header = FileHeader {
                page_size: ps as u32,
                checkpoint_lsn: FIRST_LSN,
                log_start: FIRST_LSN,
                next_txn: 1,
            };
            // Stale log segments of an earlier file at this path would be replayed.
            Wal::new(&path, options.log_segment_bytes, FIRST_LSN).truncate_before(u64::MAX)?;
            let pager = Pager::create(&path, &header)?;
            let (mut meta, mut cat) = Store::initial_pages(ps);
            for (id, buf) in [(META_PAGE, &mut meta), (CATALOG_ROOT, &mut cat)] {
                page::seal(buf.as_bytes_mut());
                pager.write_page(id, buf.as_bytes())?;
            }
            pager.sync()?;
            (pager, header)
        };
        let ps = pager.page_size();
        let wal = Arc::new(Wal::new(&path, options.log_segment_bytes, header.log_start));
        wal.set_fpw_threshold(header.checkpoint_lsn);
        let pool = BufferPool::new(
            pager,
            wal.clone(),
            options.pool_pages,
            options.sync != SyncMode::Off,
        );
        let db = Database {
            store: Store { pool, wal },
            locks: LockManager::new(options.lock_timeout),
            catalog: RwLock::new(Catalog::default()),
            ddl: Mutex::new(()),
            limits: Limits {
                page_size: ps,
                max_key: node::max_key(ps),
                max_entry: node::max_entry(ps),
            },
            options,
            next_txn: AtomicU64::new(header.next_txn.max(1)),
            active: Mutex::new(IdMap::default()),
            checkpoint_lock: Mutex::new(()),
            txn_cache: Mutex::new(Vec::new()),
            crashed: std::sync::atomic::AtomicBool::new(false),
            last_checkpoint: AtomicU64::new(header.checkpoint_lsn),
            commits: AtomicU64::new(0),
            aborts: AtomicU64::new(0),
            deadlocks: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            path,
        };
        crate::recovery::recover(&db, &header)?;
        db.checkpoint()?;
        let pages = db.store.page_count()?;
        if db.store.pool.pager().len_pages()? < pages as u64 {
            return Err(Error::Truncated {
                what: "database file (fewer pages than allocated)",
            });
        }
        db.load_catalog()?;
        Ok(Arc::new(db))
    }

    fn load_catalog(&self) -> Result<()> {
        let mut cat = Catalog::default();
        let mut cur = crate::btree::CursorState::open(
            &self.store,
            CATALOG_ROOT,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
        )?;
        let (mut k, mut v) = (Vec::new(), Vec::new());
        while cur.next(&self.store, &mut k, &mut v)? {
            let info = decode_entry(&k, &v)?;
            cat.by_name.insert(info.name.clone(), info.root);
            cat.by_id.insert(info.root, info);
        }
        *self.catalog.write().unwrap_or_else(PoisonError::into_inner) = cat;
        Ok(())
    }

    /// The root page of a live table, or `UnknownTableId`.
    pub(crate) fn root_of(&self, table: TableId) -> Result<PageId> {
        let cat = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        if cat.by_id.contains_key(&table.0) {
            Ok(table.0)
        } else {
            Err(Error::UnknownTableId(table.0))
        }
    }

    /// Creates a table (autocommitted). Errors with `TableExists`.
    pub fn create_table(&self, name: &str) -> Result<TableId> {
        self.create(name, TableKind::Table)
    }

    /// Creates a secondary index table over `table` (autocommitted). Its keys
    /// and values are whatever the application writes; usually the index key
    /// followed by the table's primary key.
    pub fn create_index(&self, name: &str, table: TableId) -> Result<TableId> {
        self.root_of(table)?;
        self.create(name, TableKind::Index { table })
    }

    fn create(&self, name: &str, kind: TableKind) -> Result<TableId> {
        let _ddl = lock(&self.ddl);
        if name.len() > self.limits.max_key {
            return Err(Error::KeyTooLarge {
                len: name.len(),
                max: self.limits.max_key,
            });
        }
        if self
            .catalog
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .by_name
            .contains_key(name)
        {
            return Err(Error::TableExists(name.into()));
        }
        let root = self.store.create_tree()?;
        let info = TableInfo {
            id: TableId(root),
            name: name.into(),
            kind,
            root,
        };
        let mut txn = self.begin();
        match txn.modify_raw(
            CATALOG_ROOT,
            name.as_bytes(),
            Modify::Insert(&encode_entry(&info)),
        )? {
            Outcome::Done => {}
            _ => return Err(Error::TableExists(name.into())),
        }
        txn.commit()?;
        let mut cat = self.catalog.write().unwrap_or_else(PoisonError::into_inner);
        cat.by_name.insert(info.name.clone(), root);
        cat.by_id.insert(root, info);
        Ok(TableId(root))
    }

    /// Looks a table or index up by name; `UnknownTable` if there is none.
    pub fn table(&self, name: &str) -> Result<TableId> {
        let cat = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        cat.by_name
            .get(name)
            .map(|&r| TableId(r))
            .ok_or_else(|| Error::UnknownTable(name.into()))
    }

    /// All catalog entries, by name.
    pub fn tables(&self) -> Vec<TableInfo> {
        let cat = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
        let mut v: Vec<TableInfo> = cat.by_id.values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Drops a table or index (waiting for transactions using it) and returns
    /// its pages to the free list. A later table may reuse its root page and
    /// so its [`TableId`]: forget the old id.
    pub fn drop_table(&self, table: TableId) -> Result<()> {
        let _ddl = lock(&self.ddl);
        let root = self.root_of(table)?;
        let name = {
            let cat = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
            cat.by_id
                .get(&root)
                .map(|i| i.name.clone())
                .unwrap_or_default()
        };
        let mut txn = self.begin();
        txn.lock_raw(table_lock_name(root), LockMode::Exclusive)?;
        txn.modify_raw(CATALOG_ROOT, name.as_bytes(), Modify::Delete)?;
        {
            let mut cat = self.catalog.write().unwrap_or_else(PoisonError::into_inner);
            cat.by_id.remove(&root);
            cat.by_name.remove(&name);
        }
        txn.commit()?;
        // After the commit: a crash before the pages are freed leaks them,
        // it never frees pages of a live table.
        self.store.free_tree(root)
    }

    /// Begins a transaction.
    pub fn begin(&self) -> Txn<'_> {
        let scratch = lock(&self.txn_cache).pop().unwrap_or_default();
        Txn::new(self, self.next_txn.fetch_add(1, Ordering::Relaxed), scratch)
    }

    /// Keeps a finished transaction's buffers for the next one.
    pub(crate) fn recycle_scratch(&self, s: TxnScratch) {
        let mut cache = lock(&self.txn_cache);
        if cache.len() < 64 {
            cache.push(s);
        }
    }

    /// Registers a transaction's first write; `lsn_floor` is at or below the
    /// LSN of its first record.
    pub(crate) fn register_writer(&self, txn: u64) {
        let mut a = lock(&self.active);
        a.insert(txn, self.store.wal.next_lsn());
    }

    pub(crate) fn unregister_writer(&self, txn: u64) {
        lock(&self.active).remove(&txn);
    }

    /// Takes a checkpoint: writes the log and every dirty page, syncs, records
    /// the new recovery start in the header and deletes old log files. Safe
    /// to kill at any point: until the header is rewritten, recovery starts
    /// from the previous checkpoint, whose log is still there.
    pub fn checkpoint(&self) -> Result<()> {
        let _one = lock(&self.checkpoint_lock);
        let wal = &self.store.wal;
        let redo = wal.begin_checkpoint();
        let oldest = lock(&self.active)
            .values()
            .copied()
            .min()
            .unwrap_or(u64::MAX);
        let log_start = redo.min(oldest);
        wal.flush(redo, true)?;
        self.store.pool.flush_all()?;
        let pager = self.store.pool.pager();
        pager.sync()?;
        pager.write_header(&FileHeader {
            page_size: self.limits.page_size as u32,
            checkpoint_lsn: redo,
            log_start,
            next_txn: self.next_txn.load(Ordering::Relaxed),
        })?;
        wal.truncate_before(log_start)?;
        self.last_checkpoint.store(redo, Ordering::Relaxed);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Takes a checkpoint if enough log was written since the last one.
    pub(crate) fn maybe_checkpoint(&self) -> Result<()> {
        let every = self.options.checkpoint_log_bytes;
        if every > 0
            && self
                .store
                .wal
                .next_lsn()
                .saturating_sub(self.last_checkpoint.load(Ordering::Relaxed))
                > every
        {
            return self.checkpoint();
        }
        Ok(())
    }

    /// Checks every tree's structure (key order, high keys, right links,
    /// levels); returns the number of entries in all tables and indexes.
    pub fn check_integrity(&self) -> Result<u64> {
        self.store.check_tree(CATALOG_ROOT)?;
        let mut total = 0;
        for t in self.tables() {
            total += self.store.check_tree(t.root)?;
        }
        Ok(total)
    }

    /// Size limits of this database.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let r = Ordering::Relaxed;
        let pager = self.store.pool.pager();
        let wal = &self.store.wal;
        Stats {
            page_reads: pager.reads.load(r),
            page_writes: pager.writes.load(r),
            pool_hits: self.store.pool.hits(),
            log_bytes: wal.appended_bytes.load(r),
            log_flushes: wal.flushes.load(r),
            log_syncs: wal.syncs.load(r),
            checkpoints: self.checkpoints.load(r),
            commits: self.commits.load(r),
            aborts: self.aborts.load(r),
            deadlocks: self.deadlocks.load(r),
        }
    }

    /// Makes dropping this database behave like a process crash: no
    /// checkpoint, and log records still in memory are lost (for tests of
    /// recovery within one process).
    #[doc(hidden)]
    pub fn simulate_crash_on_drop(&self) {
        self.crashed.store(true, Ordering::Relaxed);
    }

    /// Whether page `id` is in the buffer pool (for replacement-policy tests).
    #[doc(hidden)]
    pub fn page_is_resident(&self, id: PageId) -> bool {
        self.store.pool.is_resident(id)
    }

    /// The pages on the path from a table's root to the leaf holding `key`
    /// (for replacement-policy tests).
    #[doc(hidden)]
    pub fn path_to(&self, table: TableId, key: &[u8]) -> Result<Vec<PageId>> {
        let mut out = Vec::new();
        let root = self.root_of(table)?;
        for level in (0..=self.store.height_of(root)?).rev() {
            out.push(self.store.descend(root, key, level)?.id());
        }
        Ok(out)
    }

    /// A copy of page `id` as stored in the pool (for tests and tools).
    #[doc(hidden)]
    pub fn page_image(&self, id: PageId) -> Result<PageBuf> {
        let p = self.store.pool.get_page(id)?;
        let g = p.read();
        let mut buf = PageBuf::new(self.limits.page_size);
        crate::page::PageAccess::read_bytes(&g, 0, buf.as_bytes_mut());
        Ok(buf)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // A clean close leaves nothing to recover; errors are ignored
        // because recovery on the next open covers them.
        if !self.crashed.load(Ordering::Relaxed) {
            let _ = self.checkpoint();
        }
    }
}
