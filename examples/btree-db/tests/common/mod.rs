//! Helpers shared by test files (each test file is its own crate and uses some).
#![allow(dead_code)]

use std::time::Duration;

use btree_db::{Database, Options, SyncMode};

/// A database in `dir` (file `db`), its log unsynced, with `lock_timeout`.
pub(crate) fn open(dir: &std::path::Path, lock_timeout: Duration) -> std::sync::Arc<Database> {
    Database::open(
        dir.join("db"),
        Options {
            sync: SyncMode::Off,
            lock_timeout,
            ..Options::default()
        },
    )
    .unwrap()
}

/// Key `i`, big-endian so that keys sort as numbers.
pub(crate) fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}
