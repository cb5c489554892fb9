//! An in-memory [`KvStore`] built on `BTreeMap`, with an undo log for aborts.
//!
//! It is the reference the key/value transaction code is tested against, independent of
//! the B-tree database's own correctness.

use std::collections::BTreeMap;
use std::ops::Bound;

use anyhow::{Result, bail};

use std::sync::Mutex;

use super::kv::{KvOps, KvStore, KvTxn, SharedKv, Table};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// A `BTreeMap` per table; changes of the open transaction are undone on abort.
#[derive(Debug)]
pub struct MemoryKv {
    tables: Vec<Map>,
    /// Old values of the open transaction, newest last (`None`: the key was absent).
    undo: Vec<(Table, Vec<u8>, Option<Vec<u8>>)>,
}

impl Default for MemoryKv {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryKv {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            tables: vec![Map::new(); Table::ALL.len()],
            undo: Vec::new(),
        }
    }
}

impl KvStore for MemoryKv {
    type Txn<'a> = MemoryTxn<'a>;

    fn begin(&mut self) -> Result<MemoryTxn<'_>> {
        self.undo.clear();
        Ok(MemoryTxn {
            kv: self,
            done: false,
        })
    }
}

/// A transaction of [`MemoryKv`]; dropping it unfinished aborts it.
#[derive(Debug)]
pub struct MemoryTxn<'a> {
    kv: &'a mut MemoryKv,
    done: bool,
}

impl MemoryTxn<'_> {
    fn rollback(&mut self) {
        while let Some((t, k, old)) = self.kv.undo.pop() {
            let map = &mut self.kv.tables[t.index()];
            match old {
                Some(v) => map.insert(k, v),
                None => map.remove(&k),
            };
        }
        self.done = true;
    }
}

impl Drop for MemoryTxn<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.rollback();
        }
    }
}

impl<'a> KvTxn for MemoryTxn<'a> {
    type Shared<'s>
        = MemoryShared<'s, 'a>
    where
        Self: 's;

    fn commit(mut self) -> Result<()> {
        self.kv.undo.clear();
        self.done = true;
        Ok(())
    }

    fn abort(mut self) -> Result<()> {
        self.rollback();
        Ok(())
    }

    fn share(&mut self) -> MemoryShared<'_, 'a> {
        MemoryShared(Mutex::new(self))
    }
}

/// A [`MemoryTxn`] lent to several threads: each operation takes a lock.
#[derive(Debug)]
pub struct MemoryShared<'s, 'a>(Mutex<&'s mut MemoryTxn<'a>>);

impl<'s, 'a> MemoryShared<'s, 'a> {
    fn txn(&self) -> std::sync::MutexGuard<'_, &'s mut MemoryTxn<'a>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SharedKv for MemoryShared<'_, '_> {
    type Found = ();

    fn get(&self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.txn().get(table, key, out)
    }

    fn get_for_update(&self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.txn().get_for_update(table, key, out)
    }

    fn insert(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.txn().insert(table, key, value)
    }

    fn update(&self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.txn().update(table, key, value)
    }

    fn delete(&self, table: Table, key: &[u8]) -> Result<()> {
        self.txn().delete(table, key)
    }

    fn scan<F>(&self, table: Table, from: &[u8], to: Option<&[u8]>, f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<bool>,
    {
        // The rows are copied out first and `f` runs with the store unlocked: a
        // speculative loop's callback reads its overlay, which may wait for a
        // commit that is writing to this store.
        let mut rows = Vec::new();
        self.txn().scan(table, from, to, |k, v| {
            rows.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })?;
        let mut f = f;
        for (k, v) in &rows {
            if !f(k, v)? {
                break;
            }
        }
        Ok(())
    }
}

impl KvOps for MemoryTxn<'_> {
    fn get(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.kv.tables[table.index()].get(key) {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn get_for_update(&mut self, table: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.get(table, key, out)
    }

    fn insert(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        let map = &mut self.kv.tables[table.index()];
        if map.contains_key(key) {
            bail!("duplicate key in {}", table.name());
        }
        map.insert(key.to_vec(), value.to_vec());
        self.kv.undo.push((table, key.to_vec(), None));
        Ok(())
    }

    fn update(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<()> {
        let Some(slot) = self.kv.tables[table.index()].get_mut(key) else {
            bail!("update of a missing key in {}", table.name());
        };
        let old = std::mem::replace(slot, value.to_vec());
        self.kv.undo.push((table, key.to_vec(), Some(old)));
        Ok(())
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> Result<()> {
        let Some(old) = self.kv.tables[table.index()].remove(key) else {
            bail!("delete of a missing key in {}", table.name());
        };
        self.kv.undo.push((table, key.to_vec(), Some(old)));
        Ok(())
    }

    fn scan<F>(&mut self, table: Table, from: &[u8], to: Option<&[u8]>, mut f: F) -> Result<()>
    where
        F: FnMut(&[u8], &[u8]) -> Result<bool>,
    {
        let hi = match to {
            Some(to) if from >= to => return Ok(()),
            Some(to) => Bound::Excluded(to),
            None => Bound::Unbounded,
        };
        for (k, v) in self.kv.tables[table.index()].range::<[u8], _>((Bound::Included(from), hi)) {
            if !f(k, v)? {
                break;
            }
        }
        Ok(())
    }
}
