//! One transaction used by several threads at once: the seam a speculative
//! loop inside a transaction needs.
//!
//! A loop body that runs as parallel epochs reads and writes rows of the same
//! transaction from several threads. [`Txn`] takes `&mut self` because its
//! bookkeeping is one sequence; [`SharedTxn`] borrows it and hands out `&self`
//! operations, with the bookkeeping split by who needs it:
//!
//! - the lock set (the locks held, with their acquisition counts) and the
//!   tables opened move into the handle, split by thread stripe: each thread
//!   counts the acquisitions it makes in a set of its own, behind its own
//!   mutex, held only to grant and count an acquisition, so that a thread's
//!   reads and writes touch no line the other threads write (one set for all
//!   cost two threads 3 to 5% more time on lookups and 2 to 7% on updates,
//!   measured with a temporary switch between the two forms flipped
//!   transaction by transaction in one process). A lock two threads both took is
//!   held once by the transaction in the lock manager and counted in both
//!   sets; the sets are merged when the handle is dropped. A wait for another
//!   transaction's lock happens with the mutex released (only opening a
//!   table, whose shared lock waits for nothing but a table being dropped,
//!   waits under it). The tables open for the transaction are also kept in
//!   one set the threads only read once a table is in, so that a table one
//!   thread opened is not locked again by the others;
//! - the undo chain (the last LSN and the undo entries) moves into a
//!   [`Chain`] that takes no lock of the transaction's own: the log links
//!   each record to the one before as it appends it, and each thread stripe
//!   keeps the undo entries of its changes, merged in record order when the
//!   transaction takes them back (see [`crate::chain`]); each thread has its
//!   own record buffers, so the descent, the latch, the change to the page
//!   and the record's construction run in parallel with the other threads'
//!   writes;
//! - the rest of the transaction stays in the `Txn`, behind a third mutex
//!   taken once, to register the transaction as a writer before its first
//!   change.
//!
//! So a read never waits for another thread's write in progress: it counts its
//! lock and walks the tree with no mutex held (the lock is held to the
//! transaction's end), and writes to different pages wait for each other only
//! in the log's append, as the writes of different transactions do. The
//! mutexes are tried in a spin first: their holders are the loop's other
//! threads, in for microseconds, and a thread put to sleep takes tens of
//! microseconds to wake on a small machine.
//!
//! Dropping the handle gives the locks and tables back to the transaction, which
//! then commits or aborts as usual.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::btree::{CursorState, LogCtx, LogMode, Modify, Outcome};
use crate::catalog::TableId;
use crate::chain::{Chain, spin_lock};
use crate::db::Database;
use crate::error::{Error, PageId, Result};
use crate::lock::{LockMode, TxnLocks, lock_name};
use crate::stripes::{Padded, Striped, stripe};
use crate::txn::Txn;

/// Trees whose last leaf the handle remembers for reads.
const HINTS: usize = 8;

/// The locks and tables of a lent transaction.
#[derive(Default)]
struct Lent {
    locks: TxnLocks,
    tables: Vec<PageId>,
}

/// Where a read of a key in a [`SharedTxn`] ended, for a later write of the same
/// key ([`SharedTxn::update_at`]). Opaque; `Default` is "nowhere" (a descent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeafHint {
    /// The database ([`Database`]'s `instance`; 0 in the default hint).
    db: u64,
    txn: u64,
    table: PageId,
    leaf: PageId,
}

/// A transaction lent to several threads (see [`Txn::share`]).
pub struct SharedTxn<'t, 'db> {
    db: &'db Database,
    id: u64,
    // The mutexes each on cache lines of their own, apart from the fields every
    // operation only reads: the loop's threads take them all the time, and a
    // line that one thread writes and the other reads moves between their cores
    // on every access (on two threads New Order's epochs took about half as long
    // again as on one).
    txn: Padded<Mutex<&'t mut Txn<'db>>>,
    /// Per thread stripe: the acquisitions that stripe's threads made, and the
    /// tables they opened (the stripe of the thread that lent the transaction
    /// starts with the transaction's locks and tables).
    lent: Striped<Mutex<Lent>>,
    /// Every table the transaction has open, whichever stripe opened it.
    opened: Padded<Opened>,
    /// The stripe of the thread that lent the transaction: its set, which holds
    /// the transaction's own locks, is the one the others merge into.
    lender: usize,
    chain: Arc<Chain>,
    /// Record buffers for writes, per thread stripe, one taken per write in
    /// progress.
    ctxs: Striped<Mutex<Vec<LogCtx>>>,
    /// Whether the transaction is registered as a writer.
    registered: AtomicBool,
    /// Per thread stripe and tree (root, last leaf read): a guess that saves
    /// descents on ascending reads (each thread's own reads); a wrong one costs
    /// a descent.
    hints: Striped<[(AtomicU32, AtomicU32); HINTS]>,
}

