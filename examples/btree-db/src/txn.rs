//! Transactions and cursors.
//!
//! A transaction takes a shared lock on each table it touches (so a table
//! cannot be dropped under it), shared record locks on reads and exclusive
//! record locks on writes, all held to the end (strict two-phase locking).
//! Each change is logged with its old value; abort undoes the changes in
//! reverse order, logging a compensation record for each.

use std::ops::Bound;
use std::sync::Arc;

use crate::btree::{CursorState, LogMode, Modify, Outcome};
use crate::catalog::TableId;
use crate::chain::{Chain, push_undo};
use crate::db::Database;
use crate::error::{Error, PageId, Result};
use crate::lock::{LockMode, TxnLocks, lock_name, table_lock_name};
use crate::options::SyncMode;
use crate::scratch::TxnScratch;
use crate::stripes::stripe;
use crate::wal::{KIND_ABORT, KIND_COMMIT};

impl Database {
    /// Begins a transaction.
    pub fn begin(&self) -> Txn<'_> {
        let (id, scratch) = self.txn_start();
        Txn::new(self, id, scratch)
    }
}

/// A transaction: strict two-phase locking (shared locks on reads, exclusive
/// on writes, all released at commit or abort). Dropping an unfinished
/// transaction aborts it. After `Deadlock` or `LockTimeout`, abort.
pub struct Txn<'db> {
    db: &'db Database,
    id: u64,
    s: TxnScratch,
    /// The stripe this transaction registered as a writer on, once it wrote.
    wrote: Option<usize>,
    done: bool,
    /// Its locks are lent to a `SharedTxn` (set by `share`, cleared when the
    /// handle gives them back).
    lent: bool,
    /// Its undo chain, while lent to a `SharedTxn` (see [`Txn::lend_chain`]).
    chain: Option<Arc<Chain>>,
}

impl<'db> Txn<'db> {
    pub(crate) fn new(db: &'db Database, id: u64, mut s: TxnScratch) -> Txn<'db> {
        s.ctx.txn = id;
        Txn {
            db,
            id,
            s,
            wrote: None,
            done: false,
            lent: false,
            chain: None,
        }
    }

    /// Returns the buffers to the database's cache.
    fn recycle(&mut self) {
        let mut s = std::mem::take(&mut self.s);
        s.reset();
        self.db.recycle_scratch(s);
    }

    fn hint(&mut self, root: PageId) -> usize {
        match self.s.hints.iter().position(|h| h.0 == root) {
            Some(i) => i,
            None => {
                self.s.hints.push((root, 0));
                self.s.hints.len() - 1
            }
        }
    }

    /// The database this transaction runs on.
    pub(crate) fn database(&self) -> &'db Database {
        self.db
    }

    /// This transaction's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Lock acquire seam: one counted acquisition.
    pub(crate) fn lock_raw(&mut self, name: u64, mode: LockMode) -> Result<bool> {
        Self::lock_in(self.db, self.id, &mut self.s.locks, name, mode)
    }

    /// One counted acquisition for transaction `id` into `locks` (its own set, or
    /// the set a [`crate::SharedTxn`] holds while the transaction is lent).
    pub(crate) fn lock_in(
        db: &Database,
        id: u64,
        locks: &mut TxnLocks,
        name: u64,
        mode: LockMode,
    ) -> Result<bool> {
        let r = db.locks.acquire(id, locks, name, mode);
        if matches!(r, Err(Error::Deadlock)) {
            db.deadlocks.add(1);
        }
        r
    }

    /// Undoes one acquisition of the record lock on `(table, key)`; the lock
    /// is released when no acquisition remains. This is the undo of an
    /// acquire for the speculation layer; ordinary callers never need it.
    #[doc(hidden)]
    pub fn unlock_once(&mut self, table: TableId, key: &[u8]) {
        self.db
            .locks
            .release_one(self.id, &mut self.s.locks, lock_name(table.0, key));
    }

    /// Number of distinct locks held (for tests).
    #[doc(hidden)]
    pub fn locks_held(&self) -> usize {
        self.s.locks.len()
    }

    /// Checks the table and takes its shared table lock once.
    fn open_table(&mut self, table: TableId) -> Result<PageId> {
        Self::open_table_in(
            self.db,
            self.id,
            &mut self.s.tables,
            &mut self.s.locks,
            table,
        )
    }

