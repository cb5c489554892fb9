//! `SpecMemory`: byte-addressed memory tracked per 64-byte line, as hardware TLS tracks
//! cache lines. A database's buffer pool keeps its page frames here, so that two
//! epochs touching different parts of one page do not conflict.

use super::consume::{consume_slots, drop_slots};
use super::slot::Slot;
use super::{Header, read_with, update, write};
use core::fmt;
use core::panic::Location;

/// The tracking granularity of [`SpecMemory`], in bytes.
pub const LINE_SIZE: usize = 64;

type Line = [u8; LINE_SIZE];

/// A fixed-size, zero-initialized byte array whose 64-byte lines are speculative
/// locations.
///
/// Reads and writes may span lines; each line is tracked on its own. A write that
/// covers only part of a line also counts as a read of that line (the epoch's buffered
/// copy of the line keeps the bytes it did not write), so a later epoch writing part of
/// a line an earlier epoch writes later is rolled back, as its copy would be stale.
///
/// ```
/// use tls_runtime::SpecMemory;
/// let mem = SpecMemory::new(4096);
/// tls_runtime::for_each(0..64u64, |i| mem.write_u64(i as usize * 8, i * i));
/// assert_eq!(mem.read_u64(8 * 7), 49);
/// ```
pub struct SpecMemory {
    lines: Box<[Slot<Line>]>,
    len: usize,
    header: Header,
}

impl SpecMemory {
    /// `len` zero bytes.
    pub fn new(len: usize) -> Self {
        let lines = len.div_ceil(LINE_SIZE);
        // The header first: see `Header::new`.
        let header = Header::new();
        SpecMemory {
            lines: (0..lines).map(|_| Slot::new([0; LINE_SIZE])).collect(),
            len,
            header,
        }
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the memory has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[track_caller]
    fn check(&self, addr: usize, n: usize) {
        if addr.checked_add(n).is_none_or(|end| end > self.len) {
            panic!(
                "SpecMemory access out of bounds: {n} bytes at {addr}, size {}",
                self.len
            );
        }
    }

    /// Copies `buf.len()` bytes starting at `addr` into `buf`.
    ///
    /// Panics if the range is out of bounds.
    #[track_caller]
    pub fn read(&self, addr: usize, buf: &mut [u8]) {
        self.check(addr, buf.len());
        let loc = Location::caller();
        let mut done = 0;
        while done < buf.len() {
            let a = addr + done;
            let (line, off) = (a / LINE_SIZE, a % LINE_SIZE);
            let n = (LINE_SIZE - off).min(buf.len() - done);
            read_with(&self.lines[line], self.header.origin(), loc, |l| {
                buf[done..done + n].copy_from_slice(&l[off..off + n])
            });
            done += n;
        }
    }

    /// Copies `data` to the bytes starting at `addr`.
    ///
    /// Panics if the range is out of bounds.
    #[track_caller]
    pub fn write(&self, addr: usize, data: &[u8]) {
        self.check(addr, data.len());
        let loc = Location::caller();
        let mut done = 0;
        while done < data.len() {
            let a = addr + done;
            let (line, off) = (a / LINE_SIZE, a % LINE_SIZE);
            let n = (LINE_SIZE - off).min(data.len() - done);
            let slot = &self.lines[line];
            if n == LINE_SIZE {
                let mut whole = [0; LINE_SIZE];
                whole.copy_from_slice(&data[done..done + n]);
                write(slot, &self.header, loc, whole);
            } else {
                let part = &data[done..done + n];
                update(slot, &self.header, loc, |l| {
                    l[off..off + n].copy_from_slice(part)
                });
            }
            done += n;
        }
    }

    /// Reads the little-endian `u16` at `addr`.
    #[track_caller]
    pub fn read_u16(&self, addr: usize) -> u16 {
        let mut b = [0; 2];
        self.read(addr, &mut b);
        u16::from_le_bytes(b)
    }

    /// Reads the little-endian `u32` at `addr`.
    #[track_caller]
    pub fn read_u32(&self, addr: usize) -> u32 {
        let mut b = [0; 4];
        self.read(addr, &mut b);
        u32::from_le_bytes(b)
    }

    /// Reads the little-endian `u64` at `addr`.
    #[track_caller]
    pub fn read_u64(&self, addr: usize) -> u64 {
        let mut b = [0; 8];
        self.read(addr, &mut b);
        u64::from_le_bytes(b)
    }

    /// Writes `v` little-endian at `addr`.
    #[track_caller]
    pub fn write_u16(&self, addr: usize, v: u16) {
        self.write(addr, &v.to_le_bytes())
    }

    /// Writes `v` little-endian at `addr`.
    #[track_caller]
    pub fn write_u32(&self, addr: usize, v: u32) {
        self.write(addr, &v.to_le_bytes())
    }

    /// Writes `v` little-endian at `addr`.
    #[track_caller]
    pub fn write_u64(&self, addr: usize, v: u64) {
        self.write(addr, &v.to_le_bytes())
    }

    /// Consumes the memory, returning its bytes: the committed ones, or, inside an
    /// epoch that wrote the memory, the ones that epoch sees.
    pub fn into_bytes(mut self) -> Vec<u8> {
        let lines = core::mem::take(&mut self.lines);
        let mut out: Vec<u8> = consume_slots(lines, self.header.was_written())
            .into_iter()
            .flatten()
            .collect();
        out.truncate(self.len);
        out
    }
}

impl Drop for SpecMemory {
    fn drop(&mut self) {
        drop_slots(core::mem::take(&mut self.lines), self.header.was_written());
    }
}

impl fmt::Debug for SpecMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpecMemory")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}
