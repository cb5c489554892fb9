//! The public configuration and report types: [`Options`] and [`SyncMode`]
//! for opening a database, [`Limits`] and [`Stats`] for asking it.

use std::time::Duration;

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
    /// How long a lock request waits before [`crate::Error::LockTimeout`]
    /// (at most 100 years: `Duration::MAX` waits as long as it takes; a
    /// deadlock is still detected at once).
    pub lock_timeout: Duration,
    /// Take a checkpoint automatically once this many log bytes were written
    /// since the last one (0 disables automatic checkpoints).
    pub checkpoint_log_bytes: u64,
    /// Size of one log segment file (at least 64 KiB) when creating a file:
    /// an existing database keeps its own, recorded in its header (a file
    /// written before that was recorded takes the size its log files show, or
    /// this option where one segment file shows only a lower bound, and
    /// records it when opened). Checkpoints delete whole segments that
    /// recovery no longer needs. Default 64 MiB.
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
    /// Automatic checkpoints that failed (an I/O error): the commit that started
    /// one still succeeds, and a later commit tries again.
    pub checkpoint_failures: u64,
    /// Transactions committed.
    pub commits: u64,
    /// Transactions aborted.
    pub aborts: u64,
    /// Deadlocks detected.
    pub deadlocks: u64,
}
