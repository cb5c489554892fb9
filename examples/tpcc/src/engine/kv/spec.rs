//! The rows a speculative loop body sees: the transaction's rows, tracked key by key
//! by the speculation runtime.
//!
//! A loop inside a transaction (New Order's items, Stock Level's items) runs its
//! iterations as ordered epochs on several threads. Each epoch reads and writes rows
//! through [`SpecRows`], which keeps every row the loop writes in a [`SpecMap`] keyed by
//! (table, key), the *overlay*:
//!
//! - a read looks in the overlay first (the epoch's own write, else the newest write
//!   of an earlier epoch, else what a committed epoch wrote) and only then reads the
//!   store. The overlay lookup is a tracked read even when the row is absent, so an
//!   earlier epoch that writes the row afterwards violates this one, which re-runs;
//! - a write goes into the overlay (a tracked write) and is applied to the store when
//!   the epoch commits, in loop order ([`Accumulator`]). The oldest epoch runs as
//!   plain code once it writes, so its writes reach the store at once, while later
//!   epochs still speculate.
//!
//! So the store only ever holds committed epochs' writes, and a read that fell
//! through to the store is checked by the overlay's tracking. Locks are taken by the
//! store as the sequential transaction takes them (a shared or exclusive lock on
//! each row read, an exclusive one on each row written), all held to the end of the
//! transaction, so several transactions at once stay serializable.
//!
//! Range scans of a written table are tracked by *bucket*: the loop declares, per
//! table it scans, how long a key prefix one scan stays within (Delivery scans one
//! district's NEW-ORDER rows: the `(w_id, d_id)` prefix). The overlay keeps, per
//! bucket, the keys the loop inserted or deleted in it (a tracked location of its
//! own); a scan reads that set (so an earlier epoch's insert or delete in the range
//! violates it), walks the store's rows of the range, and merges the two in key
//! order, each row it hands on read through the overlay like a point read (so an
//! earlier epoch's later change to that row violates it too). A scan of a written
//! table that was not declared, or that spans several buckets, is an error, never
//! an answer from the store alone; scans of tables the loop does not write go
//! straight to the store.
//!
//! The book's journey also runs the overlay with page-grained tracking
//! ([`Grain::Page`], see `journey.rs`): each row access is then also an access to a
//! per-page version, as a page-based DBMS would see it. The row operations are
//! `#[track_caller]`, so a report names the loop body's line that read or wrote a row,
//! not a line of this file.

use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow, bail};
use tls_runtime::{Accumulator, SpecMap};

use super::journey::{Grain, page_key};
use super::row_key::{FoldSeed, RowKey};
use super::{KvOps, SharedKv, Table};

/// Where a thread's latest reads for update found their rows, by the row's fold
/// ([`RowKey`]'s hash) alone, newest last: the hints only, so a row whose fold
/// collides with another's, or that fell out, costs its write a descent, nothing
/// more. A write follows its own read on its own thread (every TPC-C loop reads a
/// row for update right before it writes it), so a few recent reads are enough: a
/// hash map here, inserted into on every read and grown per loop, was about 2% of
/// a speculative Delivery's instructions.
struct FoundRing<F> {
    rows: [(u64, F); FOUND_RING],
    next: usize,
}

impl<F: Copy + Default> FoundRing<F> {
    fn note(&mut self, fold: u64, at: F) {
        self.rows[self.next % FOUND_RING] = (fold, at);
        self.next = self.next.wrapping_add(1);
    }

    /// The newest hint for `fold`.
    fn get(&self, fold: u64) -> Option<F> {
        (1..=FOUND_RING.min(self.next))
            .map(|back| &self.rows[self.next.wrapping_sub(back) % FOUND_RING])
            .find(|(f, _)| *f == fold)
            .map(|&(_, at)| at)
    }
}

/// Reads for update a thread's [`FoundRing`] remembers.
const FOUND_RING: usize = 8;