    /// [`Txn::open_table`] over explicit parts: the tables opened so far and the
    /// lock set (a lent transaction keeps both outside the `Txn`).
    pub(crate) fn open_table_in(
        db: &Database,
        id: u64,
        tables: &mut Vec<PageId>,
        locks: &mut TxnLocks,
        table: TableId,
    ) -> Result<PageId> {
        let root = table.0;
        // Holding the shared table lock means the table cannot be dropped:
        // no catalog lookup (a shared cache line) on every operation.
        if !tables.contains(&root) {
            db.root_of(table)?;
            Self::lock_in(
                db,
                id,
                locks,
                table_lock_name(root, stripe()),
                LockMode::Shared,
            )?;
            tables.push(root);
            // The table may have been dropped while we waited.
            db.root_of(table)?;
        }
        Ok(root)
    }

    /// Lends the lock set and the opened tables to a [`crate::SharedTxn`].
    pub(crate) fn lend_locks(&mut self) -> (TxnLocks, Vec<PageId>) {
        self.lent = true;
        (
            std::mem::take(&mut self.s.locks),
            std::mem::take(&mut self.s.tables),
        )
    }

    /// Takes back what [`Txn::lend_locks`] and [`Txn::lend_chain`] lent.
    pub(crate) fn return_locks(&mut self, locks: TxnLocks, tables: Vec<PageId>) {
        self.reclaim_chain();
        self.lent = false;
        self.s.locks = locks;
        self.s.tables = tables;
    }

    pub(crate) fn check_sizes(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        Self::check_sizes_in(self.db, key, value)
    }

