//! The B-link tree operations: descent with move-right, point reads, key
//! changes, and the two steps of a split (half split, separator post).

use crate::buffer::PinnedPage;
use crate::error::{PageId, Result};
use crate::frame::PageMut;
use crate::node;
use crate::page::{KIND_BRANCH, KIND_LEAF, PageAccess};
use crate::wal::{KIND_CLR, KIND_SMO, KIND_UPDATE, RecBuilder};

use super::alloc::META_PAGE;
use super::store::{LogCtx, LogMode, Modify, Outcome, Store, check_node, corrupt};

impl Store {
    /// Descends from `root` to the node at `level` whose key range holds
    /// `key`, and returns it pinned (not latched: the caller latches it and
    /// checks it again, since it may split or, for the root, grow a level
    /// meanwhile). Resident nodes are read optimistically (no latch, no pin,
    /// nothing written), so concurrent descents do not pass the upper
    /// levels' cache lines back and forth; a node being written, or not in
    /// the pool, is read under its shared latch instead.
    pub(crate) fn descend(&self, root: PageId, key: &[u8], level: u8) -> Result<PinnedPage<'_>> {
        // Levels must fall by one per step down and stay put when moving
        // right, and right moves are bounded by the page count: a crafted
        // file with a cycle of pointers (valid checksums) yields an error,
        // not a hang.
        let mut id = root;
        let mut expect: Option<u8> = None;
        let mut moves = 0u32;
        loop {
            let step = match self
                .pool
                .read_optimistic(id, |g| route(g, id, key, level, expect))
            {
                Some(step) => step,
                None => {
                    let p = self.pool.get_page(id)?;
                    let g = p.read();
                    let step = route(&g, id, key, level, expect);
                    if matches!(step, Ok(Route::Here)) {
                        drop(g);
                        return Ok(p);
                    }
                    step
                }
            }?;
            match step {
                Route::Here => return self.pool.get_page(id),
                Route::Right(r, l) => {
                    moves += 1;
                    // Read afresh: splits may add pages while we walk.
                    if moves > self.walk_limit() {
                        return Err(corrupt(id, "right-link cycle"));
                    }
                    expect = Some(l);
                    id = r;
                }
                // The node sought itself is pinned without reading it first:
                // the caller latches it and checks its level and range anyway.
                Route::Down(child, l) if l == level => return self.pool.get_page(child),
                Route::Down(child, l) => {
                    expect = Some(l);
                    id = child;
                }
            }
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
    /// is below the high key. `None` when `p` is no longer a node at `level`:
    /// the descent released its latch, and a root split in between turned
    /// the root into the parent of its old contents; the caller descends
    /// again. Any other page never changes level while its table is locked.
    fn latch_for<'a>(
        &'a self,
        mut p: PinnedPage<'a>,
        key: &[u8],
        level: u8,
    ) -> Result<Option<(PinnedPage<'a>, PageMut<'a>)>> {
        let mut g = p.write();
        if !is_node_at(&g, level) {
            return Ok(None);
        }
        let mut moves = 0u32;
        while node::beyond_high(&g, key) {
            let r = node::right(&g);
            moves += 1;
            if r == 0 || moves > self.walk_limit() {
                return Err(corrupt(p.id(), "bad right link"));
            }
            let np = self.pool.get_page(r)?;
            let ng = np.write();
            if !is_node_at(&ng, level) {
                return Err(corrupt(r, "right sibling at another level"));
            }
            drop(g);
            g = ng;
            p = np;
        }
        Ok(Some((p, g)))
    }

