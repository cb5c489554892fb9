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

use std::sync::atomic::{AtomicU64, Ordering};

use crate::btree::{LogCtx, LogMode, Modify, Store, check_node, corrupt};
use crate::buffer::IdMap;
use crate::error::{Error, PageId, Result};
use crate::node;
use crate::page::{KIND_BRANCH, KIND_LEAF, PageAccess, PageWrite};
use crate::pager::FileHeader;
use crate::wal::{FIRST_LSN, KIND_ABORT, KIND_CLR, KIND_COMMIT, KIND_UPDATE, Op, Record};

/// Recovers the database whose file header is `header`: analysis, redo,
/// undo of losers. Raises `next_txn` past every transaction id in the log.
pub(crate) fn recover(store: &Store, header: &FileHeader, next_txn: &AtomicU64) -> Result<()> {
    let wal = &store.wal;
    let (bytes, reached) = wal.read_from(header.log_start)?;
    // The checkpoint synced the log up to its LSN before the header named it
    // (a new database's header names nothing written), so files that reach
    // less lost records: perhaps committed ones, which nothing else would
    // show when their pages were never written (a large pool). Refuse.
    if reached < header.checkpoint_lsn && header.checkpoint_lsn > FIRST_LSN {
        // No log file at all under this name: most likely the file was opened
        // under another name than the one it was written under (renamed, or a
        // hard link), whose log files are named after that one.
        let reason = if !wal.segments()?.is_empty() {
            "the log files end before the last checkpoint (were the database's \
             `.wal.*` files left behind in a copy, or taken from another one?)"
        } else {
            "no log file (`<database file>.wal.*`) is next to the database file under \
             this name, and its last checkpoint needs one: a database's log files are \
             named after the path it was written under; was the file renamed, opened \
             through a hard link, or copied without its log? Open it under that name"
        };
        return Err(Error::LogDamaged {
            lsn: reached,
            reason,
        });
    }
    let base = header.log_start;

    // Analysis.
    let mut index: Vec<(u64, usize)> = Vec::new();
    let mut losers: IdMap<u64, u64> = IdMap::default();
    let mut max_txn = header.next_txn;
    let (mut pos, mut lsn) = (0usize, base);
    while let Some(rec) = Record::parse(&bytes, pos, lsn) {
        index.push((lsn, pos));
        if rec.txn != 0 {
            max_txn = max_txn.max(rec.txn + 1);
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
    check_log_end(store, header, &bytes[pos..], lsn)?;
    wal.reset_end(lsn)?;
    next_txn.fetch_max(max_txn, Ordering::Relaxed);

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
            if let Some(p) = redo_op(store, &op, lsn)?
                && !touched.contains(&p)
            {
                touched.push(p);
            }
            Ok(())
        })?;
        for &p in &touched {
            stamp(store, p, lsn)?;
        }
    }

    // Every walk from here on is bounded by the real page count.
    store.set_walk_limit(store.page_count()?);

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

/// Decides whether the log's readable end is its real end. A crash can
/// leave a torn or garbage tail after the last whole record, which is cut.
/// But if a valid record follows the bad bytes, the log was damaged in the
/// middle and the records after it (perhaps acknowledged commits) would be
/// lost; if the log ends before the checkpoint, it lost records the header
/// promises; and if a page on disk is newer than the end, the log lost
/// records that page already reflects. Each refuses to open.
fn check_log_end(store: &Store, header: &FileHeader, tail: &[u8], end: u64) -> Result<()> {
    if end < header.checkpoint_lsn {
        return Err(Error::LogDamaged {
            lsn: end,
            reason: "the log ends before the last checkpoint",
        });
    }
    // A record's LSN field holds its own position: a cheap filter before
    // the checksum, so scanning a long tail costs little.
    for off in 1..tail.len() {
        let at = end + off as u64;
        if tail.get(off + 8..off + 16) == Some(&at.to_le_bytes()[..])
            && Record::parse(tail, off, at).is_some()
        {
            return Err(Error::LogDamaged {
                lsn: end,
                reason: "a damaged record is followed by valid ones",
            });
        }
    }
    // After a crash (records past the checkpoint) or with bytes after the
    // last record, check that no page on disk is newer than the log.
    if end > header.checkpoint_lsn || !tail.is_empty() {
        let pager = store.pool.pager();
        let ps = pager.page_size();
        let mut buf = vec![0u8; ps];
        for id in 1..pager.len_pages()?.min(crate::buffer::MAX_PAGES as u64) as PageId {
            pager.read_page(id, &mut buf)?;
            let lsn = u64::from_le_bytes(buf[4..12].try_into().expect("8 bytes"));
            let sealed = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes"))
                == crate::page::checksum(id, &buf);
            // A page failing its checksum is a torn write, for redo (or, if
            // nothing rebuilds it, the first read of it) to deal with.
            if sealed && lsn >= end {
                return Err(Error::LogDamaged {
                    lsn: end,
                    reason: "a page on disk is newer than the end of the log",
                });
            }
        }
    }
    Ok(())
}

/// Applies one redo operation if the page has not seen `lsn` yet; returns
/// whether it was applied (the caller stamps the LSN after the record).
fn redo_op(store: &Store, op: &Op<'_>, lsn: u64) -> Result<Option<PageId>> {
    let page = match *op {
        Op::Image { page, .. }
        | Op::Insert { page, .. }
        | Op::Replace { page, .. }
        | Op::Delete { page, .. }
        | Op::Write { page, .. } => page,
    };
    let ps = store.page_size();
    let p = store.pool.get_page_for_redo(page)?;
    let mut g = p.write();
    if g.page_lsn() >= lsn {
        return Ok(None);
    }
    let bad = |r| Err(corrupt(page, r));
    match *op {
        Op::Image { bytes, .. } => {
            if bytes.len() != ps {
                return bad("log image of the wrong size");
            }
            g.write_bytes(0, bytes);
            if matches!(node::kind(&g), KIND_LEAF | KIND_BRANCH) {
                node::validate(&g).map_err(|r| corrupt(page, r))?;
            }
        }
        Op::Write { off, bytes, .. } => {
            if off < 12 || off + bytes.len() > ps {
                return bad("log write out of range");
            }
            g.write_bytes(off, bytes);
            // Writes target meta and free-list fields; a node they touch
            // must still be a valid node.
            node::validate(&g).map_err(|r| corrupt(page, r))?;
        }
        Op::Insert { key, val, .. } | Op::Replace { key, val, .. } => {
            check_node(&g, page)?;
            match node::search(&g, key) {
                Ok(i) => {
                    if !node::fits_replace(&g, i, val.len()) {
                        return bad("redo replace does not fit");
                    }
                    node::replace_at(&mut g, i, val);
                }
                Err(i) => {
                    if !node::fits(&g, key.len(), val.len()) {
                        return bad("redo insert does not fit");
                    }
                    node::insert_at(&mut g, i, key, val);
                }
            }
        }
        Op::Delete { key, .. } => {
            check_node(&g, page)?;
            if let Ok(i) = node::search(&g, key) {
                node::remove_at(&mut g, i);
            }
        }
    }
    Ok(Some(page))
}

/// Stamps `lsn` on a page after redo.
fn stamp(store: &Store, page: PageId, lsn: u64) -> Result<()> {
    let p = store.pool.get_page(page)?;
    let mut g = p.write();
    g.set_page_lsn(lsn);
    Ok(())
}
