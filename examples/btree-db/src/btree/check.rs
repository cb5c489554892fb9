//! Tree height and the structural check of a whole tree.

use crate::error::{PageId, Result};
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
                if steps > self.walk_limit() as u64 {
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
}
