//! The database file: page 0 is the file header, every other page is a
//! checksummed page read and written whole at `id * page_size`.
//!
//! The header is stored twice (at byte 0 and byte 256 of page 0), each copy
//! with its own checksum, and written one copy at a time with a sync between,
//! so a torn header write always leaves one valid copy.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, PageId, Result};

const MAGIC: [u8; 8] = *b"BTREE-DB";
/// The on-disk format version this build writes.
/// Version 2: page checksums cover the page number.
/// Version 3: the header records the log's segment size.
pub(crate) const FORMAT_VERSION: u32 = 3;
/// The oldest version this build reads: a version 2 header names no segment size
/// (the one the log files show is taken, see `Wal::segment_bytes_shown`) and is
/// rewritten as version 3, recording it, when opened.
const OLDEST_VERSION: u32 = 2;
const COPY_OFFSETS: [u64; 2] = [0, 256];
const HEADER_LEN: usize = 56;

/// The recovery-relevant fields of the file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileHeader {
    pub(crate) page_size: u32,
    /// Redo starts here: every change logged below it is in the file.
    pub(crate) checkpoint_lsn: u64,
    /// The log is kept from here (the oldest record an unfinished
    /// transaction may need for undo).
    pub(crate) log_start: u64,
    /// Transaction ids at or above this were never used.
    pub(crate) next_txn: u64,
    /// The size of the log's segment files, which numbers them (0: not
    /// recorded, a version 2 file).
    pub(crate) log_segment_bytes: u64,
}

impl FileHeader {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.page_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.checkpoint_lsn.to_le_bytes());
        b[24..32].copy_from_slice(&self.log_start.to_le_bytes());
        b[32..40].copy_from_slice(&self.next_txn.to_le_bytes());
        b[40..48].copy_from_slice(&self.log_segment_bytes.to_le_bytes());
        let crc = crc32fast::hash(&b[0..48]);
        b[48..52].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Result<FileHeader> {
        if b[0..8] != MAGIC {
            return Err(Error::BadMagic);
        }
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(a)
        };
        let version = u32_at(8);
        if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(Error::UnsupportedVersion {
                found: version,
                expected: FORMAT_VERSION,
            });
        }
        // Version 2 ends its checksummed part before the segment size.
        let covered = if version == 2 { 40 } else { 48 };
        if crc32fast::hash(&b[0..covered]) != u32_at(covered) {
            return Err(Error::Corrupt {
                page: 0,
                reason: "file header checksum",
            });
        }
        let page_size = u32_at(12);
        if !(512..=32768).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(Error::Corrupt {
                page: 0,
                reason: "bad page size in header",
            });
        }
        let log_segment_bytes = if version == 2 { 0 } else { u64_at(40) };
        if version > 2 && log_segment_bytes < MIN_LOG_SEGMENT {
            return Err(Error::Corrupt {
                page: 0,
                reason: "bad log segment size in header",
            });
        }
        Ok(FileHeader {
            page_size,
            checkpoint_lsn: u64_at(16),
            log_start: u64_at(24),
            next_txn: u64_at(32),
            log_segment_bytes,
        })
    }
}

/// The smallest log segment (`Options::log_segment_bytes`).
pub(crate) const MIN_LOG_SEGMENT: u64 = 64 << 10;

/// Takes the advisory exclusive lock that keeps a second `Database` (in
/// this or another process) off the file. The kernel drops it when the
/// process dies, so a killed process never blocks recovery.
fn lock_file(file: &File) -> Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::InUse),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Page-granular access to the database file.
pub(crate) struct Pager {
    file: File,
    page_size: usize,
    pub(crate) reads: AtomicU64,
    pub(crate) writes: AtomicU64,
}

