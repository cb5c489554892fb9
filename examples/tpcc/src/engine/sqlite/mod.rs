//! The SQLite baseline: bundled SQLite through rusqlite, WAL journal, every statement
//! prepared once and cached, an in-core page cache.
//!
//! The statements are the ones a careful SQLite user would write: composite keys are
//! clustered (`WITHOUT ROWID`), and a read followed by a write of the same row is one
//! `UPDATE ... RETURNING`, so the baseline is fast rather than naive.
//!
//! | file | what |
//! | --- | --- |
//! | `schema` | the tables, the secondary indexes, the per-district stock updates |
//! | `load` | the bulk load ([`LoadSink`](crate::load::LoadSink)) |
//! | `transactions` | the five transactions, the summary, order lookups ([`Engine`](super::api::Engine)) |

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use rusqlite::{Connection, OptionalExtension};

use super::api::Sync;

mod load;
mod schema;
mod transactions;

use schema::{FORMAT, SCHEMA};

/// A TPC-C database in one SQLite file.
pub struct SqliteEngine {
    conn: Connection,
    /// Reused buffers, so the transaction path does not allocate.
    ids: Vec<u32>,
    text: String,
    c_data: String,
    /// Set only while loading: the sync setting to switch to once the load commits.
    pending_sync: Option<Sync>,
}

fn sync_pragma(sync: Sync) -> &'static str {
    match sync {
        Sync::Off => "OFF",
        Sync::Normal => "NORMAL",
        Sync::Full => "FULL",
    }
}

impl SqliteEngine {
    fn configure(conn: &Connection, sync: Sync) -> Result<()> {
        conn.set_prepared_statement_cache_capacity(64);
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            bail!("SQLite refused WAL mode (got {mode})");
        }
        // The database is meant to be in core, as in the CMU study: a cache of up to
        // 1 GiB holds the whole spec-scale warehouse. The WAL is checkpointed after
        // 65,536 pages (256 MiB), the log volume after which btree-db checkpoints too;
        // SQLite's default of 1,000 pages would charge a checkpoint to one New Order in
        // every hundred or so, which btree-db does not pay either.
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {}; PRAGMA cache_size = -1048576; PRAGMA temp_store = MEMORY; \
             PRAGMA wal_autocheckpoint = 65536;",
            sync_pragma(sync)
        ))?;
        Ok(())
    }

    /// Creates the schema in a new file and starts the load transaction.
    pub fn create(path: &Path, sync: Sync) -> Result<Self> {
        let conn =
            Connection::open(path).with_context(|| format!("creating {}", path.display()))?;
        // A fresh file needs no journal while it is being filled: if the load dies, the
        // file is discarded anyway. WAL is switched on when the load commits.
        conn.execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -1048576;",
        )?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch("BEGIN")?;
        let mut engine = Self::wrap(conn);
        engine.pending_sync = Some(sync);
        Ok(engine)
    }

    /// Opens a loaded database.
    pub fn open(path: &Path, sync: Sync) -> Result<Self> {
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .with_context(|| format!("opening {}", path.display()))?;
        // The format is read before `configure`: a file that is not ours is left
        // as it was (switched to WAL first, a foreign SQLite file stayed in WAL mode
        // after it was refused).
        let format: Option<i64> = conn
            .query_row(
                "SELECT value FROM tpcc_meta WHERE name = 'format'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| anyhow!("{} is not a loaded TPC-C database: {e}", path.display()))?;
        match format {
            Some(FORMAT) => {}
            Some(f) => bail!(
                "{} has TPC-C schema version {f}, this build reads {FORMAT}",
                path.display()
            ),
            None => bail!(
                "{} is not a completely loaded TPC-C database",
                path.display()
            ),
        }
        Self::configure(&conn, sync).with_context(|| format!("opening {}", path.display()))?;
        Ok(Self::wrap(conn))
    }

    fn wrap(conn: Connection) -> Self {
        Self {
            conn,
            ids: Vec::with_capacity(16),
            text: String::with_capacity(64),
            c_data: String::with_capacity(512),
            pending_sync: None,
        }
    }

    fn begin(&self) -> Result<()> {
        self.conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(())
    }

    fn commit(&self) -> Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }

    fn rollback(&self) -> Result<()> {
        self.conn.prepare_cached("ROLLBACK")?.execute([])?;
        Ok(())
    }

    /// Runs `f` in a transaction, rolling back if it fails.
    fn in_txn<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.begin()?;
        match f(self) {
            Ok(v) => {
                self.commit()?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.rollback();
                Err(e)
            }
        }
    }

    fn meta_value(&self, name: &str) -> Result<i64> {
        self.conn
            .query_row("SELECT value FROM tpcc_meta WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .with_context(|| format!("reading {name} from tpcc_meta"))
    }
}

/// Views a fixed-width ASCII column as text.
fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or("")
}
