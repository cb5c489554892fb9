//! One transaction used by several threads at once: the seam a speculative
//! loop inside a transaction needs.
//!
//! A loop body that runs as parallel epochs reads and writes rows of the same
//! transaction from several threads. [`Txn`] takes `&mut self` because its
//! bookkeeping (locks held, undo entries, the log chain) is one sequence;
//! [`SharedTxn`] borrows it and hands out `&self` operations. The bookkeeping
//! stays one sequence behind a mutex, held only for it: a read takes the record
//! lock under the mutex and then walks the tree without it, so reads on
//! different threads overlap. A write runs under the mutex from start to end,
//! since its log record and undo entry must follow the transaction's previous
//! ones; a speculative caller applies writes one at a time in commit order
//! anyway.

use std::sync::{Mutex, MutexGuard};

use crate::catalog::TableId;
use crate::error::Result;
use crate::lock::LockMode;
use crate::txn::Txn;

/// A transaction lent to several threads (see [`Txn::share`]).
pub struct SharedTxn<'t, 'db> {
    txn: Mutex<&'t mut Txn<'db>>,
}

impl<'db> Txn<'db> {
    /// Lends this transaction to several threads: the returned handle's
    /// operations take `&self`. Locks, undo entries and log records still
    /// belong to this one transaction, which commits or aborts as usual once
    /// the handle is dropped.
    pub fn share(&mut self) -> SharedTxn<'_, 'db> {
        SharedTxn {
            txn: Mutex::new(self),
        }
    }
}

impl<'t, 'db> SharedTxn<'t, 'db> {
    fn txn(&self) -> MutexGuard<'_, &'t mut Txn<'db>> {
        // A panic inside a call leaves the transaction as a failed call on one
        // thread would: the caller aborts it.
        self.txn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads `key` into `out` (cleared first) under a shared record lock;
    /// returns whether the key exists.
    pub fn get_into(&self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.read(table, key, out, LockMode::Shared)
    }

    /// Reads `key` under an exclusive record lock, for read-modify-write.
    pub fn get_for_update(&self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.read(table, key, out, LockMode::Exclusive)
    }

    fn read(&self, table: TableId, key: &[u8], out: &mut Vec<u8>, mode: LockMode) -> Result<bool> {
        let (db, root) = {
            let mut t = self.txn();
            let root = t.lock_for_read(table, key, mode)?;
            (t.database(), root)
        };
        // The lock is held to the transaction's end, so the walk needs no mutex.
        out.clear();
        db.store.get(root, key, out, &mut 0)
    }

    /// Inserts a new key; `DuplicateKey` if present.
    pub fn insert(&self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        self.txn().insert(table, key, value)
    }

    /// Replaces the value of an existing key; `NotFound` if absent.
    pub fn update(&self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        self.txn().update(table, key, value)
    }

    /// Inserts or replaces.
    pub fn put(&self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        self.txn().put(table, key, value)
    }

    /// Deletes `key`; returns whether it existed.
    pub fn delete(&self, table: TableId, key: &[u8]) -> Result<bool> {
        self.txn().delete(table, key)
    }

    /// Undoes one acquisition of the record lock on `(table, key)` (the undo
    /// of a speculative read's lock).
    pub fn unlock_once(&self, table: TableId, key: &[u8]) {
        self.txn().unlock_once(table, key)
    }

    /// Number of distinct locks the transaction holds.
    pub fn locks_held(&self) -> usize {
        self.txn().locks_held()
    }
}
