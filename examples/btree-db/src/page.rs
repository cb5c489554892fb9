//! Page layout, checksums and the narrow accessor through which all page
//! bytes are read and written.
//!
//! Every page starts with a 32-byte header (little-endian integers):
//!
//! ```text
//!  0 checksum u32 (crc32 of the page number, then bytes 4..page_size)
//!  4 page LSN u64  (last log record applied to the page)
//! 12 kind u8       (0 unused, 1 leaf, 2 branch, 3 meta, 4 free)
//! 13 level u8      (0 for leaves)
//! 14 slot count u16
//! 16 right link u32 (0 = rightmost)
//! 20 cell area start u16
//! 22 fragmented bytes u16
//! 24 high key offset u16 (0 = no high key: +infinity)
//! 26 high key length u16
//! 28 next free page u32 (free pages only)
//! ```
//!
//! Code never holds a `&[u8]` into a frame beyond one accessor call: that is
//! the seam that lets frames later live in speculative line memory.

use std::cmp::Ordering;

pub(crate) const OFF_CHECKSUM: usize = 0;
pub(crate) const OFF_LSN: usize = 4;
pub(crate) const OFF_KIND: usize = 12;
pub(crate) const OFF_LEVEL: usize = 13;
pub(crate) const OFF_NSLOTS: usize = 14;
pub(crate) const OFF_RIGHT: usize = 16;
pub(crate) const OFF_CELL_START: usize = 20;
pub(crate) const OFF_FRAG: usize = 22;
pub(crate) const OFF_HK_OFF: usize = 24;
pub(crate) const OFF_HK_LEN: usize = 26;
pub(crate) const OFF_NEXT_FREE: usize = 28;
/// Size of the common page header.
pub(crate) const HEADER: usize = 32;

pub(crate) const KIND_LEAF: u8 = 1;
pub(crate) const KIND_BRANCH: u8 = 2;
pub(crate) const KIND_META: u8 = 3;
pub(crate) const KIND_FREE: u8 = 4;

/// Reads and writes page bytes at offsets: fixed-width little-endian integers
/// and byte ranges. This is the only way the database touches page contents.
///
/// Offsets must lie inside the page; callers guarantee it by validating a
/// page's structure when it is read from disk ([`validate_page`](crate::validate_page)).
pub trait PageAccess {
    /// The page size in bytes.
    fn page_size(&self) -> usize;
    /// Copies `out.len()` bytes starting at `off` into `out`.
    fn read_bytes(&self, off: usize, out: &mut [u8]);
    /// Appends `len` bytes starting at `off` to `out`.
    fn append_to(&self, off: usize, len: usize, out: &mut Vec<u8>);
    /// Compares the `len` bytes at `off` with `key` lexicographically.
    fn compare(&self, off: usize, len: usize, key: &[u8]) -> Ordering;
    /// Reads a byte.
    fn read_u8(&self, off: usize) -> u8 {
        let mut b = [0u8; 1];
        self.read_bytes(off, &mut b);
        b[0]
    }
    /// Reads a little-endian u16.
    fn read_u16(&self, off: usize) -> u16 {
        let mut b = [0u8; 2];
        self.read_bytes(off, &mut b);
        u16::from_le_bytes(b)
    }
    /// Reads a little-endian u32.
    fn read_u32(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        self.read_bytes(off, &mut b);
        u32::from_le_bytes(b)
    }
    /// Reads a little-endian u64.
    fn read_u64(&self, off: usize) -> u64 {
        let mut b = [0u8; 8];
        self.read_bytes(off, &mut b);
        u64::from_le_bytes(b)
    }
    /// The page LSN.
    fn page_lsn(&self) -> u64 {
        self.read_u64(OFF_LSN)
    }
}

