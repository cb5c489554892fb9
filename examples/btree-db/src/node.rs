//! The B-link node format: a slotted page of sorted cells plus a high key and
//! a right link (Lehman and Yao).
//!
//! Slots (u16 cell offsets) grow up from the header; cells grow down from the
//! end of the page. A cell is `key_len u16, value_len u16, key, value`. In a
//! branch node the value is the child page id (u32) and cell `i` routes keys
//! in `[key_i, key_{i+1})`; the first cell's key is the node's low key (empty
//! in the leftmost node of a level). Every key in a node is below its high key;
//! a search for a key at or above it moves right.
//!
//! The decoders for page images read from disk ([`verify`], [`validate_page`],
//! [`decode_page`]) live here too: checking a page's structure is checking
//! its node format.

use std::cmp::Ordering;

use crate::error::{self, Error, PageId};
use crate::page::{
    HEADER, KIND_BRANCH, KIND_FREE, KIND_LEAF, KIND_META, OFF_CELL_START, OFF_FRAG, OFF_HK_LEN,
    OFF_HK_OFF, OFF_KIND, OFF_LEVEL, OFF_NSLOTS, OFF_RIGHT, PageAccess, PageBuf, PageWrite,
    checksum,
};

/// Bytes of a cell header.
pub(crate) const CELL_HDR: usize = 4;

/// Longest key for a page size: small enough that a node always holds the
/// high key plus several cells after a split.
pub(crate) fn max_key(page_size: usize) -> usize {
    (page_size - HEADER) / 8 - 14
}

/// Longest key plus value for a page size (a quarter of the usable space).
pub(crate) fn max_entry(page_size: usize) -> usize {
    (page_size - HEADER) / 4 - 16
}

/// Formats an empty node.
pub(crate) fn init<P: PageWrite>(p: &mut P, kind: u8, level: u8) {
    let ps = p.page_size();
    p.write_bytes(OFF_KIND, &[0u8; HEADER - OFF_KIND]);
    p.write_u8(OFF_KIND, kind);
    p.write_u8(OFF_LEVEL, level);
    p.write_u16(OFF_CELL_START, ps as u16);
}

pub(crate) fn kind<P: PageAccess>(p: &P) -> u8 {
    p.read_u8(OFF_KIND)
}
pub(crate) fn level<P: PageAccess>(p: &P) -> u8 {
    p.read_u8(OFF_LEVEL)
}
pub(crate) fn nslots<P: PageAccess>(p: &P) -> usize {
    p.read_u16(OFF_NSLOTS) as usize
}
pub(crate) fn right<P: PageAccess>(p: &P) -> PageId {
    p.read_u32(OFF_RIGHT)
}
pub(crate) fn set_right<P: PageWrite>(p: &mut P, r: PageId) {
    p.write_u32(OFF_RIGHT, r);
}
fn cell_start<P: PageAccess>(p: &P) -> usize {
    p.read_u16(OFF_CELL_START) as usize
}
fn frag<P: PageAccess>(p: &P) -> usize {
    p.read_u16(OFF_FRAG) as usize
}
#[inline]
fn slot<P: PageAccess>(p: &P, i: usize) -> usize {
    p.read_u16(HEADER + 2 * i) as usize
}
fn cell_size<P: PageAccess>(p: &P, off: usize) -> usize {
    CELL_HDR + p.read_u16(off) as usize + p.read_u16(off + 2) as usize
}

/// Compares cell `i`'s key with `key`.
#[inline]
pub(crate) fn key_cmp<P: PageAccess>(p: &P, i: usize, key: &[u8]) -> Ordering {
    let off = slot(p, i);
    let kl = p.read_u16(off) as usize;
    p.compare(off + CELL_HDR, kl, key)
}

