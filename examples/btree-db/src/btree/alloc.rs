//! Page allocation: the meta page (page count and free-list head), taking
//! pages from the free list or the end of the file, and creating and freeing
//! whole trees.

use crate::buffer::{MAX_PAGES, PinnedPage};
use crate::error::{PageId, Result};
use crate::frame::PageMut;
use crate::node;
use crate::page::{
    KIND_FREE, KIND_LEAF, KIND_META, OFF_KIND, OFF_NEXT_FREE, PageAccess, PageBuf, PageWrite,
};
use crate::wal::{KIND_SMO, RecBuilder};

use super::store::{Store, check_node, corrupt};

/// The meta page: page count and free list head.
pub(crate) const META_PAGE: PageId = 1;
/// Root of the catalog tree.
pub(crate) const CATALOG_ROOT: PageId = 2;
const META_PAGE_COUNT: usize = 32;
const META_FREE_HEAD: usize = 36;

impl Store {
    /// Formats a fresh database's meta page and catalog root image.
    pub(crate) fn initial_pages(page_size: usize) -> (PageBuf, PageBuf) {
        let mut meta = PageBuf::new(page_size);
        meta.write_u8(OFF_KIND, KIND_META);
        meta.write_u32(META_PAGE_COUNT, CATALOG_ROOT + 1);
        let mut cat = PageBuf::new(page_size);
        node::init(&mut cat, KIND_LEAF, 0);
        (meta, cat)
    }

    /// Number of pages allocated (the file may be shorter until write-back).
    pub(crate) fn page_count(&self) -> Result<u32> {
        let m = self.pool.get_page(META_PAGE)?;
        let g = m.read();
        if g.read_u8(OFF_KIND) != KIND_META {
            return Err(corrupt(META_PAGE, "meta page is not a meta page"));
        }
        Ok(g.read_u32(META_PAGE_COUNT))
    }

    /// Allocates a page (free list first), logging the meta change into
    /// `rec`, and returns it pinned. The caller keeps `meta` latched until
    /// the record is appended, so meta changes reach the log in the order
    /// they happen. On error nothing has changed: every check and the pin
    /// come before the meta page is written, and the meta page itself or a
    /// page outside the file is never handed out, whatever the meta page says.
    pub(super) fn alloc(
        &self,
        meta: &mut PageMut<'_>,
        rec: &mut RecBuilder,
    ) -> Result<PinnedPage<'_>> {
        if meta.read_u8(OFF_KIND) != KIND_META {
            return Err(corrupt(META_PAGE, "meta page is not a meta page"));
        }
        let count = meta.read_u32(META_PAGE_COUNT);
        if count <= CATALOG_ROOT || count >= MAX_PAGES {
            return Err(corrupt(META_PAGE, "page count out of range"));
        }
        let head = meta.read_u32(META_FREE_HEAD);
        if head != 0 {
            if head <= CATALOG_ROOT || head >= count {
                return Err(corrupt(META_PAGE, "free list head out of range"));
            }
            let p = self.pool.get_page(head)?;
            let next = {
                let g = p.read();
                if g.read_u8(OFF_KIND) != KIND_FREE {
                    return Err(corrupt(head, "free list entry is not a free page"));
                }
                g.read_u32(OFF_NEXT_FREE)
            };
            if next != 0 && (next <= CATALOG_ROOT || next >= count) {
                return Err(corrupt(head, "free list link out of range"));
            }
            meta.write_u32(META_FREE_HEAD, next);
            rec.op_write(META_PAGE, META_FREE_HEAD, &next.to_le_bytes());
            Ok(p)
        } else {
            if count >= MAX_PAGES - 1 {
                return Err(corrupt(META_PAGE, "database is full"));
            }
            let p = self.pool.get_new_page(count)?;
            meta.write_u32(META_PAGE_COUNT, count + 1);
            rec.op_write(META_PAGE, META_PAGE_COUNT, &(count + 1).to_le_bytes());
            self.raise_walk_limit(count + 1);
            Ok(p)
        }
    }

    /// Runs `f`, which allocates pages under the latched `meta`; if it fails,
    /// puts the meta page's count and free-list head back as they were, so
    /// an allocation that a later step undid leaves no unlogged change.
    pub(super) fn allocating<'s, T>(
        &'s self,
        meta: &mut PageMut<'_>,
        f: impl FnOnce(&'s Self, &mut PageMut<'_>) -> Result<T>,
    ) -> Result<T> {
        let (count, head) = (
            meta.read_u32(META_PAGE_COUNT),
            meta.read_u32(META_FREE_HEAD),
        );
        let r = f(self, meta);
        if r.is_err() {
            meta.write_u32(META_PAGE_COUNT, count);
            meta.write_u32(META_FREE_HEAD, head);
        }
        r
    }

    /// Checks the meta page and walks the free list: every entry inside the
    /// file's page range, a free page, and no cycle; adds its pages to `seen`.
    pub(crate) fn check_free_list(
        &self,
        seen: &mut std::collections::HashSet<PageId>,
    ) -> Result<u32> {
        let count = self.page_count()?;
        if count <= CATALOG_ROOT || count >= MAX_PAGES {
            return Err(corrupt(META_PAGE, "page count out of range"));
        }
        let mut id = {
            let m = self.pool.get_page(META_PAGE)?;
            let g = m.read();
            g.read_u32(META_FREE_HEAD)
        };
        let mut steps = 0u32;
        while id != 0 {
            steps += 1;
            if id <= CATALOG_ROOT || id >= count || steps > count || !seen.insert(id) {
                return Err(corrupt(id, "free list entry out of range or in a cycle"));
            }
            let p = self.pool.get_page(id)?;
            let g = p.read();
            if g.read_u8(OFF_KIND) != KIND_FREE {
                return Err(corrupt(id, "free list entry is not a free page"));
            }
            id = g.read_u32(OFF_NEXT_FREE);
        }
        Ok(count)
    }

    /// Allocates and formats an empty leaf as a table root (one record).
    pub(crate) fn create_tree(&self) -> Result<PageId> {
        let mut rec = RecBuilder::default();
        rec.begin(0, 0, KIND_SMO);
        rec.start_ops();
        let mp = self.pool.get_page(META_PAGE)?;
        let mut meta = mp.write();
        let p = self.alloc(&mut meta, &mut rec)?;
        let id = p.id();
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
                if pages.len() as u64 > self.walk_limit() as u64 {
                    return Err(corrupt(id, "right-link cycle"));
                }
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
}
