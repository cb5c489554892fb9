//! What the driver and the engines share: the [`Engine`] trait with the five
//! transactions, the engine [`Mode`]s, the [`Sync`] setting, the [`Summary`] an engine
//! reports, and [`execute`], which runs one transaction of any type.
//!
//! The engines implement this and the dispatch in `engine/mod.rs` chooses among them;
//! nothing here knows any engine.

use std::fmt;

use anyhow::{Result, bail};

use crate::load::LoadSink;
use crate::schema::Meta;
use crate::workload::{
    DeliveryInput, DeliveryOutput, NewOrderInput, NewOrderOutput, OrderStatusInput,
    OrderStatusOutput, PaymentInput, PaymentOutput, StockLevelInput, StockLevelOutput, TxnInput,
    TxnOutput,
};

pub use crate::check::Summary;

/// The engines `tpcc` can drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Mode {
    /// Our B-tree database, one transaction at a time.
    Sequential,
    /// SQLite through rusqlite: WAL, prepared statements.
    Sqlite,
    /// Our database with the transactions' loops run as speculative epochs.
    Tls,
    /// Our database with the same loops split between threads by hand (no
    /// speculation): the reference point for `tls` (see `engine/kv/by_hand.rs`).
    #[value(name = "by-hand")]
    ByHand,
}

impl Mode {
    /// The mode's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sequential => "sequential",
            Mode::Sqlite => "sqlite",
            Mode::Tls => "tls",
            Mode::ByHand => "by-hand",
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
            "by-hand" => Ok(Mode::ByHand),
            other => {
                bail!("unknown mode {other:?}: expected one of sequential, sqlite, tls, by-hand")
            }
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
    /// Runs the transactions' loops in order, as mode `sequential` does (`true`),
    /// or as the engine's mode says again (`false`). The driver asks for it while
    /// it runs again a transaction that keeps losing lock conflicts: loops run as
    /// speculative epochs or split by hand take their row locks out of loop order
    /// and hold them longer, which can make one transaction lose to the others'
    /// every time. Engines whose transactions have no such loops ignore it.
    fn loops_in_order(&mut self, _in_order: bool) {}
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
