//! The buffer pool's page table: page id -> frame, read without locks.
//!
//! Two levels: a directory of chunks, each a run of `CHUNK` atomic slots
//! holding `frame + 1` (0 = not resident), created the first time a page in
//! its range is loaded. A lookup is two loads and writes nothing, so threads
//! looking up the same hot pages (every tree's root) share those cache lines
//! instead of passing them back and forth. Changes (loads and evictions)
//! are made by the buffer pool under its replacer lock.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::PageId;

/// Slots per chunk: 256 KiB of table covers 64 Ki pages (256 MiB at 4 KiB).
const CHUNK_BITS: u32 = 16;
const CHUNK: usize = 1 << CHUNK_BITS;

/// The page table of a pool for databases of up to `max_pages` pages.
pub(crate) struct PageTable {
    chunks: Box<[OnceLock<Box<[AtomicU32]>>]>,
}

impl PageTable {
    pub(crate) fn new(max_pages: u32) -> PageTable {
        let n = (max_pages as usize).div_ceil(CHUNK);
        PageTable {
            chunks: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    fn slot(&self, id: PageId) -> Option<&AtomicU32> {
        let chunk = self.chunks.get((id >> CHUNK_BITS) as usize)?.get()?;
        Some(&chunk[id as usize & (CHUNK - 1)])
    }

    /// The frame holding page `id`, if resident. Acquire: a frame found here
    /// was filled (and its page number set) before it was published.
    pub(crate) fn get(&self, id: PageId) -> Option<u32> {
        match self.slot(id)?.load(Ordering::Acquire) {
            0 => None,
            v => Some(v - 1),
        }
    }

    /// Publishes `frame` as holding page `id` (the caller checked `id` is in range).
    pub(crate) fn insert(&self, id: PageId, frame: u32) {
        let Some(chunk) = self.chunks.get((id >> CHUNK_BITS) as usize) else {
            return;
        };
        let chunk = chunk.get_or_init(|| (0..CHUNK).map(|_| AtomicU32::new(0)).collect());
        chunk[id as usize & (CHUNK - 1)].store(frame + 1, Ordering::Release);
    }

    pub(crate) fn remove(&self, id: PageId) {
        if let Some(s) = self.slot(id) {
            s.store(0, Ordering::Release);
        }
    }
}
