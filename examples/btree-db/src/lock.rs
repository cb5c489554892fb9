//! The record lock manager: shared / exclusive locks on 64-bit lock names
//! (a hash of table and key), strict two-phase locking, deadlock detection on
//! a waits-for graph, and a timeout as a backstop.
//!
//! Each transaction's [`TxnLocks`] counts its acquisitions per lock, so a
//! single acquisition can be undone with [`LockManager::release_one`] (the
//! speculation layer undoes an escaped `acquire` that way); the lock is freed
//! when the count reaches zero.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::buffer::IdMap;
use crate::error::{Error, Result};

/// Lock modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LockMode {
    Shared,
    Exclusive,
}

/// Bits of a lock name that pick its shard (the highest ones).
const SHARD_BITS: u32 = 8;

/// Shards of the lock table. Many, although the machine has few cores: a
/// transaction takes tens of locks, and two threads taking theirs in 16 shards
/// met on the same shard's mutex and map all the time (TPC-C on two threads,
/// whether two terminals or one transaction lent to a speculative loop, spent
/// 1.6 to 3 times as long in the lock manager as on one; with 256 shards the
/// speculative loops' tls/seq ratios improved by 3 to 6% in five alternated runs
/// of `cargo bench -p tpcc --bench speculation`).
const SHARDS: usize = 1 << SHARD_BITS;

/// Room for entries above which a shard's map that has emptied gives its
/// memory back (see `remove_holder`): more than a shard holds at once in
/// steady use, even with several terminals.
const SHRINK_ABOVE: usize = 64;

/// Holders of one lock. Almost always one: kept inline, spilling to a
/// vector only for several shared holders, so granting allocates nothing.
#[derive(Default)]
struct Entry {
    first: Option<(u64, LockMode)>,
    more: Vec<(u64, LockMode)>,
    waiters: u32,
}

impl Entry {
    fn holders(&self) -> impl Iterator<Item = &(u64, LockMode)> {
        self.first.iter().chain(self.more.iter())
    }

    /// Whether another transaction holds the lock in a mode that excludes `mode`.
    fn conflicts(&self, txn: u64, mode: LockMode) -> bool {
        self.holders()
            .any(|&(t, m)| t != txn && (m == LockMode::Exclusive || mode == LockMode::Exclusive))
    }

    fn is_free(&self) -> bool {
        self.first.is_none() && self.more.is_empty()
    }

    fn grant(&mut self, txn: u64, mode: LockMode) {
        if let Some(h) = self
            .first
            .iter_mut()
            .chain(self.more.iter_mut())
            .find(|h| h.0 == txn)
        {
            h.1 = h.1.max(mode);
        } else if self.first.is_none() {
            self.first = Some((txn, mode));
        } else {
            self.more.push((txn, mode));
        }
    }

    fn remove(&mut self, txn: u64) {
        if self.first.is_some_and(|h| h.0 == txn) {
            self.first = self.more.pop();
        } else {
            self.more.retain(|h| h.0 != txn);
        }
    }
}

/// On cache lines of its own: threads working on different shards must not
/// move each other's lines.
#[repr(align(128))]
struct Shard {
    table: Mutex<IdMap<u64, Entry>>,
    cond: Condvar,
}

/// The locks one transaction holds, with acquisition counts.
#[derive(Default)]
pub(crate) struct TxnLocks {
    held: IdMap<u64, (LockMode, u32)>,
    /// Reused by `release_all` to group names by shard.
    sorted: Vec<u64>,
}

