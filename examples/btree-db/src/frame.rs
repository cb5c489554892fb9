//! Frame storage: where the buffer pool keeps page bytes, and the accessors
//! through which they are reached.
//!
//! A frame is a page held as 64-bit atomic words behind a reader-writer
//! latch and a version counter (a sequence lock). Three ways in:
//!
//! * [`PageRef`]: the shared latch;
//! * [`PageMut`]: the exclusive latch; it makes the version odd while held
//!   and even again (one higher) on release;
//! * [`Optimistic`]: no latch and no write at all: read the version, read
//!   the bytes, and trust what was read only if the version is still the
//!   same and even ([`Optimistic::validate`]). This is how descents cross
//!   the upper levels of a tree, which every operation reads: a latch would
//!   make every reader write the same cache line, so two threads would
//!   spend their time passing it back and forth.
//!
//! Because an optimistic reader may run while a writer changes the page, the
//! bytes are atomics: writers store words (relaxed, plain moves on x86) and
//! optimistic readers load words, so the race is defined behaviour, and
//! every optimistic accessor stays inside the page whatever offsets a
//! half-written page yields (bytes past the end read as zero). A reader acts
//! on what it read only after validating it. Latched readers, whom no
//! writer can overlap, read the same memory as a plain byte slice.
//!
//! This module is also the swap point for speculation: nothing outside it
//! sees the words, only the offset-based [`crate::PageAccess`] /
//! [`crate::PageWrite`] accessors.

use std::alloc::Layout;
use std::cmp::Ordering as Cmp;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::page::{PageAccess, PageWrite, impl_page_access};

/// Zeroed words for many frames, taken from the system in one block, so that the
/// pages of frames not used yet are never touched: the system hands out zeroed
/// pages as they are first used. (Each frame filled with zeros as it was made, a
/// pool of the default 16,384 pages made a process 64 MiB larger at open, and the
/// open took 30 ms of page faults, whatever the database held.)
pub(crate) struct Arena {
    start: NonNull<AtomicU64>,
    layout: Layout,
}

// SAFETY: the arena owns its block, which holds atomics only, reached through
// shared references; freeing it needs no particular thread.
unsafe impl Send for Arena {}
// SAFETY: as above: every access to the words is through `&AtomicU64`.
unsafe impl Sync for Arena {}

impl Arena {
    /// Zeroed room for `words` words (at least one); `None` if the memory cannot
    /// be had (a pool the process cannot hold is an error, not an abort).
    pub(crate) fn try_new(words: usize) -> Option<Arc<Arena>> {
        let layout = Layout::array::<AtomicU64>(words.max(1)).ok()?;
        // SAFETY: the layout's size is not zero (at least one word).
        let block = unsafe { std::alloc::alloc_zeroed(layout) };
        let start = NonNull::new(block.cast::<AtomicU64>())?;
        Some(Arc::new(Arena { start, layout }))
    }

    /// Words the arena holds.
    fn len(&self) -> usize {
        self.layout.size() / size_of::<AtomicU64>()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: `start` was allocated in `try_new` with `layout`, once, and the
        // arena is dropped once, after every frame holding it (each holds an `Arc`).
        unsafe { std::alloc::dealloc(self.start.as_ptr().cast(), self.layout) };
    }
}

/// One frame's words in an [`Arena`], which it keeps alive.
struct Words {
    start: NonNull<AtomicU64>,
    len: usize,
    _arena: Arc<Arena>,
}

// SAFETY: the words are atomics reached through shared references, in an arena
// kept alive by `_arena` (itself `Send` and `Sync`).
unsafe impl Send for Words {}
// SAFETY: as above.
unsafe impl Sync for Words {}

impl std::ops::Deref for Words {
    type Target = [AtomicU64];

    fn deref(&self) -> &[AtomicU64] {
        // SAFETY: `start..start + len` lies in the arena (checked in
        // `FrameData::in_arena`), which `_arena` keeps alive as long as `self`;
        // its bytes were zeroed at allocation, a valid `AtomicU64` each, and are
        // only reached as atomics.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }
}

/// The bytes of one buffer pool frame, with its latch and version.
pub(crate) struct FrameData {
    latch: RwLock<()>,
    /// Odd while an exclusive latch is held; bumped on each acquire and release.
    version: AtomicU64,
    words: Words,
}

impl FrameData {
    #[cfg(test)]
    pub(crate) fn new(page_size: usize) -> FrameData {
        FrameData::in_arena(
            &Arena::try_new(page_size / 8).expect("memory"),
            0,
            page_size,
        )
    }