/// One thread stripe's [`FoundRing`], alone on its cache lines.
#[repr(align(128))]
struct FoundAt<F>(Mutex<FoundRing<F>>);

impl<F: Copy + Default> Default for FoundAt<F> {
    fn default() -> Self {
        FoundAt(Mutex::new(FoundRing {
            rows: [(0, F::default()); FOUND_RING],
            next: 0,
        }))
    }
}

/// Rows the overlay makes room for when it is made: New Order writes about 20, so its
/// tables need not grow (Delivery's ~130 still grow them; starting here took the
/// table growth of a Delivery run in order from ~20,000 to ~12,000 instructions of
/// ~1,130,000).
const OVERLAY_AT_FIRST: usize = 64;

/// Stripes of `found_at` (threads beyond it share).
const FOUND_AT_STRIPES: usize = 16;

/// This thread's stripe number: threads take numbers in the order they first ask.
fn thread_stripe() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    STRIPE.with(|s| *s)
}

/// A row as the overlay holds it: its value, or `None` once deleted.
type Row = Option<Arc<[u8]>>;

/// The keys a loop inserted or deleted in one bucket, in order.
type Members = Arc<Vec<Box<[u8]>>>;

/// What a write does to the store when its epoch commits.
#[derive(Clone, Copy)]
enum WriteKind<F> {
    Insert,
    /// With where the store found the row when the loop read it.
    Update(F),
    Delete,
}

/// Applies committed epochs' writes to the store; keeps the first failure, after which
/// the transaction is aborted.
pub struct Applier<'r, S: SharedKv> {
    tx: &'r S,
    failed: Option<anyhow::Error>,
}

impl<S: SharedKv> Applier<'_, S> {
    fn apply(&mut self, kind: WriteKind<S::Found>, key: RowKey, value: Row) {
        if self.failed.is_some() {
            return;
        }
        let (t, k) = (key.table, key.key());
        let done = match (kind, value) {
            (WriteKind::Insert, Some(v)) => self.tx.insert(t, k, &v),
            (WriteKind::Update(hint), Some(v)) => self.tx.update_at(t, k, &v, hint),
            (WriteKind::Delete, None) => self.tx.delete(t, k),
            _ => Err(anyhow!("a speculative write lost its value")),
        };
        if let Err(e) = done {
            self.failed = Some(e);
        }
    }
}

/// The transaction's rows as speculative loop bodies see them (see the module docs).
/// `&SpecRows` is a [`KvOps`], so a loop body takes it where the sequential code takes
/// the transaction.
pub struct SpecRows<'a, 'r, S: SharedKv> {
    tx: &'r S,
    /// The tables the loop may write: only their rows go through the overlay.
    writes: &'a [Table],
    /// The written tables the loop scans, each with its bucket's prefix length.
    scans: &'a [(Table, usize)],
    /// Per bucket, the keys the loop inserted or deleted in it, in order.
    buckets: SpecMap<RowKey, Members, FoldSeed>,
    /// Threads per loop.
    threads: usize,
    overlay: SpecMap<RowKey, Row, FoldSeed>,
    /// How finely rows are tracked.
    grain: Grain,
    /// With [`Grain::Page`], each page's version: a row read reads it, a row write
    /// reads and bumps it.
    pages: SpecMap<RowKey, u64, FoldSeed>,
    sink: &'a Accumulator<'a, Applier<'r, S>>,
    /// Where rows read for update were found, for their write at commit (only a
    /// hint: a wrong or missing one costs the store a lookup, so it needs no
    /// tracking). One ring per thread stripe: an epoch's write follows its own read
    /// on its own thread, and one both threads locked on every row moved its
    /// lines between their cores each time.
    found_at: Box<[FoundAt<S::Found>]>,
}

