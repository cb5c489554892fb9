//! The tutorial book. Each chapter is included here as documentation, so that
//! `cargo test` compiles and runs every Rust snippet in it.

#[doc = include_str!("introduction.md")]
pub mod introduction {}

#[doc = include_str!("first-loop.md")]
pub mod first_loop {}