impl<'db> Txn<'db> {
    /// Lends this transaction to several threads: the returned handle's
    /// operations take `&self`. Locks, undo entries and log records still
    /// belong to this one transaction, which commits or aborts as usual once
    /// the handle is dropped.
    pub fn share(&mut self) -> SharedTxn<'_, 'db> {
        let (locks, tables) = self.lend_locks();
        let chain = self.lend_chain();
        // The tables the transaction opened (their table locks, counted in the
        // lending thread's stripe, keep them) are open for every thread.
        let opened = Opened::default();
        for &t in &tables {
            opened.insert(t);
        }
        let lent: Striped<Mutex<Lent>> = Striped::default();
        *spin_lock(lent.mine()) = Lent { locks, tables };
        SharedTxn {
            db: self.database(),
            id: self.id(),
            txn: Padded(Mutex::new(self)),
            lent,
            opened: Padded(opened),
            lender: stripe(),
            chain,
            ctxs: Striped::default(),
            registered: AtomicBool::new(false),
            hints: Default::default(),
        }
    }
}

impl SharedTxn<'_, '_> {
    /// Checks the key, opens the table and takes the record lock on `key`;
    /// returns the table's root.
    fn lock(
        &self,
        table: TableId,
        key: &[u8],
        value: Option<&[u8]>,
        mode: LockMode,
    ) -> Result<PageId> {
        Txn::check_sizes_in(self.db, key, value)?;
        let (root, granted) = {
            // The common case, opened and granted in one hold of the mutex.
            let mut lent = spin_lock(self.lent.mine());
            let root = self.open_in(&mut lent, table)?;
            let granted =
                self.db
                    .locks
                    .try_acquire(self.id, &mut lent.locks, lock_name(root, key), mode);
            (root, granted)
        };
        if !granted {
            self.lock_in(root, key, mode)?;
        }
        Ok(root)
    }

    /// Opens the table (its shared table lock, once); returns its root.
    fn open_table(&self, table: TableId) -> Result<PageId> {
        self.open_in(&mut spin_lock(self.lent.mine()), table)
    }

    /// Opens the table, in this thread's stripe `lent` (held) unless a thread of
    /// the transaction has opened it already; returns its root. The table lock
    /// of the thread that opened it keeps it for the transaction, so the others
    /// do not lock it again: a second table lock could wait behind a
    /// `drop_table` that waits for the first, and fail the transaction with a
    /// deadlock. (Two threads opening it at once each take one, which does no
    /// harm.)
    fn open_in(&self, lent: &mut Lent, table: TableId) -> Result<PageId> {
        if self.opened.0.contains(table.0) {
            return Ok(table.0);
        }
        let Lent { locks, tables } = lent;
        let root = Txn::open_table_in(self.db, self.id, tables, locks, table)?;
        self.opened.0.insert(root);
        Ok(root)
    }

    /// Takes the record lock on `key` in the tree at `root`; returns whether it
    /// had to wait for another transaction.
    fn lock_in(&self, root: PageId, key: &[u8], mode: LockMode) -> Result<bool> {
        let mut deadline = None;
        loop {
            let name = {
                let mut lent = spin_lock(self.lent.mine());
                let name = lock_name(root, key);
                // Granted and counted in one step under the mutex, so that a
                // sibling's `unlock_once` (which holds every stripe's mutex)
                // cannot slip in between.
                if self
                    .db
                    .locks
                    .try_acquire(self.id, &mut lent.locks, name, mode)
                {
                    return Ok(deadline.is_some());
                }
                name
            };
            // Another transaction holds it: wait with the mutex released, so
            // the loop's other threads go on meanwhile, then try again.
            let deadline =
                *deadline.get_or_insert_with(|| Instant::now() + self.db.locks.timeout());
            if let Err(e) = self.db.locks.wait_grantable(self.id, name, mode, deadline) {
                if matches!(e, Error::Deadlock) {
                    self.db.deadlocks.add(1);
                }
                return Err(e);
            }
        }
    }

    fn hint(&self, root: PageId) -> Option<&AtomicU32> {
        for (r, leaf) in self.hints.mine() {
            match r.load(Ordering::Relaxed) {
                0 => {
                    // Claim a free entry; if another thread took it meanwhile,
                    // read what it holds.
                    return match r.compare_exchange(0, root, Ordering::Relaxed, Ordering::Relaxed) {
                        Ok(_) => Some(leaf),
                        Err(other) if other == root => Some(leaf),
                        Err(_) => continue,
                    };
                }
                r if r == root => return Some(leaf),
                _ => {}
            }
        }
        None
    }

