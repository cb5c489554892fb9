//! The buffer pool: page-id -> frame table, pin counts, dirty pages,
//! write-back with the WAL rule, and a scan-resistant replacement policy.
//!
//! Replacement is a two-segment clock in the spirit of 2Q. A page read from
//! disk enters the *probation* FIFO. A page referenced again while resident
//! (a pool hit) gets its reference bit set; when the eviction sweep meets it
//! in probation it moves to the *protected* segment instead of being evicted.
//! Victims come from probation while it holds at least a quarter of the
//! frames; a long scan therefore only cycles pages through probation, and the
//! hot set in protected stays resident. Protected pages whose reference bit
//! is clear when the sweep reaches them are demoted back to probation.
//!
//! `get_page` / `put_page` are the seam the speculation layer wraps (escape
//! with undo = `put_page`).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Error, PageId, Result};
use crate::frame::{FrameData, PageMut, PageRef};
use crate::page::{self, PageAccess, PageBuf};
use crate::pager::Pager;
use crate::wal::Wal;

/// A multiplicative hasher for page ids (the default SipHash is slow for u32 keys).
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (v as u64 ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

const NO_PAGE: u32 = u32::MAX;

struct Frame {
    data: FrameData,
    page: AtomicU32,
    pins: AtomicU32,
    dirty: AtomicBool,
    referenced: AtomicBool,
}

struct PoolInner {
    map: IdMap<PageId, u32>,
    probation: VecDeque<u32>,
    protected: VecDeque<u32>,
    free: Vec<u32>,
    hits: u64,
}

/// The buffer pool.
pub(crate) struct BufferPool {
    pager: Pager,
    wal: Arc<Wal>,
    frames: Box<[Frame]>,
    inner: Mutex<PoolInner>,
    probation_target: usize,
    /// Whether write-back must sync the log first (sync mode not `Off`).
    sync_log: bool,
}

/// A pinned page: the frame cannot be evicted until it is dropped (which is
/// `put_page`). Latch it with [`PinnedPage::read`] or [`PinnedPage::write`].
pub(crate) struct PinnedPage<'a> {
    pool: &'a BufferPool,
    frame: u32,
    id: PageId,
}

impl<'a> PinnedPage<'a> {
    pub(crate) fn id(&self) -> PageId {
        self.id
    }

    /// Shared latch. The guard borrows the pool, not the pin, so a search
    /// can latch the next page before releasing this one; callers drop
    /// guards before the pin they were taken through.
    pub(crate) fn read(&self) -> PageRef<'a> {
        self.pool.frames[self.frame as usize].data.read()
    }

    /// Exclusive latch; marks the page dirty on release.
    pub(crate) fn write(&self) -> PageMut<'a> {
        let f = &self.pool.frames[self.frame as usize];
        f.data.write(&f.dirty)
    }
}

