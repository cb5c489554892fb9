//! TPC-C for the thread-level speculation toolkit: the spec's schema, population,
//! five transactions and consistency checks, driven against several engines.
//!
//! | module | what |
//! | --- | --- |
//! | [`random`] | NURand, a-strings, last names: the spec's generators, seeded |
//! | [`schema`] | the nine tables as rows; scale; metadata |
//! | [`load`] | the initial population, pushed into any [`load::LoadSink`] |
//! | [`workload`] | transaction inputs and outputs; the terminal drawing the mix |
//! | [`engine`] | the [`engine::Engine`] trait; SQLite; key/value engines (ours, in-memory) |
//! | [`codec`] | keys and rows as bytes for key/value engines |
//! | [`check`] | consistency conditions 1 to 4 |
//! | [`driver`] | timed runs, latency percentiles, the `compare` report |
//!
//! The same seed gives the same transaction inputs whatever the engine, so engines
//! are compared on identical work and their results can be checked for equality.

pub mod check;
pub mod codec;
pub mod driver;
pub mod engine;
pub mod load;
pub mod random;
pub mod schema;
pub mod workload;