    /// Reads `key` into `out` (cleared first) under a shared record lock;
    /// returns whether the key exists.
    pub fn get_into(&self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.read(table, key, out, LockMode::Shared)
            .map(|(found, _)| found)
    }

    /// Reads `key` under an exclusive record lock, for read-modify-write.
    pub fn get_for_update(&self, table: TableId, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.read(table, key, out, LockMode::Exclusive)
            .map(|(found, _)| found)
    }

    /// [`SharedTxn::get_for_update`], also returning where the walk ended:
    /// handed to [`SharedTxn::update_at`] for the same key, it saves that write
    /// a descent.
    pub fn get_for_update_at(
        &self,
        table: TableId,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(bool, LeafHint)> {
        let (found, leaf) = self.read(table, key, out, LockMode::Exclusive)?;
        Ok((
            found,
            LeafHint {
                db: self.db.instance,
                txn: self.id,
                table: table.0,
                leaf,
            },
        ))
    }

    fn read(
        &self,
        table: TableId,
        key: &[u8],
        out: &mut Vec<u8>,
        mode: LockMode,
    ) -> Result<(bool, PageId)> {
        let root = self.lock(table, key, None, mode)?;
        out.clear();
        let hint = self.hint(root);
        let mut leaf = hint.map_or(0, |h| h.load(Ordering::Relaxed));
        let found = self.db.store.get(root, key, out, &mut leaf)?;
        if let Some(h) = hint {
            h.store(leaf, Ordering::Relaxed);
        }
        Ok((found, leaf))
    }

    fn write(&self, table: TableId, key: &[u8], m: Modify<'_>) -> Result<Outcome> {
        self.write_at(table, key, m, LeafHint::default())
    }

    /// Takes the exclusive record lock and changes `key`, starting from `at`
    /// if this transaction found it there in this tree, else from the tree's
    /// hint.
    fn write_at(&self, table: TableId, key: &[u8], m: Modify<'_>, at: LeafHint) -> Result<Outcome> {
        let value = match m {
            Modify::Insert(v) | Modify::Update(v) | Modify::Put(v) => Some(v),
            Modify::Delete => None,
        };
        let root = self.lock(table, key, value, LockMode::Exclusive)?;
        if !self.registered.load(Ordering::Acquire) {
            spin_lock(&self.txn.0).register_writer();
            self.registered.store(true, Ordering::Release);
        }
        let hint = self.hint(root);
        // Only a leaf this transaction of this database found in this tree: pages
        // do not leave a tree while its table lock is held, which is the
        // transaction's. (A hint from another database with the same transaction
        // and table ids was followed into another tree's leaf, and wrote there.)
        let mut leaf =
            if at.db == self.db.instance && at.txn == self.id && at.table == root && at.leaf != 0 {
                at.leaf
            } else {
                hint.map_or(0, |h| h.load(Ordering::Relaxed))
            };
        let mut ctx = spin_lock(self.ctxs.mine()).pop().unwrap_or_else(|| LogCtx {
            txn: self.id,
            chain: Some(Arc::clone(&self.chain)),
            ..LogCtx::default()
        });
        let mode = LogMode::Undoable { table: root };
        let out = self
            .db
            .store
            .modify(root, key, m, mode, &mut ctx, &mut leaf);
        spin_lock(self.ctxs.mine()).push(ctx);
        if let Some(h) = hint {
            h.store(leaf, Ordering::Relaxed);
        }
        out
    }

    /// Inserts a new key; `DuplicateKey` if present.
    pub fn insert(&self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        match self.write(table, key, Modify::Insert(value))? {
            Outcome::Duplicate => Err(Error::DuplicateKey),
            _ => Ok(()),
        }
    }

    /// Replaces the value of an existing key; `NotFound` if absent.
    pub fn update(&self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        match self.write(table, key, Modify::Update(value))? {
            Outcome::Missing => Err(Error::NotFound),
            _ => Ok(()),
        }
    }

    /// [`SharedTxn::update`] starting from where a read of the same key in this
    /// transaction ended ([`SharedTxn::get_for_update_at`]). A hint from another
    /// database, transaction or table is ignored; a leaf that no longer holds the key (it
    /// split meanwhile) costs a descent.
    pub fn update_at(&self, table: TableId, key: &[u8], value: &[u8], at: LeafHint) -> Result<()> {
        match self.write_at(table, key, Modify::Update(value), at)? {
            Outcome::Missing => Err(Error::NotFound),
            _ => Ok(()),
        }
    }

    /// Inserts or replaces.
    pub fn put(&self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(table, key, Modify::Put(value)).map(|_| ())
    }

    /// Deletes `key`; returns whether it existed.
    pub fn delete(&self, table: TableId, key: &[u8]) -> Result<bool> {
        Ok(self.write(table, key, Modify::Delete)? == Outcome::Done)
    }

    /// Calls `f` with each entry whose key is in `[lo, hi)` (no upper bound if
    /// `hi` is `None`), in key order, until it returns `false`; each entry is
    /// share-locked first and read again if it may have changed meanwhile, as
    /// a [`Txn::scan`] cursor does (phantoms are not prevented). `f` runs with
    /// the entry's leaf pinned, not latched.
    pub fn scan(
        &self,
        table: TableId,
        lo: &[u8],
        hi: Option<&[u8]>,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let root = self.open_table(table)?;
        let store = &self.db.store;
        let hi = hi.map_or(Bound::Unbounded, Bound::Excluded);
        let mut state = CursorState::open(store, root, Bound::Included(lo), hi)?;
        let (mut key, mut value) = (Vec::new(), Vec::new());
        // A panic in `f` unwinds through here: the pinned leaf is unpinned when
        // the cursor's state drops.
        let result = loop {
            match state.next(store, &mut key, &mut value) {
                Ok(true) => {}
                Ok(false) => break Ok(()),
                Err(e) => break Err(e),
            }
            let waited = match self.lock_in(root, &key, LockMode::Shared) {
                Ok(w) => w,
                Err(e) => break Err(e),
            };
            if waited || !state.entry_unchanged() {
                value.clear();
                match store.get(root, &key, &mut value, &mut 0) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => break Err(e),
                }
            }
            match f(&key, &value) {
                Ok(true) => {}
                Ok(false) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        state.close(store);
        result
    }

    /// Undoes one acquisition of the record lock on `(table, key)` (the undo
    /// of a speculative read's lock); the lock is released when no
    /// acquisition remains.
    ///
    /// The acquisition undone is one of this thread's stripe if it has one,
    /// else one of another stripe's (a rollback may run on another thread than
    /// the read). Every stripe's mutex is held meanwhile, in stripe order: no
    /// thread can then be granting the same lock, so the lock is released only
    /// when no stripe counts it any more.
    pub fn unlock_once(&self, table: TableId, key: &[u8]) {
        let name = lock_name(table.0, key);
        let mut all: Vec<_> = self.lent.all().map(spin_lock).collect();
        let mine = stripe() % all.len();
        let order = std::iter::once(mine).chain((0..all.len()).filter(|&i| i != mine));
        let Some(k) = order.into_iter().find(|&i| all[i].locks.counts(name)) else {
            return;
        };
        all[k].locks.uncount(name);
        if !all.iter().any(|l| l.locks.counts(name)) {
            self.db.locks.release_name(self.id, name);
        }
    }

    /// Number of distinct locks the transaction holds.
    pub fn locks_held(&self) -> usize {
        let mut merged = TxnLocks::default();
        for l in self.lent.all() {
            merged.absorb(&spin_lock(l).locks);
        }
        merged.len()
    }
}

impl Drop for SharedTxn<'_, '_> {
    fn drop(&mut self) {
        // The other stripes' sets merged into the lender's (the transaction's own
        // set, whose maps it keeps reusing): each lock once, with every
        // acquisition.
        let Lent {
            mut locks,
            mut tables,
        } = std::mem::take(&mut *spin_lock(self.lent.at(self.lender)));
        for (i, l) in self.lent.all().enumerate() {
            if i == self.lender {
                continue;
            }
            let l = spin_lock(l);
            locks.absorb(&l.locks);
            for &t in &l.tables {
                if !tables.contains(&t) {
                    tables.push(t);
                }
            }
        }
        self.txn
            .0
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .return_locks(locks, tables);
    }
}

/// Tables a lent transaction has open, read by every operation of its threads
/// and written only when one opens a table: a line the cores share, where
/// telling each stripe in turn wrote lines of every stripe.
#[derive(Default)]
struct Opened {
    /// Roots (never 0), filled from the start.
    roots: [AtomicU32; OPENED],
    /// The rest, once `roots` is full (a transaction with that many tables open).
    more: Mutex<Vec<PageId>>,
}

/// Tables [`Opened`] keeps without a lock.
const OPENED: usize = 30;

impl Opened {
    fn contains(&self, root: PageId) -> bool {
        for r in &self.roots {
            match r.load(Ordering::Acquire) {
                0 => return false,
                x if x == root => return true,
                _ => {}
            }
        }
        spin_lock(&self.more).contains(&root)
    }

    fn insert(&self, root: PageId) {
        for r in &self.roots {
            match r.compare_exchange(0, root, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(x) if x == root => return,
                Err(_) => {}
            }
        }
        let mut more = spin_lock(&self.more);
        if !more.contains(&root) {
            more.push(root);
        }
    }
}