impl TxnLocks {
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.held.capacity()
    }

    /// Counts one more acquisition of `name` if it is already held in `mode` or
    /// stronger (no lock manager call needed); `false` otherwise.
    fn count_again(&mut self, name: u64, mode: LockMode) -> bool {
        match self.held.get_mut(&name) {
            Some((held, count)) if *held >= mode => {
                *count += 1;
                true
            }
            _ => false,
        }
    }

    /// Counts an acquisition of `name` in `mode` that the lock manager just
    /// granted (raising the mode held if it is stronger).
    fn count_new(&mut self, name: u64, mode: LockMode) {
        let e = self.held.entry(name).or_insert((mode, 0));
        e.0 = e.0.max(mode);
        e.1 += 1;
    }

    /// Forgets everything (the map keeps its capacity for the next transaction).
    pub(crate) fn clear(&mut self) {
        self.held.clear();
    }

    /// Whether the set counts an acquisition of `name`.
    pub(crate) fn counts(&self, name: u64) -> bool {
        self.held.contains_key(&name)
    }

    /// Removes one acquisition of `name` (which the set counts).
    pub(crate) fn uncount(&mut self, name: u64) {
        if let Some((_, count)) = self.held.get_mut(&name) {
            *count -= 1;
            if *count == 0 {
                self.held.remove(&name);
            }
        }
    }

    /// Adds `other`'s acquisitions: counts summed, the stronger mode kept (two
    /// threads' sets of one lent transaction, see `SharedTxn`).
    pub(crate) fn absorb(&mut self, other: &TxnLocks) {
        for (&name, &(mode, count)) in &other.held {
            let e = self.held.entry(name).or_insert((mode, 0));
            e.0 = e.0.max(mode);
            e.1 += count;
        }
    }
}

