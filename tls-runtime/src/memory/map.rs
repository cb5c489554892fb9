//! `SpecMap<K, V>`: a hash map whose entries are tracked key by key.

use super::consume::{consume_slots, drop_slots, one};
use super::slot::Slot;
use super::{Header, read_with, update};
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::panic::Location;
use crossbeam_utils::CachePadded;
use hashbrown::HashTable;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::sync::Mutex;

const SHARDS: usize = 16;

/// One shard's entries. A `HashTable` rather than a `HashMap`, so that a key is hashed
/// once per access: the same hash picks the shard and finds the entry (with a
/// `HashMap` per shard, every access hashed the key twice, and hashing was the
/// larger part of a map access for keys of a few dozen bytes).
type Entries<K, V> = HashTable<(K, Box<Slot<Option<V>>>)>;
type Shard<K, V> = CachePadded<Mutex<Entries<K, V>>>;

/// A hash map for speculative loops: each key is its own tracked location, so epochs
/// that touch different keys never conflict, and an epoch that found a key absent is
/// violated when an earlier epoch inserts it.
///
/// The map is sharded (16 shards) so that epochs on different keys rarely meet on a
/// lock. A key once touched keeps its (possibly empty) entry until `into_map`.
///
/// ```
/// use tls_runtime::SpecMap;
/// let m = SpecMap::new();
/// tls_runtime::for_each(0..10u32, |i| {
///     m.insert(i % 3, i);
/// });
/// assert_eq!(m.get(&0), Some(9));
/// ```
///
/// Keys are hashed with `S`, by default std's `RandomState` (SipHash, resistant to
/// keys chosen to collide). A map whose keys carry a well-mixed hash of their own can
/// pass a cheaper hasher ([`SpecMap::with_hasher`]): the same hash picks the shard
/// (from bits 32 to 35) and the place in the shard's table (the low bits and the top
/// seven), so it must mix all 64 bits.
pub struct SpecMap<K, V, S = RandomState> {
    shards: Box<[Shard<K, V>]>,
    hasher: S,
    header: Header,
}

impl<K: Hash + Eq + Clone, V> SpecMap<K, V, RandomState> {
    /// An empty map.
    pub fn new() -> Self {
        SpecMap::with_hasher(RandomState::new())
    }

    /// An empty map with room for about `capacity` keys before it grows.
    pub fn with_capacity(capacity: usize) -> Self {
        SpecMap::with_capacity_and_hasher(capacity, RandomState::new())
    }
}

impl<K: Hash + Eq + Clone, V, S: BuildHasher> SpecMap<K, V, S> {
    /// An empty map whose keys `hasher` hashes.
    ///
    /// ```
    /// use std::hash::{BuildHasherDefault, DefaultHasher};
    /// use tls_runtime::SpecMap;
    /// let m: SpecMap<u64, u64, BuildHasherDefault<DefaultHasher>> =
    ///     SpecMap::with_hasher(BuildHasherDefault::default());
    /// tls_runtime::for_each(0..10u64, |i| {
    ///     m.insert(i % 4, i);
    /// });
    /// assert_eq!(m.get(&1), Some(9));
    /// ```
    pub fn with_hasher(hasher: S) -> Self {
        SpecMap::with_capacity_and_hasher(0, hasher)
    }

