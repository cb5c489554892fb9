//! The write-ahead log.
//!
//! The log is one byte stream cut into segment files `<db>.wal.<n>` of a
//! fixed size; a record's LSN is its byte offset in the stream, assigned in
//! [`Wal::append_with_images`] — the single entry point for every record. Appends go to
//! an in-memory buffer; [`Wal::flush`] writes the buffer (and optionally
//! syncs). Whoever flushes takes everything appended so far, so concurrent
//! committers share one write and one sync (group commit).
//!
//! Records themselves (layout, building, decoding) are in [`record`].

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::stripes::Counter;

mod record;

pub(crate) use record::{
    KIND_ABORT, KIND_CLR, KIND_COMMIT, KIND_SMO, KIND_UPDATE, Op, RecBuilder, Record,
};

/// Stamps a finished record's checksum (over bytes 16.., everything but
/// the length, which the checksummed range depends on, and the LSN, which
/// must equal the record's position).
fn seal_record(rec: &mut [u8]) {
    let crc = crc32fast::hash(&rec[16..]);
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The first LSN of a new database (0 means "none").
pub(crate) const FIRST_LSN: u64 = 64;
/// Appends flush on their own once this much is buffered.
const BUFFER_LIMIT: usize = 1 << 20;

struct WalState {
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
    /// Full-page-write threshold: the redo start of the newest checkpoint
    /// begun. A page whose LSN is below it gets a whole image in the first
    /// record that changes it (see [`Wal::append_with_images`]). Changed
    /// only under the `state` lock.
    fpw_threshold: AtomicU64,
    io: Mutex<WalIo>,
    /// Everything below this is in the operating system.
    written: AtomicU64,
    /// Everything below this is synced.
    durable: AtomicU64,
    /// Per thread stripe: appenders do not share the counter's line.
    pub(crate) appended_bytes: Counter,
    pub(crate) flushes: AtomicU64,
    pub(crate) syncs: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The path of segment `seg` of the log of the database at `db_path`.
fn seg_path_of(db_path: &Path, seg: u64) -> PathBuf {
    let mut name = db_path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".wal.{seg:08}"));
    db_path.with_file_name(name)
}

