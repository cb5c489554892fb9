//! Mode `sequential`: TPC-C on our B-tree database (`btree-db`), one transaction at a
//! time.

use std::path::Path;

use anyhow::{Result, bail};

use super::Sync;
use super::kv::KvEngine;
use super::memory::MemoryKv;

/// Creates an empty database for loading.
pub fn create(path: &Path, sync: Sync) -> Result<KvEngine<MemoryKv>> {
    let _ = (path, sync);
    bail!("mode sequential is not available yet: btree-db is not usable in this build")
}

/// Opens a loaded database, running crash recovery.
pub fn open(path: &Path, sync: Sync) -> Result<KvEngine<MemoryKv>> {
    let _ = (path, sync);
    bail!("mode sequential is not available yet: btree-db is not usable in this build")
}
