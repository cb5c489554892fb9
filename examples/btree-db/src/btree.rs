//! The Lehman-Yao B-link tree over the buffer pool, plus page allocation.
//!
//! Searches hold one latch at a time and move right whenever the key is at
//! or above a node's high key, so they never block on a split in progress.
//! An insert latches its leaf exclusively (moving right with latch coupling,
//! left to right), and a full node is split in two atomic steps, each one
//! log record: the *half split* (new right sibling, shortened left node with
//! its new high key and right link) and later the *separator post* into the
//! parent, found by a fresh descent. Between the two, and even if a crash
//! falls between them, the tree is valid: the new node is reachable through
//! its left sibling's right link. The root page never moves: a full root
//! copies its cells into two new children and becomes their parent, so
//! catalog entries never change.
//!
//! Deletes remove cells without merging (nodes may become empty); pages of
//! dropped tables go to the free list and are reused by later allocations.

use std::ops::Bound;

use crate::buffer::{BufferPool, PinnedPage};
use crate::error::{Error, PageId, Result};
use crate::frame::PageMut;
use crate::node;
use crate::page::{
    KIND_BRANCH, KIND_FREE, KIND_LEAF, KIND_META, OFF_KIND, OFF_NEXT_FREE, PageAccess, PageBuf,
    PageWrite,
};
use crate::wal::{KIND_CLR, KIND_SMO, KIND_UPDATE, RecBuilder, Wal};
use std::sync::Arc;

/// The meta page: page count and free list head.
pub(crate) const META_PAGE: PageId = 1;
/// Root of the catalog tree.
pub(crate) const CATALOG_ROOT: PageId = 2;
const META_PAGE_COUNT: usize = 32;
const META_FREE_HEAD: usize = 36;

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
    /// The transaction's last LSN (the next record's `prev`).
    pub(crate) prev: u64,
    pub(crate) old: Vec<u8>,
    pub(crate) had_old: bool,
}

/// Page allocation and the B-link tree operations.
pub(crate) struct Store {
    pub(crate) pool: BufferPool,
    pub(crate) wal: Arc<Wal>,
}

fn corrupt(page: PageId, reason: &'static str) -> Error {
    Error::Corrupt { page, reason }
}

fn check_node<P: PageAccess>(p: &P, id: PageId) -> Result<()> {
    match node::kind(p) {
        KIND_LEAF | KIND_BRANCH => Ok(()),
        _ => Err(corrupt(id, "expected a tree node")),
    }
}

impl Store {
    pub(crate) fn page_size(&self) -> usize {
        self.pool.page_size()
    }

    /// Formats a fresh database's meta page and catalog root image.
    pub(crate) fn initial_pages(page_size: usize) -> (PageBuf, PageBuf) {
        let mut meta = PageBuf::new(page_size);
        meta.write_u8(OFF_KIND, KIND_META);
        meta.write_u32(META_PAGE_COUNT, CATALOG_ROOT + 1);
        let mut cat = PageBuf::new(page_size);
        node::init(&mut cat, KIND_LEAF, 0);
        (meta, cat)
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
        let lsn = self.wal.append_with_images(rec, |threshold, rec| {
            for (id, p) in pages.iter() {
                if p.page_lsn() < threshold && !rec.has_image(*id) {
                    rec.prepend_image(*id, &**p);
                }
            }
        });
        for (_, p) in pages.iter_mut() {
            p.set_page_lsn(lsn);
        }
        lsn
    }

    /// Number of pages allocated (the file may be shorter until write-back).
    pub(crate) fn page_count(&self) -> Result<u32> {
        let m = self.pool.get_page(META_PAGE)?;
        let g = m.read();
        Ok(g.read_u32(META_PAGE_COUNT))
    }