/// Binary search: `Ok(i)` if cell `i` holds `key`, else `Err(insert position)`.
pub(crate) fn search<P: PageAccess>(p: &P, key: &[u8]) -> Result<usize, usize> {
    let (mut lo, mut hi) = (0, nslots(p));
    while lo < hi {
        let mid = (lo + hi) / 2;
        match key_cmp(p, mid, key) {
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
            Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// In a branch node, the index of the cell whose subtree covers `key`.
pub(crate) fn child_index<P: PageAccess>(p: &P, key: &[u8]) -> usize {
    match search(p, key) {
        Ok(i) => i,
        Err(0) => 0,
        Err(i) => i - 1,
    }
}

/// The child page of branch cell `i`.
pub(crate) fn child_at<P: PageAccess>(p: &P, i: usize) -> PageId {
    let off = slot(p, i);
    let kl = p.read_u16(off) as usize;
    p.read_u32(off + CELL_HDR + kl)
}

/// Appends cell `i`'s key to `out`.
pub(crate) fn read_key<P: PageAccess>(p: &P, i: usize, out: &mut Vec<u8>) {
    let off = slot(p, i);
    let kl = p.read_u16(off) as usize;
    p.append_to(off + CELL_HDR, kl, out);
}

/// Appends cell `i`'s value to `out`.
pub(crate) fn read_value<P: PageAccess>(p: &P, i: usize, out: &mut Vec<u8>) {
    let off = slot(p, i);
    let kl = p.read_u16(off) as usize;
    let vl = p.read_u16(off + 2) as usize;
    p.append_to(off + CELL_HDR + kl, vl, out);
}

/// True if `key` is at or above the node's high key (the search must move right).
#[inline]
pub(crate) fn beyond_high<P: PageAccess>(p: &P, key: &[u8]) -> bool {
    let hk = p.read_u16(OFF_HK_OFF) as usize;
    hk != 0 && p.compare(hk + CELL_HDR, p.read_u16(OFF_HK_LEN) as usize, key) != Ordering::Greater
}

/// Appends the high key to `out`; false if the node is rightmost.
pub(crate) fn read_high_key<P: PageAccess>(p: &P, out: &mut Vec<u8>) -> bool {
    let hk = p.read_u16(OFF_HK_OFF) as usize;
    if hk == 0 {
        return false;
    }
    p.append_to(hk + CELL_HDR, p.read_u16(OFF_HK_LEN) as usize, out);
    true
}

fn free_contig<P: PageAccess>(p: &P) -> usize {
    cell_start(p).saturating_sub(HEADER + 2 * nslots(p))
}

/// Whether a new cell fits (after compaction if need be).
pub(crate) fn fits<P: PageAccess>(p: &P, klen: usize, vlen: usize) -> bool {
    free_contig(p) + frag(p) >= CELL_HDR + klen + vlen + 2
}

/// Whether cell `i`'s value can be replaced by one of `vlen` bytes.
pub(crate) fn fits_replace<P: PageAccess>(p: &P, i: usize, vlen: usize) -> bool {
    let off = slot(p, i);
    let old = cell_size(p, off);
    let kl = p.read_u16(off) as usize;
    free_contig(p) + frag(p) + old >= CELL_HDR + kl + vlen
}

/// Rewrites the cell area without holes.
pub(crate) fn compact<P: PageWrite>(p: &mut P) {
    let ps = p.page_size();
    let mut snap = PageBuf::new(ps);
    {
        let mut all = Vec::with_capacity(ps);
        p.append_to(0, ps, &mut all);
        snap.as_bytes_mut().copy_from_slice(&all);
    }
    let mut top = ps;
    let mut cell = Vec::new();
    for i in 0..nslots(&snap) {
        let off = slot(&snap, i);
        let len = cell_size(&snap, off);
        cell.clear();
        snap.append_to(off, len, &mut cell);
        top -= len;
        p.write_bytes(top, &cell);
        p.write_u16(HEADER + 2 * i, top as u16);
    }
    let hk = snap.read_u16(OFF_HK_OFF) as usize;
    if hk != 0 {
        let len = cell_size(&snap, hk);
        cell.clear();
        snap.append_to(hk, len, &mut cell);
        top -= len;
        p.write_bytes(top, &cell);
        p.write_u16(OFF_HK_OFF, top as u16);
    }
    p.write_u16(OFF_CELL_START, top as u16);
    p.write_u16(OFF_FRAG, 0);
}

/// Reserves `len` bytes of cell area (compacting if needed) and returns the
/// offset; the caller has checked that the space exists.
fn alloc_cell<P: PageWrite>(p: &mut P, len: usize, extra_slot: usize) -> usize {
    if free_contig(p) < len + extra_slot {
        compact(p);
    }
    debug_assert!(free_contig(p) >= len + extra_slot, "caller checked `fits`");
    let top = cell_start(p) - len;
    p.write_u16(OFF_CELL_START, top as u16);
    top
}

fn write_cell<P: PageWrite>(p: &mut P, off: usize, key: &[u8], val: &[u8]) {
    p.write_u16(off, key.len() as u16);
    p.write_u16(off + 2, val.len() as u16);
    p.write_bytes(off + CELL_HDR, key);
    p.write_bytes(off + CELL_HDR + key.len(), val);
}

/// Inserts a cell at slot `i`; the caller has checked [`fits`].
pub(crate) fn insert_at<P: PageWrite>(p: &mut P, i: usize, key: &[u8], val: &[u8]) {
    let off = alloc_cell(p, CELL_HDR + key.len() + val.len(), 2);
    write_cell(p, off, key, val);
    let n = nslots(p);
    if i < n {
        p.copy_within(HEADER + 2 * i, HEADER + 2 * i + 2, 2 * (n - i));
    }
    p.write_u16(HEADER + 2 * i, off as u16);
    p.write_u16(OFF_NSLOTS, (n + 1) as u16);
}

/// Removes the cell at slot `i`.
pub(crate) fn remove_at<P: PageWrite>(p: &mut P, i: usize) {
    let n = nslots(p);
    let off = slot(p, i);
    let len = cell_size(p, off);
    p.write_u16(OFF_FRAG, (frag(p) + len) as u16);
    if i + 1 < n {
        p.copy_within(HEADER + 2 * (i + 1), HEADER + 2 * i, 2 * (n - i - 1));
    }
    p.write_u16(OFF_NSLOTS, (n - 1) as u16);
}

/// Replaces cell `i`'s value; the caller has checked [`fits_replace`].
pub(crate) fn replace_at<P: PageWrite>(p: &mut P, i: usize, val: &[u8]) {
    let off = slot(p, i);
    let kl = p.read_u16(off) as usize;
    let vl = p.read_u16(off + 2) as usize;
    if vl == val.len() {
        // The common case for fixed-width rows: overwrite in place.
        p.write_bytes(off + CELL_HDR + kl, val);
        return;
    }
    let mut key = Vec::with_capacity(kl);
    p.append_to(off + CELL_HDR, kl, &mut key);
    remove_at(p, i);
    insert_at(p, i, &key, val);
}

/// Sets (or clears) the high key. The caller guarantees space: it is only
/// called on freshly built nodes.
pub(crate) fn set_high_key<P: PageWrite>(p: &mut P, key: Option<&[u8]>) {
    let old = p.read_u16(OFF_HK_OFF) as usize;
    if old != 0 {
        let len = cell_size(p, old);
        p.write_u16(OFF_FRAG, (frag(p) + len) as u16);
        p.write_u16(OFF_HK_OFF, 0);
        p.write_u16(OFF_HK_LEN, 0);
    }
    if let Some(k) = key {
        let off = alloc_cell(p, CELL_HDR + k.len(), 0);
        write_cell(p, off, k, &[]);
        p.write_u16(OFF_HK_OFF, off as u16);
        p.write_u16(OFF_HK_LEN, k.len() as u16);
    }
}

/// All cells as owned pairs (used by splits, which are rare).
pub(crate) fn entries<P: PageAccess>(p: &P) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..nslots(p))
        .map(|i| {
            let (mut k, mut v) = (Vec::new(), Vec::new());
            read_key(p, i, &mut k);
            read_value(p, i, &mut v);
            (k, v)
        })
        .collect()
}

/// Rebuilds a node from scratch (split halves, new roots). Keeps the LSN.
pub(crate) fn build<P: PageWrite>(
    p: &mut P,
    kind: u8,
    level: u8,
    cells: &[(Vec<u8>, Vec<u8>)],
    high: Option<&[u8]>,
    right_link: PageId,
) {
    init(p, kind, level);
    for (i, (k, v)) in cells.iter().enumerate() {
        insert_at(p, i, k, v);
    }
    set_high_key(p, high);
    set_right(p, right_link);
}

/// Bytes a set of cells occupies.
pub(crate) fn cells_size(cells: &[(Vec<u8>, Vec<u8>)]) -> usize {
    cells
        .iter()
        .map(|(k, v)| CELL_HDR + 2 + k.len() + v.len())
        .sum()
}

/// Checks the structure of a page image so that every accessor call on it
/// stays in bounds: the decoder for bytes read from disk. Never panics.
pub(crate) fn validate<P: PageAccess>(p: &P) -> Result<(), &'static str> {
    let ps = p.page_size();
    match kind(p) {
        KIND_META | KIND_FREE => return Ok(()),
        KIND_LEAF | KIND_BRANCH => {}
        _ => return Err("unknown page kind"),
    }
    let is_leaf = kind(p) == KIND_LEAF;
    if is_leaf != (level(p) == 0) {
        return Err("level does not match page kind");
    }
    let n = nslots(p);
    let cs = cell_start(p);
    if HEADER + 2 * n > cs || cs > ps {
        return Err("slot array overlaps cell area");
    }
    if frag(p) > ps {
        return Err("bad fragment count");
    }
    let cell_ok = |off: usize| -> Result<(usize, usize), &'static str> {
        if off < cs || off + CELL_HDR > ps {
            return Err("cell offset out of range");
        }
        let (kl, vl) = (p.read_u16(off) as usize, p.read_u16(off + 2) as usize);
        if off + CELL_HDR + kl + vl > ps {
            return Err("cell runs past the page end");
        }
        Ok((kl, vl))
    };
    let mut prev: Option<Vec<u8>> = None;
    for i in 0..n {
        let off = slot(p, i);
        let (kl, vl) = cell_ok(off)?;
        if !is_leaf && vl != 4 {
            return Err("branch cell without a child id");
        }
        if let Some(pk) = &prev
            && p.compare(off + CELL_HDR, kl, pk) != Ordering::Greater
        {
            return Err("keys out of order");
        }
        let mut k = prev.take().unwrap_or_default();
        k.clear();
        p.append_to(off + CELL_HDR, kl, &mut k);
        prev = Some(k);
    }
    let hk = p.read_u16(OFF_HK_OFF) as usize;
    if hk != 0 {
        let (kl, vl) = cell_ok(hk)?;
        if vl != 0 || kl != p.read_u16(OFF_HK_LEN) as usize {
            return Err("bad high key cell");
        }
        if let Some(pk) = &prev
            && p.compare(hk + CELL_HDR, kl, pk) != Ordering::Greater
        {
            return Err("key at or above the high key");
        }
    }
    Ok(())
}

