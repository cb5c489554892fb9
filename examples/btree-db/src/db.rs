//! The database: open / recovery, the catalog in memory, checkpoints.
//!
//! Transactions begin in `crate::txn` ([`Database::begin`]); tables and
//! indexes are created and dropped in `crate::ddl`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use crate::btree::{CATALOG_ROOT, CursorState, META_PAGE, Store};
use crate::buffer::{BufferPool, IdMap};
use crate::catalog::{Catalog, TableId, TableInfo, decode_entry};
use crate::error::{Error, PageId, Result};
use crate::lock::LockManager;
use crate::node;
use crate::options::{Limits, Options, Stats, SyncMode};
use crate::page::{self, PageAccess, PageBuf};
use crate::pager::{FileHeader, Pager};
use crate::recovery;
use crate::scratch::TxnScratch;
use crate::stripes::{Counter, Striped, stripe};
use crate::wal::{FIRST_LSN, Wal};

/// An open database. `Send + Sync`: share it between threads with `Arc`.
pub struct Database {
    pub(crate) store: Store,
    pub(crate) locks: LockManager,
    pub(crate) catalog: RwLock<Catalog>,
    /// The live tables' roots, copied per stripe: a transaction checks that
    /// a table exists in its own stripe's copy, so the check writes no
    /// line that transactions on other threads write. DDL changes every copy.
    live: Striped<RwLock<IdMap<PageId, ()>>>,
    /// Serializes creating and dropping tables.
    pub(crate) ddl: Mutex<()>,
    pub(crate) options: Options,
    pub(crate) limits: Limits,
    /// Transaction ids are handed out in blocks of `ID_BLOCK` from here,
    /// one block per stripe at a time; everything at or above it is unused.
    pub(crate) next_txn: AtomicU64,
    /// Per stripe: the rest of its block of ids, `next..end`.
    id_blocks: Striped<Mutex<(u64, u64)>>,
    /// Transactions that wrote, on the stripe they registered on: id -> a
    /// lower bound of their first LSN.
    active: Striped<Mutex<IdMap<u64, u64>>>,
    checkpoint_lock: Mutex<()>,
    /// Finished transactions' buffers, per stripe.
    txn_cache: Striped<Mutex<Vec<TxnScratch>>>,
    /// Whether dropping the database leaves the files as a crash would (set
    /// by tests, and until `open` has succeeded).
    crashed: std::sync::atomic::AtomicBool,
    last_checkpoint: AtomicU64,
    pub(crate) commits: Counter,
    pub(crate) aborts: Counter,
    pub(crate) deadlocks: Counter,
    checkpoints: AtomicU64,
    /// This open database among all opened in the process: what ties a
    /// [`crate::LeafHint`] to it (two databases that ran the same DDL have the
    /// same table ids, and their transaction ids meet).
    pub(crate) instance: u64,
    pub(crate) checkpoint_failures: AtomicU64,
}