    /// Allocates a page (free list first), logging the meta change into `rec`.
    /// The caller keeps `meta` latched until the record is appended, so meta
    /// changes reach the log in the order they happen.
    fn alloc(&self, meta: &mut PageMut<'_>, rec: &mut RecBuilder) -> Result<PageId> {
        let head = meta.read_u32(META_FREE_HEAD);
        let id = if head != 0 {
            let p = self.pool.get_page(head)?;
            let next = {
                let g = p.read();
                if g.read_u8(OFF_KIND) != KIND_FREE {
                    return Err(corrupt(head, "free list entry is not a free page"));
                }
                g.read_u32(OFF_NEXT_FREE)
            };
            meta.write_u32(META_FREE_HEAD, next);
            rec.op_write(META_PAGE, META_FREE_HEAD, &next.to_le_bytes());
            head
        } else {
            let n = meta.read_u32(META_PAGE_COUNT);
            if n >= crate::buffer::MAX_PAGES - 1 {
                return Err(corrupt(META_PAGE, "database is full"));
            }
            meta.write_u32(META_PAGE_COUNT, n + 1);
            rec.op_write(META_PAGE, META_PAGE_COUNT, &(n + 1).to_le_bytes());
            n
        };
        Ok(id)
    }

    /// Allocates and formats an empty leaf as a table root (one record).
    pub(crate) fn create_tree(&self) -> Result<PageId> {
        let mut rec = RecBuilder::default();
        rec.begin(0, 0, KIND_SMO);
        rec.start_ops();
        let mp = self.pool.get_page(META_PAGE)?;
        let mut meta = mp.write();
        let id = self.alloc(&mut meta, &mut rec)?;
        let p = self.pool.get_page(id)?;
        let mut g = p.write();
        node::init(&mut g, KIND_LEAF, 0);
        rec.op_image(id, &g);
        self.log(&mut rec, &mut [(id, &mut g), (META_PAGE, &mut meta)]);
        Ok(id)
    }

    /// Returns every page of a tree to the free list (one record per page).
    pub(crate) fn free_tree(&self, root: PageId) -> Result<()> {
        let mut pages = Vec::new();
        let mut level_start = root;
        loop {
            let mut id = level_start;
            let mut next_level = None;
            while id != 0 {
                pages.push(id);
                let p = self.pool.get_page(id)?;
                let g = p.read();
                check_node(&g, id)?;
                if next_level.is_none() && node::level(&g) > 0 && node::nslots(&g) > 0 {
                    next_level = Some(node::child_at(&g, 0));
                }
                id = node::right(&g);
            }
            match next_level {
                Some(c) => level_start = c,
                None => break,
            }
        }
        let mut rec = RecBuilder::default();
        for id in pages {
            rec.begin(0, 0, KIND_SMO);
            rec.start_ops();
            let mp = self.pool.get_page(META_PAGE)?;
            let mut meta = mp.write();
            let head = meta.read_u32(META_FREE_HEAD);
            let p = self.pool.get_page(id)?;
            let mut g = p.write();
            g.write_u8(OFF_KIND, KIND_FREE);
            g.write_u32(OFF_NEXT_FREE, head);
            rec.op_write(id, OFF_KIND, &[KIND_FREE]);
            rec.op_write(id, OFF_NEXT_FREE, &head.to_le_bytes());
            meta.write_u32(META_FREE_HEAD, id);
            rec.op_write(META_PAGE, META_FREE_HEAD, &id.to_le_bytes());
            self.log(&mut rec, &mut [(id, &mut g), (META_PAGE, &mut meta)]);
        }
        Ok(())
    }

    /// The root's level (tree height minus one).
    pub(crate) fn height_of(&self, root: PageId) -> Result<u8> {
        let p = self.pool.get_page(root)?;
        let g = p.read();
        check_node(&g, root)?;
        Ok(node::level(&g))
    }

