//! The write-ahead log.
//!
//! The log is one byte stream cut into segment files `<db>.wal.<n>` of a
//! fixed size; a record's LSN is its byte offset in the stream, assigned in
//! [`Wal::append_with_images`] — the single entry point for every record. Appends go to
//! an in-memory buffer; [`Wal::flush`] writes the buffer (and optionally
//! syncs). Whoever flushes takes everything appended so far, so concurrent
//! committers share one write and one sync (group commit).
//!
//! Record layout (little-endian):
//!
//! ```text
//!  0 len u32 | 4 crc32 of bytes 8..len | 8 lsn u64 | 16 txn u64 | 24 prev lsn u64
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

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

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

/// The first LSN of a new database (0 means "none").
pub(crate) const FIRST_LSN: u64 = 64;
/// Appends flush on their own once this much is buffered.
const BUFFER_LIMIT: usize = 1 << 20;

/// Builds one log record in a reusable buffer.
#[derive(Default)]
pub(crate) struct RecBuilder {
    pub(crate) buf: Vec<u8>,
    nops_at: usize,
    nops: u16,
    /// Pages this record carries a whole image of.
    imaged: Vec<PageId>,
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
        let mut img = Vec::with_capacity(p.page_size() + 7);
        img.push(OP_IMAGE);
        img.extend_from_slice(&page.to_le_bytes());
        img.extend_from_slice(&(p.page_size() as u16).to_le_bytes());
        p.append_to(0, p.page_size(), &mut img);
        let at = self.nops_at + 2;
        self.buf.splice(at..at, img);
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
        if crc32fast::hash(&body[8..]) != crc {
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

struct WalState {
    /// Full-page-write threshold: the redo start of the newest checkpoint
    /// begun. A page whose LSN is below it gets a whole image in the first
    /// record that changes it (see [`Wal::append_with_images`]).
    fpw_threshold: u64,
    buf: Vec<u8>,
    /// LSN of `buf[0]`.
    buf_lsn: u64,
    next_lsn: u64,
}

struct WalIo {
    files: HashMap<u64, File>,
    unsynced: Vec<u64>,
    spare: Vec<u8>,
}

/// The log manager.
pub(crate) struct Wal {
    base: PathBuf,
    seg_size: u64,
    state: Mutex<WalState>,
    io: Mutex<WalIo>,
    /// Everything below this is in the operating system.
    written: AtomicU64,
    /// Everything below this is synced.
    durable: AtomicU64,
    pub(crate) appended_bytes: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) syncs: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Wal {
    /// A log for the database at `db_path`, appending at `end`.
    pub(crate) fn new(db_path: &Path, seg_size: u64, end: u64) -> Wal {
        Wal {
            base: db_path.to_path_buf(),
            seg_size,
            state: Mutex::new(WalState {
                fpw_threshold: end,
                buf: Vec::with_capacity(BUFFER_LIMIT + (64 << 10)),
                buf_lsn: end,
                next_lsn: end,
            }),
            io: Mutex::new(WalIo {
                files: HashMap::new(),
                unsynced: Vec::new(),
                spare: Vec::with_capacity(BUFFER_LIMIT + (64 << 10)),
            }),
            written: AtomicU64::new(end),
            durable: AtomicU64::new(end),
            appended_bytes: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        }
    }

    fn seg_path(&self, seg: u64) -> PathBuf {
        let mut name = self.base.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".wal.{seg:08}"));
        self.base.with_file_name(name)
    }

