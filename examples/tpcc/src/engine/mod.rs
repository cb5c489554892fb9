//! The seam between the TPC-C driver and the storage engines.
//!
//! Each engine implements the five transactions natively (SQL for SQLite, key/value
//! operations for our B-tree), because that is how each would be used for real; the
//! driver, the inputs and the consistency rules are shared.
//!
//! The engines import the shared types from `api`, never from this module, which only
//! dispatches to them ([`create`], [`open`]): the imports run one way.
//!
//! | module | what |
//! | --- | --- |
//! | `api` | the [`Engine`] trait, [`Mode`], [`Sync`], [`Summary`], [`execute`]: what the engines and the driver share |
//! | `kv/` | TPC-C written once against an ordered transactional key/value store |
//! | `sequential` | `btree-db` as that store, one transaction at a time |
//! | `memory` | an in-memory `BTreeMap` as that store, the reference for tests |
//! | `sqlite/` | SQLite: its schema, bulk load and transactions in SQL |
//!
//! Mode `tls` is the key/value engine of [`kv`] over the same `btree-db` store and the
//! same database files, with the transactions' loops (New Order's items, Stock Level's
//! items) run as speculative loops over the rows of [`kv::spec`].

use std::path::Path;

use anyhow::{Context, Result, bail};

mod api;
pub mod kv;
pub mod memory;
pub mod sequential;
pub mod sqlite;

pub use api::{Engine, Mode, Summary, Sync, execute};

/// Creates an empty database at `path` for loading `warehouses` warehouses of the
/// population `scale` (a sizing hint). Fails if something is already there.
pub fn create(
    path: &Path,
    mode: Mode,
    sync: Sync,
    warehouses: u16,
    scale: crate::schema::Scale,
) -> Result<Box<dyn Engine>> {
    if path.exists() {
        bail!(
            "{} already exists: remove it or choose another --db path",
            path.display()
        );
    }
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && !dir.is_dir()
    {
        if dir.exists() {
            bail!("{} is not a directory", dir.display());
        }
        bail!("directory {} does not exist", dir.display());
    }
    match mode {
        Mode::Sqlite => Ok(Box::new(sqlite::SqliteEngine::create(path, sync)?)),
        Mode::Sequential | Mode::Tls | Mode::ByHand => Ok(Box::new(sequential::create(
            path, sync, warehouses, scale, mode,
        )?)),
    }
}

/// Opens a loaded database. `mode` defaults to what the file is; asking for a mode
/// that does not match the file is an error.
pub fn open(path: &Path, mode: Option<Mode>, sync: Sync) -> Result<Box<dyn Engine>> {
    if !path.exists() {
        bail!(
            "no database at {}: create one with `tpcc load --db {} --warehouses 1`",
            path.display(),
            path.display()
        );
    }
    let mode = resolve_mode(path, mode)?;
    let engine: Box<dyn Engine> = match mode {
        Mode::Sqlite => Box::new(sqlite::SqliteEngine::open(path, sync)?),
        Mode::Sequential | Mode::Tls | Mode::ByHand => {
            Box::new(sequential::open(path, sync, mode)?)
        }
    };
    Ok(engine)
}

/// The most terminals one run drives: each is an OS thread, and tens of thousands of
/// them ran the process out of memory maps (it aborted at 40,000).
pub const MAX_TERMINALS: usize = 1024;

/// Opens `terminals` engines on the database at `path` (see [`open`]), each to be
/// driven by its own thread; their transactions run at the same time. Our engine's
/// modes share one open database; SQLite runs one terminal.
pub fn open_terminals(
    path: &Path,
    mode: Option<Mode>,
    sync: Sync,
    terminals: usize,
) -> Result<Vec<Box<dyn Engine + Send>>> {
    if terminals == 0 {
        bail!("--terminals must be at least 1");
    }
    if terminals > MAX_TERMINALS {
        bail!(
            "--terminals {terminals} is more than {MAX_TERMINALS}: each terminal is a thread \
             (the specification has 10 per warehouse)"
        );
    }
    if !path.exists() {
        return open(path, mode, sync).map(|_| Vec::new());
    }
    let mode = resolve_mode(path, mode)?;
    if mode == Mode::Sqlite {
        if terminals > 1 {
            bail!(
                "the sqlite engine runs one terminal; --terminals > 1 needs a sequential or \
                 tls database"
            );
        }
        return Ok(vec![Box::new(sqlite::SqliteEngine::open(path, sync)?)]);
    }
    let first = sequential::open(path, sync, mode)?;
    let mut engines: Vec<Box<dyn Engine + Send>> = Vec::with_capacity(terminals);
    for _ in 1..terminals {
        engines.push(Box::new(first.another_terminal()?));
    }
    engines.insert(0, Box::new(first));
    Ok(engines)
}

/// The mode to run the database at `path` in: `mode`, checked against the engine that
/// wrote the file (a sequential database also runs in modes tls and by-hand), else
/// that engine.
fn resolve_mode(path: &Path, mode: Option<Mode>) -> Result<Mode> {
    let found = detect(path)?;
    Ok(match mode {
        None => found,
        Some(m @ (Mode::Tls | Mode::ByHand)) if found == Mode::Sequential => m,
        Some(m) if m == found => m,
        Some(m) => bail!(
            "{} is a {found} database; it cannot be opened in mode {m} (load one with --mode {m})",
            path.display()
        ),
    })
}

/// Which engine wrote the file at `path`, from its first bytes.
fn detect(path: &Path) -> Result<Mode> {
    use std::io::Read;
    let mut head = [0u8; 16];
    // Opening a pipe for reading waits for a writer: look first.
    let meta = std::fs::metadata(path).with_context(|| format!("opening {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let n = f
        .read(&mut head)
        .with_context(|| format!("reading {}", path.display()))?;
    if n == 16 && &head == b"SQLite format 3\0" {
        Ok(Mode::Sqlite)
    } else {
        Ok(Mode::Sequential)
    }
}