    /// Frame `index` of `arena`, of `page_size` bytes (zeroed until written).
    /// Panics if the arena is too small for it.
    pub(crate) fn in_arena(arena: &Arc<Arena>, index: usize, page_size: usize) -> FrameData {
        let len = page_size / 8;
        let first = index * len;
        assert!(
            first + len <= arena.len(),
            "frame {index} is past the arena"
        );
        // SAFETY: `first` is inside the arena's block (asserted above).
        let start = unsafe { NonNull::new_unchecked(arena.start.as_ptr().add(first)) };
        FrameData {
            latch: RwLock::new(()),
            version: AtomicU64::new(0),
            words: Words {
                start,
                len,
                _arena: Arc::clone(arena),
            },
        }
    }

    /// Takes the shared latch.
    pub(crate) fn read(&self) -> PageRef<'_> {
        PageRef {
            _g: self.latch.read().unwrap_or_else(PoisonError::into_inner),
            words: &self.words,
        }
    }

    /// Takes the exclusive latch; the frame is marked dirty when it is released.
    pub(crate) fn write<'a>(&'a self, dirty: &'a AtomicBool) -> PageMut<'a> {
        let g = self.latch.write().unwrap_or_else(PoisonError::into_inner);
        // Sequence-lock writer: odd version first, and the fence keeps every
        // later word store from becoming visible before it.
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        PageMut {
            _g: g,
            words: &self.words,
            version: &self.version,
            dirty,
        }
    }

    /// Starts an optimistic read; `None` while a writer holds the page.
    pub(crate) fn optimistic(&self) -> Option<Optimistic<'_>> {
        let v = self.version.load(Ordering::Acquire);
        (v & 1 == 0).then_some(Optimistic {
            words: &self.words,
            version: &self.version,
            start: v,
        })
    }
}

/// A shared-latched page.
pub(crate) struct PageRef<'a> {
    _g: RwLockReadGuard<'a, ()>,
    words: &'a [AtomicU64],
}

/// An exclusively latched page. Dropping it marks the frame dirty while the
/// latch is still held, so a checkpoint that latches the page afterwards
/// always sees the flag, and ends the write for optimistic readers.
pub(crate) struct PageMut<'a> {
    _g: RwLockWriteGuard<'a, ()>,
    words: &'a [AtomicU64],
    version: &'a AtomicU64,
    dirty: &'a AtomicBool,
}

impl Drop for PageMut<'_> {
    fn drop(&mut self) {
        // Release pairs with the checkpoint's Acquire swap of the flag.
        self.dirty.store(true, Ordering::Release);
        // Even again: the Release store publishes every word written.
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v + 1, Ordering::Release);
    }
}

/// An unlatched view of a page, read while writers may change it: nothing
/// read through it counts until [`Optimistic::validate`] says so.
pub(crate) struct Optimistic<'a> {
    words: &'a [AtomicU64],
    version: &'a AtomicU64,
    start: u64,
}

impl Optimistic<'_> {
    /// Whether nobody wrote the page since the read began, so that
    /// everything read through this view was one consistent page.
    pub(crate) fn validate(&self) -> bool {
        // Sequence-lock reader: the fence orders the word loads above
        // before the second version load.
        fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed) == self.start
    }
}

/// The word at index `w`, or 0 past the page.
#[inline(always)]
fn word(words: &[AtomicU64], w: usize) -> u64 {
    words.get(w).map_or(0, |x| x.load(Ordering::Relaxed))
}

/// The 8 bytes starting at byte `pos`, little-endian (bytes past the page
/// read as zero): one load when aligned, two otherwise.
#[inline(always)]
fn load_u64_at(words: &[AtomicU64], pos: usize) -> u64 {
    let (w, sh) = (pos / 8, (pos % 8) as u32 * 8);
    let lo = word(words, w);
    if sh == 0 {
        lo
    } else {
        (lo >> sh) | (word(words, w + 1) << (64 - sh))
    }
}