    /// Segment numbers present on disk, ascending.
    fn segments(&self) -> Result<Vec<u64>> {
        let dir = match self.base.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut prefix = self
            .base
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        prefix.push_str(".wal.");
        let mut segs = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let name = e?.file_name();
            let name = name.to_string_lossy();
            if let Some(n) = name
                .strip_prefix(&prefix)
                .and_then(|s| s.parse::<u64>().ok())
            {
                segs.push(n);
            }
        }
        segs.sort_unstable();
        Ok(segs)
    }

    /// The LSN the next record will get.
    pub(crate) fn next_lsn(&self) -> u64 {
        lock(&self.state).next_lsn
    }

    /// Starts a checkpoint: returns its redo start (the next LSN) and, in
    /// the same critical section, raises the full-page-write threshold to
    /// it, so every record at or after the redo start sees the new
    /// threshold.
    pub(crate) fn begin_checkpoint(&self) -> u64 {
        let mut st = lock(&self.state);
        st.fpw_threshold = st.fpw_threshold.max(st.next_lsn);
        st.next_lsn
    }

    /// Sets the full-page-write threshold at open (the header's redo start).
    pub(crate) fn set_fpw_threshold(&self, lsn: u64) {
        lock(&self.state).fpw_threshold = lsn;
    }

    /// Appends a record, assigning its LSN: the one call through which
    /// every log record enters the log. `images` runs first, under the same
    /// lock as the LSN assignment, with the full-page-write threshold, to
    /// prepend images of pages not logged whole since the last checkpoint.
    /// Never fails: the record is in the buffer; an error writing a full
    /// buffer is reported by the next explicit [`Wal::flush`] (commit,
    /// checkpoint, page write-back).
    pub(crate) fn append_with_images(
        &self,
        rec: &mut RecBuilder,
        images: impl FnOnce(u64, &mut RecBuilder),
    ) -> u64 {
        let st = lock(&self.state);
        images(st.fpw_threshold, rec);
        let bytes = rec.finish();
        self.append_locked(st, bytes)
    }

    fn append_locked(&self, st: std::sync::MutexGuard<'_, WalState>, rec: &mut [u8]) -> u64 {
        let mut st = st;
        let len = rec.len() as u64;
        let (lsn, full) = {
            let lsn = st.next_lsn;
            rec[8..16].copy_from_slice(&lsn.to_le_bytes());
            let crc = crc32fast::hash(&rec[8..]);
            rec[4..8].copy_from_slice(&crc.to_le_bytes());
            st.buf.extend_from_slice(rec);
            st.next_lsn += len;
            let full = st.buf.len() >= BUFFER_LIMIT;
            drop(st);
            (lsn, full)
        };
        self.appended_bytes.fetch_add(len, Ordering::Relaxed);
        if full {
            let _ = self.flush(lsn + len, false);
        }
        lsn
    }

    /// Makes the log up to `upto` written (and synced if `sync`). Concurrent
    /// callers queue on the I/O lock; the one holding it writes everything
    /// appended so far, so later callers usually find their records done.
    pub(crate) fn flush(&self, upto: u64, sync: bool) -> Result<()> {
        let done = |w: &Wal| {
            if sync {
                w.durable.load(Ordering::Acquire) >= upto
            } else {
                w.written.load(Ordering::Acquire) >= upto
            }
        };
        if done(self) {
            return Ok(());
        }
        let mut io = lock(&self.io);
        if done(self) {
            return Ok(());
        }
        let start = {
            let mut st = lock(&self.state);
            std::mem::swap(&mut st.buf, &mut io.spare);
            let start = st.buf_lsn;
            st.buf_lsn = st.next_lsn;
            start
        };
        let io = &mut *io;
        let data = std::mem::take(&mut io.spare);
        let r = self.write_at(io, start, &data);
        io.spare = data;
        io.spare.clear();
        r?;
        self.flushes.fetch_add(1, Ordering::Relaxed);
        if sync {
            for seg in io.unsynced.drain(..) {
                if let Some(f) = io.files.get(&seg) {
                    f.sync_data()?;
                }
            }
            self.syncs.fetch_add(1, Ordering::Relaxed);
            let w = self.written.load(Ordering::Acquire);
            self.durable.store(w, Ordering::Release);
        }
        Ok(())
    }

    fn write_at(&self, io: &mut WalIo, start: u64, data: &[u8]) -> Result<()> {
        let mut pos = start;
        let mut rest = data;
        while !rest.is_empty() {
            let seg = pos / self.seg_size;
            let off = pos % self.seg_size;
            let n = rest.len().min((self.seg_size - off) as usize);
            let f = match io.files.entry(seg) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(
                    OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(true)
                        .truncate(false)
                        .open(self.seg_path(seg))?,
                ),
            };
            f.write_all_at(&rest[..n], off)?;
            if io.unsynced.last() != Some(&seg) {
                io.unsynced.push(seg);
            }
            pos += n as u64;
            rest = &rest[n..];
        }
        self.written
            .store(start + data.len() as u64, Ordering::Release);
        Ok(())
    }

    /// Reads the stream from `from` to the end of the last contiguous segment.
    /// Returns the bytes and the LSN of the first byte.
    pub(crate) fn read_from(&self, from: u64) -> Result<(Vec<u8>, u64)> {
        let first = from / self.seg_size;
        let mut out = Vec::new();
        let mut expect = first;
        let segs = self.segments()?;
        for &seg in &segs {
            if seg < first {
                continue;
            }
            if seg != expect {
                // A hole in the middle of the log is damage, not a torn tail:
                // refuse rather than cut off the later, committed records.
                return Err(Error::Corrupt {
                    page: 0,
                    reason: "a log segment file is missing",
                });
            }
            let bytes = std::fs::read(self.seg_path(seg))?;
            let full = bytes.len() as u64 == self.seg_size;
            out.extend_from_slice(&bytes);
            expect += 1;
            if !full {
                if segs.iter().any(|&s| s > seg) {
                    return Err(Error::Corrupt {
                        page: 0,
                        reason: "a log segment file is short",
                    });
                }
                break;
            }
        }
        let skip = (from - first * self.seg_size) as usize;
        if out.len() < skip {
            return Ok((Vec::new(), from));
        }
        out.drain(..skip);
        Ok((out, from))
    }

    /// After recovery found the valid end of the log: cut everything past it
    /// so stale bytes can never be mistaken for records, and append there.
    pub(crate) fn reset_end(&self, end: u64) -> Result<()> {
        let end_seg = end / self.seg_size;
        for seg in self.segments()? {
            if seg > end_seg {
                std::fs::remove_file(self.seg_path(seg))?;
            } else if seg == end_seg {
                let f = OpenOptions::new().write(true).open(self.seg_path(seg))?;
                f.set_len(end % self.seg_size)?;
                f.sync_data()?;
            }
        }
        let mut io = lock(&self.io);
        io.files.clear();
        io.unsynced.clear();
        let mut st = lock(&self.state);
        st.buf.clear();
        st.buf_lsn = end;
        st.next_lsn = end;
        self.written.store(end, Ordering::Release);
        self.durable.store(end, Ordering::Release);
        Ok(())
    }

    /// Deletes segments that lie wholly below `lsn`.
    pub(crate) fn truncate_before(&self, lsn: u64) -> Result<()> {
        let mut io = lock(&self.io);
        for seg in self.segments()? {
            if (seg + 1).saturating_mul(self.seg_size) <= lsn {
                io.files.remove(&seg);
                io.unsynced.retain(|s| *s != seg);
                std::fs::remove_file(self.seg_path(seg))?;
            }
        }
        Ok(())
    }
}