    /// Point lookup: appends the value to `out`.
    pub(crate) fn get(
        &self,
        root: PageId,
        key: &[u8],
        out: &mut Vec<u8>,
        hint: &mut PageId,
    ) -> Result<bool> {
        let mut restarts = 0u32;
        'descent: loop {
            let mut p = self.find_leaf(root, key, hint)?;
            let mut moves = 0u32;
            loop {
                let next = {
                    let g = p.read();
                    if !is_node_at(&g, 0) {
                        // The root split after the descent let go of it.
                        if moves > 0 {
                            return Err(corrupt(p.id(), "a leaf was expected"));
                        }
                        restart(&mut restarts, p.id())?;
                        *hint = 0;
                        continue 'descent;
                    }
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
                moves += 1;
                if next == 0 || moves > self.walk_limit() {
                    return Err(corrupt(p.id(), "bad right link"));
                }
                p = self.pool.get_page(next)?;
            }
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
        let mut restarts = 0u32;
        loop {
            let leaf = self.find_leaf(root, key, hint)?;
            let leaf_id = leaf.id();
            let Some((p, mut g)) = self.latch_for(leaf, key, 0)? else {
                restart(&mut restarts, leaf_id)?;
                *hint = 0;
                continue;
            };
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
        let LogCtx {
            rec,
            txn,
            prev,
            old,
            had_old,
            chain,
            ..
        } = ctx;
        let old = had_old.then_some(old.as_slice());
        // A lent transaction's `prev` is set as the log appends the record
        // (see `crate::chain`): 0 until then.
        let linked = chain.as_deref();
        rec.begin(
            *txn,
            if linked.is_some() { 0 } else { *prev },
            kind_of(mode),
        );
        match mode {
            LogMode::Undoable { table } => rec.update_header(table, key, old),
            LogMode::Compensation { undo_next } => rec.clr_header(undo_next),
        }
        rec.start_ops();
        op(rec);
        let lsn = self.log_linked(rec, &mut [(id, g)], linked.map(|c| &c.last));
        match linked {
            None => *prev = lsn,
            Some(c) => {
                if let LogMode::Undoable { table } = mode {
                    c.push(table, key, old, rec.prev());
                }
            }
        }
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
        let (rp, lp) = self.allocating(&mut meta, |s, meta| {
            let rp = s.alloc(meta, rec)?;
            let lp = if is_root {
                Some(s.alloc(meta, rec)?)
            } else {
                None
            };
            Ok((rp, lp))
        })?;
        let rid = rp.id();
        let mut rg = rp.write();
        if let Some(lp) = lp {
            let lid = lp.id();
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
        let mut restarts = 0u32;
        loop {
            let node_p = self.descend(root, &sep, level)?;
            let node_id = node_p.id();
            let Some((p, mut g)) = self.latch_for(node_p, &sep, level)? else {
                restart(&mut restarts, node_id)?;
                continue;
            };
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
}

/// Whether a latched page is a tree node at `level`.
fn is_node_at<P: PageAccess>(g: &P, level: u8) -> bool {
    matches!(node::kind(g), KIND_LEAF | KIND_BRANCH) && node::level(g) == level
}

/// Counts a restart of a descent after a concurrent root split. Each one
/// follows a split that raised the root a level, so more restarts than a
/// tree can have levels mean the page is damaged, not busy.
pub(super) fn restart(restarts: &mut u32, page: PageId) -> Result<()> {
    *restarts += 1;
    if *restarts > u8::MAX as u32 {
        return Err(corrupt(page, "page changed level"));
    }
    Ok(())
}

/// Where a descent goes from a node.
enum Route {
    /// This node is the one sought.
    Here,
    /// Right, to a sibling at the given level.
    Right(PageId, u8),
    /// Down, to a child at the given level.
    Down(PageId, u8),
}

/// One step of a descent towards `key` at `level` from node `id`, whose
/// level must be `expect` if known. Pure: run on an optimistic view, its
/// answer (errors included) counts only once the view is validated.
fn route<P: PageAccess>(
    g: &P,
    id: PageId,
    key: &[u8],
    level: u8,
    expect: Option<u8>,
) -> Result<Route> {
    check_node(g, id)?;
    let l = node::level(g);
    if expect.is_some_and(|e| e != l) {
        return Err(corrupt(id, "child level mismatch"));
    }
    if node::beyond_high(g, key) {
        let r = node::right(g);
        if r == 0 {
            return Err(corrupt(id, "bad right link"));
        }
        return Ok(Route::Right(r, l));
    }
    if l == level {
        return Ok(Route::Here);
    }
    if l < level || node::nslots(g) == 0 {
        return Err(corrupt(id, "tree shape"));
    }
    Ok(Route::Down(
        node::child_at(g, node::child_index(g, key)),
        l - 1,
    ))
}

/// The record kind of a key change logged in `mode`.
fn kind_of(mode: LogMode) -> u8 {
    match mode {
        LogMode::Undoable { .. } => KIND_UPDATE,
        LogMode::Compensation { .. } => KIND_CLR,
    }
}