impl Drop for PinnedPage<'_> {
    fn drop(&mut self) {
        self.pool.unpin(self.frame);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BufferPool {
    pub(crate) fn new(pager: Pager, wal: Arc<Wal>, frames: usize, sync_log: bool) -> BufferPool {
        let ps = pager.page_size();
        let frames: Box<[Frame]> = (0..frames)
            .map(|_| Frame {
                data: FrameData::new(ps),
                page: AtomicU32::new(NO_PAGE),
                pins: AtomicU32::new(0),
                dirty: AtomicBool::new(false),
                referenced: AtomicBool::new(false),
            })
            .collect();
        let n = frames.len();
        BufferPool {
            pager,
            wal,
            inner: Mutex::new(PoolInner {
                map: IdMap::with_capacity_and_hasher(n * 2, Default::default()),
                probation: VecDeque::with_capacity(n),
                protected: VecDeque::with_capacity(n),
                free: (0..n as u32).rev().collect(),
                hits: 0,
            }),
            frames,
            probation_target: (n / 4).max(1),
            sync_log,
        }
    }

    pub(crate) fn pager(&self) -> &Pager {
        &self.pager
    }

    pub(crate) fn page_size(&self) -> usize {
        self.pager.page_size()
    }

    /// Pins page `id`, reading it from disk on a miss.
    pub(crate) fn get_page(&self, id: PageId) -> Result<PinnedPage<'_>> {
        if id == 0 {
            return Err(Error::Corrupt {
                page: 0,
                reason: "reference to the file header page",
            });
        }
        let mut inner = lock(&self.inner);
        if let Some(&f) = inner.map.get(&id) {
            let fr = &self.frames[f as usize];
            fr.pins.fetch_add(1, Ordering::Relaxed);
            // Load first: re-storing a set bit would dirty the cache line.
            if !fr.referenced.load(Ordering::Relaxed) {
                fr.referenced.store(true, Ordering::Relaxed);
            }
            inner.hits += 1;
            return Ok(PinnedPage {
                pool: self,
                frame: f,
                id,
            });
        }
        let f = match inner.free.pop() {
            Some(f) => f,
            None => self.evict(&mut inner)?,
        };
        let fr = &self.frames[f as usize];
        let loaded = (|| {
            let mut buf = PageBuf::new(self.page_size());
            self.pager.read_page(id, buf.as_bytes_mut())?;
            page::verify(id, buf.as_bytes())?;
            let mut g = fr.data.write(&fr.dirty);
            use crate::page::PageWrite;
            g.write_bytes(0, buf.as_bytes());
            Ok::<(), Error>(())
        })();
        if let Err(e) = loaded {
            inner.free.push(f);
            return Err(e);
        }
        fr.dirty.store(false, Ordering::Relaxed);
        fr.referenced.store(false, Ordering::Relaxed);
        fr.pins.store(1, Ordering::Relaxed);
        fr.page.store(id, Ordering::Relaxed);
        inner.map.insert(id, f);
        inner.probation.push_back(f);
        Ok(PinnedPage {
            pool: self,
            frame: f,
            id,
        })
    }

    /// Unpins a page (the explicit form of dropping the [`PinnedPage`]).
    pub(crate) fn put_page(&self, page: PinnedPage<'_>) {
        drop(page);
    }

    fn unpin(&self, frame: u32) {
        self.frames[frame as usize]
            .pins
            .fetch_sub(1, Ordering::Release);
    }

    /// Picks an unpinned victim frame, writes it back if dirty, and unmaps it.
    fn evict(&self, inner: &mut PoolInner) -> Result<u32> {
        let n = self.frames.len();
        for _ in 0..4 * n + 8 {
            let from_probation = !inner.probation.is_empty()
                && (inner.probation.len() >= self.probation_target || inner.protected.is_empty());
            if from_probation {
                let Some(f) = inner.probation.pop_front() else {
                    break;
                };
                let fr = &self.frames[f as usize];
                if fr.pins.load(Ordering::Acquire) > 0 {
                    inner.probation.push_back(f);
                } else if fr.referenced.swap(false, Ordering::Relaxed) {
                    inner.protected.push_back(f);
                } else {
                    if let Err(e) = self.write_back(fr) {
                        inner.probation.push_front(f);
                        return Err(e);
                    }
                    inner.map.remove(&fr.page.load(Ordering::Relaxed));
                    fr.page.store(NO_PAGE, Ordering::Relaxed);
                    return Ok(f);
                }
            } else {
                let Some(f) = inner.protected.pop_front() else {
                    break;
                };
                let fr = &self.frames[f as usize];
                if fr.pins.load(Ordering::Acquire) > 0
                    || fr.referenced.swap(false, Ordering::Relaxed)
                {
                    inner.protected.push_back(f);
                } else {
                    inner.probation.push_back(f);
                }
            }
        }
        Err(Error::PoolExhausted)
    }

    /// Writes a frame's page if dirty, obeying the WAL rule: the log is made
    /// durable up to the page LSN before the page reaches the file.
    fn write_back(&self, fr: &Frame) -> Result<()> {
        if !fr.dirty.load(Ordering::Acquire) {
            return Ok(());
        }
        let id = fr.page.load(Ordering::Relaxed);
        let mut buf = PageBuf::new(self.page_size());
        let lsn = {
            let g = fr.data.read();
            g.read_bytes(0, buf.as_bytes_mut());
            fr.dirty.store(false, Ordering::Release);
            g.page_lsn()
        };
        let r = self.wal.flush(lsn + 1, self.sync_log).and_then(|()| {
            page::seal(buf.as_bytes_mut());
            self.pager.write_page(id, buf.as_bytes())
        });
        if r.is_err() {
            fr.dirty.store(true, Ordering::Release);
        }
        r
    }

    /// Writes every dirty page (a checkpoint). Pages dirtied while this runs
    /// may or may not be written; every page dirty when it started is.
    pub(crate) fn flush_all(&self) -> Result<()> {
        for (i, fr) in self.frames.iter().enumerate() {
            let Some(p) = self.pin_frame(i as u32) else {
                continue;
            };
            // A writer sets the dirty flag before it releases its exclusive
            // latch, so once we hold the shared latch the flag is current.
            drop(p.read());
            self.write_back(fr)?;
        }
        Ok(())
    }

    /// Pins the page currently in frame `f`, if any.
    fn pin_frame(&self, f: u32) -> Option<PinnedPage<'_>> {
        let _inner = lock(&self.inner);
        let fr = &self.frames[f as usize];
        let id = fr.page.load(Ordering::Relaxed);
        if id == NO_PAGE {
            return None;
        }
        fr.pins.fetch_add(1, Ordering::Relaxed);
        Some(PinnedPage {
            pool: self,
            frame: f,
            id,
        })
    }

    /// `get_page` calls served without a read.
    pub(crate) fn hits(&self) -> u64 {
        lock(&self.inner).hits
    }

    /// Whether page `id` is resident (for tests of the replacement policy).
    pub(crate) fn is_resident(&self, id: PageId) -> bool {
        lock(&self.inner).map.contains_key(&id)
    }
}
