//! The seam between the TPC-C driver and the storage engines.
//!
//! Each engine implements the five transactions natively (SQL for SQLite, key/value
//! operations for our B-tree), because that is how each would be used for real; the
//! driver, the inputs and the consistency rules are shared.
//!
//! | module | what |
//! | --- | --- |
//! | `kv/` | TPC-C written once against an ordered transactional key/value store |
//! | `sequential` | `btree-db` as that store, one transaction at a time |
//! | `memory` | an in-memory `BTreeMap` as that store, the reference for tests |
//! | `sqlite/` | SQLite: its schema, bulk load and transactions in SQL |
//!
//! Mode `tls` is reserved: it will be the key/value engine of [`kv`] over the same
//! `btree-db` store, with three loops (New Order's items, Delivery's districts, Stock
//! Level's items) run as speculative loops. Each of those loop bodies in
//! `kv/transactions.rs` already touches only its own line's rows plus a few accumulators
//! (sum, brand count), which is the shape the runtime needs. Until then, [`create`] and
//! [`open`] answer `tls` with a clear "not available yet".

use std::fmt;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::load::LoadSink;
use crate::schema::Meta;
use crate::workload::{
    DeliveryInput, DeliveryOutput, NewOrderInput, NewOrderOutput, OrderStatusInput,
    OrderStatusOutput, PaymentInput, PaymentOutput, StockLevelInput, StockLevelOutput, TxnInput,
    TxnOutput,
};

pub mod kv;
pub mod memory;
pub mod sequential;
pub mod sqlite;

pub use crate::check::Summary;

/// The engines `tpcc` can drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Mode {
    /// Our B-tree database, one transaction at a time.
    Sequential,
    /// SQLite through rusqlite: WAL, prepared statements.
    Sqlite,
    /// Our database with thread-level speculation inside transactions (not built yet).
    Tls,
}

impl Mode {
    /// The mode's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sequential => "sequential",
            Mode::Sqlite => "sqlite",
            Mode::Tls => "tls",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Mode {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sequential" => Ok(Mode::Sequential),
            "sqlite" => Ok(Mode::Sqlite),
            "tls" => Ok(Mode::Tls),
            other => bail!("unknown mode {other:?}: expected one of sequential, sqlite, tls"),
        }
    }
}

/// Durability of a commit, as both engines understand it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Sync {
    /// Never wait for the disk: a crash may lose recent commits (and, for SQLite, more).
    #[default]
    Off,
    /// Flush at checkpoints; a crash may lose the latest commits but not consistency.
    Normal,
    /// A commit returns only once it is on disk.
    Full,
}

impl Sync {
    /// The setting's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Sync::Off => "off",
            Sync::Normal => "normal",
            Sync::Full => "full",
        }
    }
}

impl std::str::FromStr for Sync {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "off" => Ok(Sync::Off),
            "normal" => Ok(Sync::Normal),
            "full" => Ok(Sync::Full),
            other => bail!("unknown sync setting {other:?}: expected off, normal or full"),
        }
    }
}

/// A TPC-C database: the five transactions plus what loading and checking need.
pub trait Engine: LoadSink {
    /// Which engine this is.
    fn mode(&self) -> Mode;
    /// The metadata the loader recorded.
    fn meta(&mut self) -> Result<Meta>;
    /// New Order; a rollback on the unused item is an `Ok` with `rolled_back` set.
    fn new_order(&mut self, input: &NewOrderInput) -> Result<NewOrderOutput>;
    /// Payment.
    fn payment(&mut self, input: &PaymentInput) -> Result<PaymentOutput>;
    /// Order Status.
    fn order_status(&mut self, input: &OrderStatusInput) -> Result<OrderStatusOutput>;
    /// Delivery.
    fn delivery(&mut self, input: &DeliveryInput) -> Result<DeliveryOutput>;
    /// Stock Level.
    fn stock_level(&mut self, input: &StockLevelInput) -> Result<StockLevelOutput>;
    /// Aggregates over the whole database, for the consistency conditions and for
    /// comparing engines.
    fn summary(&mut self) -> Result<Summary>;
    /// Whether order `(w_id, d_id, o_id)` exists.
    fn order_exists(&mut self, w_id: u16, d_id: u8, o_id: u32) -> Result<bool>;
}

/// Runs one transaction of any type.
pub fn execute(engine: &mut dyn Engine, input: &TxnInput) -> Result<TxnOutput> {
    Ok(match input {
        TxnInput::NewOrder(i) => TxnOutput::NewOrder(engine.new_order(i)?),
        TxnInput::Payment(i) => TxnOutput::Payment(engine.payment(i)?),
        TxnInput::OrderStatus(i) => TxnOutput::OrderStatus(engine.order_status(i)?),
        TxnInput::Delivery(i) => TxnOutput::Delivery(engine.delivery(i)?),
        TxnInput::StockLevel(i) => TxnOutput::StockLevel(engine.stock_level(i)?),
    })
}

fn tls_unavailable() -> anyhow::Error {
    anyhow::anyhow!(
        "mode tls is not available yet: it arrives with the speculative runtime; \
         use sequential or sqlite"
    )
}

/// Creates an empty database at `path` for loading `warehouses` warehouses (a sizing
/// hint). Fails if something is already there.
pub fn create(path: &Path, mode: Mode, sync: Sync, warehouses: u16) -> Result<Box<dyn Engine>> {
    if path.exists() {
        bail!(
            "{} already exists: remove it or choose another --db path",
            path.display()
        );
    }
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && !dir.is_dir()
    {
        bail!("directory {} does not exist", dir.display());
    }
    match mode {
        Mode::Sqlite => Ok(Box::new(sqlite::SqliteEngine::create(path, sync)?)),
        Mode::Sequential => Ok(Box::new(sequential::create(path, sync, warehouses)?)),
        Mode::Tls => Err(tls_unavailable()),
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
    let found = detect(path)?;
    let mode = match mode {
        None => found,
        Some(Mode::Tls) => return Err(tls_unavailable()),
        Some(m) if m == found => m,
        Some(m) => bail!(
            "{} is a {found} database; it cannot be run in mode {m} (load one with --mode {m})",
            path.display()
        ),
    };
    let engine: Box<dyn Engine> = match mode {
        Mode::Sqlite => Box::new(sqlite::SqliteEngine::open(path, sync)?),
        Mode::Sequential => Box::new(sequential::open(path, sync)?),
        Mode::Tls => return Err(tls_unavailable()),
    };
    Ok(engine)
}

/// Which engine wrote the file at `path`, from its first bytes.
fn detect(path: &Path) -> Result<Mode> {
    use std::io::Read;
    let mut head = [0u8; 16];
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
