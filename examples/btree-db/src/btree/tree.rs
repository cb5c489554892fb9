//! The B-link tree operations: descent with move-right, point reads, key
//! changes, and the two steps of a split (half split, separator post).

use crate::buffer::PinnedPage;
use crate::error::{PageId, Result};
use crate::frame::PageMut;
use crate::node;
use crate::page::{KIND_BRANCH, KIND_LEAF};
use crate::wal::{KIND_CLR, KIND_SMO, KIND_UPDATE, RecBuilder};

use super::alloc::META_PAGE;
use super::store::{LogCtx, LogMode, Modify, Outcome, Store, check_node, corrupt};

impl Store {
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
}
