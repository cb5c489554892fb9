//! Crash recovery, run by `Database::open` before anything else touches the
//! trees.
//!
//! 1. **Analysis**: read the log from the header's `log_start` to its valid
//!    end (a torn or garbage tail fails its checksum or LSN check and ends
//!    the log), and find the *losers*: transactions with records but no
//!    commit or abort record.
//! 2. **Redo** (repeating history): from the checkpoint LSN, apply every
//!    record's page operations to pages whose LSN is older than the record.
//!    Structure changes are single records, so the trees are consistent
//!    after redo, whatever point the crash hit.
//! 3. **Undo**: roll each loser back along its `prev` chain with logical
//!    inverses, logging compensation records whose undo-next pointer skips
//!    what is already undone (so a crash during recovery resumes, never
//!    repeats, an undo), then log its abort record.
//!
//! `open` then takes a checkpoint.

use std::sync::atomic::Ordering;

use crate::btree::{LogCtx, LogMode, Modify};
use crate::buffer::IdMap;
use crate::db::Database;
use crate::error::{Error, Result};
use crate::pager::FileHeader;
use crate::wal::{KIND_ABORT, KIND_CLR, KIND_COMMIT, KIND_UPDATE, Record};

pub(crate) fn recover(db: &Database, header: &FileHeader) -> Result<()> {
    let store = &db.store;
    let wal = &store.wal;
    let (bytes, base) = wal.read_from(header.log_start)?;

    // Analysis.
    let mut index: Vec<(u64, usize)> = Vec::new();
    let mut losers: IdMap<u64, u64> = IdMap::default();
    let mut next_txn = header.next_txn;
    let (mut pos, mut lsn) = (0usize, base);
    while let Some(rec) = Record::parse(&bytes, pos, lsn) {
        index.push((lsn, pos));
        if rec.txn != 0 {
            next_txn = next_txn.max(rec.txn + 1);
            match rec.kind {
                KIND_COMMIT | KIND_ABORT => {
                    losers.remove(&rec.txn);
                }
                _ => {
                    losers.insert(rec.txn, lsn);
                }
            }
        }
        pos += rec.len;
        lsn += rec.len as u64;
    }
    wal.reset_end(lsn)?;
    db.next_txn.fetch_max(next_txn, Ordering::Relaxed);

    // Redo.
    let mut touched = Vec::new();
    for &(lsn, pos) in &index {
        if lsn < header.checkpoint_lsn {
            continue;
        }
        let Some(rec) = Record::parse(&bytes, pos, lsn) else {
            break;
        };
        touched.clear();
        rec.for_each_op(|op| {
            if let Some(p) = store.redo_op(&op, lsn)?
                && !touched.contains(&p)
            {
                touched.push(p);
            }
            Ok(())
        })?;
        for &p in &touched {
            store.stamp(p, lsn)?;
        }
    }

    // Undo, oldest loser first (their changes touch disjoint keys: they held
    // exclusive locks until the crash).
    let mut losers: Vec<(u64, u64)> = losers.into_iter().collect();
    losers.sort_unstable();
    for (txn, last) in losers {
        let mut ctx = LogCtx {
            txn,
            prev: last,
            ..LogCtx::default()
        };
        let mut cur = last;
        while cur != 0 {
            let Ok(i) = index.binary_search_by_key(&cur, |e| e.0) else {
                return Err(Error::Corrupt {
                    page: 0,
                    reason: "undo chain points outside the log",
                });
            };
            let Some(rec) = Record::parse(&bytes, index[i].1, cur) else {
                break;
            };
            match rec.kind {
                KIND_UPDATE => {
                    let m = match rec.old {
                        Some(old) => Modify::Put(old),
                        None => Modify::Delete,
                    };
                    store.modify(
                        rec.table,
                        rec.key,
                        m,
                        LogMode::Compensation {
                            undo_next: rec.prev,
                        },
                        &mut ctx,
                        &mut 0,
                    )?;
                    cur = rec.prev;
                }
                KIND_CLR => cur = rec.undo_next,
                _ => cur = rec.prev,
            }
        }
        ctx.rec.begin(txn, ctx.prev, KIND_ABORT);
        store.log(&mut ctx.rec, &mut []);
    }
    Ok(())
}