/// The writing half of the page accessor.
pub trait PageWrite: PageAccess {
    /// Writes `data` at `off`.
    fn write_bytes(&mut self, off: usize, data: &[u8]);
    /// Moves `len` bytes from `src` to `dst` (ranges may overlap).
    fn copy_within(&mut self, src: usize, dst: usize, len: usize);
    /// Writes a byte.
    fn write_u8(&mut self, off: usize, v: u8) {
        self.write_bytes(off, &[v]);
    }
    /// Writes a little-endian u16.
    fn write_u16(&mut self, off: usize, v: u16) {
        self.write_bytes(off, &v.to_le_bytes());
    }
    /// Writes a little-endian u32.
    fn write_u32(&mut self, off: usize, v: u32) {
        self.write_bytes(off, &v.to_le_bytes());
    }
    /// Writes a little-endian u64.
    fn write_u64(&mut self, off: usize, v: u64) {
        self.write_bytes(off, &v.to_le_bytes());
    }
    /// Sets the page LSN.
    fn set_page_lsn(&mut self, lsn: u64) {
        self.write_u64(OFF_LSN, lsn);
    }
}

/// Implements [`PageAccess`] for a type whose bytes are reachable as a slice
/// through `$get` / `$get_mut`; the slice never escapes a method.
macro_rules! impl_page_access {
    ($ty:ty, $s:ident => $get:expr) => {
        impl crate::page::PageAccess for $ty {
            #[inline]
            fn page_size(&self) -> usize {
                let $s = self;
                $get.len()
            }
            #[inline]
            fn read_bytes(&self, off: usize, out: &mut [u8]) {
                let $s = self;
                out.copy_from_slice(&$get[off..off + out.len()]);
            }
            #[inline]
            fn append_to(&self, off: usize, len: usize, out: &mut Vec<u8>) {
                let $s = self;
                out.extend_from_slice(&$get[off..off + len]);
            }
            #[inline]
            fn compare(&self, off: usize, len: usize, key: &[u8]) -> std::cmp::Ordering {
                let $s = self;
                crate::page::compare_keys(&$get[off..off + len], key)
            }
        }
    };
}

pub(crate) use impl_page_access;

/// Implements [`PageWrite`] likewise.
macro_rules! impl_page_write {
    ($ty:ty, $s:ident => $get_mut:expr) => {
        impl crate::page::PageWrite for $ty {
            #[inline]
            fn write_bytes(&mut self, off: usize, data: &[u8]) {
                let $s = self;
                $get_mut[off..off + data.len()].copy_from_slice(data);
            }
            #[inline]
            fn copy_within(&mut self, src: usize, dst: usize, len: usize) {
                let $s = self;
                $get_mut.copy_within(src..src + len, dst);
            }
        }
    };
}

/// Lexicographic comparison, eight bytes at a time: keys are short, and a
/// `memcmp` call per probe of a binary search costs more than the compare.
#[inline]
pub(crate) fn compare_keys(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let mut x = [0u8; 8];
        let mut y = [0u8; 8];
        x.copy_from_slice(&a[i..i + 8]);
        y.copy_from_slice(&b[i..i + 8]);
        let (x, y) = (u64::from_be_bytes(x), u64::from_be_bytes(y));
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return a[i].cmp(&b[i]);
        }
        i += 1;
    }
    a.len().cmp(&b.len())
}

/// An owned page image, used to build split halves, log images and for I/O.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageBuf {
    bytes: Box<[u8]>,
}

impl PageBuf {
    /// A zeroed page.
    pub fn new(page_size: usize) -> PageBuf {
        PageBuf {
            bytes: vec![0u8; page_size].into_boxed_slice(),
        }
    }

    /// A page holding a copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> PageBuf {
        PageBuf {
            bytes: bytes.into(),
        }
    }

    /// The whole image (for file I/O and log images, not for page logic).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The whole image, mutable (for file I/O).
    pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

impl_page_access!(PageBuf, s => s.bytes);
impl_page_write!(PageBuf, s => s.bytes);

/// The checksum of page `id`'s image: the page number (little-endian u32)
/// followed by bytes 4.. . Covering the number makes a page written to, or
/// copied into, the wrong place fail its check like a damaged one.
pub(crate) fn checksum(id: u32, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&id.to_le_bytes());
    h.update(&bytes[4..]);
    h.finalize()
}

/// Stamps page `id`'s checksum into its image before it is written.
pub(crate) fn seal(id: u32, bytes: &mut [u8]) {
    let c = checksum(id, bytes);
    bytes[OFF_CHECKSUM..OFF_CHECKSUM + 4].copy_from_slice(&c.to_le_bytes());
}