/// Copies `out.len()` bytes from `off`; bytes past the page read as zero.
#[inline(always)]
fn load_bytes(words: &[AtomicU64], off: usize, out: &mut [u8]) {
    let mut i = 0;
    while i + 8 <= out.len() {
        out[i..i + 8].copy_from_slice(&load_u64_at(words, off + i).to_le_bytes());
        i += 8;
    }
    let rest = out.len() - i;
    if rest > 0 {
        let v = load_u64_at(words, off + i).to_le_bytes();
        // A byte loop: a library copy call for under 8 bytes costs more.
        #[allow(clippy::manual_memcpy)]
        for j in 0..rest {
            out[i + j] = v[j];
        }
    }
}

/// Compares the `len` bytes at `off` with `key` lexicographically, eight
/// bytes at a time (as big-endian integers, whose order is the bytes' order).
#[inline(always)]
fn compare_bytes(words: &[AtomicU64], off: usize, len: usize, key: &[u8]) -> Cmp {
    let n = len.min(key.len());
    let mut i = 0;
    while i + 8 <= n {
        let a = load_u64_at(words, off + i).swap_bytes();
        let mut k = [0u8; 8];
        k.copy_from_slice(&key[i..i + 8]);
        let b = u64::from_be_bytes(k);
        if a != b {
            return a.cmp(&b);
        }
        i += 8;
    }
    if i < n {
        let a = load_u64_at(words, off + i).to_le_bytes();
        for j in 0..n - i {
            if a[j] != key[i + j] {
                return a[j].cmp(&key[i + j]);
            }
        }
    }
    len.cmp(&key.len())
}

/// Writes `data` at `off`. Offsets come from validated pages under the
/// exclusive latch, so a write past the page is a bug: it panics. Partial
/// words at the ends are merged with what is there (only the latch holder
/// writes, so load-merge-store loses nothing); whole words in between are
/// stored directly.
#[inline]
fn store_bytes(words: &[AtomicU64], off: usize, data: &[u8]) {
    assert!(
        off + data.len() <= words.len() * 8,
        "page write out of bounds"
    );
    let mut i = 0;
    // Leading partial word.
    if !off.is_multiple_of(8) && !data.is_empty() {
        let sh = off % 8;
        let n = (8 - sh).min(data.len());
        merge(&words[off / 8], sh, &data[..n]);
        i = n;
    }
    // Whole words.
    let mut chunks = data[i..].chunks_exact(8);
    let mut w = (off + i) / 8;
    for chunk in &mut chunks {
        let v = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        words[w].store(v, Ordering::Relaxed);
        w += 1;
    }
    // Trailing partial word.
    let rest = chunks.remainder();
    if !rest.is_empty() {
        merge(&words[w], 0, rest);
    }
}

/// Replaces bytes `sh..sh + part.len()` of one word with `part`.
#[inline(always)]
fn merge(word: &AtomicU64, sh: usize, part: &[u8]) {
    let mut b = word.load(Ordering::Relaxed).to_le_bytes();
    for (j, &x) in part.iter().enumerate() {
        b[sh + j] = x;
    }
    word.store(u64::from_le_bytes(b), Ordering::Relaxed);
}

/// Page `words` as bytes, for latched readers.
///
/// # Safety
///
/// For as long as the slice lives, no thread may write `words`: the caller
/// holds the page's shared latch, or its exclusive latch and makes no write
/// through it meanwhile. Optimistic readers may read the words at the same
/// time; reads never race with reads.
#[inline(always)]
unsafe fn as_bytes(words: &[AtomicU64]) -> &[u8] {
    // SAFETY: `AtomicU64` has the size and bit validity of `u64` and lives
    // in an `UnsafeCell`, so its bytes may be read through a pointer derived
    // from a shared reference; the caller rules out concurrent writes, so
    // these plain reads are no data race, and the slice covers exactly the
    // words' bytes.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) }
}

impl PageRef<'_> {
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        // SAFETY: this guard holds the shared latch for its whole life, and
        // every writer takes the exclusive latch first.
        unsafe { as_bytes(self.words) }
    }
}

impl PageMut<'_> {
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        // SAFETY: this guard holds the exclusive latch, so only this thread
        // writes the page, and only through `&mut self`, which cannot be
        // used while the slice (borrowing `&self`) lives.
        unsafe { as_bytes(self.words) }
    }
}

