//! [`Store`]: the buffer pool and the log that every tree operation works
//! through, the log seam ([`Store::log`]), and the types describing a key
//! change and how it is logged.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::buffer::{BufferPool, MAX_PAGES};
use crate::chain::Chain;
use crate::error::{Error, PageId, Result};
use crate::node;
use crate::page::{KIND_BRANCH, KIND_LEAF, PageAccess, PageWrite};
use crate::wal::{RecBuilder, Wal};

use super::alloc::CATALOG_ROOT;

/// A change to one key.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Modify<'a> {
    /// Insert; fails if present.
    Insert(&'a [u8]),
    /// Replace; fails if absent.
    Update(&'a [u8]),
    /// Insert or replace.
    Put(&'a [u8]),
    /// Remove; fails if absent.
    Delete,
}

/// What [`Store::modify`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Done,
    Duplicate,
    Missing,
}

/// How a key change is logged.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LogMode {
    /// A transaction's change, with logical undo information.
    Undoable { table: u32 },
    /// A compensation record of an undo (never undone itself).
    Compensation { undo_next: u64 },
}

/// Logging state of the caller: record buffer, transaction, LSN chain and
/// the old value of the last modified key.
#[derive(Default)]
pub(crate) struct LogCtx {
    pub(crate) rec: RecBuilder,
    /// Records built for structure changes (kept apart from `rec`).
    pub(crate) smo: RecBuilder,
    pub(crate) txn: u64,
    /// The transaction's last LSN (the next record's `prev`), unless `chain`
    /// keeps it.
    pub(crate) prev: u64,
    pub(crate) old: Vec<u8>,
    pub(crate) had_old: bool,
    /// The undo chain of a transaction lent to several threads: a change
    /// then gets its `prev` from it as the log appends it, and records its
    /// undo entry in it (see [`crate::chain`]).
    pub(crate) chain: Option<Arc<Chain>>,
}

/// Page allocation and the B-link tree operations.
pub(crate) struct Store {
    pub(crate) pool: BufferPool,
    pub(crate) wal: Arc<Wal>,
    /// An upper bound on the pages in the database (the meta page's count
    /// once known): no walk along right links or down a tree visits more
    /// pages than exist, so a cycle made by damage ends in an error.
    walk_limit: AtomicU32,
}

pub(crate) fn corrupt(page: PageId, reason: &'static str) -> Error {
    Error::Corrupt { page, reason }
}

pub(crate) fn check_node<P: PageAccess>(p: &P, id: PageId) -> Result<()> {
    match node::kind(p) {
        KIND_LEAF | KIND_BRANCH => Ok(()),
        _ => Err(corrupt(id, "expected a tree node")),
    }
}

impl Store {
    pub(crate) fn new(pool: BufferPool, wal: Arc<Wal>) -> Store {
        Store {
            pool,
            wal,
            walk_limit: AtomicU32::new(MAX_PAGES),
        }
    }

    /// The most pages a walk may visit before it reports a cycle.
    pub(crate) fn walk_limit(&self) -> u32 {
        self.walk_limit.load(Ordering::Relaxed)
    }

    /// Sets the walk bound from the meta page's page count (after recovery).
    pub(crate) fn set_walk_limit(&self, pages: u32) {
        self.walk_limit
            .store(pages.max(CATALOG_ROOT + 1), Ordering::Relaxed);
    }

    /// Raises the walk bound as pages are allocated.
    pub(crate) fn raise_walk_limit(&self, pages: u32) {
        if self.walk_limit() < pages {
            self.walk_limit.fetch_max(pages, Ordering::Relaxed);
        }
    }

    pub(crate) fn page_size(&self) -> usize {
        self.pool.page_size()
    }

    /// The log seam: every record an operation produces goes through here.
    /// [`Wal::append_with_images`] assigns the LSN, which is then stamped on each page the
    /// record changed (all still exclusively latched, so per-page LSN order
    /// is modification order). A speculative epoch can defer this call, and
    /// the stamping with it, to its commit.
    ///
    /// Full-page writes: a page not logged whole since the newest checkpoint
    /// began gets its image put first in the record, so recovery can rebuild
    /// it even if a write of it was torn by a crash.
    pub(crate) fn log(
        &self,
        rec: &mut RecBuilder,
        pages: &mut [(PageId, &mut dyn PageWrite)],
    ) -> u64 {
        self.log_linked(rec, pages, None)
    }

    /// [`Store::log`], with the record's `prev` set from `link` (a lent
    /// transaction's last LSN) as it is appended, and `link` advanced to it
    /// (see [`crate::chain`]).
    pub(crate) fn log_linked(
        &self,
        rec: &mut RecBuilder,
        pages: &mut [(PageId, &mut dyn PageWrite)],
        link: Option<&AtomicU64>,
    ) -> u64 {
        let images = |threshold, rec: &mut RecBuilder| {
            for (id, p) in pages.iter() {
                if p.page_lsn() < threshold && !rec.has_image(*id) {
                    rec.prepend_image(*id, &**p);
                }
            }
        };
        let lsn = self.wal.append_with_images(rec, images, link);
        for (_, p) in pages.iter_mut() {
            p.set_page_lsn(lsn);
        }
        lsn
    }
}
