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
//! bytes are atomics (relaxed loads and stores, plain moves on x86), so the
//! race is defined behaviour, and every accessor stays inside the page
//! whatever offsets a half-written page yields (bytes past the end read as
//! zero). A reader acts on what it read only after validating it.
//!
//! This module is also the swap point for speculation: nothing outside it
//! sees the words, only the offset-based [`crate::PageAccess`] /
//! [`crate::PageWrite`] accessors.

use std::cmp::Ordering as Cmp;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::page::{PageAccess, PageWrite, compare_keys};

/// The bytes of one buffer pool frame, with its latch and version.
pub(crate) struct FrameData {
    latch: RwLock<()>,
    /// Odd while an exclusive latch is held; bumped on each acquire and release.
    version: AtomicU64,
    words: Box<[AtomicU64]>,
}

impl FrameData {
    pub(crate) fn new(page_size: usize) -> FrameData {
        FrameData {
            latch: RwLock::new(()),
            version: AtomicU64::new(0),
            words: (0..page_size / 8).map(|_| AtomicU64::new(0)).collect(),
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

/// Copies `out.len()` bytes from `off`; bytes past the page read as zero.
#[inline]
fn load_bytes(words: &[AtomicU64], off: usize, out: &mut [u8]) {
    let mut i = 0;
    while i < out.len() {
        let pos = off + i;
        let word = words
            .get(pos / 8)
            .map_or(0, |w| w.load(Ordering::Relaxed))
            .to_le_bytes();
        let sh = pos % 8;
        let n = (8 - sh).min(out.len() - i);
        out[i..i + n].copy_from_slice(&word[sh..sh + n]);
        i += n;
    }
}

/// Compares the `len` bytes at `off` with `key`, 64 bytes at a time.
#[inline]
fn compare_bytes(words: &[AtomicU64], off: usize, len: usize, key: &[u8]) -> Cmp {
    let mut buf = [0u8; 64];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(64);
        load_bytes(words, off + done, &mut buf[..n]);
        let k = &key[done.min(key.len())..(done + n).min(key.len())];
        // Equal over a whole chunk (the key is as long): go on. A key that
        // ends inside the chunk compares as shorter, so Greater, as it should.
        match compare_keys(&buf[..n], k) {
            Cmp::Equal => {}
            other => return other,
        }
        done += n;
    }
    len.cmp(&key.len())
}

/// Writes `data` at `off`. Offsets come from validated pages under the
/// exclusive latch, so a write past the page is a bug: it panics.
#[inline]
fn store_bytes(words: &[AtomicU64], off: usize, data: &[u8]) {
    assert!(
        off + data.len() <= words.len() * 8,
        "page write out of bounds"
    );
    let mut i = 0;
    while i < data.len() {
        let pos = off + i;
        let w = &words[pos / 8];
        let sh = pos % 8;
        let n = (8 - sh).min(data.len() - i);
        let mut word = if n == 8 {
            [0u8; 8]
        } else {
            // Only the latch holder writes, so load-merge-store is safe.
            w.load(Ordering::Relaxed).to_le_bytes()
        };
        word[sh..sh + n].copy_from_slice(&data[i..i + n]);
        w.store(u64::from_le_bytes(word), Ordering::Relaxed);
        i += n;
    }
}

macro_rules! impl_word_access {
    ($ty:ty) => {
        impl PageAccess for $ty {
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
        }
    };
}

impl_word_access!(PageRef<'_>);
impl_word_access!(PageMut<'_>);
impl_word_access!(Optimistic<'_>);

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
        load_bytes(self.words, src, buf);
        store_bytes(self.words, dst, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PageBuf;

    /// The word accessors agree with the plain byte-slice ones.
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
            let (o, l) = (next() % 400, next() % 100);
            let key: Vec<u8> = (0..next() % 120).map(|_| next() as u8 % 4).collect();
            assert_eq!(
                g.compare(o, l, &key),
                buf.compare(o, l, &key),
                "{o} {l} {key:?}"
            );
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
