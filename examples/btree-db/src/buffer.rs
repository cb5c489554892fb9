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
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Error, PageId, Result};
use crate::frame::{Arena, FrameData, Optimistic, PageMut, PageRef};
use crate::node;
use crate::page::{self, PageAccess, PageBuf, PageWrite};
use crate::page_table::PageTable;
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

/// How a miss fills its frame.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Load {
    /// Read and verify (checksum, structure, LSN within the log).
    Verified,
    /// Read; a page failing verification becomes zeros for redo to rebuild.
    Redo,
    /// A fresh page from the end of the file: zeros, nothing read.
    New,
}

/// One frame, alone on its cache lines: pins and latches of neighbouring
/// frames are written by different threads.
#[repr(align(128))]
struct Frame {
    data: FrameData,
    /// The page held, `NO_PAGE` if none; set before the frame is published
    /// in the page table.
    page: AtomicU32,
    /// Pins, plus `EVICTING` while an evictor owns the frame.
    pins: AtomicU32,
    dirty: AtomicBool,
    referenced: AtomicBool,
    /// `get_page` calls served from this frame (per frame, so counting
    /// writes no line that other frames' users write).
    hits: AtomicU64,
}

impl Frame {
    /// Sets the reference bit for replacement. Load first: re-storing a set
    /// bit would dirty the line, which hot pages' users share.
    fn mark_referenced(&self) {
        if !self.referenced.load(Ordering::Relaxed) {
            self.referenced.store(true, Ordering::Relaxed);
        }
    }
}

/// Replacement state; touched only on misses.
struct Replacer {
    probation: VecDeque<u32>,
    protected: VecDeque<u32>,
    free: Vec<u32>,
}

/// Set in a frame's pin count while the frame is being evicted: a pin that
/// sees it backs off, and the evictor waits for no pin to come.
const EVICTING: u32 = 1 << 31;

/// The largest database, in pages (a bound on what a corrupt pointer can
/// make the page table allocate).
pub(crate) const MAX_PAGES: u32 = 1 << 26;

/// The buffer pool.
pub(crate) struct BufferPool {
    pager: Pager,
    wal: Arc<Wal>,
    frames: Box<[Frame]>,
    table: PageTable,
    /// Held for a whole miss (victim choice, write-back, read), so two
    /// misses on one page load it once.
    replacer: Mutex<Replacer>,
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
    /// A pool of `frames` frames over `pager`; `None` if their memory cannot be
    /// had.
    pub(crate) fn new(
        pager: Pager,
        wal: Arc<Wal>,
        frames: usize,
        sync_log: bool,
    ) -> Option<BufferPool> {
        let ps = pager.page_size();
        let arena = Arena::try_new(frames.checked_mul(ps / 8)?)?;
        let mut all = Vec::new();
        all.try_reserve_exact(frames).ok()?;
        for i in 0..frames {
            all.push(Frame {
                data: FrameData::in_arena(&arena, i, ps),
                page: AtomicU32::new(NO_PAGE),
                pins: AtomicU32::new(0),
                dirty: AtomicBool::new(false),
                referenced: AtomicBool::new(false),
                hits: AtomicU64::new(0),
            });
        }
        let frames = all.into_boxed_slice();
        let n = frames.len();
        Some(BufferPool {
            pager,
            wal,
            table: PageTable::new(MAX_PAGES),
            replacer: Mutex::new(Replacer {
                probation: VecDeque::with_capacity(n),
                protected: VecDeque::with_capacity(n),
                free: (0..n as u32).rev().collect(),
            }),
            frames,
            probation_target: (n / 4).max(1),
            sync_log,
        })
    }

    pub(crate) fn pager(&self) -> &Pager {
        &self.pager
    }

    pub(crate) fn page_size(&self) -> usize {
        self.pager.page_size()
    }

    /// Pins frame `f` if it still holds page `id` and nobody is evicting it.
    fn pin(&self, f: u32, id: PageId) -> bool {
        let fr = &self.frames[f as usize];
        let prev = fr.pins.fetch_add(1, Ordering::Acquire);
        if prev & EVICTING != 0 || fr.page.load(Ordering::Acquire) != id {
            fr.pins.fetch_sub(1, Ordering::Release);
            return false;
        }
        true
    }