    /// Checks a key's and an entry's size against `db`'s limits.
    pub(crate) fn check_sizes_in(db: &Database, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let l = db.limits();
        if key.len() > l.max_key {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: l.max_key,
            });
        }
        let len = key.len() + value.map_or(0, <[u8]>::len);
        if len > l.max_entry {
            return Err(Error::ValueTooLarge {
                len,
                max: l.max_entry,
            });
        }
        Ok(())
    }

    /// Applies a logged, undoable change to a tree without catalog checks.
    pub(crate) fn modify_raw(
        &mut self,
        root: PageId,
        key: &[u8],
        m: Modify<'_>,
    ) -> Result<Outcome> {
        self.lock_raw(lock_name(root, key), LockMode::Exclusive)?;
        self.modify_locked(root, key, m)
    }

    /// [`Txn::modify_raw`] once the exclusive record lock is held, starting from
    /// the tree's last leaf (a leaf that no longer holds `key` costs a descent).
    fn modify_locked(&mut self, root: PageId, key: &[u8], m: Modify<'_>) -> Result<Outcome> {
        self.register_writer();
        let h = self.hint(root);
        let mut leaf = self.s.hints[h].1;
        let prev_lsn = self.s.ctx.prev;
        let out = self.db.store.modify(
            root,
            key,
            m,
            LogMode::Undoable { table: root },
            &mut self.s.ctx,
            &mut leaf,
        );
        self.s.hints[h].1 = leaf;
        if matches!(out, Ok(Outcome::Done)) {
            let TxnScratch {
                ctx, undo, arena, ..
            } = &mut self.s;
            let old = ctx.had_old.then_some(ctx.old.as_slice());
            push_undo(undo, arena, root, key, old, prev_lsn);
        }
        out
    }

    /// Registers the transaction as a writer (checkpoints keep the log of
    /// unfinished writers) before its first change.
    pub(crate) fn register_writer(&mut self) {
        if self.wrote.is_none() {
            self.wrote = Some(self.db.register_writer(self.id));
        }
    }

    /// Moves the undo chain into a [`Chain`] for a [`crate::SharedTxn`]'s
    /// threads; the transaction keeps a reference, so that it gets the chain
    /// back even from a handle that was forgotten rather than dropped.
    pub(crate) fn lend_chain(&mut self) -> Arc<Chain> {
        let chain = Arc::new(Chain::new(
            self.s.ctx.prev,
            std::mem::take(&mut self.s.undo),
            std::mem::take(&mut self.s.arena),
        ));
        self.chain = Some(Arc::clone(&chain));
        chain
    }

    /// Takes back what [`Txn::lend_chain`] lent, if anything.
    fn reclaim_chain(&mut self) {
        if let Some(chain) = self.chain.take() {
            (self.s.ctx.prev, self.s.undo, self.s.arena) = chain.take();
        }
    }

    fn write(&mut self, table: TableId, key: &[u8], m: Modify<'_>) -> Result<Outcome> {
        let value = match m {
            Modify::Insert(v) | Modify::Update(v) | Modify::Put(v) => Some(v),
            Modify::Delete => None,
        };
        self.check_sizes(key, value)?;
        let root = self.open_table(table)?;
        self.modify_raw(root, key, m)
    }

    /// Reads `key` (shared lock).
    pub fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(table, key, &mut out)?.then_some(out))
    }

    /// Reads `key` into `out` (cleared first) without allocating; returns
    /// whether the key exists.
    pub fn get_into(&mut self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.read(table, key, out, LockMode::Shared)
    }

    /// Reads `key` taking an exclusive lock at once, for read-modify-write
    /// (avoids the deadlocks of shared-to-exclusive upgrades).
    pub fn get_for_update(
        &mut self,
        table: TableId,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        self.read(table, key, out, LockMode::Exclusive)
    }

    fn read(
        &mut self,
        table: TableId,
        key: &[u8],
        out: &mut Vec<u8>,
        mode: LockMode,
    ) -> Result<bool> {
        self.check_sizes(key, None)?;
        let root = self.open_table(table)?;
        self.lock_raw(lock_name(root, key), mode)?;
        out.clear();
        let h = self.hint(root);
        self.db.store.get(root, key, out, &mut self.s.hints[h].1)
    }

    /// Inserts a new key; `DuplicateKey` if present.
    pub fn insert(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        match self.write(table, key, Modify::Insert(value))? {
            Outcome::Duplicate => Err(Error::DuplicateKey),
            _ => Ok(()),
        }
    }

    /// Replaces the value of an existing key; `NotFound` if absent.
    pub fn update(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        match self.write(table, key, Modify::Update(value))? {
            Outcome::Missing => Err(Error::NotFound),
            _ => Ok(()),
        }
    }

    /// Inserts or replaces.
    pub fn put(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(table, key, Modify::Put(value)).map(|_| ())
    }

    /// Deletes `key`; returns whether it existed.
    pub fn delete(&mut self, table: TableId, key: &[u8]) -> Result<bool> {
        Ok(self.write(table, key, Modify::Delete)? == Outcome::Done)
    }

    /// Opens a cursor over keys in `(lo, hi)` in ascending order. Each entry
    /// returned is share-locked. (Phantoms are not prevented.)
    pub fn scan<'t>(
        &'t mut self,
        table: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> Result<Cursor<'t, 'db>> {
        let root = self.open_table(table)?;
        let state = CursorState::open(&self.db.store, root, lo, hi)?;
        Ok(Cursor { txn: self, state })
    }

    /// The entry with the greatest key in `[lo, hi)`, share-locked. Walks the
    /// range forward, so keep the range small (e.g. one customer's orders).
    pub fn last_in_range(
        &mut self,
        table: TableId,
        lo: &[u8],
        hi: &[u8],
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let root = self.open_table(table)?;
        let store = &self.db.store;
        let mut state = CursorState::open(store, root, Bound::Included(lo), Bound::Excluded(hi))?;
        let (mut k, mut v) = (Vec::new(), Vec::new());
        let mut last: Option<(Vec<u8>, Vec<u8>)> = None;
        while state.next(store, &mut k, &mut v)? {
            match &mut last {
                Some((lk, lv)) => {
                    std::mem::swap(lk, &mut k);
                    std::mem::swap(lv, &mut v);
                }
                None => last = Some((std::mem::take(&mut k), std::mem::take(&mut v))),
            }
        }
        state.close(store);
        let Some((key, _)) = last else {
            return Ok(None);
        };
        // Lock, then read again: the entry may have changed while we waited.
        let mut val = Vec::new();
        self.lock_raw(lock_name(root, &key), LockMode::Shared)?;
        if !self.db.store.get(root, &key, &mut val, &mut 0)? {
            return self.last_in_range(table, lo, &key);
        }
        Ok(Some((key, val)))
    }

    /// Commits: appends the commit record, makes it durable per
    /// [`crate::SyncMode`], releases locks. An error other than
    /// [`Error::CommitNotDurable`] means the transaction did not take effect
    /// ([`Error::LentOut`]); `CommitNotDurable` means it did, but the log could
    /// not be written: do not run it again.
    pub fn commit(mut self) -> Result<()> {
        if self.lent {
            // Its locks are gone with a forgotten handle: committing would leave
            // the rows locked for good with nobody to tell; undo, and say so.
            let _ = self.rollback();
            return Err(Error::LentOut);
        }
        self.done = true;
        let mut result = Ok(());
        if let Some(at) = self.wrote {
            let rec = &mut self.s.ctx.rec;
            rec.begin(self.id, self.s.ctx.prev, KIND_COMMIT);
            let lsn = self.db.store.log(rec, &mut []);
            let len = rec.buf.len() as u64;
            let wal = &self.db.store.wal;
            result = match self.db.options.sync {
                SyncMode::Off => Ok(()),
                SyncMode::Normal => wal.flush(lsn + len, false),
                SyncMode::Full => wal.flush(lsn + len, true),
            };
            self.db.unregister_writer(self.id, at);
        }
        self.db.locks.release_all(self.id, &mut self.s.locks);
        self.db.commits.add(1);
        self.recycle();
        if let Err(e) = result {
            // The commit record is in the log buffer and the locks are gone:
            // the transaction took effect, only its durability is in doubt.
            return Err(Error::CommitNotDurable {
                cause: e.to_string(),
            });
        }
        if self.wrote.is_some() && self.db.maybe_checkpoint().is_err() {
            // The commit is durable; a checkpoint that failed leaves the last
            // one in force, and the next commit past the threshold tries again.
            (self.db.checkpoint_failures).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// Aborts: undoes every change (logging compensation records), releases locks.
    pub fn abort(mut self) -> Result<()> {
        let undone = self.rollback();
        if self.lent {
            return Err(Error::LentOut);
        }
        undone
    }

    fn rollback(&mut self) -> Result<()> {
        self.done = true;
        self.reclaim_chain();
        if let Some(at) = self.wrote {
            if let Err(e) = self.undo_all() {
                // The undo could not finish. Its locks stay held, so nobody
                // sees the half-undone rows, and it stays registered as
                // active, so checkpoints keep its log: the next open finds it
                // unfinished and undoes the rest. Forgetting it instead would
                // let a later checkpoint drop its log and make its changes
                // permanent.
                self.db.aborts.add(1);
                return Err(Error::AbortIncomplete {
                    cause: e.to_string(),
                });
            }
            self.db.unregister_writer(self.id, at);
        }
        self.db.locks.release_all(self.id, &mut self.s.locks);
        self.db.aborts.add(1);
        self.recycle();
        Ok(())
    }

    /// Undoes the changes newest first, logging a compensation record for
    /// each, then logs the abort. A change is forgotten only once undone, so
    /// a retry after a failure resumes where it stopped. Running out of
    /// buffer frames is waited out for a while (other transactions' pins
    /// come and go); any other error ends the attempt.
    fn undo_all(&mut self) -> Result<()> {
        let store = &self.db.store;
        let mut waited = std::time::Duration::ZERO;
        while let Some(e) = self.s.undo.last() {
            let key = &self.s.arena[e.key.0 as usize..(e.key.0 + e.key.1) as usize];
            let m = match e.old {
                Some((s, l)) => Modify::Put(&self.s.arena[s as usize..(s + l) as usize]),
                None => Modify::Delete,
            };
            match store.modify(
                e.table,
                key,
                m,
                LogMode::Compensation {
                    undo_next: e.prev_lsn,
                },
                &mut self.s.ctx,
                &mut 0,
            ) {
                Ok(_) => {
                    self.s.undo.pop();
                }
                Err(Error::PoolExhausted) if waited < UNDO_PATIENCE => {
                    let pause = std::time::Duration::from_millis(1);
                    std::thread::sleep(pause);
                    waited += pause;
                }
                Err(e) => return Err(e),
            }
        }
        let rec = &mut self.s.ctx.rec;
        rec.begin(self.id, self.s.ctx.prev, KIND_ABORT);
        store.log(rec, &mut []);
        Ok(())
    }
}

/// How long an abort waits out a full buffer pool before giving up.
const UNDO_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.rollback();
        }
    }
}

