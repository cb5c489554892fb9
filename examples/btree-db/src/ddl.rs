//! Creating and dropping tables and indexes: each is an autocommitted
//! transaction on the catalog tree plus the change to the in-memory catalog.

use std::sync::PoisonError;

use crate::btree::{CATALOG_ROOT, Modify, Outcome};
use crate::catalog::{TableId, TableInfo, TableKind, encode_entry};
use crate::db::{Database, lock};
use crate::error::{Error, Result};
use crate::lock::{LockMode, table_lock_name};
use crate::stripes::STRIPES;

impl Database {
    /// Creates a table (autocommitted). Errors with `TableExists`.
    pub fn create_table(&self, name: &str) -> Result<TableId> {
        self.create(name, TableKind::Table)
    }

    /// Creates a secondary index table over `table` (autocommitted). Its keys
    /// and values are whatever the application writes; usually the index key
    /// followed by the table's primary key.
    pub fn create_index(&self, name: &str, table: TableId) -> Result<TableId> {
        self.root_of(table)?;
        self.create(name, TableKind::Index { table })
    }

    fn create(&self, name: &str, kind: TableKind) -> Result<TableId> {
        let _ddl = lock(&self.ddl);
        if name.len() > self.limits.max_key {
            return Err(Error::NameTooLong {
                len: name.len(),
                max: self.limits.max_key,
            });
        }
        if self
            .catalog
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .by_name
            .contains_key(name)
        {
            return Err(Error::TableExists(name.into()));
        }
        let root = self.store.create_tree()?;
        let info = TableInfo {
            id: TableId(root),
            name: name.into(),
            kind,
            root,
        };
        let mut txn = self.begin();
        match txn.modify_raw(
            CATALOG_ROOT,
            name.as_bytes(),
            Modify::Insert(&encode_entry(&info)),
        )? {
            Outcome::Done => {}
            _ => return Err(Error::TableExists(name.into())),
        }
        txn.commit()?;
        let mut cat = self.catalog.write().unwrap_or_else(PoisonError::into_inner);
        cat.by_name.insert(info.name.clone(), root);
        cat.by_id.insert(root, info);
        drop(cat);
        self.set_live(root, true);
        Ok(TableId(root))
    }

    /// Drops a table or index (waiting for transactions using it) and returns
    /// its pages to the free list; a table's indexes are dropped with it, as
    /// SQL's `DROP TABLE` drops them (left behind, they named a table id a later
    /// table may take). A later table may reuse a dropped root page and so its
    /// [`TableId`]: forget the old ids.
    ///
    /// The wait lasts at most [`crate::Options::lock_timeout`], then fails with
    /// [`Error::TableInUse`] (naming the table or index in use), and nothing is
    /// dropped. A transaction of the calling thread that used the table or one
    /// of its indexes is waited for too, and cannot end while the thread waits:
    /// commit or abort it first (with an unbounded timeout the call would never
    /// return).
    pub fn drop_table(&self, table: TableId) -> Result<()> {
        let _ddl = lock(&self.ddl);
        let root = self.root_of(table)?;
        // The table, then its indexes: (root, name) of each.
        let doomed: Vec<(u32, String)> = {
            let cat = self.catalog.read().unwrap_or_else(PoisonError::into_inner);
            let name = cat
                .by_id
                .get(&root)
                .map(|i| i.name.clone())
                .unwrap_or_default();
            let mut indexes: Vec<(u32, String)> = cat
                .by_id
                .values()
                .filter(|i| i.kind == TableKind::Index { table })
                .map(|i| (i.root, i.name.clone()))
                .collect();
            indexes.sort();
            std::iter::once((root, name)).chain(indexes).collect()
        };
        let mut txn = self.begin();
        // Every stripe of each one's table lock: no transaction has it open.
        for (root, name) in &doomed {
            for stripe in 0..STRIPES {
                txn.lock_raw(table_lock_name(*root, stripe), LockMode::Exclusive)
                    .map_err(|e| match e {
                        Error::LockTimeout => Error::TableInUse(name.clone()),
                        e => e,
                    })?;
            }
        }
        for (_, name) in &doomed {
            txn.modify_raw(CATALOG_ROOT, name.as_bytes(), Modify::Delete)?;
        }
        {
            let mut cat = self.catalog.write().unwrap_or_else(PoisonError::into_inner);
            for (root, name) in &doomed {
                cat.by_id.remove(root);
                cat.by_name.remove(name);
            }
        }
        for (root, _) in &doomed {
            self.set_live(*root, false);
        }
        txn.commit()?;
        // After the commit: a crash before the pages are freed leaks them,
        // it never frees pages of a live table.
        for (root, _) in &doomed {
            self.store.free_tree(*root)?;
        }
        Ok(())
    }
}