/// Runs `f` (which runs speculative loops over the rows) with a fresh overlay over
/// `tx`. Every write of a committed epoch has been applied to `tx` when it returns; the
/// first write that failed is the error, else `f`'s result.
///
/// `writes` names the tables the loop writes. Rows of other tables cannot change while
/// the loop runs (other transactions are kept out by the locks), so reading them needs
/// no tracking and goes straight to the store; a write to one of them is an error,
/// never an untracked change. `scans` names the written tables the loop scans, each
/// with the length of the key prefix a scan stays within (see the module docs).
/// `threads` is the loops' thread count (`None`: the runtime's default); `grain`, how
/// finely rows are tracked ([`Grain::Row`] but in the book's journey).
pub fn with_spec_rows<'r, S: SharedKv, R>(
    tx: &'r S,
    writes: &[Table],
    scans: &[(Table, usize)],
    threads: Option<usize>,
    grain: Grain,
    f: impl for<'a> FnOnce(&SpecRows<'a, 'r, S>) -> Result<R>,
) -> Result<R> {
    let mut applier = Applier { tx, failed: None };
    let result = {
        // SAFETY: the accumulator lives in this block and every loop that records into
        // it runs inside `f`, so it outlives them (`Accumulator::new`'s contract).
        let sink = unsafe { Accumulator::new(&mut applier) };
        let seed = FoldSeed::random();
        let rows = SpecRows {
            tx,
            writes,
            scans,
            buckets: SpecMap::with_hasher(seed),
            threads: threads.unwrap_or_else(tls_runtime::default_threads),
            overlay: SpecMap::with_capacity_and_hasher(OVERLAY_AT_FIRST, seed),
            grain,
            pages: SpecMap::with_hasher(seed),
            sink: &sink,
            found_at: (0..FOUND_AT_STRIPES).map(|_| FoundAt::default()).collect(),
        };
        f(&rows)
    };
    match applier.failed {
        Some(e) => Err(e.context("applying a speculative epoch's writes at its commit")),
        None => result,
    }
}

impl<S: SharedKv> SpecRows<'_, '_, S> {
    /// This thread's ring of where rows read for update were found.
    fn found_at(&self) -> std::sync::MutexGuard<'_, FoundRing<S::Found>> {
        self.found_at[thread_stripe() % FOUND_AT_STRIPES]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The threads each loop over these rows runs on.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How finely these rows are tracked.
    pub fn grain(&self) -> Grain {
        self.grain
    }

    fn tracks(&self, table: Table) -> bool {
        self.writes.contains(&table)
    }

    /// With [`Grain::Page`], reads the version of `key`'s page, and bumps it if
    /// `write`: what a page-based store's tracking would see of a row access.
    #[track_caller]
    fn touch_page(&self, table: Table, key: &[u8], write: bool) -> Result<()> {
        if self.grain == Grain::Page {
            let mut buf = [0; 64];
            let page = RowKey::new(table, page_key(key, &mut buf))?;
            let version = self.pages.with(&page, |v| v.copied().unwrap_or(0));
            if write {
                self.pages.insert(page, version + 1);
            }
        }
        Ok(())
    }

    #[track_caller]
    fn read(&self, table: Table, key: &[u8], out: &mut Vec<u8>, for_update: bool) -> Result<bool> {
        if !self.tracks(table) {
            return self.store_read(table, key, out, for_update);
        }
        self.touch_page(table, key, false)?;
        let k = RowKey::new(table, key)?;
        let seen = self.overlay.with(&k, |row| {
            let row = row?;
            if let Some(v) = row {
                out.clear();
                out.extend_from_slice(v);
            }
            Some(row.is_some())
        });
        match seen {
            Some(found) => Ok(found),
            None if for_update => {
                let (found, at) = self.tx.get_for_update_at(table, key, out)?;
                self.found_at().note(k.fold, at);
                Ok(found)
            }
            None => self.tx.get(table, key, out),
        }
    }

