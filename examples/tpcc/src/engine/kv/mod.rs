//! TPC-C on an ordered key/value store with transactions: the transactions written once
//! against [`KvStore`], so our B-tree database and the in-memory reference store run
//! the same code.
//!
//! The transaction path allocates nothing: keys are stack arrays, and rows are read into
//! and built in buffers the engine keeps.
//!
//! | file | what |
//! | --- | --- |
//! | `schema` | [`Table`]: the tables and indexes, and their names |
//! | `load` | the bulk load, in batches of one transaction ([`LoadSink`](crate::load::LoadSink)) |
//! | `transactions` | the five transactions ([`Engine`](super::api::Engine)) |
//! | `spec` | the tracked row view that speculative loop bodies use ([`spec::SpecRows`]) |
//! | `speculative` | the loops of mode `tls`, as `#[tls_loop]` functions |
//! | `by_hand` | the same loops split between threads by hand (mode `by-hand`) |
//! | `journey` | the earlier forms of mode `tls` that the book's journey runs (`TPCC_JOURNEY`) |
//! | `summary` | the whole-database aggregates for the consistency checks |

use std::time::Instant;

use anyhow::Result;

use super::api::Mode;
use crate::workload::TxnKind;
use journey::Journey;

mod by_hand;
pub mod journey;
mod load;
mod row_key;
mod schema;
pub mod spec;
mod speculative;
mod summary;
mod transactions;

pub use schema::Table;

/// An ordered, transactional key/value store with one key space per [`Table`].
pub trait KvStore {
    /// An open transaction; it borrows the store.
    type Txn<'a>: KvTxn
    where
        Self: 'a;
    /// Starts a transaction.
    fn begin(&mut self) -> Result<Self::Txn<'_>>;
    /// Makes everything committed so far durable and cheap to recover (after a load).
    fn checkpoint(&mut self) -> Result<()> {
        Ok(())
    }
    /// A second handle to the same data, whose transactions run at the same time as
    /// this one's (several terminals); stores that cannot do that say so.
    fn another(&self) -> Result<Self>
    where
        Self: Sized,
    {
        anyhow::bail!("this store runs one terminal at a time")
    }
}

