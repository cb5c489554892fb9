//! Log records: building them ([`RecBuilder`]) and decoding them ([`Record`],
//! [`Op`]).
//!
//! Record layout (little-endian):
//!
//! ```text
//!  0 len u32 | 4 crc32 of bytes 16..len | 8 lsn u64 (its own position) | 16 txn u64 | 24 prev lsn u64
//! 32 kind u8 | kind header | op count u16 | ops
//! update: table u32, key len u16, key, has old u8, [old len u32, old]
//! clr:    undo-next lsn u64
//! ops:    code u8, page u32, then
//!         image:   len u16, bytes      insert / replace: klen u16, vlen u16, key, value
//!         delete:  klen u16, key       write: offset u16, len u16, bytes
//! ```
//!
//! Page operations are physiological (a page id plus a key-addressed change)
//! and redo is guarded by the page LSN; undo information is logical (table,
//! key, old value).

use crate::error::{Error, PageId, Result};
use crate::page::PageAccess;

pub(crate) const REC_HDR: usize = 33;
pub(crate) const KIND_UPDATE: u8 = 1;
pub(crate) const KIND_CLR: u8 = 2;
pub(crate) const KIND_SMO: u8 = 3;
pub(crate) const KIND_COMMIT: u8 = 4;
pub(crate) const KIND_ABORT: u8 = 5;

const OP_IMAGE: u8 = 1;
const OP_INSERT: u8 = 2;
const OP_DELETE: u8 = 3;
const OP_REPLACE: u8 = 4;
const OP_WRITE: u8 = 5;

/// Builds one log record in a reusable buffer.
#[derive(Default)]
pub(crate) struct RecBuilder {
    pub(crate) buf: Vec<u8>,
    nops_at: usize,
    nops: u16,
    /// Pages this record carries a whole image of.
    imaged: Vec<PageId>,
    /// Reused by [`RecBuilder::prepend_image`] to hold the operations that
    /// follow an image.
    ops_aside: Vec<u8>,
}

impl RecBuilder {
    /// Starts a record; the kind header follows, then [`RecBuilder::start_ops`].
    pub(crate) fn begin(&mut self, txn: u64, prev: u64, kind: u8) {
        self.buf.clear();
        self.buf.extend_from_slice(&[0u8; 16]);
        self.buf.extend_from_slice(&txn.to_le_bytes());
        self.buf.extend_from_slice(&prev.to_le_bytes());
        self.buf.push(kind);
        self.nops = 0;
        self.nops_at = 0;
        self.imaged.clear();
    }

    /// The record's `prev` (see [`RecBuilder::begin`]).
    pub(crate) fn prev(&self) -> u64 {
        u64::from_le_bytes(self.buf[24..32].try_into().expect("a begun record"))
    }

    /// Sets the record's `prev` (a record of a lent transaction gets it as it
    /// is appended: see [`crate::chain`]).
    pub(crate) fn set_prev(&mut self, prev: u64) {
        self.buf[24..32].copy_from_slice(&prev.to_le_bytes());
    }

