//! An embedded transactional key-value store: a B-link tree per table in one
//! file of checksummed pages, a buffer pool, strict two-phase locking and a
//! write-ahead log with crash recovery. It is the database the TPC-C example
//! runs on, and it is built so thread-level speculation can later wrap it.
//!
//! # Architecture (one file per concept)
//!
//! Listed bottom up: each module uses only modules above it in this table.
//!
//! | module | what |
//! | --- | --- |
//! | `error` | [`Error`], [`PageId`], [`Result`] |
//! | `page` | page layout, checksums, the narrow [`PageAccess`] accessor trait |
//! | `stripes` | per-thread stripes of counters and caches every transaction writes |
//! | `frame` | frame storage: atomic words, latched `PageRef` / `PageMut`, optimistic views |
//! | `page_table` | the buffer pool's lock-free page id -> frame table |
//! | `pager` | the database file: header page, page reads and writes |
//! | `node` | slotted B-link node format: cells, high key, right link, splits; page decoders |
//! | `wal` | write-ahead log: records (`wal/record`), LSNs, group commit, segments |
//! | `buffer` | buffer pool: `get_page` / `put_page`, pins, dirty pages, 2Q-style clock |
//! | `lock` | record lock manager: shared / exclusive, deadlock detection |
//! | `chain` | a transaction's undo chain (last LSN, undo entries), shareable between threads |
//! | `btree` | Lehman-Yao B-link tree: allocation, search, insert, delete, checks, cursors |
//! | `recovery` | crash recovery: analysis, redo (repeat history), undo losers |
//! | `options` | [`Options`], [`SyncMode`], [`Limits`], [`Stats`] |
//! | `catalog` | [`TableId`], [`TableInfo`], catalog entries and their encoding |
//! | `scratch` | a transaction's reusable buffers: locks held, undo entries |
//! | `db` | [`Database`]: open, catalog lookups, checkpoints |
//! | `txn` | transactions: begin / commit / abort, undo, cursors |
//! | `shared_txn` | [`SharedTxn`]: one transaction used from several threads (speculative loops) |
//! | `ddl` | creating and dropping tables and indexes |
//!
//! # How the pieces fit
//!
//! * **Pages.** One file of fixed-size pages (4 KiB by default), each with a
//!   CRC-32 checksum (covering the page's own number, so a page written to or
//!   copied into the wrong place fails it) and the LSN of the last log record
//!   applied to it. Page 0 is the file header (magic, format version, page
//!   size, checkpoint), page 1 the meta page (page count, free list), page 2
//!   the catalog tree's root. An all-zero page, a page that fails its check
//!   and a page newer than the end of the log are errors, never data.
//! * **Buffer pool.** A lock-free two-level page table over a fixed array of
//!   frames (their bytes one zeroed block, whose memory the system provides as
//!   frames are first used: a large pool costs nothing until it fills); pages are pinned by `get_page` and unpinned by `put_page`,
//!   latched shared or exclusive while read or changed, written back when
//!   evicted (after the log up to their page LSN: the WAL rule) and at
//!   checkpoints. A frame is a sequence lock over atomic words, so a reader
//!   can also read a page *optimistically*: no pin, no latch, nothing written,
//!   and the result kept only if no writer came in between.
//! * **Trees.** Each table is a B-link tree whose root page never moves; its
//!   id is the [`TableId`]. Descents read the upper levels optimistically and
//!   move right past concurrent splits; a page latched after a descent is
//!   checked again (level, high key) and the descent restarts if the root
//!   split in between. Splits are two atomic, separately logged steps. Every
//!   walk is bounded by the page count, so damage that makes a cycle is an
//!   error, not a hang.
//! * **Transactions.** Strict two-phase locking on record keys (plus a shared
//!   lock per table, striped per thread so that transactions on different
//!   threads do not write one lock entry), deadlock detection on a waits-for
//!   graph. Transaction ids, cached buffers, counters and the check that a
//!   table exists are per-thread stripes too: nothing every transaction
//!   writes is one cache line, except the log's tail (one short lock per
//!   record, to copy it in; its checksum is computed before).
//! * **Log and recovery.** Physiological redo (page id + key-level change,
//!   or a page image for splits) guarded by page LSNs; logical undo (table,
//!   key, old value) with compensation records. Group commit shares one write
//!   and sync among concurrent committers. Checkpoints are fuzzy (no
//!   quiescing): flush the log and all dirty pages, then record the new redo
//!   start in the header. The first change to a page after a checkpoint
//!   began logs the whole page first (full-page writes), so a page write torn
//!   by a crash is rebuilt. Recovery on open: analysis, redo, undo of losers.
//!   A torn or garbage tail after the last whole record is cut; damage it
//!   cannot tell apart from lost commits (a bad record followed by valid
//!   ones, a log ending before the checkpoint, log files that end before it
//!   or are missing, a page on disk newer than the log's end) refuses to open
//!   with [`Error::LogDamaged`].
//!
//! # API
//!
//! Tables are ordered maps from byte-string keys to byte-string values; keys
//! compare lexicographically (encode integers big-endian). Secondary indexes
//! are tables too ([`Database::create_index`] records the owning table in the
//! catalog); the application writes index entries in the same transaction.
//!
//! ```
//! use btree_db::{Database, Options, SyncMode};
//! use std::ops::Bound;
//! # fn main() -> btree_db::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let db = Database::open(dir.path().join("shop.db"), Options { sync: SyncMode::Off, ..Options::default() })?;
//! let items = db.create_table("items")?;
//! let mut txn = db.begin();
//! txn.insert(items, &7u32.to_be_bytes(), b"apple")?;
//! txn.put(items, &9u32.to_be_bytes(), b"pear")?;
//! assert_eq!(txn.get(items, &7u32.to_be_bytes())?.as_deref(), Some(&b"apple"[..]));
//! txn.commit()?;
//!
//! let mut txn = db.begin();
//! let mut cur = txn.scan(items, Bound::Unbounded, Bound::Unbounded)?;
//! while let Some((key, value)) = cur.next()? {
//!     println!("{key:?} -> {value:?}");
//! }
//! cur.close();
//! txn.abort()?;
//! db.checkpoint()?;
//! # Ok(()) }
//! ```
//!
//! # Seams for thread-level speculation
//!
//! * Page bytes are only reached through [`PageAccess`] methods (integers and
//!   byte ranges at offsets); no slice into a frame outlives one call.
//! * `BufferPool::get_page` / `put_page`, `LockManager::acquire` /
//!   `release_one`, and `Cursor` open / [`Cursor::close`] are plain functions.
//! * Every log record goes through one call, `Store::log`, where
//!   `Wal::append_with_images` assigns the LSN and the changed pages are stamped with it.
//! * The lock manager counts acquisitions per transaction and lock, so one
//!   acquisition can be undone.

mod btree;
mod buffer;
mod catalog;
mod chain;
mod db;
mod ddl;
mod error;
mod frame;
mod lock;
mod node;
mod options;
mod page;
mod page_table;
mod pager;
mod recovery;
mod scratch;
mod shared_txn;
mod stripes;
mod txn;
mod wal;

pub use catalog::{TableId, TableInfo, TableKind};
pub use db::Database;
pub use error::{Error, PageId, Result};
pub use node::{decode_page, validate_page};
pub use options::{Limits, Options, Stats, SyncMode};
pub use page::{PageAccess, PageBuf, PageWrite};
pub use shared_txn::{LeafHint, SharedTxn};
pub use txn::{Cursor, Txn};
