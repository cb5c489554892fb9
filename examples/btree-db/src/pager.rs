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
/// The on-disk format version this build reads and writes.
/// Version 2: page checksums cover the page number.
pub(crate) const FORMAT_VERSION: u32 = 2;
const COPY_OFFSETS: [u64; 2] = [0, 256];
const HEADER_LEN: usize = 48;

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
        let crc = crc32fast::hash(&b[0..40]);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
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
        if version != FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                found: version,
                expected: FORMAT_VERSION,
            });
        }
        if crc32fast::hash(&b[0..40]) != u32_at(40) {
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
        Ok(FileHeader {
            page_size,
            checkpoint_lsn: u64_at(16),
            log_start: u64_at(24),
            next_txn: u64_at(32),
        })
    }
}

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
        lock_file(&file)?;
        let len = file.metadata()?.len();
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