/// A forward cursor over a key range of one table. Opening pins the first
/// leaf; [`Cursor::close`] (or drop) unpins.
pub struct Cursor<'t, 'db> {
    txn: &'t mut Txn<'db>,
    state: CursorState<'db>,
}

impl Cursor<'_, '_> {
    /// The next entry, or `None` at the end of the range.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let (mut k, mut v) = (Vec::new(), Vec::new());
        Ok(self.next_into(&mut k, &mut v)?.then_some((k, v)))
    }

    /// The next entry into reused buffers; `false` at the end of the range.
    pub fn next_into(&mut self, key: &mut Vec<u8>, value: &mut Vec<u8>) -> Result<bool> {
        let store = &self.txn.db.store;
        loop {
            if !self.state.next(store, key, value)? {
                return Ok(false);
            }
            let root = self.state.root();
            // Lock after releasing the latch (never wait for a lock while
            // latched). The value was read before the lock was ours: a
            // writer may have changed it, committed or rolled back since,
            // even if the lock came without waiting. It stands only if its
            // page has not changed since (same page LSN); else read again.
            let waited = self.txn.lock_raw(lock_name(root, key), LockMode::Shared)?;
            if waited || !self.state.entry_unchanged() {
                value.clear();
                if !store.get(root, key, value, &mut 0)? {
                    continue;
                }
            }
            return Ok(true);
        }
    }

    /// Closes the cursor (unpins its page).
    pub fn close(mut self) {
        self.state.close(&self.txn.db.store);
    }
}
