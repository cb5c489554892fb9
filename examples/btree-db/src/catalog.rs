//! The catalog: table and index ids, catalog entries, their encoding as
//! values of the catalog tree, and the in-memory copy of that tree.

use std::collections::HashMap;

use crate::btree::CATALOG_ROOT;
use crate::buffer::IdMap;
use crate::error::{Error, PageId, Result};

/// Identifies a table or index; cheap to copy, valid for the life of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub(crate) u32);

impl TableId {
    /// The numeric id stored in the catalog.
    pub fn as_u32(self) -> u32 {
        self.0
    }
}

/// Whether a catalog entry is a table or a secondary index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableKind {
    /// A table.
    Table,
    /// A secondary index over the given table.
    Index {
        /// The indexed table.
        table: TableId,
    },
}

/// A catalog entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableInfo {
    /// Its id.
    pub id: TableId,
    /// Its name.
    pub name: String,
    /// Table or index.
    pub kind: TableKind,
    /// The B-link tree root page (it never moves).
    pub root: PageId,
}

/// The in-memory copy of the catalog.
#[derive(Default)]
pub(crate) struct Catalog {
    pub(crate) by_id: IdMap<u32, TableInfo>,
    pub(crate) by_name: HashMap<String, u32>,
}

/// The catalog tree's value for a table: root page, kind, owning table.
pub(crate) fn encode_entry(info: &TableInfo) -> [u8; 9] {
    let mut v = [0u8; 9];
    v[0..4].copy_from_slice(&info.root.to_le_bytes());
    let (kind, parent) = match info.kind {
        TableKind::Table => (0u8, 0u32),
        TableKind::Index { table } => (1, table.0),
    };
    v[4] = kind;
    v[5..9].copy_from_slice(&parent.to_le_bytes());
    v
}

/// Decodes a catalog tree entry (key: the name).
pub(crate) fn decode_entry(name: &[u8], v: &[u8]) -> Result<TableInfo> {
    let bad = Error::Corrupt {
        page: CATALOG_ROOT,
        reason: "bad catalog entry",
    };
    if v.len() != 9 {
        return Err(bad);
    }
    let root = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
    let parent = u32::from_le_bytes([v[5], v[6], v[7], v[8]]);
    let kind = match v[4] {
        0 => TableKind::Table,
        1 => TableKind::Index {
            table: TableId(parent),
        },
        _ => return Err(bad),
    };
    let name = String::from_utf8(name.to_vec()).map_err(|_| Error::Corrupt {
        page: CATALOG_ROOT,
        reason: "catalog name is not UTF-8",
    })?;
    Ok(TableInfo {
        id: TableId(root),
        name,
        kind,
        root,
    })
}