    /// Descends from `root` to the node at `level` whose key range holds
    /// `key`, one shared latch at a time, and returns it pinned.
    pub(crate) fn descend(&self, root: PageId, key: &[u8], level: u8) -> Result<PinnedPage<'_>> {
        let mut p = self.pool.get_page(root)?;
        // Levels must fall by one per step down and stay put when moving
        // right, and right moves are bounded: a crafted file with a cycle of
        // pointers (valid checksums) yields an error, not a hang.
        let mut expect: Option<u8> = None;
        let mut moves = 0u32;
        loop {
            let next = {
                let g = p.read();
                check_node(&g, p.id())?;
                let l = node::level(&g);
                if expect.is_some_and(|e| e != l) {
                    return Err(corrupt(p.id(), "child level mismatch"));
                }
                if node::beyond_high(&g, key) {
                    let r = node::right(&g);
                    moves += 1;
                    if r == 0 || moves > 1 << 24 {
                        return Err(corrupt(p.id(), "bad right link"));
                    }
                    expect = Some(l);
                    r
                } else {
                    if l == level {
                        drop(g);
                        return Ok(p);
                    }
                    if l < level || node::nslots(&g) == 0 {
                        return Err(corrupt(p.id(), "tree shape"));
                    }
                    expect = Some(l - 1);
                    node::child_at(&g, node::child_index(&g, key))
                }
            };
            p = self.pool.get_page(next)?;
        }
    }

    /// The leaf for `key`: the hinted leaf (the one this transaction last
    /// used in this tree) if `key` provably belongs there, else a descent.
    /// Consecutive operations on one row, or appends of ascending keys,
    /// skip the descent. Safe because pages never leave their tree while a
    /// transaction holds its table lock, and a leaf's range only shrinks
    /// rightwards (the caller still moves right).
    fn find_leaf(&self, root: PageId, key: &[u8], hint: &mut PageId) -> Result<PinnedPage<'_>> {
        if *hint != 0 {
            let p = self.pool.get_page(*hint)?;
            let ok = {
                let g = p.read();
                node::kind(&g) == KIND_LEAF
                    && node::nslots(&g) > 0
                    && node::key_cmp(&g, 0, key) != std::cmp::Ordering::Greater
                    && !node::beyond_high(&g, key)
            };
            if ok {
                return Ok(p);
            }
        }
        let p = self.descend(root, key, 0)?;
        *hint = p.id();
        Ok(p)
    }

    /// Latches `p` exclusively and moves right (latch coupling) until `key`
    /// is below the high key.
    fn latch_for<'a>(
        &'a self,
        mut p: PinnedPage<'a>,
        key: &[u8],
    ) -> Result<(PinnedPage<'a>, PageMut<'a>)> {
        let mut g = p.write();
        while node::beyond_high(&g, key) {
            let r = node::right(&g);
            if r == 0 {
                return Err(corrupt(p.id(), "high key without right link"));
            }
            let np = self.pool.get_page(r)?;
            let ng = np.write();
            drop(g);
            g = ng;
            p = np;
        }
        Ok((p, g))
    }

    /// Point lookup: appends the value to `out`.
    pub(crate) fn get(
        &self,
        root: PageId,
        key: &[u8],
        out: &mut Vec<u8>,
        hint: &mut PageId,
    ) -> Result<bool> {
        let mut p = self.find_leaf(root, key, hint)?;
        loop {
            let next = {
                let g = p.read();
                if !node::beyond_high(&g, key) {
                    return Ok(match node::search(&g, key) {
                        Ok(i) => {
                            node::read_value(&g, i, out);
                            true
                        }
                        Err(_) => false,
                    });
                }
                node::right(&g)
            };
            p = self.pool.get_page(next)?;
        }
    }

    /// Inserts, replaces or deletes `key`, logging the change per `mode`.
    /// On `Done`, `ctx.old` / `ctx.had_old` hold the previous value.
    pub(crate) fn modify(
        &self,
        root: PageId,
        key: &[u8],
        m: Modify<'_>,
        mode: LogMode,
        ctx: &mut LogCtx,
        hint: &mut PageId,
    ) -> Result<Outcome> {
        loop {
            let leaf = self.find_leaf(root, key, hint)?;
            let (p, mut g) = self.latch_for(leaf, key)?;
            let found = node::search(&g, key);
            ctx.old.clear();
            ctx.had_old = false;
            let val = match (m, found) {
                (Modify::Insert(_), Ok(_)) => return Ok(Outcome::Duplicate),
                (Modify::Update(_) | Modify::Delete, Err(_)) => return Ok(Outcome::Missing),
                (Modify::Delete, Ok(i)) => {
                    node::read_value(&g, i, &mut ctx.old);
                    ctx.had_old = true;
                    node::remove_at(&mut g, i);
                    self.log_change(ctx, mode, key, |r| r.op_delete(p.id(), key), p.id(), &mut g);
                    return Ok(Outcome::Done);
                }
                (Modify::Insert(v) | Modify::Update(v) | Modify::Put(v), _) => v,
            };
            if let Ok(i) = found {
                node::read_value(&g, i, &mut ctx.old);
                ctx.had_old = true;
            }
            let fits = match found {
                Ok(i) => node::fits_replace(&g, i, val.len()),
                Err(_) => node::fits(&g, key.len(), val.len()),
            };
            if fits {
                self.apply_and_log(ctx, mode, key, val, &p, &mut g);
                return Ok(Outcome::Done);
            }
            // Split (its own record), post the separator, and try again: the
            // key's half may still be too full for a large entry, in which
            // case it splits again. Our exclusive record lock keeps the key's
            // state unchanged meanwhile.
            let is_root = p.id() == root;
            let level = node::level(&g);
            let (sep, right) = self.split(&p, &mut g, is_root, ctx)?;
            drop(g);
            drop(p);
            if !is_root {
                self.post_separator(root, level + 1, sep, right, ctx)?;
            }
            *hint = 0;
        }
    }

    /// Inserts or replaces `key` on a latched leaf that has room, and logs it.
    fn apply_and_log(
        &self,
        ctx: &mut LogCtx,
        mode: LogMode,
        key: &[u8],
        val: &[u8],
        p: &PinnedPage<'_>,
        g: &mut PageMut<'_>,
    ) {
        let id = p.id();
        match node::search(g, key) {
            Ok(i) => {
                node::replace_at(g, i, val);
                self.log_change(ctx, mode, key, |r| r.op_replace(id, key, val), id, g);
            }
            Err(i) => {
                node::insert_at(g, i, key, val);
                self.log_change(ctx, mode, key, |r| r.op_insert(id, key, val), id, g);
            }
        }
    }

    /// Builds the record of a key change (header per `mode`, one page op),
    /// appends it and stamps the page.
    fn log_change(
        &self,
        ctx: &mut LogCtx,
        mode: LogMode,
        key: &[u8],
        op: impl FnOnce(&mut RecBuilder),
        id: PageId,
        g: &mut PageMut<'_>,
    ) {
        let rec = &mut ctx.rec;
        match mode {
            LogMode::Undoable { table } => {
                rec.begin(ctx.txn, ctx.prev, KIND_UPDATE);
                rec.update_header(table, key, ctx.had_old.then_some(ctx.old.as_slice()));
            }
            LogMode::Compensation { undo_next } => {
                rec.begin(ctx.txn, ctx.prev, KIND_CLR);
                rec.clr_header(undo_next);
            }
        }
        rec.start_ops();
        op(rec);
        ctx.prev = self.log(rec, &mut [(id, g)]);
    }

    /// Splits the latched node `p` (one redo-only record) and returns the
    /// separator and the new right node. For the root, its cells move to two
    /// new children and it becomes their parent (nothing to post).
    fn split(
        &self,
        p: &PinnedPage<'_>,
        g: &mut PageMut<'_>,
        is_root: bool,
        ctx: &mut LogCtx,
    ) -> Result<(Vec<u8>, PageId)> {
        let cells = node::entries(g);
        if cells.len() < 2 {
            return Err(corrupt(p.id(), "node too full to split"));
        }
        let total = node::cells_size(&cells);
        let mut m = 0;
        let mut acc = 0;
        while m < cells.len() && acc < total / 2 {
            acc += node::cells_size(&cells[m..m + 1]);
            m += 1;
        }
        let m = m.clamp(1, cells.len() - 1);
        let sep = cells[m].0.clone();
        let kind = node::kind(g);
        let level = node::level(g);
        let mut high = Vec::new();
        let has_high = node::read_high_key(g, &mut high);
        let old_right = node::right(g);

        let rec = &mut ctx.smo;
        rec.begin(0, 0, KIND_SMO);
        rec.start_ops();
        let mp = self.pool.get_page(META_PAGE)?;
        let mut meta = mp.write();
        let rid = self.alloc(&mut meta, rec)?;
        let rp = self.pool.get_page(rid)?;
        let mut rg = rp.write();
        if is_root {
            let lid = self.alloc(&mut meta, rec)?;
            let lp = self.pool.get_page(lid)?;
            let mut lg = lp.write();
            node::build(&mut lg, kind, level, &cells[..m], Some(&sep), rid);
            node::build(&mut rg, kind, level, &cells[m..], None, 0);
            let root_cells = vec![
                (Vec::new(), lid.to_le_bytes().to_vec()),
                (sep.clone(), rid.to_le_bytes().to_vec()),
            ];
            node::build(g, KIND_BRANCH, level + 1, &root_cells, None, 0);
            rec.op_image(lid, &lg);
            rec.op_image(rid, &rg);
            rec.op_image(p.id(), &*g);
            self.log(
                rec,
                &mut [
                    (lid, &mut lg),
                    (rid, &mut rg),
                    (p.id(), g),
                    (META_PAGE, &mut meta),
                ],
            );
            drop(lg);
            drop(lp);
        } else {
            node::build(
                &mut rg,
                kind,
                level,
                &cells[m..],
                has_high.then_some(high.as_slice()),
                old_right,
            );
            node::build(g, kind, level, &cells[..m], Some(&sep), rid);
            rec.op_image(rid, &rg);
            rec.op_image(p.id(), &*g);
            self.log(
                rec,
                &mut [(rid, &mut rg), (p.id(), g), (META_PAGE, &mut meta)],
            );
        }
        // Latch before pin, always.
        drop(rg);
        drop(rp);
        drop(meta);
        drop(mp);
        Ok((sep, rid))
    }

    /// Inserts the separator `(sep, child)` into the node at `level` covering
    /// `sep`, splitting (and posting upwards) as needed. Each step is one record.
    fn post_separator(
        &self,
        root: PageId,
        level: u8,
        sep: Vec<u8>,
        child: PageId,
        ctx: &mut LogCtx,
    ) -> Result<()> {
        let val = child.to_le_bytes();
        loop {
            let node_p = self.descend(root, &sep, level)?;
            let (p, mut g) = self.latch_for(node_p, &sep)?;
            if node::search(&g, &sep).is_ok() {
                return Ok(());
            }
            if node::fits(&g, sep.len(), 4) {
                self.insert_separator(&p, &mut g, &sep, &val, ctx);
                return Ok(());
            }
            let is_root = p.id() == root;
            let (up_sep, up_right) = self.split(&p, &mut g, is_root, ctx)?;
            drop(g);
            drop(p);
            if !is_root {
                self.post_separator(root, level + 1, up_sep, up_right, ctx)?;
            }
        }
    }

    fn insert_separator(
        &self,
        p: &PinnedPage<'_>,
        g: &mut PageMut<'_>,
        sep: &[u8],
        val: &[u8],
        ctx: &mut LogCtx,
    ) {
        let i = match node::search(g, sep) {
            Ok(i) | Err(i) => i,
        };
        node::insert_at(g, i, sep, val);
        let rec = &mut ctx.smo;
        rec.begin(0, 0, KIND_SMO);
        rec.start_ops();
        rec.op_insert(p.id(), sep, val);
        self.log(rec, &mut [(p.id(), g)]);
    }

    /// Walks every level of a tree checking order, high keys, right links and
    /// levels; returns the number of leaf entries.
    pub(crate) fn check_tree(&self, root: PageId) -> Result<u64> {
        let mut level_start = root;
        let mut expect_level: Option<u8> = None;
        loop {
            let mut id = level_start;
            let mut prev_high: Option<Vec<u8>> = None;
            let mut next_level = None;
            let mut count = 0u64;
            let mut level = 0;
            let mut steps = 0u64;
            while id != 0 {
                steps += 1;
                if steps > u32::MAX as u64 {
                    return Err(corrupt(id, "right-link cycle"));
                }
                let p = self.pool.get_page(id)?;
                let g = p.read();
                check_node(&g, id)?;
                node::validate(&g).map_err(|r| corrupt(id, r))?;
                level = node::level(&g);
                if let Some(l) = expect_level
                    && l != level
                {
                    return Err(corrupt(id, "child level mismatch"));
                }
                expect_level = Some(level);
                let n = node::nslots(&g);
                if let (Some(h), true) = (&prev_high, n > 0)
                    && node::key_cmp(&g, 0, h) == std::cmp::Ordering::Less
                {
                    return Err(corrupt(id, "key below its left sibling's high key"));
                }
                let mut hk = Vec::new();
                let has_high = node::read_high_key(&g, &mut hk);
                if has_high == (node::right(&g) == 0) {
                    return Err(corrupt(id, "high key and right link disagree"));
                }
                prev_high = has_high.then_some(hk);
                if level == 0 {
                    count += n as u64;
                } else if next_level.is_none() {
                    if n == 0 {
                        return Err(corrupt(id, "empty branch node"));
                    }
                    next_level = Some(node::child_at(&g, 0));
                }
                id = node::right(&g);
            }
            if level == 0 {
                return Ok(count);
            }
            expect_level = Some(level - 1);
            level_start = next_level.unwrap_or(0);
            if level_start == 0 {
                return Err(corrupt(root, "branch level without children"));
            }
        }
    }

    /// Applies one redo operation if the page has not seen `lsn` yet; returns
    /// whether it was applied (the caller stamps the LSN after the record).
    pub(crate) fn redo_op(&self, op: &crate::wal::Op<'_>, lsn: u64) -> Result<Option<PageId>> {
        use crate::wal::Op;
        let page = match *op {
            Op::Image { page, .. }
            | Op::Insert { page, .. }
            | Op::Replace { page, .. }
            | Op::Delete { page, .. }
            | Op::Write { page, .. } => page,
        };
        let ps = self.page_size();
        let p = self.pool.get_page_for_redo(page)?;
        let mut g = p.write();
        if g.page_lsn() >= lsn {
            return Ok(None);
        }
        let bad = |r| Err(corrupt(page, r));
        match *op {
            Op::Image { bytes, .. } => {
                if bytes.len() != ps {
                    return bad("log image of the wrong size");
                }
                g.write_bytes(0, bytes);
                if matches!(node::kind(&g), KIND_LEAF | KIND_BRANCH) {
                    node::validate(&g).map_err(|r| corrupt(page, r))?;
                }
            }
            Op::Write { off, bytes, .. } => {
                if off < 12 || off + bytes.len() > ps {
                    return bad("log write out of range");
                }
                g.write_bytes(off, bytes);
                // Writes target meta and free-list fields; a node they touch
                // must still be a valid node.
                node::validate(&g).map_err(|r| corrupt(page, r))?;
            }
            Op::Insert { key, val, .. } | Op::Replace { key, val, .. } => {
                check_node(&g, page)?;
                match node::search(&g, key) {
                    Ok(i) => {
                        if !node::fits_replace(&g, i, val.len()) {
                            return bad("redo replace does not fit");
                        }
                        node::replace_at(&mut g, i, val);
                    }
                    Err(i) => {
                        if !node::fits(&g, key.len(), val.len()) {
                            return bad("redo insert does not fit");
                        }
                        node::insert_at(&mut g, i, key, val);
                    }
                }
            }
            Op::Delete { key, .. } => {
                check_node(&g, page)?;
                if let Ok(i) = node::search(&g, key) {
                    node::remove_at(&mut g, i);
                }
            }
        }
        Ok(Some(page))
    }

    /// Stamps `lsn` on a page after redo.
    pub(crate) fn stamp(&self, page: PageId, lsn: u64) -> Result<()> {
        let p = self.pool.get_page(page)?;
        let mut g = p.write();
        g.set_page_lsn(lsn);
        Ok(())
    }
}

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