    pub(crate) fn update_header(&mut self, table: u32, key: &[u8], old: Option<&[u8]>) {
        self.buf.extend_from_slice(&table.to_le_bytes());
        self.buf
            .extend_from_slice(&(key.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(key);
        match old {
            None => self.buf.push(0),
            Some(v) => {
                self.buf.push(1);
                self.buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
                self.buf.extend_from_slice(v);
            }
        }
    }

    pub(crate) fn clr_header(&mut self, undo_next: u64) {
        self.buf.extend_from_slice(&undo_next.to_le_bytes());
    }

    pub(crate) fn start_ops(&mut self) {
        self.nops_at = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
    }

    fn op(&mut self, code: u8, page: PageId) {
        self.nops += 1;
        self.buf.push(code);
        self.buf.extend_from_slice(&page.to_le_bytes());
    }

    fn u16(&mut self, v: usize) {
        self.buf.extend_from_slice(&(v as u16).to_le_bytes());
    }

    /// Logs the whole current content of `page`.
    pub(crate) fn op_image<P: PageAccess + ?Sized>(&mut self, page: PageId, p: &P) {
        self.op(OP_IMAGE, page);
        self.u16(p.page_size());
        p.append_to(0, p.page_size(), &mut self.buf);
        self.imaged.push(page);
    }

    /// Whether the record already holds a whole image of `page`.
    pub(crate) fn has_image(&self, page: PageId) -> bool {
        self.imaged.contains(&page)
    }

    /// Puts a whole image of `page` *before* the record's other operations
    /// (a full-page write): redo then rebuilds a torn page from the image,
    /// and the record's own operations, idempotent by key, apply on top.
    pub(crate) fn prepend_image<P: PageAccess + ?Sized>(&mut self, page: PageId, p: &P) {
        // The operations already built step aside while the image goes in
        // after the op count, straight from the page: no page-sized
        // temporary, no zeroed gap copied over (a Delivery logs ~90 images
        // after a checkpoint, and these copies were ~10% of its work).
        let at = self.nops_at + 2;
        self.ops_aside.clear();
        self.ops_aside.extend_from_slice(&self.buf[at..]);
        self.buf.truncate(at);
        self.buf.reserve(7 + p.page_size() + self.ops_aside.len());
        self.buf.push(OP_IMAGE);
        self.buf.extend_from_slice(&page.to_le_bytes());
        self.buf
            .extend_from_slice(&(p.page_size() as u16).to_le_bytes());
        p.append_to(0, p.page_size(), &mut self.buf);
        self.buf.extend_from_slice(&self.ops_aside);
        self.nops += 1;
        self.imaged.push(page);
    }

    pub(crate) fn op_insert(&mut self, page: PageId, key: &[u8], val: &[u8]) {
        self.op(OP_INSERT, page);
        self.u16(key.len());
        self.u16(val.len());
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(val);
    }

    pub(crate) fn op_replace(&mut self, page: PageId, key: &[u8], val: &[u8]) {
        self.op(OP_REPLACE, page);
        self.u16(key.len());
        self.u16(val.len());
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(val);
    }

    pub(crate) fn op_delete(&mut self, page: PageId, key: &[u8]) {
        self.op(OP_DELETE, page);
        self.u16(key.len());
        self.buf.extend_from_slice(key);
    }

    pub(crate) fn op_write(&mut self, page: PageId, off: usize, bytes: &[u8]) {
        self.op(OP_WRITE, page);
        self.u16(off);
        self.u16(bytes.len());
        self.buf.extend_from_slice(bytes);
    }

    /// Completes the record; it is ready to append.
    pub(crate) fn finish(&mut self) -> &mut [u8] {
        if self.nops_at != 0 {
            let n = self.nops.to_le_bytes();
            self.buf[self.nops_at..self.nops_at + 2].copy_from_slice(&n);
        }
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_le_bytes());
        &mut self.buf
    }
}

/// A page operation decoded from a record.
#[derive(Debug)]
pub(crate) enum Op<'a> {
    Image {
        page: PageId,
        bytes: &'a [u8],
    },
    Insert {
        page: PageId,
        key: &'a [u8],
        val: &'a [u8],
    },
    Replace {
        page: PageId,
        key: &'a [u8],
        val: &'a [u8],
    },
    Delete {
        page: PageId,
        key: &'a [u8],
    },
    Write {
        page: PageId,
        off: usize,
        bytes: &'a [u8],
    },
}

/// Bounds-checked little-endian reader; `None` on running out of bytes.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<usize> {
        let s = self.take(2)?;
        Some(u16::from_le_bytes([s[0], s[1]]) as usize)
    }
    fn u32(&mut self) -> Option<u32> {
        let s = self.take(4)?;
        Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Some(u64::from_le_bytes(a))
    }
}

/// A decoded log record borrowing the log bytes.
#[derive(Debug)]
pub(crate) struct Record<'a> {
    pub(crate) len: usize,
    pub(crate) txn: u64,
    pub(crate) prev: u64,
    pub(crate) kind: u8,
    pub(crate) table: u32,
    pub(crate) key: &'a [u8],
    pub(crate) old: Option<&'a [u8]>,
    pub(crate) undo_next: u64,
    ops: &'a [u8],
}

fn corrupt(reason: &'static str) -> Error {
    Error::Corrupt { page: 0, reason }
}

