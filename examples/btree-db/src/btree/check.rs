//! Tree height and the structural check of a whole tree.

use std::collections::HashSet;

use crate::error::{PageId, Result};
use crate::frame::PageRef;
use crate::node;

use super::store::{Store, check_node, corrupt};

impl Store {
    /// The root's level (tree height minus one).
    pub(crate) fn height_of(&self, root: PageId) -> Result<u8> {
        let p = self.pool.get_page(root)?;
        let g = p.read();
        check_node(&g, root)?;
        Ok(node::level(&g))
    }

    /// Checks that each child of the branch node `g` lies in the key range its
    /// cell gives it: at the level below, first key at or above the cell's
    /// key, last key and high key below the next cell's key (or the node's
    /// high key). A child pointer aimed at the wrong node of the right level
    /// would otherwise send searches to a node that cannot hold their key.
    fn check_children(&self, g: &PageRef<'_>, level: u8, children: &mut Vec<PageId>) -> Result<()> {
        let n = node::nslots(g);
        let mut node_high = Vec::new();
        let bounded = node::read_high_key(g, &mut node_high);
        let (mut lo, mut hi, mut k) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            lo.clear();
            node::read_key(g, i, &mut lo);
            hi.clear();
            let has_hi = if i + 1 < n {
                node::read_key(g, i + 1, &mut hi);
                true
            } else {
                hi.extend_from_slice(&node_high);
                bounded
            };
            let child = node::child_at(g, i);
            children.push(child);
            let p = self.pool.get_page(child)?;
            let c = p.read();
            check_node(&c, child)?;
            if node::level(&c) + 1 != level {
                return Err(corrupt(child, "child level mismatch"));
            }
            let cn = node::nslots(&c);
            if cn > 0 {
                k.clear();
                node::read_key(&c, 0, &mut k);
                if k < lo {
                    return Err(corrupt(child, "child key below its parent cell"));
                }
                k.clear();
                node::read_key(&c, cn - 1, &mut k);
                if has_hi && k >= hi {
                    return Err(corrupt(child, "child key above its parent range"));
                }
            }
            if has_hi {
                k.clear();
                if !node::read_high_key(&c, &mut k) || k > hi {
                    return Err(corrupt(child, "child high key above its parent range"));
                }
            }
        }
        Ok(())
    }

    /// Walks every level of a tree checking order, high keys, right links,
    /// levels and each child's key range; returns the number of leaf
    /// entries. Each level's walk must meet the children the level above
    /// names, in their order (a right link into another tree would skip
    /// them), and no page may be visited twice across the trees checked
    /// with the same `seen` (pages belong to one tree).
    pub(crate) fn check_tree(&self, root: PageId, seen: &mut HashSet<PageId>) -> Result<u64> {
        let mut level_start = root;
        let mut expect_level: Option<u8> = None;
        let mut children: Vec<PageId> = Vec::new();
        loop {
            let mut id = level_start;
            let mut prev_high: Option<Vec<u8>> = None;
            let mut count = 0u64;
            let mut level = 0;
            let mut steps = 0u64;
            let parents_children = std::mem::take(&mut children);
            let mut met = 0;
            while id != 0 {
                steps += 1;
                if steps > self.walk_limit() as u64 {
                    return Err(corrupt(id, "right-link cycle"));
                }
                if !seen.insert(id) {
                    return Err(corrupt(
                        id,
                        "page reached twice (shared by two trees or levels)",
                    ));
                }
                if parents_children.get(met) == Some(&id) {
                    met += 1;
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
                if level > 0 {
                    if n == 0 {
                        return Err(corrupt(id, "empty branch node"));
                    }
                    self.check_children(&g, level, &mut children)?;
                } else {
                    count += n as u64;
                }
                id = node::right(&g);
            }
            if met != parents_children.len() {
                return Err(corrupt(
                    parents_children[met],
                    "a child is not reached along its level",
                ));
            }
            if level == 0 {
                return Ok(count);
            }
            expect_level = Some(level - 1);
            level_start = children.first().copied().unwrap_or(0);
            if level_start == 0 {
                return Err(corrupt(root, "branch level without children"));
            }
        }
    }
}