    /// The bucket prefix length of a scanned table.
    fn bucket_len(&self, table: Table) -> Option<usize> {
        self.scans
            .iter()
            .find(|(t, _)| *t == table)
            .map(|&(_, p)| p)
    }

    /// Records an insert or delete of `key` in its bucket, if `table` is scanned.
    #[track_caller]
    fn note_member(&self, table: Table, key: &[u8]) -> Result<()> {
        let Some(p) = self.bucket_len(table) else {
            return Ok(());
        };
        let prefix = key.get(..p).ok_or_else(|| {
            anyhow!(
                "a {}-byte key of {} is shorter than its scan buckets",
                key.len(),
                table.name()
            )
        })?;
        let bucket = RowKey::new(table, prefix)?;
        let members = self
            .buckets
            .with(&bucket, |m| m.cloned())
            .unwrap_or_default();
        if let Err(at) = members.binary_search_by(|m| (**m).cmp(key)) {
            let mut grown = Vec::clone(&members);
            grown.insert(at, key.into());
            self.buckets.insert(bucket, Arc::new(grown));
        }
        Ok(())
    }

    /// A tracked scan of `[from, to)` of a written table (see the module docs).
    #[track_caller]
    fn scan_tracked<F>(&self, table: Table, from: &[u8], to: Option<&[u8]>, mut f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<bool>,
    {
        let Some(p) = self.bucket_len(table) else {
            bail!(
                "a speculative loop scanned {}, which it writes, without declaring the scan; \
                 add it to the loop's `with_spec_rows` scans",
                table.name()
            );
        };
        let to = match to {
            Some(to) if within_one_bucket(from, to, p) => to,
            _ => bail!(
                "a scan of {} inside a speculative loop must stay within one {p}-byte key \
                 prefix (its bucket)",
                table.name()
            ),
        };
        let members = self
            .buckets
            .with(&RowKey::new(table, &from[..p])?, |m| m.cloned())
            .unwrap_or_default();
        let (lo, hi) = (
            members.partition_point(|m| &**m < from),
            members.partition_point(|m| &**m < to),
        );
        let mut pending = members[lo..hi].iter().map(|m| &**m).peekable();
        // A row as the loop sees it: the overlay's version, if it has one.
        let seen = |k: &[u8]| -> Result<Option<Row>> {
            self.touch_page(table, k, false)?;
            Ok(self.overlay.with(&RowKey::new(table, k)?, |r| r.cloned()))
        };
        let mut stopped = false;
        self.tx.scan(table, from, Some(to), |k, v| {
            // Rows the loop inserted before this one.
            while let Some(m) = pending.next_if(|m| *m < k) {
                if let Some(Some(v)) = seen(m)?
                    && !f(m, &v)?
                {
                    stopped = true;
                    return Ok(false);
                }
            }
            pending.next_if(|m| *m == k);
            let more = match seen(k)? {
                None => f(k, v)?,
                Some(None) => true,
                Some(Some(v)) => f(k, &v)?,
            };
            stopped = !more;
            Ok(more)
        })?;
        if !stopped {
            for m in pending {
                if let Some(Some(v)) = seen(m)?
                    && !f(m, &v)?
                {
                    break;
                }
            }
        }
        Ok(())
    }

    fn store_read(
        &self,
        table: Table,
        key: &[u8],
        out: &mut Vec<u8>,
        for_update: bool,
    ) -> Result<bool> {
        if for_update {
            self.tx.get_for_update(table, key, out)
        } else {
            self.tx.get(table, key, out)
        }
    }

    #[track_caller]
    fn write(
        &self,
        kind: WriteKind<S::Found>,
        table: Table,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<()> {
        if !self.tracks(table) {
            bail!(
                "a speculative loop wrote {}, which is not among the tables it declared it \
                 writes; add it to the loop's `with_spec_rows` tables",
                table.name()
            );
        }
        let k = RowKey::new(table, key)?;
        let kind = match kind {
            WriteKind::Update(_) => {
                WriteKind::Update(self.found_at().get(k.fold).unwrap_or_default())
            }
            other => other,
        };
        if !matches!(kind, WriteKind::Update(_)) {
            self.note_member(table, key)?;
        }
        self.touch_page(table, key, true)?;
        let row: Row = value.map(Arc::from);
        self.overlay.insert(k, row.clone());
        self.sink.record(move |a| a.apply(kind, k, row));
        Ok(())
    }
}

impl<S: SharedKv> KvOps for &SpecRows<'_, '_, S> {
    #[track_caller]
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.read(table, key, out, false)
    }

    #[track_caller]
    fn get_for_update(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.read(table, key, out, true)
    }

    #[track_caller]
    fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(WriteKind::Insert, table, key, Some(value))
    }

