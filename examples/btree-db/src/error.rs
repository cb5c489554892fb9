//! The one error type of the database.

use std::fmt;

/// A page number in the database file.
pub type PageId = u32;

/// Everything that can go wrong. Bad input from disk or from the caller is an
/// error, never a panic.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error.
    Io(std::io::Error),
    /// The file does not start with the database magic number.
    BadMagic,
    /// The file was written by an incompatible format version.
    UnsupportedVersion {
        /// Version found in the file.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
    /// The file is shorter than its header says, or a page is cut short.
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// A page failed its checksum.
    BadChecksum {
        /// The page number.
        page: PageId,
    },
    /// A page (or log record) passed its checksum but its structure is invalid.
    Corrupt {
        /// The page number (0 for the file header or the log).
        page: PageId,
        /// What is wrong.
        reason: &'static str,
    },
    /// The log is damaged where recovery cannot tell what was committed:
    /// valid records follow a damaged one, the log ends before the last
    /// checkpoint, or a page on disk is newer than the end of the log. The
    /// database refuses to open rather than lose committed transactions
    /// silently; restore the files from a backup (or, when the reason is that no
    /// log file is there at all, open the file under the name it was written
    /// under: the log's files are named after it).
    LogDamaged {
        /// Where the damage was found (the LSN of the first bad byte, or the
        /// end of the readable log).
        lsn: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// An abort (or the abort of a dropped transaction) could not undo all
    /// its changes, for the reason given (an I/O error, or a buffer pool
    /// that stayed full). Its locks stay held, so no transaction sees the
    /// half-undone rows, and its log is kept: the next `Database::open`
    /// finds it unfinished and undoes the rest.
    AbortIncomplete {
        /// Why the undo stopped.
        cause: String,
    },
    /// `commit` made the transaction's changes permanent in memory (other
    /// transactions see them, and nothing undoes them), but its commit record
    /// could not be written or synced to the log (an I/O error, a full disk):
    /// it survives a crash, or a close while the disk is still full, only if
    /// the log is written later, as the next commit or checkpoint that
    /// succeeds does. It took effect: do not run it again.
    CommitNotDurable {
        /// Why the log write failed.
        cause: String,
    },
    /// An option value is out of range.
    InvalidOptions(String),
    /// A table or index name is longer than [`crate::Limits::max_key`] (names are
    /// keys of the catalog).
    NameTooLong {
        /// The name's length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `drop_table` waited [`crate::Options::lock_timeout`] for the transactions that
    /// have the table open (a transaction of the calling thread among them waits for
    /// the call itself: commit or abort it first).
    TableInUse(String),
    /// A key is longer than [`crate::Limits::max_key`].
    KeyTooLarge {
        /// The key length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A key plus value is larger than [`crate::Limits::max_entry`].
    ValueTooLarge {
        /// The key plus value length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// No table or index with this name.
    UnknownTable(String),
    /// No table or index with this id (dropped, or never created).
    UnknownTableId(u32),
    /// A table or index with this name already exists.
    TableExists(String),
    /// `insert` found the key already present.
    DuplicateKey,
    /// `update` found no such key.
    NotFound,
    /// Waiting for the lock would close a cycle of waiting transactions. The
    /// transaction must be aborted (dropping it aborts it).
    Deadlock,
    /// The lock was not granted within [`crate::Options::lock_timeout`]. The
    /// transaction must be aborted.
    LockTimeout,
    /// Every buffer pool frame is pinned; raise `Options::pool_pages`.
    PoolExhausted,
    /// The database file is open elsewhere (another process or another
    /// `Database` in this one); two writers would corrupt it.
    InUse,
    /// `commit` or `abort` of a transaction whose [`crate::SharedTxn`] was
    /// never dropped (`mem::forget`): the handle took the transaction's locks
    /// with it, so they can no longer be released. The transaction's changes
    /// are undone; its locks stay held until the database is closed.
    LentOut,
}

/// Result with the database [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "i/o error: {e}"),
            Error::BadMagic => f.write_str("not a btree-db file (bad magic number)"),
            Error::UnsupportedVersion { found, expected } => {
                write!(
                    f,
                    "unsupported format version {found} (this build reads {expected})"
                )
            }
            Error::Truncated { what } => write!(f, "file truncated while reading {what}"),
            Error::BadChecksum { page } => write!(f, "page {page} failed its checksum"),
            Error::AbortIncomplete { cause } => write!(
                f,
                "the abort could not finish ({cause}); its locks stay held and its changes \
                 are undone when the database is next opened"
            ),
            Error::LogDamaged { lsn, reason } => {
                write!(f, "the log is damaged at LSN {lsn}: {reason}")
            }
            Error::Corrupt { page, reason } => write!(f, "page {page} is corrupt: {reason}"),
            Error::InvalidOptions(m) => write!(f, "invalid options: {m}"),
            Error::NameTooLong { len, max } => {
                write!(
                    f,
                    "a table or index name of {len} bytes is longer than {max}"
                )
            }
            Error::TableInUse(name) => write!(
                f,
                "table {name:?} is still in use by a transaction after the lock timeout (one \
                 of this thread's own included: commit or abort it before dropping the table)"
            ),
            Error::KeyTooLarge { len, max } => write!(f, "key of {len} bytes exceeds {max}"),
            Error::ValueTooLarge { len, max } => {
                write!(f, "entry of {len} bytes exceeds {max}")
            }
            Error::UnknownTable(n) => write!(f, "unknown table {n:?}"),
            Error::UnknownTableId(n) => write!(f, "unknown table id {n}"),
            Error::TableExists(n) => write!(f, "table {n:?} already exists"),
            Error::DuplicateKey => f.write_str("duplicate key"),
            Error::NotFound => f.write_str("key not found"),
            Error::Deadlock => f.write_str("deadlock detected; abort the transaction"),
            Error::LockTimeout => f.write_str("lock wait timed out; abort the transaction"),
            Error::PoolExhausted => f.write_str("all buffer pool frames are pinned"),
            Error::InUse => f.write_str("database file is already open elsewhere"),
            Error::CommitNotDurable { cause } => write!(
                f,
                "the transaction committed, but its commit record could not be made durable \
                 ({cause}); it is lost if the process crashes before the log is written"
            ),
            Error::LentOut => f.write_str(
                "the transaction's SharedTxn was never dropped (forgotten): its locks went with \
                 it; the transaction was rolled back",
            ),
        }
    }
}

/// No `source`: `Io`'s message already includes the OS error's, and a reporter that
/// walks the chain (`anyhow`'s `{:#}`, `main` returning an error) printed it twice
/// ("Read-only file system (os error 30): Read-only file system (os error 30)"). The
/// `io::Error` itself is in `Error::Io`.
impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}