    /// An empty map whose keys `hasher` hashes, with room for about `capacity` keys
    /// before it grows (spread over its shards: a map made for each run of a loop
    /// otherwise spends part of the loop's first accesses growing its tables).
    pub fn with_capacity_and_hasher(capacity: usize, hasher: S) -> Self {
        let per_shard = capacity.div_ceil(SHARDS);
        // The header first: see `Header::new`.
        let header = Header::new();
        SpecMap {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(HashTable::with_capacity(per_shard))))
                .collect(),
            hasher,
            header,
        }
    }

    /// The slot of `k`, created empty if `create` (speculative accesses must track
    /// absent keys too). The slot is boxed and never removed while the map lives, so the
    /// returned reference stays valid after the shard lock is released.
    fn slot(&self, k: &K, create: bool) -> Option<&Slot<Option<V>>> {
        let hash = self.hasher.hash_one(k);
        // The table itself uses the hash's low bits and its top seven; the shard
        // takes bits from the middle.
        let shard = &self.shards[(hash >> 32) as usize % SHARDS];
        let mut shard = shard.lock().unwrap_or_else(|e| e.into_inner());
        let slot: *const Slot<Option<V>> = match shard.find(hash, |(key, _)| key == k) {
            Some((_, s)) => &**s,
            None if create => {
                let hasher = |(key, _): &(K, Box<Slot<Option<V>>>)| self.hasher.hash_one(key);
                let entry =
                    shard.insert_unique(hash, (k.clone(), Box::new(Slot::new(None))), hasher);
                &*entry.into_mut().1
            }
            None => return None,
        };
        // SAFETY: the slot lives in a `Box` that stays in the map (entries are never
        // removed before the map is consumed or dropped, which needs `&mut self`), so it
        // outlives `&self`.
        Some(unsafe { &*slot })
    }

    /// A copy of the value of `k`.
    #[track_caller]
    pub fn get(&self, k: &K) -> Option<V>
    where
        V: Clone,
    {
        self.with(k, |v| v.cloned())
    }

    /// Looks at the value of `k` through `f` without cloning it.
    #[track_caller]
    pub fn with<R>(&self, k: &K, f: impl FnOnce(Option<&V>) -> R) -> R {
        let loc = Location::caller();
        match self.slot(k, crate::epoch::current().is_some()) {
            Some(slot) => read_with(slot, self.header.origin(), loc, |v| f(v.as_ref())),
            None => f(None),
        }
    }

    /// Whether `k` has a value.
    #[track_caller]
    pub fn contains_key(&self, k: &K) -> bool {
        self.with(k, |v| v.is_some())
    }

    /// Sets the value of `k`, returning the previous one.
    #[track_caller]
    pub fn insert(&self, k: K, v: V) -> Option<V>
    where
        V: Clone,
    {
        let loc = Location::caller();
        let slot = self.slot(&k, true).expect("created");
        update(slot, &self.header, loc, |old| old.replace(v))
    }

    /// Removes `k`, returning its value.
    #[track_caller]
    pub fn remove(&self, k: &K) -> Option<V>
    where
        V: Clone,
    {
        let loc = Location::caller();
        let slot = self.slot(k, crate::epoch::current().is_some())?;
        update(slot, &self.header, loc, Option::take)
    }

    /// Consumes the map, returning its entries: the committed ones, or, inside an
    /// epoch that wrote the map, the ones that epoch sees.
    pub fn into_map(mut self) -> HashMap<K, V> {
        let written = self.header.was_written();
        let mut out = HashMap::new();
        for shard in self.take_shards() {
            for (k, slot) in shard {
                if let Some(v) = consume_slots(one(slot), written).pop().flatten() {
                    out.insert(k, v);
                }
            }
        }
        out
    }

    /// Empties the shards, returning their entries.
    fn take_shards(&mut self) -> Vec<Entries<K, V>> {
        self.shards
            .iter_mut()
            .map(|s| core::mem::take(s.get_mut().unwrap_or_else(|e| e.into_inner())))
            .collect()
    }
}

impl<K: Hash + Eq + Clone, V, S: BuildHasher + Default> Default for SpecMap<K, V, S> {
    fn default() -> Self {
        SpecMap::with_hasher(S::default())
    }
}

impl<K, V, S> Drop for SpecMap<K, V, S> {
    fn drop(&mut self) {
        let written = self.header.was_written();
        for shard in self.shards.iter_mut() {
            let shard = core::mem::take(shard.get_mut().unwrap_or_else(|e| e.into_inner()));
            for (_, slot) in shard {
                drop_slots(one(slot), written);
            }
        }
    }
}

impl<K: fmt::Debug, V: fmt::Debug, S> fmt::Debug for SpecMap<K, V, S> {
    /// Shows the committed entries.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for shard in self.shards.iter() {
            for (k, slot) in shard.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                slot.read_committed(|v| {
                    if let Some(v) = v {
                        m.entry(k, v);
                    }
                });
            }
        }
        m.finish()
    }
}