/// The row operations of a transaction: what a transaction body, and a loop body run
/// as speculative epochs ([`spec::SpecRows`]), can do.
pub trait KvOps {
    /// Reads `key` into `out` (replacing its contents); `false` if absent.
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    /// Like `get`, for a row the transaction is about to update (stores with locks
    /// take the exclusive lock at once).
    fn get_for_update(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    /// Inserts a new key; an existing key is an error.
    fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()>;
    /// Replaces the value of an existing key.
    fn update(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()>;
    /// Deletes an existing key.
    fn delete(&mut self, table: Table, key: &[u8]) -> Result<()>;
    /// Calls `f` on each entry with `from <= key < to` (`to = None`: no upper bound), in
    /// key order, until it returns `false`.
    fn scan<F>(&mut self, table: Table, from: &[u8], to: Option<&[u8]>, f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<bool>;
}

/// One transaction of a [`KvStore`]. Dropping it without `commit` aborts it.
pub trait KvTxn: KvOps {
    /// The transaction lent to several threads (see [`KvTxn::share`]).
    type Shared<'s>: SharedKv
    where
        Self: 's;
    /// Commits (durably, as far as the store's sync setting says).
    fn commit(self) -> Result<()>;
    /// Undoes every change of the transaction.
    fn abort(self) -> Result<()>;
    /// Lends the transaction to the threads of a speculative loop: the handle's
    /// operations take `&self`. Its locks, undo entries and log records stay this
    /// transaction's.
    fn share(&mut self) -> Self::Shared<'_>;
}

/// A transaction whose row operations several threads can call at once (`&self`):
/// what speculative loop bodies use underneath their tracked view ([`spec`]).
pub trait SharedKv: Sync {
    /// [`KvOps::get`].
    fn get(&self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    /// [`KvOps::get_for_update`].
    fn get_for_update(&self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    /// [`KvOps::insert`].
    fn insert(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()>;
    /// [`KvOps::update`].
    fn update(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()>;
    /// Where a store found a row (a hint for writing it again; `Default`: nowhere).
    type Found: Copy + Default + Send + Sync + 'static;
    /// [`SharedKv::get_for_update`], also returning where the row was found, for a
    /// later [`SharedKv::update_at`] of the same row.
    fn get_for_update_at(
        &self,
        table: Table,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(bool, Self::Found)> {
        Ok((
            self.get_for_update(table, key, out)?,
            Self::Found::default(),
        ))
    }
    /// [`SharedKv::update`] of a row read with [`SharedKv::get_for_update_at`], given
    /// where that read found it.
    fn update_at(&self, table: Table, key: &[u8], value: &[u8], _at: Self::Found) -> Result<()> {
        self.update(table, key, value)
    }
    /// [`KvOps::delete`].
    fn delete(&self, table: Table, key: &[u8]) -> Result<()>;
    /// [`KvOps::scan`].
    fn scan<F>(&self, table: Table, from: &[u8], to: Option<&[u8]>, f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<bool>;
}

/// TPC-C over a [`KvStore`].
pub struct KvEngine<S: KvStore> {
    store: S,
    mode: Mode,
    bufs: Bufs,
    /// Rows the loader handed over since the last batch boundary: their bytes, and
    /// per row its table, key length and value length.
    load_bytes: Vec<u8>,
    load_rows: Vec<(Table, u32, u32)>,
}

/// Buffers reused by every transaction, so the transaction path does not allocate.
struct Bufs {
    /// How the transactions' loops run: in order (`Sequential`), as speculative
    /// epochs (`Tls`) or split between threads by hand (`ByHand`).
    loops: Mode,
    /// Threads per loop (speculative or by hand); `None`: the runtime's default
    /// (`TLS_THREADS`).
    threads: Option<usize>,
    /// Which form of mode `tls` runs (the shipped one but in the book's journey).
    journey: Journey,
    row: Vec<u8>,
    row2: Vec<u8>,
    out: Vec<u8>,
    ids: Vec<u32>,
    text: String,
    c_data: String,
    /// When recording ([`KvEngine::record_loop_times`]): the wall time of each
    /// transaction's loop, as its mode runs it.
    loop_ns: Option<Vec<(TxnKind, u64)>>,
    /// Made by [`Bufs::for_epoch`]: its buffers go back to the thread's
    /// [`EpochScratch`] when it is dropped.
    epoch: bool,
}

impl Drop for Bufs {
    fn drop(&mut self) {
        if self.epoch {
            EpochScratch::give_back(EpochScratch {
                row: std::mem::take(&mut self.row),
                row2: std::mem::take(&mut self.row2),
                out: std::mem::take(&mut self.out),
                ids: std::mem::take(&mut self.ids),
                text: std::mem::take(&mut self.text),
                c_data: std::mem::take(&mut self.c_data),
            });
        }
    }
}

/// The buffers of a speculative epoch's [`Bufs`], kept by the thread between its
/// epochs. Scratch only: emptied before each use, so nothing one epoch leaves in
/// them reaches another (an epoch rolled back by unwinding gives them back too).
#[derive(Default)]
struct EpochScratch {
    row: Vec<u8>,
    row2: Vec<u8>,
    out: Vec<u8>,
    ids: Vec<u32>,
    text: String,
    c_data: String,
}

/// Sets of [`EpochScratch`] a thread keeps: one per epoch it may hold at once
/// (a loop body that runs a loop of its own holds two).
const SCRATCH_KEPT: usize = 4;

thread_local! {
    static SPARE_SCRATCH: std::cell::RefCell<Vec<EpochScratch>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl EpochScratch {
    /// A set this thread kept, emptied, or a new empty one.
    fn take() -> EpochScratch {
        let mut s = SPARE_SCRATCH
            .try_with(|spare| spare.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_default();
        s.row.clear();
        s.row2.clear();
        s.out.clear();
        s.ids.clear();
        s.text.clear();
        s.c_data.clear();
        s
    }

    /// Keeps `self` for this thread's next epoch (dropped if the thread keeps
    /// enough, or is ending).
    fn give_back(self) {
        let _ = SPARE_SCRATCH.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < SCRATCH_KEPT {
                spare.push(self);
            }
        });
    }
}

impl Bufs {
    /// Buffers sized for any TPC-C row, so filling them never grows them.
    fn new(loops: Mode) -> Bufs {
        Bufs {
            loops,
            threads: None,
            journey: Journey::default(),
            row: Vec::with_capacity(1024),
            row2: Vec::with_capacity(1024),
            out: Vec::with_capacity(1024),
            ids: Vec::with_capacity(64),
            text: String::with_capacity(64),
            c_data: String::with_capacity(512),
            loop_ns: None,
            epoch: false,
        }
    }

    /// Buffers for one speculative epoch: those an earlier epoch on this thread gave
    /// back ([`EpochScratch`]), emptied, or new ones. New ones, allocated and grown
    /// by each epoch afresh, were about 4% of a New Order's instructions (an epoch
    /// lasts a few microseconds).
    fn for_epoch(loops: Mode) -> Bufs {
        let s = EpochScratch::take();
        Bufs {
            loops,
            threads: None,
            journey: Journey::default(),
            row: s.row,
            row2: s.row2,
            out: s.out,
            ids: s.ids,
            text: s.text,
            c_data: s.c_data,
            loop_ns: None,
            epoch: true,
        }
    }

    /// The start of a transaction's loop, if loop times are recorded.
    fn loop_start(&self) -> Option<Instant> {
        self.loop_ns.as_ref().map(|_| Instant::now())
    }

    /// Records the wall time of a `kind` loop begun at `start`.
    fn loop_end(&mut self, kind: TxnKind, start: Option<Instant>) {
        if let (Some(times), Some(start)) = (&mut self.loop_ns, start) {
            times.push((kind, start.elapsed().as_nanos() as u64));
        }
    }
}

impl<S: KvStore> KvEngine<S> {
    /// Wraps an opened store; `mode` is what the engine reports itself as.
    pub fn new(store: S, mode: Mode) -> Self {
        Self {
            store,
            mode,
            bufs: Bufs::new(mode),
            load_bytes: Vec::new(),
            load_rows: Vec::new(),
        }
    }

    /// Switches between running the transactions' loops in order (`Sequential`), as
    /// speculative epochs (`Tls`) and split by hand (`ByHand`) on the same store, so
    /// that a benchmark can alternate them on one database. Other modes are refused.
    pub fn set_mode(&mut self, mode: Mode) -> anyhow::Result<()> {
        if !matches!(mode, Mode::Sequential | Mode::Tls | Mode::ByHand) {
            anyhow::bail!("a key/value engine runs in mode sequential, tls or by-hand, not {mode}");
        }
        self.mode = mode;
        self.bufs.loops = mode;
        Ok(())
    }

    /// Sets the threads each speculative loop runs on (`None`: `TLS_THREADS`, else
    /// all cores), whatever the environment says: for tests that compare thread
    /// counts in one process.
    pub fn set_threads(&mut self, threads: Option<usize>) {
        self.bufs.threads = threads;
    }

    /// Runs mode `tls` in one of the forms of the book's journey (see
    /// [`journey`]); the default is the shipped form.
    pub fn set_journey(&mut self, journey: Journey) {
        self.bufs.journey = journey;
    }

    /// Starts (or stops) recording the wall time of every transaction's loop (New
    /// Order's items, Delivery's districts, Stock Level's items), from the moment the
    /// transaction is lent to the loop's threads to the moment it is given back, so
    /// that a benchmark can set the loop apart from the rest of its transaction (the
    /// part no thread count shortens).
    pub fn record_loop_times(&mut self, on: bool) {
        self.bufs.loop_ns = on.then(Vec::new);
    }

    /// The loop times recorded since the last call, per transaction kind, in
    /// nanoseconds (see [`KvEngine::record_loop_times`]).
    pub fn take_loop_times(&mut self) -> Vec<(TxnKind, u64)> {
        self.bufs
            .loop_ns
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Another engine over a second handle to the same store (see
    /// [`KvStore::another`]), in the same mode and with the same threads per loop:
    /// one more terminal.
    pub fn another_terminal(&self) -> Result<Self> {
        let mut e = KvEngine::new(self.store.another()?, self.mode);
        e.bufs.threads = self.bufs.threads;
        e.bufs.journey = self.bufs.journey;
        Ok(e)
    }

    /// The store underneath, without the engine.
    pub fn into_store(self) -> S {
        self.store
    }

    /// The store underneath.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Runs `body` in a transaction; on error the transaction is aborted.
    fn txn<T>(
        &mut self,
        body: impl FnOnce(&mut S::Txn<'_>, &mut Bufs) -> Result<Decision<T>>,
    ) -> Result<T> {
        let mut tx = self.store.begin()?;
        match body(&mut tx, &mut self.bufs) {
            Ok(Decision::Commit(v)) => {
                tx.commit()?;
                Ok(v)
            }
            Ok(Decision::Abort(v)) => {
                tx.abort()?;
                Ok(v)
            }
            Err(e) => {
                // The original error matters more than a failure to abort.
                let _ = tx.abort();
                Err(e)
            }
        }
    }
}

/// What a transaction body decided.
enum Decision<T> {
    Commit(T),
    Abort(T),
}

#[cfg(test)]
mod tests {
    use super::{Bufs, Mode};

    /// An epoch's buffers come back empty, whatever the epoch before left in them,
    /// and keep their room: a later epoch on the thread reuses it.
    #[test]
    fn an_epochs_buffers_are_reused_empty() {
        let room = {
            let mut b = Bufs::for_epoch(Mode::Tls);
            b.row.extend_from_slice(&[7; 300]);
            b.out.extend_from_slice(&[8; 200]);
            b.ids.extend([1, 2, 3]);
            b.text.push_str("left over");
            b.c_data.push_str("left over too");
            b.row2.push(9);
            b.row.capacity()
        };
        let b = Bufs::for_epoch(Mode::Tls);
        assert!(b.row.is_empty() && b.row2.is_empty() && b.out.is_empty());
        assert!(b.ids.is_empty() && b.text.is_empty() && b.c_data.is_empty());
        assert_eq!(b.row.capacity(), room, "the row buffer was not reused");
        // Sequential buffers are the engine's own, never given to an epoch.
        drop(Bufs::new(Mode::Sequential));
        let (e1, e2) = (Bufs::for_epoch(Mode::Tls), Bufs::for_epoch(Mode::Tls));
        assert!(e1.row.capacity() != 1024 && e2.row.capacity() != 1024);
    }
}
