//! A row's identity in the speculative overlay ([`super::spec`]), and the hasher the
//! overlay's maps take for it.

use std::hash::{BuildHasher, Hash, Hasher};

use anyhow::{Result, anyhow};

use super::Table;

/// The longest key the overlay holds (the longest TPC-C key is 39 bytes).
const MAX_KEY: usize = 48;

/// A row's identity in the overlay.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct RowKey {
    /// The used key bytes and the table folded into one word, once (see `Hash`).
    pub(super) fold: u64,
    pub(super) table: Table,
    len: u8,
    bytes: [u8; MAX_KEY],
}

impl RowKey {
    pub(super) fn new(table: Table, key: &[u8]) -> Result<RowKey> {
        let mut bytes = [0; MAX_KEY];
        bytes
            .get_mut(..key.len())
            .ok_or_else(|| {
                anyhow!(
                    "a {}-byte key in {} is longer than a speculative loop tracks ({MAX_KEY})",
                    key.len(),
                    table.name()
                )
            })?
            .copy_from_slice(key);
        let mut fold = (table as u64) << 56 | key.len() as u64;
        for chunk in key.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            fold = (fold ^ u64::from_le_bytes(word)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            fold ^= fold >> 29;
        }
        Ok(RowKey {
            fold,
            table,
            len: key.len() as u8,
            bytes,
        })
    }

    pub(super) fn key(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Hash for RowKey {
    /// The fold made once by `RowKey::new`: the map's hasher then digests 8 bytes, not
    /// the whole 48-byte buffer, and no key byte is read again per lookup (a tracked
    /// access is meant to cost little next to the B-tree operation it stands for).
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.fold);
    }
}

/// Hashes a [`RowKey`]: its fold is already mixed, so, XORed with the map's seed, it
/// is the hash.
pub(super) struct FoldHasher(u64);

impl Hasher for FoldHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

/// Builds [`FoldHasher`]s with a random seed, so that which rows share a shard of
/// the overlay changes from loop to loop. The overlay's maps take it instead of
/// their default (SipHash, a twentieth of a speculative Delivery's instructions).
#[derive(Clone, Copy)]
pub(super) struct FoldSeed(u64);

impl FoldSeed {
    pub(super) fn random() -> FoldSeed {
        FoldSeed(std::collections::hash_map::RandomState::new().hash_one(0u64))
    }
}

impl BuildHasher for FoldSeed {
    type Hasher = FoldHasher;

    fn build_hasher(&self) -> FoldHasher {
        FoldHasher(self.0)
    }
}