impl<'a> Record<'a> {
    /// Decodes the record at `buf[pos..]`, expected at `lsn`. `None` marks the
    /// end of the valid log (torn or garbage tail).
    pub(crate) fn parse(buf: &'a [u8], pos: usize, lsn: u64) -> Option<Record<'a>> {
        let mut r = Reader { b: buf, pos };
        let len = r.u32()? as usize;
        if len < REC_HDR {
            return None;
        }
        let body = buf.get(pos..pos.checked_add(len)?)?;
        let crc = r.u32()?;
        if crc32fast::hash(&body[16..]) != crc {
            return None;
        }
        let mut r = Reader { b: body, pos: 8 };
        if r.u64()? != lsn {
            return None;
        }
        let txn = r.u64()?;
        let prev = r.u64()?;
        let kind = r.u8()?;
        let mut rec = Record {
            len,
            txn,
            prev,
            kind,
            table: 0,
            key: &[],
            old: None,
            undo_next: 0,
            ops: &[],
        };
        match kind {
            KIND_UPDATE => {
                rec.table = r.u32()?;
                let kl = r.u16()?;
                rec.key = r.take(kl)?;
                if r.u8()? != 0 {
                    let ol = r.u32()? as usize;
                    rec.old = Some(r.take(ol)?);
                }
            }
            KIND_CLR => rec.undo_next = r.u64()?,
            KIND_SMO => {}
            KIND_COMMIT | KIND_ABORT => return Some(rec),
            _ => return None,
        }
        rec.ops = &body[r.pos..];
        Some(rec)
    }

    /// Calls `f` on each page operation in order.
    pub(crate) fn for_each_op(&self, mut f: impl FnMut(Op<'a>) -> Result<()>) -> Result<()> {
        if self.ops.is_empty() {
            return Ok(());
        }
        let bad = || corrupt("malformed log record operation");
        let mut r = Reader {
            b: self.ops,
            pos: 0,
        };
        let n = r.u16().ok_or_else(bad)?;
        for _ in 0..n {
            let code = r.u8().ok_or_else(bad)?;
            let page = r.u32().ok_or_else(bad)?;
            let op = match code {
                OP_IMAGE => {
                    let l = r.u16().ok_or_else(bad)?;
                    Op::Image {
                        page,
                        bytes: r.take(l).ok_or_else(bad)?,
                    }
                }
                OP_INSERT | OP_REPLACE => {
                    let kl = r.u16().ok_or_else(bad)?;
                    let vl = r.u16().ok_or_else(bad)?;
                    let key = r.take(kl).ok_or_else(bad)?;
                    let val = r.take(vl).ok_or_else(bad)?;
                    if code == OP_INSERT {
                        Op::Insert { page, key, val }
                    } else {
                        Op::Replace { page, key, val }
                    }
                }
                OP_DELETE => {
                    let kl = r.u16().ok_or_else(bad)?;
                    Op::Delete {
                        page,
                        key: r.take(kl).ok_or_else(bad)?,
                    }
                }
                OP_WRITE => {
                    let off = r.u16().ok_or_else(bad)?;
                    let l = r.u16().ok_or_else(bad)?;
                    Op::Write {
                        page,
                        off,
                        bytes: r.take(l).ok_or_else(bad)?,
                    }
                }
                _ => return Err(bad()),
            };
            f(op)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{KIND_UPDATE, Op, RecBuilder, Record};
    use crate::page::PageBuf;

    /// Images prepended after the record's own operations come first, newest
    /// first, each whole, and the operations follow intact; the builder reused
    /// for a second record carries nothing over.
    #[test]
    fn images_go_before_the_operations_built_so_far() {
        let page = |fill: u8| {
            let mut p = PageBuf::new(512);
            p.as_bytes_mut().fill(fill);
            p
        };
        let mut b = RecBuilder::default();
        for round in 0..2u8 {
            b.begin(7, 0, KIND_UPDATE);
            b.update_header(3, b"key", Some(b"old"));
            b.start_ops();
            b.op_replace(10, b"key", b"new");
            b.prepend_image(11, &page(0xA0 + round));
            b.op_delete(12, b"gone");
            b.prepend_image(13, &page(0xB0 + round));
            crate::wal::seal_record(b.finish());
            let bytes = b.finish().to_vec();
            let rec = Record::parse(&bytes, 0, 0).expect("a whole record");
            let mut ops = Vec::new();
            rec.for_each_op(|op| {
                ops.push(match op {
                    Op::Image { page, bytes } => {
                        assert_eq!(bytes.len(), 512);
                        assert!(bytes.iter().all(|&x| x == bytes[0]));
                        format!("image {page} {:x}", bytes[0])
                    }
                    Op::Replace { page, key, val } => format!("replace {page} {key:?} {val:?}"),
                    Op::Delete { page, key } => format!("delete {page} {key:?}"),
                    other => format!("{other:?}"),
                });
                Ok(())
            })
            .unwrap();
            assert_eq!(
                ops,
                [
                    format!("image 13 {:x}", 0xB0 + round),
                    format!("image 11 {:x}", 0xA0 + round),
                    format!("replace 10 {:?} {:?}", b"key", b"new"),
                    format!("delete 12 {:?}", b"gone"),
                ]
            );
            assert!(b.has_image(11) && b.has_image(13) && !b.has_image(10));
        }
    }
}
