//! The tutorial book. Each chapter is included here as documentation, so that
//! `cargo test` compiles and runs every Rust snippet in it (the README's too).

#[doc = include_str!("../../README.md")]
pub mod readme {}

#[doc = include_str!("introduction.md")]
pub mod introduction {}

#[doc = include_str!("first-loop.md")]
pub mod first_loop {}

#[doc = include_str!("reading-the-report.md")]
pub mod reading_the_report {}

#[doc = include_str!("tls-loop.md")]
pub mod tls_loop {}

#[doc = include_str!("escape.md")]
pub mod escape {}

#[doc = include_str!("on-commit.md")]
pub mod on_commit {}

#[doc = include_str!("containers.md")]
pub mod containers {}

#[doc = include_str!("not-tracked.md")]
pub mod not_tracked {}

#[doc = include_str!("guarantees.md")]
pub mod guarantees {}

#[doc = include_str!("database.md")]
pub mod database {}

#[doc = include_str!("tpcc-speculative.md")]
pub mod tpcc_speculative {}

#[doc = include_str!("glossary.md")]
pub mod glossary {}
