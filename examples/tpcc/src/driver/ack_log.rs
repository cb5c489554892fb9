//! The acknowledgement log of `run --ack-log`: committed New Orders, one line each,
//! written before the next transaction starts, and read back by `check
//! --expect-orders` after a crash.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Appends acknowledged New Orders to a file, one `w d o_id` line each, handed to the
/// operating system before the next transaction starts: enough to survive the process
/// being killed, which is what the crash tests do (not a power failure).
pub struct AckLog {
    file: std::fs::File,
    /// For error messages.
    path: std::path::PathBuf,
}

/// Refuses an ack log that is the database `db` or one of its files (its log, or
/// SQLite's journal): the acks written into it took the database with them at the
/// first crash (an outside probe's `--ack-log` naming the database file left a file
/// that no longer opened).
pub fn refuse_ack_log_on_database(ack: &Path, db: &Path) -> Result<()> {
    // Where each would be: the file itself when it exists, else its directory
    // (canonical, so that `./x` and `x`, or a link, compare equal) and its name.
    let place = |p: &Path| -> (Option<PathBuf>, std::ffi::OsString) {
        let name = p.file_name().unwrap_or_default().to_os_string();
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        (std::fs::canonicalize(dir).ok(), name)
    };
    let ((ack_dir, ack_name), (db_dir, db_name)) = (place(ack), place(db));
    let ack_name = ack_name.to_string_lossy();
    let db_name = db_name.to_string_lossy();
    let is_databases = |name: &str| {
        *name == *db_name
            || name.starts_with(&format!("{db_name}.wal."))
            || ["-wal", "-shm", "-journal"]
                .iter()
                .any(|s| name == format!("{db_name}{s}"))
    };
    let one_of_its_files = ack_dir.is_some() && ack_dir == db_dir && is_databases(&ack_name);
    // An existing ack file that is one of them under another name (a hard link, which
    // no comparison of names or canonical paths sees: an outside probe's ack lines
    // went into the database through one): the same device and inode.
    let same_file = std::fs::metadata(ack).is_ok_and(|a| {
        let of_db = db_dir
            .as_deref()
            .and_then(|d| std::fs::read_dir(d).ok())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| is_databases(&e.file_name().to_string_lossy()));
        of_db
            .filter_map(|e| e.metadata().ok())
            .any(|d| same_inode(&a, &d))
    });
    if same_file || one_of_its_files {
        bail!(
            "--ack-log {} is the database {} or one of its files: name a file of its own",
            ack.display(),
            db.display()
        );
    }
    Ok(())
}

/// Whether two files' metadata are of one file.
#[cfg(unix)]
fn same_inode(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Elsewhere: no inode to compare (names and canonical paths only).
#[cfg(not(unix))]
fn same_inode(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    false
}

impl AckLog {
    /// Opens (appending to) `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening ack log {}", path.display()))?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Records one order. The line goes out in a single `write`, so a kill leaves
    /// either the whole line or none of it.
    pub fn ack(&mut self, w: u16, d: u8, o: u32) -> Result<()> {
        let mut line = [0u8; 32];
        let mut cursor = std::io::Cursor::new(&mut line[..]);
        writeln!(cursor, "{w} {d} {o}")?;
        let n = cursor.position() as usize;
        self.file
            .write_all(&line[..n])
            .and_then(|()| self.file.flush())
            .with_context(|| format!("writing ack log {}", self.path.display()))
    }
}

/// Parses an ack log: `(w_id, d_id, o_id)` per complete line. A last line without a
/// newline was cut by a crash before it was acknowledged, and is ignored.
pub fn read_ack_log(path: &Path) -> Result<Vec<(u16, u8, u32)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading expected orders from {}", path.display()))?;
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let mut orders = Vec::new();
    for (n, line) in complete.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = || {
            anyhow::anyhow!(
                "{}:{}: expected `w_id d_id o_id`, found {line:?}",
                path.display(),
                n + 1
            )
        };
        let mut it = line.split_whitespace();
        let w = it.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let d = it.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let o = it.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        if it.next().is_some() {
            return Err(bad());
        }
        orders.push((w, d, o));
    }
    Ok(orders)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The database itself or one of its files, under any name that reaches it: the
    /// same name, another spelling, a symbolic link, a hard link; a file of its own
    /// passes.
    #[test]
    fn an_ack_log_on_the_database_is_refused_whatever_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        std::fs::write(&db, b"db").unwrap();
        let wal = dir.path().join("t.db.wal.00000000");
        std::fs::write(&wal, b"wal").unwrap();
        let refused = |ack: &Path| refuse_ack_log_on_database(ack, &db).is_err();
        assert!(refused(&db));
        assert!(refused(&wal));
        assert!(refused(&dir.path().join("t.db.wal.00000009")));
        assert!(refused(&dir.path().join(".").join("t.db")));
        let sym = dir.path().join("sym");
        std::os::unix::fs::symlink(&db, &sym).unwrap();
        assert!(refused(&sym));
        let hard = dir.path().join("hard");
        std::fs::hard_link(&db, &hard).unwrap();
        assert!(refused(&hard), "a hard link to the database");
        let hard_wal = dir.path().join("hard-wal");
        std::fs::hard_link(&wal, &hard_wal).unwrap();
        assert!(refused(&hard_wal), "a hard link to its log");
        assert!(!refused(&dir.path().join("acks")));
        std::fs::write(dir.path().join("acks"), b"").unwrap();
        assert!(!refused(&dir.path().join("acks")));
    }

    #[test]
    fn ack_log_round_trips_and_ignores_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        let mut log = AckLog::open(&path).unwrap();
        log.ack(1, 2, 3001).unwrap();
        log.ack(65535, 10, u32::MAX).unwrap();
        drop(log);
        assert_eq!(
            read_ack_log(&path).unwrap(),
            [(1, 2, 3001), (65535, 10, u32::MAX)]
        );
        // A line cut by a crash has no newline yet: it was never acknowledged.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("1 3 30");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_ack_log(&path).unwrap().len(), 2);
        std::fs::write(&path, "1 2\n").unwrap();
        assert!(read_ack_log(&path).is_err());
        std::fs::write(&path, "1 2 3 4\n").unwrap();
        assert!(read_ack_log(&path).is_err());
        assert!(read_ack_log(&dir.path().join("missing")).is_err());
    }
}