    #[track_caller]
    fn update(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(
            WriteKind::Update(S::Found::default()),
            table,
            key,
            Some(value),
        )
    }

    #[track_caller]
    fn delete(&mut self, table: Table, key: &[u8]) -> Result<()> {
        self.write(WriteKind::Delete, table, key, None)
    }

    #[track_caller]
    fn scan<F>(&mut self, table: Table, from: &[u8], to: Option<&[u8]>, f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<bool>,
    {
        if self.tracks(table) {
            self.scan_tracked(table, from, to, f)
        } else {
            self.tx.scan(table, from, to, f)
        }
    }
}

/// Whether every key in `[from, to)` has `from`'s first `p` bytes: `to` has them
/// too, or is the first key of the next such prefix.
fn within_one_bucket(from: &[u8], to: &[u8], p: usize) -> bool {
    let (Some(a), Some(b)) = (from.get(..p), to.get(..p)) else {
        return false;
    };
    if a == b {
        return true;
    }
    // `a` plus one, big-endian, must be `b`, and `to` nothing more.
    let mut next = a.to_vec();
    for byte in next.iter_mut().rev() {
        let (v, carry) = byte.overflowing_add(1);
        *byte = v;
        if !carry {
            return next == b && to[p..].iter().all(|&x| x == 0);
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{FOUND_RING, FoundAt, within_one_bucket};

    /// The ring answers with the newest hint for a fold, and forgets a fold once
    /// `FOUND_RING` newer reads have come after it.
    #[test]
    fn the_read_hints_ring_keeps_the_newest_reads() {
        let at = FoundAt::<u32>::default();
        let mut ring = at.0.lock().unwrap();
        assert_eq!(
            ring.get(0),
            None,
            "an empty ring vouches for nothing, fold 0 included"
        );
        ring.note(7, 1);
        ring.note(8, 2);
        ring.note(7, 3);
        assert_eq!(
            (ring.get(7), ring.get(8), ring.get(9)),
            (Some(3), Some(2), None)
        );
        for fold in 100..100 + FOUND_RING as u64 - 1 {
            ring.note(fold, 0);
        }
        assert_eq!(ring.get(7), Some(3), "the newest of eight reads");
        assert_eq!(ring.get(8), None, "pushed out");
        ring.note(200, 4);
        assert_eq!((ring.get(7), ring.get(200)), (None, Some(4)));
    }

    #[test]
    fn one_bucket_or_up_to_the_next() {
        assert!(within_one_bucket(&[1, 2, 0, 0], &[1, 2, 9, 9], 2));
        assert!(within_one_bucket(&[1, 2, 0, 0], &[1, 3, 0, 0], 2));
        assert!(within_one_bucket(&[1, 255, 7], &[2, 0, 0], 2));
        assert!(!within_one_bucket(&[1, 2, 0, 0], &[1, 3, 0, 1], 2));
        assert!(!within_one_bucket(&[1, 2, 0, 0], &[1, 4, 0, 0], 2));
        assert!(!within_one_bucket(&[255, 255], &[0, 0], 2));
        assert!(!within_one_bucket(&[1], &[1, 3], 2));
    }
}
