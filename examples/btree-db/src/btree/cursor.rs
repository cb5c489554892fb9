//! A forward cursor's position in a tree: pinned leaf, bounds, last key.

use std::ops::Bound;

use crate::buffer::PinnedPage;
use crate::error::{PageId, Result};
use crate::node;
use crate::page::{KIND_LEAF, PageAccess};

use super::store::{Store, corrupt};
use super::tree::restart;

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

    /// Whether the current page is unchanged since the entry last returned
    /// was read from it (same page LSN): a value read then is still the
    /// value now.
    pub(crate) fn entry_unchanged(&self) -> bool {
        self.page
            .as_ref()
            .is_some_and(|p| p.read().page_lsn() == self.lsn)
    }

    /// Moves to the next entry in range, copying it out.
    pub(crate) fn next(
        &mut self,
        store: &'db Store,
        key: &mut Vec<u8>,
        val: &mut Vec<u8>,
    ) -> Result<bool> {
        // Both bounded, so damage (a cycle of right links, a link into
        // another level) ends in an error rather than a hang.
        let mut moves = 0u32;
        let mut restarts = 0u32;
        loop {
            if self.done {
                return Ok(false);
            }
            let Some(p) = self.page.as_ref() else {
                return Ok(false);
            };
            let right = {
                let g = p.read();
                if node::kind(&g) != KIND_LEAF {
                    // The root was a leaf when the cursor reached it and has
                    // split since (its cells moved to new children): find the
                    // position again from the top.
                    drop(g);
                    restart(&mut restarts, p.id())?;
                    let from = if self.started {
                        self.last.clone()
                    } else {
                        match &self.lo {
                            Bound::Included(k) | Bound::Excluded(k) => k.clone(),
                            Bound::Unbounded => Vec::new(),
                        }
                    };
                    self.page = Some(store.descend(self.root, &from, 0)?);
                    self.lsn = u64::MAX;
                    continue;
                }
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
                let right = node::right(&g);
                // A high key promises a right sibling: without one, keys
                // from the high key on would silently be missing.
                if right == 0 && node::read_high_key(&g, &mut Vec::new()) {
                    return Err(corrupt(p.id(), "high key without right link"));
                }
                right
            };
            if right == 0 {
                self.close(store);
                return Ok(false);
            }
            moves += 1;
            if moves > store.walk_limit() {
                return Err(corrupt(p.id(), "right-link cycle"));
            }
            let np = store.pool.get_page(right)?;
            self.page = Some(np);
            self.lsn = u64::MAX;
        }
    }
}