/// Checks page `page`'s image read from disk: checksum (which covers the
/// page number), then structure. An all-zero page is never valid: every page
/// the database hands out is formatted and logged before it can be written,
/// so zeros in place of a page are damage (a page allocated but never written
/// is read through the buffer pool's new-page path, not this one).
pub(crate) fn verify(page: PageId, bytes: &[u8]) -> error::Result<()> {
    if bytes.iter().all(|&b| b == 0) {
        return Err(Error::Corrupt {
            page,
            reason: "page is all zeros",
        });
    }
    let stored = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if stored != checksum(page, bytes) {
        return Err(Error::BadChecksum { page });
    }
    validate(&PageBuf::from_bytes(bytes)).map_err(|reason| Error::Corrupt { page, reason })
}

/// Decodes arbitrary bytes as page `page` of a database: `Ok` only if the
/// checksum (over the page number and the bytes) and the whole structure
/// are valid, so that every later accessor call stays in bounds. Never
/// panics, whatever the input.
pub fn validate_page(page: PageId, bytes: &[u8]) -> error::Result<()> {
    let n = bytes.len();
    if !(512..=32768).contains(&n) || !n.is_power_of_two() {
        return Err(Error::Truncated { what: "page" });
    }
    verify(page, bytes)
}

/// Decodes page `page`'s image from disk the way the database does
/// (checksum, then structure) and returns its cells and high key. Never
/// panics, whatever the input: the entry point of the decoder fuzz target
/// and property test.
#[allow(clippy::type_complexity)]
pub fn decode_page(
    page: PageId,
    bytes: &[u8],
) -> error::Result<(Vec<(Vec<u8>, Vec<u8>)>, Option<Vec<u8>>)> {
    validate_page(page, bytes)?;
    let p = PageBuf::from_bytes(bytes);
    match kind(&p) {
        KIND_LEAF | KIND_BRANCH => {}
        _ => return Ok((Vec::new(), None)),
    }
    let mut high = Vec::new();
    let has_high = read_high_key(&p, &mut high);
    Ok((entries(&p), has_high.then_some(high)))
}
