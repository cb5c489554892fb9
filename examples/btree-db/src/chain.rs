//! A transaction's undo chain: the LSN of its last log record and the entries
//! that undo its changes, newest last.
//!
//! A transaction on one thread keeps them in its buffers. A transaction lent
//! to several threads ([`crate::SharedTxn`]) moves them behind a mutex that
//! each change takes only around its log append: the record's `prev` link, the
//! append and the undo entry must be one step, so that the entries stay in
//! the order of the records they undo (an abort walks them newest first and
//! logs each compensation's undo-next from them; out of order, a crash in the
//! middle of an abort would skip a change). The descent, the page latch and
//! the change to the page happen outside it, so changes to different pages
//! of one transaction proceed in parallel.

use std::sync::{Mutex, MutexGuard, TryLockError};

use crate::error::PageId;

/// How many times a thread tries a mutex before it sleeps on it (tens of
/// microseconds of spinning).
const SPINS: u32 = 4096;

/// Locks `m`, spinning first: the holders of the mutexes a lent transaction
/// uses are the loop's other threads, in for microseconds, and a thread put to
/// sleep takes tens of microseconds to wake on a small machine. A poisoned
/// mutex is taken as it is: a panic inside a call leaves the transaction as a
/// failed call on one thread would, and the caller aborts it.
pub(crate) fn spin_lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    for _ in 0..SPINS {
        match m.try_lock() {
            Ok(g) => return g,
            Err(TryLockError::Poisoned(e)) => return e.into_inner(),
            Err(TryLockError::WouldBlock) => std::hint::spin_loop(),
        }
    }
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One change to undo: slices of the transaction's undo arena.
pub(crate) struct UndoEntry {
    pub(crate) table: PageId,
    pub(crate) key: (u32, u32),
    /// `None` if the key did not exist before.
    pub(crate) old: Option<(u32, u32)>,
    /// The LSN before the change's record (a compensation's undo-next).
    pub(crate) prev_lsn: u64,
}

/// The undo chain of a transaction lent to several threads.
#[derive(Default)]
pub(crate) struct Chain {
    /// The transaction's last LSN (the next record's `prev`).
    pub(crate) prev: u64,
    pub(crate) undo: Vec<UndoEntry>,
    /// The bytes `undo` points into.
    pub(crate) arena: Vec<u8>,
}

/// Records the undo of a change whose record was logged at `prev_lsn`'s
/// successor, into `undo` and `arena` (a transaction's own buffers, or a
/// [`Chain`]'s).
pub(crate) fn push_undo(
    undo: &mut Vec<UndoEntry>,
    arena: &mut Vec<u8>,
    table: PageId,
    key: &[u8],
    old: Option<&[u8]>,
    prev_lsn: u64,
) {
    let mut stash = |b: &[u8]| {
        let start = arena.len() as u32;
        arena.extend_from_slice(b);
        (start, b.len() as u32)
    };
    let key = stash(key);
    let old = old.map(&mut stash);
    undo.push(UndoEntry {
        table,
        key,
        old,
        prev_lsn,
    });
}
