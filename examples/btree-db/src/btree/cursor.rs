//! A forward cursor's position in a tree: pinned leaf, bounds, last key.

use std::ops::Bound;

use crate::buffer::PinnedPage;
use crate::error::{PageId, Result};
use crate::node;
use crate::page::PageAccess;

use super::store::Store;

/// A forward cursor's position (the transaction layer adds locking).
pub(crate) struct CursorState<'db> {
    root: PageId,
    page: Option<PinnedPage<'db>>,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    last: Vec<u8>,
    started: bool,
    slot: usize,
    lsn: u64,
    done: bool,
}

impl<'db> CursorState<'db> {
    /// Cursor open: positions on the leaf holding the low bound and pins it.
    pub(crate) fn open(
        store: &'db Store,
        root: PageId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> Result<CursorState<'db>> {
        let start: &[u8] = match lo {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        let page = store.descend(root, start, 0)?;
        Ok(CursorState {
            root,
            page: Some(page),
            lo: lo.map(|k| k.to_vec()),
            hi: hi.map(|k| k.to_vec()),
            last: Vec::new(),
            started: false,
            slot: 0,
            lsn: u64::MAX,
            done: false,
        })
    }

    pub(crate) fn root(&self) -> PageId {
        self.root
    }

    /// Cursor close: unpins (`put_page`).
    pub(crate) fn close(&mut self, store: &Store) {
        if let Some(p) = self.page.take() {
            store.pool.put_page(p);
        }
        self.done = true;
    }

    /// Moves to the next entry in range, copying it out.
    pub(crate) fn next(
        &mut self,
        store: &'db Store,
        key: &mut Vec<u8>,
        val: &mut Vec<u8>,
    ) -> Result<bool> {
        loop {
            if self.done {
                return Ok(false);
            }
            let Some(p) = self.page.as_ref() else {
                return Ok(false);
            };
            let right = {
                let g = p.read();
                let n = node::nslots(&g);
                let pos = if !self.started {
                    match &self.lo {
                        Bound::Unbounded => 0,
                        Bound::Included(k) => node::search(&g, k).unwrap_or_else(|i| i),
                        Bound::Excluded(k) => match node::search(&g, k) {
                            Ok(i) => i + 1,
                            Err(i) => i,
                        },
                    }
                } else if g.page_lsn() == self.lsn {
                    self.slot
                } else {
                    match node::search(&g, &self.last) {
                        Ok(i) => i + 1,
                        Err(i) => i,
                    }
                };
                if pos < n {
                    key.clear();
                    node::read_key(&g, pos, key);
                    let in_range = match &self.hi {
                        Bound::Unbounded => true,
                        Bound::Included(h) => key.as_slice() <= h.as_slice(),
                        Bound::Excluded(h) => key.as_slice() < h.as_slice(),
                    };
                    if !in_range {
                        drop(g);
                        self.close(store);
                        return Ok(false);
                    }
                    val.clear();
                    node::read_value(&g, pos, val);
                    self.last.clear();
                    self.last.extend_from_slice(key);
                    self.started = true;
                    self.slot = pos + 1;
                    self.lsn = g.page_lsn();
                    return Ok(true);
                }
                node::right(&g)
            };
            if right == 0 {
                self.close(store);
                return Ok(false);
            }
            let np = store.pool.get_page(right)?;
            self.page = Some(np);
            self.lsn = u64::MAX;
        }
    }
}