/// The segment numbers of the log of the database at `db_path` present on disk,
/// ascending (listed from the path alone: a `Wal` holds a 1 MiB buffer).
pub(crate) fn segments_of(db_path: &Path) -> Result<Vec<u64>> {
    let dir = match db_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut prefix = db_path
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

impl Wal {
    /// A log for the database at `db_path`, appending at `end`.
    pub(crate) fn new(db_path: &Path, seg_size: u64, end: u64) -> Wal {
        Wal {
            base: db_path.to_path_buf(),
            seg_size,
            fpw_threshold: AtomicU64::new(end),
            state: Mutex::new(WalState {
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
            appended_bytes: Counter::default(),
            flushes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        }
    }

    /// The size of one segment file.
    pub(crate) fn segment_bytes(&self) -> u64 {
        self.seg_size
    }

    fn seg_path(&self, seg: u64) -> PathBuf {
        seg_path_of(&self.base, seg)
    }

    /// Segment numbers present on disk, ascending.
    pub(crate) fn segments(&self) -> Result<Vec<u64>> {
        segments_of(&self.base)
    }

    /// The segment size the log files of the database at `db_path` show, for a
    /// file that does not record it (format version 2), given the caller's
    /// `option`. Every segment but the last is full, so with two or more their
    /// size is the first one's length (the option does not matter: opened with
    /// another size, the log read as damaged); with one, any size from its length
    /// up reads it, and the option is kept unless the file is longer.
    pub(crate) fn segment_bytes_shown(db_path: &Path, option: u64) -> Result<u64> {
        let mut lengths = Vec::new();
        for seg in segments_of(db_path)? {
            lengths.push(std::fs::metadata(seg_path_of(db_path, seg))?.len());
        }
        match lengths.split_last() {
            None => Ok(option),
            Some((&last, [])) => Ok(option.max(last)),
            Some((&last, full)) => {
                let size = full[0];
                if size == 0 || full.iter().any(|&l| l != size) || last > size {
                    return Err(Error::LogDamaged {
                        lsn: 0,
                        reason: "the log's segment files differ in size",
                    });
                }
                Ok(size)
            }
        }
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
        let st = lock(&self.state);
        self.fpw_threshold.fetch_max(st.next_lsn, Ordering::Relaxed);
        st.next_lsn
    }

    /// Sets the full-page-write threshold at open (the header's redo start).
    pub(crate) fn set_fpw_threshold(&self, lsn: u64) {
        let _st = lock(&self.state);
        self.fpw_threshold.store(lsn, Ordering::Relaxed);
    }

    /// Appends a record, assigning its LSN: the one call through which
    /// every log record enters the log. `images` runs first with the
    /// full-page-write threshold, to prepend images of pages not logged
    /// whole since the last checkpoint. The record is finished and its
    /// checksum computed before the log's lock is taken (the checksum does
    /// not cover the LSN, which the position checks instead), so committers
    /// share the lock only to copy their bytes; if a checkpoint began in
    /// between, `images` runs again under the lock with the new threshold.
    /// Never fails: the record is in the buffer; an error writing a full
    /// buffer is reported by the next explicit [`Wal::flush`] (commit,
    /// checkpoint, page write-back).
    ///
    /// With `link` (the last LSN of a transaction lent to several threads,
    /// see [`crate::chain`]), the record's `prev` is set from it and it is
    /// advanced to the record's LSN, both under the lock, so that the
    /// transaction's records are linked in log order whichever thread
    /// appends them; the checksum, which covers `prev`, is then computed
    /// under the lock too.
    pub(crate) fn append_with_images(
        &self,
        rec: &mut RecBuilder,
        mut images: impl FnMut(u64, &mut RecBuilder),
        link: Option<&AtomicU64>,
    ) -> u64 {
        let threshold = self.fpw_threshold.load(Ordering::Acquire);
        images(threshold, rec);
        if link.is_none() {
            seal_record(rec.finish());
        }
        let st = lock(&self.state);
        let now = self.fpw_threshold.load(Ordering::Relaxed);
        if now != threshold {
            images(now, rec);
        }
        if let Some(link) = link {
            rec.set_prev(link.load(Ordering::Relaxed));
            link.store(st.next_lsn, Ordering::Relaxed);
            seal_record(rec.finish());
        } else if now != threshold {
            seal_record(rec.finish());
        }
        self.append_locked(st, rec.finish())
    }

    fn append_locked(&self, st: std::sync::MutexGuard<'_, WalState>, rec: &mut [u8]) -> u64 {
        let mut st = st;
        let len = rec.len() as u64;
        let (lsn, full) = {
            let lsn = st.next_lsn;
            rec[8..16].copy_from_slice(&lsn.to_le_bytes());
            st.buf.extend_from_slice(rec);
            st.next_lsn += len;
            let full = st.buf.len() >= BUFFER_LIMIT;
            drop(st);
            (lsn, full)
        };
        self.appended_bytes.add(len);
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
        if let Err(e) = self.write_at(io, start, &data) {
            // The bytes go back in front of what was appended meanwhile, so that the
            // next flush writes them again at their place. Dropped, they left a hole
            // in the log (a full disk), and recovery ended the log there, losing the
            // records written after it, committed ones included.
            let mut st = lock(&self.state);
            let mut back = data;
            back.extend_from_slice(&st.buf);
            st.buf = back;
            st.buf_lsn = start;
            return Err(e);
        }
        io.spare = data;
        io.spare.clear();
        self.flushes.fetch_add(1, Ordering::Relaxed);
        if sync {
            // A segment leaves the list only once synced: one whose sync failed is
            // synced again by the next flush, never taken for durable.
            while let Some(&seg) = io.unsynced.first() {
                if let Some(f) = io.files.get(&seg) {
                    f.sync_data()?;
                }
                io.unsynced.remove(0);
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
    /// Returns the bytes and how far the files reach: the LSN just past their
    /// last byte, which is below `from` when the file that should hold `from`
    /// is shorter or missing (then there are no bytes).
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
                return Err(Error::LogDamaged {
                    lsn: expect * self.seg_size,
                    reason: "a log segment file is missing",
                });
            }
            let bytes = std::fs::read(self.seg_path(seg))?;
            let full = bytes.len() as u64 == self.seg_size;
            out.extend_from_slice(&bytes);
            expect += 1;
            if !full {
                if segs.iter().any(|&s| s > seg) {
                    return Err(Error::LogDamaged {
                        lsn: seg * self.seg_size + bytes.len() as u64,
                        reason: "a log segment file is short",
                    });
                }
                break;
            }
        }
        let reached = first * self.seg_size + out.len() as u64;
        let skip = (from - first * self.seg_size) as usize;
        if out.len() < skip {
            return Ok((Vec::new(), reached));
        }
        out.drain(..skip);
        Ok((out, reached))
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