/// Transaction ids a stripe takes from `next_txn` at a time.
const ID_BLOCK: u64 = 64;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Database {
    /// Opens the database file at `path`, creating it if missing, and runs
    /// crash recovery (redo, then undo of unfinished transactions). The log
    /// lives next to it in files named `<path>.wal.<n>`; through a symbolic
    /// link, next to the file the link leads to, named after it (unless the
    /// database was written through the link before this rule, when its log
    /// is under the link's name).
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Arc<Database>> {
        let path = path.as_ref().to_path_buf();
        let ps = options.page_size;
        if !(512..=32768).contains(&ps) || !ps.is_power_of_two() {
            return Err(Error::InvalidOptions(format!(
                "page_size {ps} is not a power of two in 512..=32768"
            )));
        }
        if options.log_segment_bytes < crate::pager::MIN_LOG_SEGMENT {
            return Err(Error::InvalidOptions(
                "log_segment_bytes must be at least 64 KiB".into(),
            ));
        }
        if options.pool_pages < 16 {
            return Err(Error::InvalidOptions(
                "pool_pages must be at least 16".into(),
            ));
        }
        if options.pool_pages > crate::buffer::MAX_PAGES as usize {
            return Err(Error::InvalidOptions(format!(
                "pool_pages {} is more than the largest database has pages ({})",
                options.pool_pages,
                crate::buffer::MAX_PAGES
            )));
        }
        if path.as_os_str().is_empty() {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the database path is empty",
            )));
        }
        if !is_there(&path) {
            check_pool_fits(options.pool_pages, options.page_size)?;
            create_file(&path, &options)?;
        } else if !path.exists() {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the database path is a symbolic link whose target is missing (a volume \
                 not mounted?)",
            )));
        }
        let path = log_home(path)?;
        let (pager, mut header) = Pager::open(&path)?;
        check_pool_fits(options.pool_pages, pager.page_size())?;
        // The segment size numbers the log's files: an existing database keeps
        // its own (one opened with another read "a log segment file is missing").
        if header.log_segment_bytes == 0 {
            // A version 2 file: the size its log files show, recorded before
            // recovery appends anything in that numbering. Recorded later (at
            // open's checkpoint), an open with another size killed between its
            // first append and the checkpoint left a log that no size read.
            header.log_segment_bytes = Wal::segment_bytes_shown(&path, options.log_segment_bytes)?;
            pager.write_header(&header)?;
        }
        let log_segment_bytes = header.log_segment_bytes;
        let ps = pager.page_size();
        let wal = Arc::new(Wal::new(&path, log_segment_bytes, header.log_start));
        wal.set_fpw_threshold(header.checkpoint_lsn);
        let pool = BufferPool::new(
            pager,
            wal.clone(),
            options.pool_pages,
            options.sync != SyncMode::Off,
        )
        .ok_or_else(|| pool_too_large(options.pool_pages, ps))?;
        let db = Database {
            store: Store::new(pool, wal),
            locks: LockManager::new(options.lock_timeout),
            catalog: RwLock::new(Catalog::default()),
            live: Striped::default(),
            ddl: Mutex::new(()),
            limits: Limits {
                page_size: ps,
                max_key: node::max_key(ps),
                max_entry: node::max_entry(ps),
            },
            options,
            next_txn: AtomicU64::new(header.next_txn.max(1)),
            id_blocks: Striped::default(),
            active: Striped::default(),
            checkpoint_lock: Mutex::new(()),
            txn_cache: Striped::default(),
            // Until the open succeeds, dropping the database leaves the files as
            // they are: a checkpoint after a failed recovery would name the end
            // of the log as the recovery start and delete the log, so that the
            // next open (the damage repaired) would skip the redo and undo the
            // failed one had not finished.
            crashed: std::sync::atomic::AtomicBool::new(true),
            last_checkpoint: AtomicU64::new(header.checkpoint_lsn),
            commits: Counter::default(),
            aborts: Counter::default(),
            deadlocks: Counter::default(),
            checkpoints: AtomicU64::new(0),
            instance: {
                static OPENED: AtomicU64 = AtomicU64::new(1);
                OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
            checkpoint_failures: AtomicU64::new(0),
        };
        recovery::recover(&db.store, &header, &db.next_txn)?;
        db.checkpoint()?;
        let pages = db.store.page_count()?;
        if db.store.pool.pager().len_pages()? < pages as u64 {
            return Err(Error::Truncated {
                what: "database file (fewer pages than allocated)",
            });
        }
        db.load_catalog()?;
        db.crashed.store(false, Ordering::Relaxed);
        Ok(Arc::new(db))
    }

    fn load_catalog(&self) -> Result<()> {
        let mut cat = Catalog::default();
        let mut cur = CursorState::open(
            &self.store,
            CATALOG_ROOT,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
        )?;
        let (mut k, mut v) = (Vec::new(), Vec::new());
        let pages = self.store.page_count()?;
        while cur.next(&self.store, &mut k, &mut v)? {
            let info = decode_entry(&k, &v)?;
            // A root must be a page of its own: not the header, meta page or
            // catalog, inside the file, and no other table's.
            if info.root <= CATALOG_ROOT || info.root >= pages || cat.by_id.contains_key(&info.root)
            {
                return Err(Error::Corrupt {
                    page: CATALOG_ROOT,
                    reason: "catalog entry with an impossible or shared root page",
                });
            }
            cat.by_name.insert(info.name.clone(), info.root);
            cat.by_id.insert(info.root, info);
        }
        for &root in cat.by_id.keys() {
            self.set_live(root, true);
        }
        *self.catalog.write().unwrap_or_else(PoisonError::into_inner) = cat;
        Ok(())
    }

    /// Marks a table live or dropped in every stripe's copy.
    pub(crate) fn set_live(&self, root: PageId, live: bool) {
        for copy in self.live.all() {
            let mut set = copy.write().unwrap_or_else(PoisonError::into_inner);
            if live {
                set.insert(root, ());
            } else {
                set.remove(&root);
            }
        }
    }

    /// The root page of a live table, or `UnknownTableId`.
    pub(crate) fn root_of(&self, table: TableId) -> Result<PageId> {
        let live = self
            .live
            .mine()
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        if live.contains_key(&table.0) {
            Ok(table.0)
        } else {
            Err(Error::UnknownTableId(table.0))
        }
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

    /// A new transaction id and buffers for it, from this thread's stripe.
    pub(crate) fn txn_start(&self) -> (u64, TxnScratch) {
        let id = {
            let mut block = lock(self.id_blocks.mine());
            if block.0 == block.1 {
                let start = self.next_txn.fetch_add(ID_BLOCK, Ordering::Relaxed);
                *block = (start, start + ID_BLOCK);
            }
            block.0 += 1;
            block.0 - 1
        };
        let scratch = lock(self.txn_cache.mine()).pop().unwrap_or_default();
        (id, scratch)
    }

    /// Keeps a finished transaction's buffers for the next one.
    pub(crate) fn recycle_scratch(&self, s: TxnScratch) {
        let mut cache = lock(self.txn_cache.mine());
        if cache.len() < 8 {
            cache.push(s);
        }
    }

    /// Registers a transaction's first write (with a lower bound of the LSN
    /// of its first record); returns the stripe to unregister it from.
    pub(crate) fn register_writer(&self, txn: u64) -> usize {
        let at = stripe();
        let floor = self.store.wal.next_lsn();
        lock(self.active.at(at)).insert(txn, floor);
        at
    }

    pub(crate) fn unregister_writer(&self, txn: u64, at: usize) {
        lock(self.active.at(at)).remove(&txn);
    }

    /// Takes a checkpoint: writes the log and every dirty page, syncs, records
    /// the new recovery start in the header and deletes old log files. Safe
    /// to kill at any point: until the header is rewritten, recovery starts
    /// from the previous checkpoint, whose log is still there.
    pub fn checkpoint(&self) -> Result<()> {
        let _one = lock(&self.checkpoint_lock);
        let wal = &self.store.wal;
        let redo = wal.begin_checkpoint();
        let oldest = self
            .active
            .all()
            .filter_map(|a| lock(a).values().copied().min())
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
            log_segment_bytes: wal.segment_bytes(),
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

    /// Checks the meta page and free list, then every tree's structure (key
    /// order, high keys, right links, levels; each page's checksum, number
    /// and LSN as it is read); returns the number of entries in all tables and indexes.
    pub fn check_integrity(&self) -> Result<u64> {
        let mut seen = std::collections::HashSet::new();
        self.store.check_free_list(&mut seen)?;
        self.store.check_tree(CATALOG_ROOT, &mut seen)?;
        let mut total = 0;
        for t in self.tables() {
            total += self.store.check_tree(t.root, &mut seen)?;
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
            log_bytes: wal.appended_bytes.sum(),
            log_flushes: wal.flushes.load(r),
            log_syncs: wal.syncs.load(r),
            checkpoints: self.checkpoints.load(r),
            checkpoint_failures: self.checkpoint_failures.load(r),
            commits: self.commits.sum(),
            aborts: self.aborts.sum(),
            deadlocks: self.deadlocks.sum(),
        }
    }

    /// Buffer frames pinned and record or table locks held right now, by
    /// anyone: both are 0 whenever no transaction or cursor is open (for
    /// tests that check nothing leaks).
    #[doc(hidden)]
    pub fn pins_and_locks(&self) -> (usize, usize) {
        (self.store.pool.pinned_frames(), self.locks.entries())
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
        PageAccess::read_bytes(&g, 0, buf.as_bytes_mut());
        Ok(buf)
    }
}

/// Refuses a buffer pool of `pages` pages of `page_size` bytes larger than the
/// machine's memory, where that is known (Linux): the frames are allocated up
/// front, and past memory the process would be killed, or abort, at open.
fn check_pool_fits(pages: usize, page_size: usize) -> Result<()> {
    let bytes = (pages as u64).saturating_mul(page_size as u64);
    match physical_memory() {
        Some(memory) if bytes > memory => Err(pool_too_large(pages, page_size)),
        _ => Ok(()),
    }
}

fn pool_too_large(pages: usize, page_size: usize) -> Error {
    let gib = (pages as f64) * (page_size as f64) / f64::from(1u32 << 30);
    let memory = physical_memory()
        .map(|m| {
            format!(
                " (the machine has {:.1} GiB)",
                m as f64 / f64::from(1u32 << 30)
            )
        })
        .unwrap_or_default();
    Error::InvalidOptions(format!(
        "pool_pages {pages} of {page_size} bytes need {gib:.1} GiB of memory, more than \
         this process can have{memory}"
    ))
}

/// The machine's memory in bytes (`MemTotal` of `/proc/meminfo`), if known.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The path the database's log files are named after: through a symbolic link,
/// the file it leads to, so that the log lies beside the data and the database
/// opens under any link to it (the link's own name found no log: "the log is
/// damaged"). A database written through the link before keeps its log under the
/// link's name, where it is found.
fn log_home(path: PathBuf) -> Result<PathBuf> {
    let is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link || !crate::wal::segments_of(&path)?.is_empty() {
        return Ok(path);
    }
    Ok(std::fs::canonicalize(&path)?)
}

/// Whether anything is at `path`, a symbolic link whose target is missing
/// included: a link to a database on a volume that is not mounted is not a
/// new database (creating one deleted the real one's log files and replaced
/// the link).
fn is_there(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Creates an empty database file at `path`, unless another opener made one
/// meanwhile. The file is built whole under a temporary name (`<path>.creating`),
/// synced and renamed into place, so that no crash leaves a file at `path` that
/// does not open: written in place, a first open killed after the header and
/// before the pages that follow left a file that failed every later open ("page
/// is all zeros"). Openers that find no file take turns on a lock of the
/// directory; the second finds the file made, and then `InUse` if the first still
/// has it open.
fn create_file(path: &Path, options: &Options) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir_file = std::fs::File::open(dir)?;
    dir_file.lock()?;
    if is_there(path) {
        return Ok(());
    }
    // Stale log segments of an earlier file at this path would be replayed.
    Wal::new(path, options.log_segment_bytes, FIRST_LSN).truncate_before(u64::MAX)?;
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".creating");
    let tmp = std::path::PathBuf::from(tmp);
    // A file not built whole (a full disk) is removed: nothing half-made is left.
    let built = (|| -> Result<()> {
        let header = FileHeader {
            page_size: options.page_size as u32,
            checkpoint_lsn: FIRST_LSN,
            log_start: FIRST_LSN,
            next_txn: 1,
            log_segment_bytes: options.log_segment_bytes,
        };
        let pager = Pager::create(&tmp, &header)?;
        let (mut meta, mut cat) = Store::initial_pages(options.page_size);
        for (id, buf) in [(META_PAGE, &mut meta), (CATALOG_ROOT, &mut cat)] {
            page::seal(id, buf.as_bytes_mut());
            pager.write_page(id, buf.as_bytes())?;
        }
        pager.sync()?;
        Ok(())
    })();
    if let Err(e) = built {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path)?;
    // The rename itself durable before anything is logged for the new file.
    dir_file.sync_all()?;
    Ok(())
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
