//! Transactions and cursors.

use std::ops::Bound;

use crate::db::{Database, TableId};
use crate::error::Result;

/// A transaction: strict two-phase locking (shared locks on reads, exclusive
/// on writes, all released at commit or abort). Dropping an unfinished
/// transaction aborts it. After `Deadlock` or `LockTimeout`, abort.
pub struct Txn<'db> {
    db: &'db Database,
}

impl<'db> Txn<'db> {
    /// This transaction's id.
    pub fn id(&self) -> u64 {
        todo!()
    }

    /// Reads `key` (shared lock).
    pub fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let _ = (self.db, table, key);
        todo!()
    }

    /// Reads `key` into `out` (cleared first) without allocating; returns
    /// whether the key exists.
    pub fn get_into(&mut self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let _ = (table, key, out);
        todo!()
    }

    /// Reads `key` taking an exclusive lock at once, for read-modify-write
    /// (avoids the deadlocks of shared-to-exclusive upgrades).
    pub fn get_for_update(&mut self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let _ = (table, key, out);
        todo!()
    }

    /// Inserts a new key; `DuplicateKey` if present.
    pub fn insert(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        let _ = (table, key, value);
        todo!()
    }

    /// Replaces the value of an existing key; `NotFound` if absent.
    pub fn update(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        let _ = (table, key, value);
        todo!()
    }

    /// Inserts or replaces.
    pub fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        let _ = (table, key, value);
        todo!()
    }

    /// Deletes `key`; returns whether it existed.
    pub fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool> {
        let _ = (table, key);
        todo!()
    }

    /// Opens a cursor over keys in `(lo, hi)` in ascending order. Each entry
    /// returned is share-locked. (Phantoms are not prevented.)
    pub fn scan<'t>(
        &'t mut self,
        table: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> Result<Cursor<'t, 'db>> {
        let _ = (table, lo, hi);
        todo!()
    }

    /// The entry with the greatest key in `[lo, hi)`, share-locked.
    pub fn last_in_range(
        &mut self,
        table: TableId,
        lo: &[u8],
        hi: &[u8],
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let _ = (table, lo, hi);
        todo!()
    }

    /// Commits: appends the commit record, makes it durable per
    /// [`crate::SyncMode`], releases locks.
    pub fn commit(self) -> Result<()> {
        todo!()
    }

    /// Aborts: undoes every change (logging compensation records), releases locks.
    pub fn abort(self) -> Result<()> {
        todo!()
    }
}

/// A forward cursor over a key range of one table. Opening pins the first
/// leaf; [`Cursor::close`] (or drop) unpins.
pub struct Cursor<'t, 'db> {
    txn: &'t mut Txn<'db>,
}

impl Cursor<'_, '_> {
    /// The next entry, or `None` at the end of the range.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let _ = &self.txn;
        todo!()
    }

    /// The next entry into reused buffers; `false` at the end of the range.
    pub fn next_into(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Result<bool> {
        let _ = (key, value);
        todo!()
    }

    /// Closes the cursor (unpins its page).
    pub fn close(self) {}
}
