//! Ordinary programs written against the public API from outside, in shapes unlike the
//! runtime's own tests: structs holding speculative containers, escapes with undo
//! actions, commit-time logs, `break` and early `return`, panics caught around the
//! loop, nodes replaced while later iterations write them. Each program computes its
//! result with the runtime and with a plain sequential twin, at 1, 2, 4 and 8 threads,
//! and the two must agree exactly.

mod bank;
mod common;
mod inventory;
mod union_find;
