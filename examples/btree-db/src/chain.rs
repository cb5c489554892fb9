//! A transaction's undo chain: the LSN of its last log record and the entries
//! that undo its changes, in the order of their records.
//!
//! A transaction on one thread keeps them in its buffers. A transaction lent
//! to several threads ([`crate::SharedTxn`]) moves them into a [`Chain`] that
//! its threads share without a lock of the transaction's own:
//!
//! - the last LSN is read and advanced by the log itself, under the lock it
//!   appends under ([`crate::wal::Wal::append_with_images`] with a link), so
//!   each record's `prev` is the record before it in log order however the
//!   threads interleave;
//! - each thread stripe keeps the undo entries of its own changes, and the
//!   stripes are merged in record order (by `prev_lsn`, which the chain
//!   makes distinct and increasing) when the transaction takes the chain
//!   back. An abort walks the merged entries newest first and logs each
//!   compensation's undo-next from them; out of order, a crash in the middle
//!   of an abort would skip a change.
//!
//! The descent, the page latch, the record's construction and the undo entry
//! all happen outside any shared lock, so changes to different pages of one
//! transaction meet only in the log's append. (An earlier form held one
//! mutex per transaction from reading `prev` to recording the undo entry;
//! two threads writing spent much of their time waiting on it.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use crate::stripes::Striped;

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
pub(crate) struct Chain {
    /// The transaction's last LSN (the next record's `prev`): read and
    /// advanced only by the log, under its append lock.
    pub(crate) last: AtomicU64,
    /// Undo entries per thread stripe, each in the order of its records.
    parts: Striped<Mutex<UndoPart>>,
}

/// One stripe's undo entries and the bytes they point into.
#[derive(Default)]
struct UndoPart {
    undo: Vec<UndoEntry>,
    arena: Vec<u8>,
}

impl Chain {
    /// A chain that starts where a transaction's own buffers are: its last
    /// LSN and undo entries so far (kept in this thread's stripe).
    pub(crate) fn new(last: u64, undo: Vec<UndoEntry>, arena: Vec<u8>) -> Chain {
        let chain = Chain {
            last: AtomicU64::new(last),
            parts: Striped::default(),
        };
        *spin_lock(chain.parts.mine()) = UndoPart { undo, arena };
        chain
    }

    /// Records, in this thread's stripe, the undo of a change whose record's
    /// `prev` is `prev_lsn`.
    pub(crate) fn push(&self, table: PageId, key: &[u8], old: Option<&[u8]>, prev_lsn: u64) {
        let mut part = spin_lock(self.parts.mine());
        let UndoPart { undo, arena } = &mut *part;
        push_undo(undo, arena, table, key, old, prev_lsn);
    }

    /// Takes the chain back: the last LSN, and every stripe's undo entries
    /// merged in the order of their records (with the arena they point
    /// into). Leaves the chain empty.
    pub(crate) fn take(&self) -> (u64, Vec<UndoEntry>, Vec<u8>) {
        let last = self.last.load(Ordering::Acquire);
        let mut parts: Vec<UndoPart> = self
            .parts
            .all()
            .map(|p| std::mem::take(&mut *spin_lock(p)))
            .filter(|p| !p.undo.is_empty())
            .collect();
        // One stripe wrote (or none) and its entries are in order: as they are.
        // (Threads that share a stripe may push in another order than they
        // appended.)
        let in_order = |p: &UndoPart| p.undo.is_sorted_by_key(|e| e.prev_lsn);
        if parts.len() <= 1 && parts.iter().all(in_order) {
            let UndoPart { undo, arena } = parts.pop().unwrap_or_default();
            return (last, undo, arena);
        }
        let mut order: Vec<(u64, usize, usize)> = parts
            .iter()
            .enumerate()
            .flat_map(|(p, part)| {
                part.undo
                    .iter()
                    .enumerate()
                    .map(move |(i, e)| (e.prev_lsn, p, i))
            })
            .collect();
        order.sort_unstable();
        let bytes = parts.iter().map(|p| p.arena.len()).sum();
        let (mut undo, mut arena) = (Vec::with_capacity(order.len()), Vec::with_capacity(bytes));
        for (_, p, i) in order {
            let (e, src) = (&parts[p].undo[i], &parts[p].arena);
            let bytes = |(start, len): (u32, u32)| &src[start as usize..(start + len) as usize];
            let old = e.old.map(bytes);
            push_undo(
                &mut undo,
                &mut arena,
                e.table,
                bytes(e.key),
                old,
                e.prev_lsn,
            );
        }
        (last, undo, arena)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(arena: &[u8], e: &UndoEntry) -> u64 {
        let (s, l) = e.key;
        u64::from_be_bytes(arena[s as usize..(s + l) as usize].try_into().unwrap())
    }

    /// Entries from before the loan, then entries pushed from several threads (each
    /// in an order of its own, as threads that share a stripe may push): taken back
    /// in the order of their records, each with its own key and old value.
    #[test]
    fn taking_the_chain_merges_every_stripe_in_record_order() {
        let (mut undo, mut arena) = (Vec::new(), Vec::new());
        for lsn in [1u64, 2, 3] {
            push_undo(&mut undo, &mut arena, 7, &lsn.to_be_bytes(), None, lsn);
        }
        let chain = Chain::new(3, undo, arena);
        std::thread::scope(|s| {
            for th in 0..5u64 {
                let chain = &chain;
                s.spawn(move || {
                    let mut lsns: Vec<u64> = (0..5).map(|k| 10 + th + 5 * k).collect();
                    if th % 2 == 1 {
                        lsns.reverse();
                    }
                    for lsn in lsns {
                        let old = [lsn as u8; 5];
                        let old = (lsn % 3 != 0).then_some(&old[..]);
                        chain.push(7, &lsn.to_be_bytes(), old, lsn);
                    }
                });
            }
        });
        // This thread's own stripe, out of order too.
        chain.push(7, &41u64.to_be_bytes(), None, 41);
        chain.push(7, &40u64.to_be_bytes(), None, 40);
        let (last, undo, arena) = chain.take();
        assert_eq!(last, 3, "the log advances `last`, pushes do not");
        let lsns: Vec<u64> = undo.iter().map(|e| e.prev_lsn).collect();
        let want: Vec<u64> = [1, 2, 3]
            .into_iter()
            .chain(10..35)
            .chain([40, 41])
            .collect();
        assert_eq!(lsns, want);
        for e in &undo {
            assert_eq!(key_of(&arena, e), e.prev_lsn);
            let lsn = e.prev_lsn;
            let old = e
                .old
                .map(|(s, l)| arena[s as usize..(s + l) as usize].to_vec());
            let want = ((10..40).contains(&lsn) && lsn % 3 != 0).then(|| vec![lsn as u8; 5]);
            assert_eq!(old, want, "old value of {lsn}");
        }
        assert!(chain.take().1.is_empty(), "taking leaves the chain empty");
    }
}