impl Pager {
    /// Creates a file with a header and nothing else, replacing any file at
    /// `path` (a temporary one: see `db::create_file`).
    pub(crate) fn create(path: &Path, header: &FileHeader) -> Result<Pager> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        lock_file(&file)?;
        let pager = Pager {
            file,
            page_size: header.page_size as usize,
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        };
        pager.file.write_all_at(&vec![0u8; pager.page_size], 0)?;
        pager.write_header(header)?;
        Ok(pager)
    }

    /// Opens an existing file and reads its header.
    pub(crate) fn open(path: &Path) -> Result<(Pager, FileHeader)> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            // A pipe, a device: reading a header from it would wait or read garbage.
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the database path is not a regular file",
            )));
        }
        lock_file(&file)?;
        let len = meta.len();
        if len < 512 {
            return Err(
                if len >= 8 && {
                    let mut m = [0u8; 8];
                    file.read_exact_at(&mut m, 0)?;
                    m != MAGIC
                } {
                    Error::BadMagic
                } else {
                    Error::Truncated {
                        what: "file header",
                    }
                },
            );
        }
        let mut raw = [0u8; 512];
        file.read_exact_at(&mut raw, 0)?;
        let copies =
            COPY_OFFSETS.map(|o| FileHeader::decode(&raw[o as usize..o as usize + HEADER_LEN]));
        let header = match copies {
            [Ok(a), Ok(b)] => {
                if b.checkpoint_lsn > a.checkpoint_lsn {
                    b
                } else {
                    a
                }
            }
            [Ok(a), Err(_)] | [Err(_), Ok(a)] => a,
            [Err(e), Err(_)] => return Err(e),
        };
        let ps = header.page_size as u64;
        if len % ps != 0 || len < ps {
            return Err(Error::Truncated {
                what: "database file (length is not a whole number of pages)",
            });
        }
        Ok((
            Pager {
                file,
                page_size: ps as usize,
                reads: AtomicU64::new(0),
                writes: AtomicU64::new(0),
            },
            header,
        ))
    }

    pub(crate) fn page_size(&self) -> usize {
        self.page_size
    }

    /// Writes both header copies, syncing after each.
    pub(crate) fn write_header(&self, header: &FileHeader) -> Result<()> {
        let b = header.encode();
        for off in COPY_OFFSETS {
            self.file.write_all_at(&b, off)?;
            self.file.sync_data()?;
        }
        Ok(())
    }

    /// Reads a page; bytes past the end of the file read as zero (a page that
    /// was allocated but never written).
    pub(crate) fn read_page(&self, id: PageId, out: &mut [u8]) -> Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let mut done = 0;
        let base = id as u64 * self.page_size as u64;
        while done < out.len() {
            match self.file.read_at(&mut out[done..], base + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        out[done..].fill(0);
        Ok(())
    }

    /// Writes a sealed page image.
    pub(crate) fn write_page(&self, id: PageId, bytes: &[u8]) -> Result<()> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.file
            .write_all_at(bytes, id as u64 * self.page_size as u64)?;
        Ok(())
    }

    /// Makes written pages durable.
    pub(crate) fn sync(&self) -> Result<()> {
        self.file.sync_data()?;
        Ok(())
    }

    /// File length in pages.
    pub(crate) fn len_pages(&self) -> Result<u64> {
        Ok(self.file.metadata()?.len() / self.page_size as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::{FileHeader, HEADER_LEN};

    /// A version 3 header reads back as written; a version 2 one (no segment size,
    /// its checksum right after the transaction id) reads with the size unknown.
    #[test]
    fn headers_of_both_versions_read() {
        let h = FileHeader {
            page_size: 4096,
            checkpoint_lsn: 1234,
            log_start: 1000,
            next_txn: 77,
            log_segment_bytes: 1 << 20,
        };
        assert_eq!(FileHeader::decode(&h.encode()).unwrap(), h);
        let mut v2 = [0u8; HEADER_LEN];
        v2[..40].copy_from_slice(&h.encode()[..40]);
        v2[8..12].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32fast::hash(&v2[0..40]);
        v2[40..44].copy_from_slice(&crc.to_le_bytes());
        let old = FileHeader::decode(&v2).unwrap();
        assert_eq!(
            old,
            FileHeader {
                log_segment_bytes: 0,
                ..h
            }
        );
        let mut bad = h.encode();
        bad[40] ^= 1;
        assert!(FileHeader::decode(&bad).is_err(), "the size is checksummed");
    }
}