// Latched pages read through plain slices (as fast as unshared memory);
// optimistic views read word by word with atomic loads.
impl_page_access!(PageRef<'_>, s => s.bytes());
impl_page_access!(PageMut<'_>, s => s.bytes());

impl PageAccess for Optimistic<'_> {
    #[inline]
    fn page_size(&self) -> usize {
        self.words.len() * 8
    }
    #[inline]
    fn read_bytes(&self, off: usize, out: &mut [u8]) {
        load_bytes(self.words, off, out);
    }
    #[inline]
    fn append_to(&self, off: usize, len: usize, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + len, 0);
        load_bytes(self.words, off, &mut out[at..]);
    }
    #[inline]
    fn compare(&self, off: usize, len: usize, key: &[u8]) -> Cmp {
        compare_bytes(self.words, off, len, key)
    }
    // Integers straight from one or two word loads (a descent reads little
    // else), rather than through a byte buffer.
    #[inline]
    fn read_u8(&self, off: usize) -> u8 {
        load_u64_at(self.words, off) as u8
    }
    #[inline]
    fn read_u16(&self, off: usize) -> u16 {
        load_u64_at(self.words, off) as u16
    }
    #[inline]
    fn read_u32(&self, off: usize) -> u32 {
        load_u64_at(self.words, off) as u32
    }
    #[inline]
    fn read_u64(&self, off: usize) -> u64 {
        load_u64_at(self.words, off)
    }
}

impl PageWrite for PageMut<'_> {
    #[inline]
    fn write_bytes(&mut self, off: usize, data: &[u8]) {
        store_bytes(self.words, off, data);
    }

    fn copy_within(&mut self, src: usize, dst: usize, len: usize) {
        // Through a buffer, so overlapping ranges move like memmove.
        let mut small = [0u8; 512];
        let mut large = Vec::new();
        let buf = if len <= small.len() {
            &mut small[..len]
        } else {
            large.resize(len, 0);
            &mut large[..]
        };
        buf.copy_from_slice(&self.bytes()[src..src + len]);
        store_bytes(self.words, dst, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PageBuf;

    /// Word stores, latched slice reads and optimistic word reads agree
    /// with a plain byte buffer.
    #[test]
    fn word_access_matches_bytes() {
        let frame = FrameData::new(512);
        let dirty = AtomicBool::new(false);
        let mut buf = PageBuf::new(512);
        let mut s = 0x1234_5678u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as usize
        };
        for _ in 0..2000 {
            let off = next() % 500;
            let len = next() % (512 - off).min(90);
            let data: Vec<u8> = (0..len).map(|_| next() as u8 % 4).collect();
            {
                let mut g = frame.write(&dirty);
                g.write_bytes(off, &data);
                let (src, dst) = (next() % 400, next() % 400);
                let n = next() % 100;
                g.copy_within(src, dst, n);
                buf.write_bytes(off, &data);
                buf.copy_within(src, dst, n);
            }
            let g = frame.read();
            let mut a = vec![0u8; 512];
            g.read_bytes(0, &mut a);
            let mut b = vec![0u8; 512];
            buf.read_bytes(0, &mut b);
            assert_eq!(a, b);
            let view = frame.optimistic().unwrap();
            let mut c = vec![0u8; 512];
            view.read_bytes(0, &mut c);
            assert_eq!(c, b);
            let (o, l) = (next() % 400, next() % 100);
            let mut part = Vec::new();
            view.append_to(o, l, &mut part);
            assert_eq!(part, b[o..o + l]);
            let key: Vec<u8> = (0..next() % 120).map(|_| next() as u8 % 4).collect();
            let want = buf.compare(o, l, &key);
            assert_eq!(g.compare(o, l, &key), want, "{o} {l} {key:?}");
            assert_eq!(view.compare(o, l, &key), want, "{o} {l} {key:?}");
            assert!(view.validate());
        }
    }

    #[test]
    fn optimistic_reads_fail_across_a_write() {
        let frame = FrameData::new(512);
        let dirty = AtomicBool::new(false);
        let o = frame.optimistic().unwrap();
        assert!(o.validate());
        let g = frame.write(&dirty);
        assert!(frame.optimistic().is_none(), "a writer holds the page");
        drop(g);
        assert!(!o.validate());
        assert!(frame.optimistic().unwrap().validate());
        // Reads past the end never panic.
        let mut out = [1u8; 16];
        frame.optimistic().unwrap().read_bytes(505, &mut out);
        assert_eq!(out[7..], [0u8; 9]);
    }
}