    /// Pins `id` if it is resident: no lock, and no write but the pin.
    fn try_hit(&self, id: PageId) -> Option<PinnedPage<'_>> {
        let f = self.table.get(id)?;
        if !self.pin(f, id) {
            return None;
        }
        self.frames[f as usize].mark_referenced();
        Some(PinnedPage {
            pool: self,
            frame: f,
            id,
        })
    }

    /// Reads page `id` without pinning or latching it, if it is resident
    /// and no writer holds it: `read` runs on an optimistic view and its
    /// result is returned only if the view was consistent throughout (else
    /// it is retried a few times). `None`: use `get_page` and a latch.
    pub(crate) fn read_optimistic<R>(
        &self,
        id: PageId,
        mut read: impl FnMut(&Optimistic<'_>) -> R,
    ) -> Option<R> {
        let f = self.table.get(id)?;
        let fr = &self.frames[f as usize];
        // A use like any other for replacement (else the upper levels, read
        // only this way, would look cold and be evicted).
        fr.mark_referenced();
        for _ in 0..4 {
            let view = fr.data.optimistic()?;
            if fr.page.load(Ordering::Acquire) != id {
                return None;
            }
            let r = read(&view);
            // Validated and still this page: `r` came from one consistent
            // image of page `id` (an evictor changes the page number before
            // a new page's bytes, which bump the version, go in).
            if view.validate() && fr.page.load(Ordering::Relaxed) == id {
                return Some(r);
            }
        }
        None
    }

    /// Pins page `id`, reading it from disk on a miss.
    pub(crate) fn get_page(&self, id: PageId) -> Result<PinnedPage<'_>> {
        self.get_page_inner(id, Load::Verified)
    }

    /// `get_page` for redo: a page that fails its checksum or structure
    /// check (a torn write) is loaded as zeros instead, for the full-page
    /// image in the log to rebuild; any other redo operation on it fails.
    pub(crate) fn get_page_for_redo(&self, id: PageId) -> Result<PinnedPage<'_>> {
        self.get_page_inner(id, Load::Redo)
    }

    /// Pins a page just taken from the end of the file (never written): its
    /// frame is zeroed, nothing is read.
    pub(crate) fn get_new_page(&self, id: PageId) -> Result<PinnedPage<'_>> {
        self.get_page_inner(id, Load::New)
    }

    fn get_page_inner(&self, id: PageId, how: Load) -> Result<PinnedPage<'_>> {
        if id == 0 || id >= MAX_PAGES {
            return Err(Error::Corrupt {
                page: id,
                reason: "page number out of range",
            });
        }
        if let Some(p) = self.try_hit(id) {
            self.frames[p.frame as usize]
                .hits
                .fetch_add(1, Ordering::Relaxed);
            return Ok(p);
        }
        let mut rep = lock(&self.replacer);
        // Another miss may have loaded it while we waited.
        if let Some(p) = self.try_hit(id) {
            return Ok(p);
        }
        let f = match rep.free.pop() {
            Some(f) => f,
            None => self.evict(&mut rep)?,
        };
        let fr = &self.frames[f as usize];
        let loaded = (|| {
            let mut buf = PageBuf::new(self.page_size());
            if how == Load::New {
                let mut g = fr.data.write(&fr.dirty);
                g.write_bytes(0, buf.as_bytes());
                return Ok(());
            }
            self.pager.read_page(id, buf.as_bytes_mut())?;
            match node::verify(id, buf.as_bytes()) {
                Ok(()) => {}
                Err(Error::BadChecksum { .. } | Error::Corrupt { .. }) if how == Load::Redo => {
                    buf.as_bytes_mut().fill(0);
                }
                Err(e) => return Err(e),
            }
            // A page is written only after the log holds its last record
            // (the WAL rule), so a page newer than the whole log means the
            // log lost records that the page depends on.
            if buf.page_lsn() >= self.wal.next_lsn() {
                return Err(Error::Corrupt {
                    page: id,
                    reason: "page is newer than the end of the log (log records are missing)",
                });
            }
            let mut g = fr.data.write(&fr.dirty);
            g.write_bytes(0, buf.as_bytes());
            Ok::<(), Error>(())
        })();
        if let Err(e) = loaded {
            self.release_frame(f);
            rep.free.push(f);
            return Err(e);
        }
        fr.dirty.store(false, Ordering::Relaxed);
        fr.referenced.store(false, Ordering::Relaxed);
        fr.page.store(id, Ordering::Release);
        // Pinned for the caller, then no longer being evicted, then
        // findable: a pin racing with this sees either the eviction flag or
        // the new page number.
        fr.pins.fetch_add(1, Ordering::Relaxed);
        fr.pins.fetch_and(!EVICTING, Ordering::Release);
        self.table.insert(id, f);
        rep.probation.push_back(f);
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

    /// Takes frame `f` for eviction and unmaps it if nobody has it pinned;
    /// false if pinned.
    fn try_unmap(&self, f: u32) -> bool {
        let fr = &self.frames[f as usize];
        if fr
            .pins
            .compare_exchange(0, EVICTING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        self.table.remove(fr.page.load(Ordering::Relaxed));
        true
    }

    /// Gives up an eviction of frame `f` (its page stays, unmapped or not).
    fn release_frame(&self, f: u32) {
        self.frames[f as usize]
            .pins
            .fetch_and(!EVICTING, Ordering::Release);
    }

    /// Picks an unpinned victim frame, unmaps it and writes it back if dirty.
    fn evict(&self, rep: &mut Replacer) -> Result<u32> {
        // Keep probation near its target by demoting cold protected frames.
        for _ in 0..rep.protected.len() {
            if rep.probation.len() >= self.probation_target {
                break;
            }
            let Some(f) = rep.protected.pop_front() else {
                break;
            };
            let fr = &self.frames[f as usize];
            if fr.pins.load(Ordering::Acquire) > 0 || fr.referenced.swap(false, Ordering::Relaxed) {
                rep.protected.push_back(f);
            } else {
                rep.probation.push_back(f);
            }
        }
        // One sweep of probation: a frame used again since it came in moves
        // to protected; the first unpinned one that was not is the victim.
        for _ in 0..rep.probation.len() {
            let Some(f) = rep.probation.pop_front() else {
                break;
            };
            let fr = &self.frames[f as usize];
            if fr.pins.load(Ordering::Acquire) > 0 {
                rep.probation.push_back(f);
            } else if fr.referenced.swap(false, Ordering::Relaxed) {
                rep.protected.push_back(f);
            } else if let Some(f) = self.take_victim(rep, f, false)? {
                return Ok(f);
            }
        }
        // Everything in probation is pinned: the victim must come from
        // protected (else a pool whose few probation frames are pinned would
        // report exhaustion with most frames free). Two sweeps: the first
        // clears reference bits.
        for _ in 0..2 * rep.protected.len() {
            let Some(f) = rep.protected.pop_front() else {
                break;
            };
            let fr = &self.frames[f as usize];
            if fr.pins.load(Ordering::Acquire) > 0 || fr.referenced.swap(false, Ordering::Relaxed) {
                rep.protected.push_back(f);
            } else if let Some(f) = self.take_victim(rep, f, true)? {
                return Ok(f);
            }
        }
        Err(Error::PoolExhausted)
    }

    /// Unmaps unpinned frame `f` (taken from probation, or from protected if
    /// `protected`) and writes it back; `None` if a pin came first (the
    /// frame goes back where it was).
    fn take_victim(&self, rep: &mut Replacer, f: u32, protected: bool) -> Result<Option<u32>> {
        let queue = if protected {
            &mut rep.protected
        } else {
            &mut rep.probation
        };
        if !self.try_unmap(f) {
            queue.push_back(f);
            return Ok(None);
        }
        // Unmapped: nobody can pin it now; write it back.
        let fr = &self.frames[f as usize];
        if let Err(e) = self.write_back(fr) {
            let id = fr.page.load(Ordering::Relaxed);
            self.table.insert(id, f);
            self.release_frame(f);
            queue.push_front(f);
            return Err(e);
        }
        // Still flagged as evicting: the caller fills it.
        fr.page.store(NO_PAGE, Ordering::Release);
        Ok(Some(f))
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
            page::seal(id, buf.as_bytes_mut());
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
        let mut busy = Vec::new();
        for (i, fr) in self.frames.iter().enumerate() {
            let Some(p) = self.pin_frame(i as u32) else {
                // Empty, or being evicted right now: looked at again below.
                busy.push(i);
                continue;
            };
            // A writer sets the dirty flag before it releases its exclusive
            // latch, so once we hold the shared latch the flag is current.
            drop(p.read());
            self.write_back(fr)?;
        }
        // An eviction holds the replacer lock until its write-back is done
        // (or has failed and put the page back): once we have had the lock,
        // every eviction we skipped is over, and its page is either on disk
        // or resident again, to be written here. Without this, a checkpoint
        // could record its redo start while an older change was still on its
        // way to the file. The lock is not kept while latching: a writer
        // holding a latch may be waiting for it to load a page.
        drop(lock(&self.replacer));
        for i in busy {
            if let Some(p) = self.pin_frame(i as u32) {
                drop(p.read());
                self.write_back(&self.frames[i])?;
            }
        }
        Ok(())
    }

    /// Pins the page currently in frame `f`, if any.
    fn pin_frame(&self, f: u32) -> Option<PinnedPage<'_>> {
        let id = self.frames[f as usize].page.load(Ordering::Acquire);
        if id == NO_PAGE || !self.pin(f, id) {
            return None;
        }
        Some(PinnedPage {
            pool: self,
            frame: f,
            id,
        })
    }

    /// `get_page` calls served without a read.
    pub(crate) fn hits(&self) -> u64 {
        self.frames
            .iter()
            .map(|f| f.hits.load(Ordering::Relaxed))
            .sum()
    }

    /// Whether page `id` is resident (for tests of the replacement policy).
    /// Frames pinned right now (for tests: none once every caller let go).
    pub(crate) fn pinned_frames(&self) -> usize {
        self.frames
            .iter()
            .filter(|f| f.pins.load(Ordering::Acquire) & !EVICTING != 0)
            .count()
    }

    pub(crate) fn is_resident(&self, id: PageId) -> bool {
        self.table.get(id).is_some()
    }
}