/// The lock manager.
pub(crate) struct LockManager {
    shards: Box<[Shard]>,
    /// Waits-for edges of blocked transactions.
    waits_for: Mutex<HashMap<u64, Vec<u64>>>,
    timeout: Duration,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The lock name of a record.
pub(crate) fn lock_name(table: u32, key: &[u8]) -> u64 {
    // FNV-1a then a final mix; collisions only cause extra waiting.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ (table as u64).wrapping_mul(0x100_0000_01b3);
    for &b in key {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// The lock name of one stripe of a whole table's lock. A transaction
/// opening the table takes its own thread's stripe shared; dropping the
/// table takes every stripe exclusive. The stripe is also the name's lock
/// manager shard, so threads on different stripes opening the same table
/// never touch the same shard.
pub(crate) fn table_lock_name(table: u32, stripe: usize) -> u64 {
    let h = lock_name(u32::MAX, &table.to_le_bytes());
    let low = 64 - SHARD_BITS;
    ((stripe % SHARDS) as u64) << low | (h & ((1 << low) - 1))
}

/// The longest lock wait: longer timeouts (`Duration::MAX` for "wait as long
/// as it takes") are cut to it, so that a deadline is always a time the clock
/// can hold.
const LONGEST_WAIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl LockManager {
    pub(crate) fn new(timeout: Duration) -> LockManager {
        let timeout = timeout.min(LONGEST_WAIT);
        LockManager {
            shards: (0..SHARDS)
                .map(|_| Shard {
                    table: Mutex::new(IdMap::default()),
                    cond: Condvar::new(),
                })
                .collect(),
            waits_for: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    fn shard(&self, name: u64) -> &Shard {
        &self.shards[shard_of(name)]
    }

    /// Acquires `name` in `mode` for transaction `txn`, waiting if needed.
    /// Returns whether it had to wait (the caller re-reads what it read before).
    pub(crate) fn acquire(
        &self,
        txn: u64,
        locks: &mut TxnLocks,
        name: u64,
        mode: LockMode,
    ) -> Result<bool> {
        if locks.count_again(name, mode) {
            return Ok(false);
        }
        // Read the clock only once we have to wait.
        self.wait_for(txn, name, mode, None, Some(locks))
    }

    /// Waits until `name` can be granted to `txn` in `mode` (deadlock detection;
    /// until `deadline`, or the timeout from the first wait when `None`). With
    /// `grant`, grants it and counts it there; without, leaves it to the caller
    /// to try again. Returns whether it had to wait.
    fn wait_for(
        &self,
        txn: u64,
        name: u64,
        mode: LockMode,
        mut deadline: Option<Instant>,
        grant: Option<&mut TxnLocks>,
    ) -> Result<bool> {
        let shard = self.shard(name);
        let mut table = lock(&shard.table);
        let mut waited = false;
        loop {
            let entry = table.entry(name).or_default();
            if !entry.conflicts(txn, mode) {
                if waited {
                    entry.waiters -= 1;
                    lock(&self.waits_for).remove(&txn);
                }
                match grant {
                    Some(locks) => {
                        entry.grant(txn, mode);
                        locks.count_new(name, mode);
                    }
                    None if entry.is_free() && entry.waiters == 0 => {
                        table.remove(&name);
                    }
                    None => {}
                }
                return Ok(waited);
            }
            let blockers: Vec<u64> = entry.holders().map(|h| h.0).filter(|&t| t != txn).collect();
            if !waited {
                entry.waiters += 1;
                waited = true;
            }
            if self.would_deadlock(txn, blockers) {
                return Err(self.give_up(&mut table, name, txn, Error::Deadlock));
            }
            let now = Instant::now();
            let deadline = *deadline.get_or_insert(now + self.timeout);
            if now >= deadline {
                return Err(self.give_up(&mut table, name, txn, Error::LockTimeout));
            }
            // Wake periodically: the waits-for graph changes as others block.
            let wait = (deadline - now).min(Duration::from_millis(20));
            table = shard
                .cond
                .wait_timeout(table, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn give_up(&self, table: &mut IdMap<u64, Entry>, name: u64, txn: u64, e: Error) -> Error {
        lock(&self.waits_for).remove(&txn);
        if let Some(entry) = table.get_mut(&name) {
            entry.waiters -= 1;
            if entry.is_free() && entry.waiters == 0 {
                table.remove(&name);
            }
        }
        e
    }

    /// Records `txn -> blockers` and reports whether that closes a cycle.
    fn would_deadlock(&self, txn: u64, blockers: Vec<u64>) -> bool {
        let mut g = lock(&self.waits_for);
        g.insert(txn, blockers);
        let mut stack: Vec<u64> = g.get(&txn).cloned().unwrap_or_default();
        let mut seen = std::collections::HashSet::new();
        while let Some(t) = stack.pop() {
            if t == txn {
                return true;
            }
            if seen.insert(t)
                && let Some(next) = g.get(&t)
            {
                stack.extend_from_slice(next);
            }
        }
        false
    }

    /// Grants `name` in `mode` to `txn` and counts the acquisition in `locks` if
    /// nothing conflicts; `false`, changing nothing, if another transaction's lock
    /// does. With [`LockManager::wait_grantable`], the form of `acquire` for a
    /// lock set behind a mutex that must not be held while waiting
    /// ([`crate::SharedTxn`]).
    pub(crate) fn try_acquire(
        &self,
        txn: u64,
        locks: &mut TxnLocks,
        name: u64,
        mode: LockMode,
    ) -> bool {
        if locks.count_again(name, mode) {
            return true;
        }
        let mut table = lock(&self.shard(name).table);
        let entry = table.entry(name).or_default();
        if entry.conflicts(txn, mode) {
            if entry.is_free() && entry.waiters == 0 {
                table.remove(&name);
            }
            return false;
        }
        entry.grant(txn, mode);
        locks.count_new(name, mode);
        true
    }

    /// Waits, as `acquire` does (deadlock detection, until `deadline`), until
    /// `name` could be granted to `txn` in `mode`, without granting it: the
    /// caller then tries again with [`LockManager::try_acquire`].
    pub(crate) fn wait_grantable(
        &self,
        txn: u64,
        name: u64,
        mode: LockMode,
        deadline: Instant,
    ) -> Result<()> {
        self.wait_for(txn, name, mode, Some(deadline), None)
            .map(|_| ())
    }

    /// How long a lock wait may last.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Locks held or waited for right now, by any transaction (for tests).
    pub(crate) fn entries(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.table.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    /// Undoes one acquisition of `name`; frees the lock when none remain.
    pub(crate) fn release_one(&self, txn: u64, locks: &mut TxnLocks, name: u64) {
        let Some((_, count)) = locks.held.get_mut(&name) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            locks.held.remove(&name);
            self.unlock(txn, name);
        }
    }

    /// Releases every lock of the transaction (commit / abort), one visit
    /// per shard: each shard's lock and map are touched once, however many
    /// of the transaction's locks live there.
    pub(crate) fn release_all(&self, txn: u64, locks: &mut TxnLocks) {
        let mut by_shard = std::mem::take(&mut locks.sorted);
        by_shard.clear();
        by_shard.extend(locks.held.drain().map(|(name, _)| name));
        by_shard.sort_unstable_by_key(|&n| shard_of(n));
        for group in by_shard.chunk_by(|a, b| shard_of(*a) == shard_of(*b)) {
            let shard = &self.shards[shard_of(group[0])];
            let mut table = lock(&shard.table);
            let mut notify = false;
            for &name in group {
                notify |= remove_holder(&mut table, txn, name);
            }
            drop(table);
            if notify {
                shard.cond.notify_all();
            }
        }
        locks.sorted = by_shard;
    }

    /// Releases `txn`'s lock on `name`, whatever it counted (the caller's
    /// sets no longer count it).
    pub(crate) fn release_name(&self, txn: u64, name: u64) {
        self.unlock(txn, name);
    }

    fn unlock(&self, txn: u64, name: u64) {
        let shard = self.shard(name);
        let notify = remove_holder(&mut lock(&shard.table), txn, name);
        if notify {
            shard.cond.notify_all();
        }
    }
}

/// The shard a lock name lives in (high bits: the shard's hash map buckets
/// on the low bits).
fn shard_of(name: u64) -> usize {
    (name >> (64 - SHARD_BITS)) as usize
}

/// Removes `txn` from the holders of `name`; returns whether anyone waits.
fn remove_holder(table: &mut IdMap<u64, Entry>, txn: u64, name: u64) -> bool {
    let Some(entry) = table.get_mut(&name) else {
        return false;
    };
    entry.remove(txn);
    let notify = entry.waiters > 0;
    if entry.is_free() && entry.waiters == 0 {
        table.remove(&name);
        // Maps never shrink by themselves; after a bulk load a sparse,
        // huge map would make every probe a cache miss. The bound is per
        // shard: a transaction's tens of locks spread over all of them, so a
        // shard holds a few at a time (after TPC-C's load the shards had
        // room for 111,452 entries in all, 435 each, about 6.5 MB that
        // every lock afterwards probed at a random place: a cache miss or
        // two per lock, 12% of a sequential run's time).
        if table.is_empty() && table.capacity() > SHRINK_ABOVE {
            table.shrink_to(0);
        }
    }
    notify
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transaction that held many locks (a bulk load's) leaves no sparse,
    /// huge shard map behind once it releases them: every later lock would
    /// probe it at a random place, a cache miss. With 256 shards each held a
    /// few hundred entries' room, under the old per-shard bound of 4,096.
    #[test]
    fn releasing_many_locks_gives_the_shards_memory_back() {
        let m = LockManager::new(Duration::from_secs(1));
        let mut locks = TxnLocks::default();
        for i in 0..100_000u32 {
            let name = lock_name(1, &i.to_le_bytes());
            m.acquire(7, &mut locks, name, LockMode::Exclusive).unwrap();
        }
        let room = |m: &LockManager| -> Vec<usize> {
            m.shards.iter().map(|s| lock(&s.table).capacity()).collect()
        };
        assert!(room(&m).iter().sum::<usize>() >= 100_000);
        m.release_all(7, &mut locks);
        let after = room(&m);
        assert!(
            after.iter().all(|&c| c <= SHRINK_ABOVE),
            "a shard kept room for {} entries",
            after.iter().max().unwrap()
        );
    }
}
