//! The database: options, catalog, open / recovery, checkpoints.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::txn::Txn;

/// When a commit waits for its log records to reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Commit does not write the log; it is written when the log buffer fills,
    /// at checkpoints, and before dirty pages are written. A crash may lose
    /// the latest commits but never leaves the database inconsistent.
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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: 4096,
            pool_pages: 16384,
            sync: SyncMode::Normal,
            lock_timeout: Duration::from_secs(5),
            checkpoint_log_bytes: 256 << 20,
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

/// An open database. `Send + Sync`: share it between threads with `Arc`.
pub struct Database {
    _private: (),
}

impl Database {
    /// Opens the database file at `path`, creating it if missing, and runs
    /// crash recovery (redo, then undo of unfinished transactions). The log
    /// lives next to it in files named `<path>.wal.<n>`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Arc<Database>> {
        let _ = (path.as_ref(), options);
        todo!()
    }

    /// Creates a table (autocommitted). Errors with `TableExists`.
    pub fn create_table(&self, name: &str) -> Result<TableId> {
        let _ = name;
        todo!()
    }

    /// Creates a secondary index table over `table` (autocommitted). Its keys
    /// and values are whatever the application writes; usually the index key
    /// followed by the table's primary key.
    pub fn create_index(&self, name: &str, table: TableId) -> Result<TableId> {
        let _ = (name, table);
        todo!()
    }

    /// Looks a table or index up by name; `UnknownTable` if there is none.
    pub fn table(&self, name: &str) -> Result<TableId> {
        let _ = name;
        todo!()
    }

    /// All catalog entries.
    pub fn tables(&self) -> Vec<TableInfo> {
        todo!()
    }

    /// Drops a table or index and returns its pages to the free list.
    pub fn drop_table(&self, table: TableId) -> Result<()> {
        let _ = table;
        todo!()
    }

    /// Begins a transaction.
    pub fn begin(&self) -> Txn<'_> {
        todo!()
    }

    /// Takes a checkpoint: writes the log and every dirty page, syncs, records
    /// the new recovery start in the header and deletes old log files.
    pub fn checkpoint(&self) -> Result<()> {
        todo!()
    }

    /// Checks every tree's structure (key order, high keys, right links);
    /// returns the number of entries in all tables.
    pub fn check_integrity(&self) -> Result<u64> {
        todo!()
    }

    /// Size limits of this database.
    pub fn limits(&self) -> Limits {
        todo!()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        todo!()
    }
}
