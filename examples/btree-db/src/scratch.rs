//! A transaction's buffers: its held locks, its logging state, its undo
//! entries and their byte arena, the tables it opened and its leaf hints.
//! The database keeps finished transactions' buffers for the next ones, so
//! the hot path does not allocate.

use crate::btree::LogCtx;
use crate::chain::UndoEntry;
use crate::error::PageId;
use crate::lock::TxnLocks;

/// A transaction's buffers, recycled between transactions so the hot path
/// does not allocate.
#[derive(Default)]
pub(crate) struct TxnScratch {
    pub(crate) locks: TxnLocks,
    pub(crate) ctx: LogCtx,
    pub(crate) undo: Vec<UndoEntry>,
    pub(crate) arena: Vec<u8>,
    pub(crate) tables: Vec<PageId>,
    /// Per tree, the leaf last used (see `Store::find_leaf`).
    pub(crate) hints: Vec<(PageId, PageId)>,
}

impl TxnScratch {
    /// Empties the buffers for the next transaction.
    pub(crate) fn reset(&mut self) {
        // A bulk load leaves huge buffers; clearing a huge lock map costs
        // time proportional to its capacity, so start such ones afresh.
        if self.locks.capacity() > 4096 || self.arena.capacity() > (1 << 20) {
            *self = TxnScratch::default();
            return;
        }
        self.locks.clear();
        self.ctx.prev = 0;
        self.undo.clear();
        self.arena.clear();
        self.tables.clear();
        self.hints.clear();
    }
}
