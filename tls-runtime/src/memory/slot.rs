//! One speculative location: a committed value plus the uncommitted versions and the
//! reader records of the epochs now in flight.
//!
//! This is the heart of violation detection. Every speculative read and write of the
//! location happens under the slot's [`RawLock`], so a read by a later epoch and a racing
//! write by an earlier one are totally ordered: either the read comes first and the
//! write finds its reader record (and violates the reader), or the write comes first and
//! the read sees the written version (forwarding). There is no window in which both miss
//! each other; `tests/loom.rs` checks this.
//!
//! Versioning is lazy: a speculative write adds a version tagged with (epoch, segment)
//! and leaves the committed value alone; commit moves the epoch's newest version into
//! the committed value, rollback drops the versions of the rolled-back segments.
//!
//! A read records `(reader epoch, reader segment, version seen)`. A write by epoch `i`
//! violates every recorded reader `j > i` that saw a version older than or equal to `i`
//! (it should have seen `i`'s new value), rolling `j` back to the segment of that read.
//! Records of committed epochs or of other loops are dead and pruned as they are met;
//! a record left behind by a rolled-back attempt can at worst cause one needless
//! rollback, never a missed one.

use crate::epoch::{Access, Cause, Tag, serial_of};
use crate::sync::{Held, RaceCell, RawLock};
use core::panic::Location;
use smallvec::SmallVec;

/// Which version a reader saw: the committed value, or the version of (epoch, segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// The writer's tag; `0` for the committed value (no real tag is 0).
    tag: Tag,
    segment: u32,
}

const COMMITTED: Seen = Seen { tag: 0, segment: 0 };

#[derive(Debug)]
struct Version<T> {
    tag: Tag,
    segment: u32,
    value: T,
    store: &'static Location<'static>,
}

#[derive(Debug, Clone, Copy)]
struct Reader {
    tag: Tag,
    segment: u32,
    seen: Seen,
    load: &'static Location<'static>,
    ordinal: u32,
}

/// The rarely needed part of a slot's speculative state, allocated on first need:
/// reader records beyond the first.
#[derive(Debug, Default)]
struct Meta {
    more_readers: Vec<Reader>,
}

/// A slot's speculative state. The first reader record and the first uncommitted
/// version live inline, so the common cases (one epoch reads a location nobody
/// writes; one epoch writes it) allocate nothing and follow no pointer.
#[derive(Debug)]
struct SpecState<T> {
    /// `first.tag == 0` means no record.
    first: Reader,
    /// Uncommitted versions, sorted by (tag, segment).
    versions: SmallVec<[Version<T>; 1]>,
    meta: Option<Box<Meta>>,
}

const NO_READER: Reader = Reader {
    tag: 0,
    segment: 0,
    seen: COMMITTED,
    load: Location::caller(),
    ordinal: 0,
};

impl<T> SpecState<T> {
    fn versions(&self) -> &[Version<T>] {
        &self.versions
    }

    fn meta(&mut self) -> &mut Meta {
        self.meta.get_or_insert_with(Default::default)
    }

    /// Keeps the reader records for which `keep` is true.
    fn retain_readers(&mut self, mut keep: impl FnMut(&Reader) -> bool) {
        if self.first.tag != 0 && !keep(&self.first) {
            self.first.tag = 0;
        }
        if let Some(m) = self.meta.as_mut()
            && !m.more_readers.is_empty()
        {
            m.more_readers.retain(|r| keep(r));
            if self.first.tag == 0
                && let Some(r) = m.more_readers.pop()
            {
                self.first = r;
            }
        }
    }

    fn has_readers(&self) -> bool {
        self.first.tag != 0
    }

    fn reader_mut(&mut self, tag: Tag) -> Option<&mut Reader> {
        if self.first.tag == tag {
            return Some(&mut self.first);
        }
        self.meta
            .as_mut()
            .and_then(|m| m.more_readers.iter_mut().find(|r| r.tag == tag))
    }

    fn push_reader(&mut self, r: Reader) {
        if self.first.tag == 0 {
            self.first = r;
        } else {
            self.meta().more_readers.push(r);
        }
    }
}

/// What a speculative write did to the epoch's write set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteEffect {
    /// The write went to an existing version of this (epoch, segment), or straight to
    /// the committed value (homefree epochs): nothing to log.
    NoNewVersion,
    /// A new version was created: the epoch must log the location for commit/discard.
    NewVersion,
}

/// A speculative location holding a `T`.
///
/// Aligned to a cache line: neighbouring elements of a `SpecVec` written by epochs on
/// different threads must not share a line. For `u64` elements a slot takes two lines
/// (lock and value, the first reader record, the first version inline): memory traded
/// for writes that allocate nothing and reads that follow no pointer.
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Slot<T> {
    lock: RawLock,
    value: RaceCell<T>,
    spec: RaceCell<SpecState<T>>,
}

// SAFETY: all access to `value` and `meta` happens under `lock` (see every `with_mut`
// below), so a `Slot` hands a `T` between threads exactly like `Mutex<T>` does: it is
// `Sync` and `Send` when `T: Send`.
unsafe impl<T: Send> Sync for Slot<T> {}
// SAFETY: as above; the slot owns its `T`s.
unsafe impl<T: Send> Send for Slot<T> {}

impl<T> Slot<T> {
    pub(crate) fn new(value: T) -> Self {
        Slot {
            lock: RawLock::new(),
            value: RaceCell::new(value),
            spec: RaceCell::new(SpecState {
                first: NO_READER,
                versions: SmallVec::new(),
                meta: None,
            }),
        }
    }

    /// Runs `f` on the committed value and speculative state, under the lock.
    #[inline]
    fn locked<R>(&self, f: impl FnOnce(&mut T, &mut SpecState<T>) -> R) -> R {
        struct Unlock<'a>(&'a RawLock, Held);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                self.0.unlock(self.1);
            }
        }
        let held = self.lock.lock();
        let _unlock = Unlock(&self.lock, held);
        // SAFETY: we hold `self.lock`, which guards both cells.
        unsafe { self.value.with_mut(|v| self.spec.with_mut(|m| f(v, m))) }
    }

    /// Non-speculative look at the committed value.
    ///
    /// For small values without drop glue this takes no lock: `f` runs on a copy
    /// validated by the lock's count (see [`Slot::snapshot`]); otherwise, or when a
    /// lock holder got in the way, `f` runs under the lock.
    #[inline(always)]
    pub(crate) fn read_committed<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        #[cfg(not(loom))]
        if let Some(copy) = self.snapshot() {
            return f(&copy);
        }
        self.locked(|v, _| f(v))
    }

    /// A copy of the committed value taken without the lock, when that is sound and
    /// no lock holder ran during the copy.
    ///
    /// Sound for types without drop glue: overwriting such a value frees nothing and
    /// runs no code, so a validated bitwise copy is exactly a value the location held
    /// at the moment of validation, and whatever `f` then does with it (clone it, look
    /// into it) it could have done to that value under the lock. The one difference,
    /// interior mutability inside the value (a `Cell`), is outside the tracking
    /// contract anyway: speculative containers track their own reads and writes only.
    /// Limited to a cache line, the most a speculative location usually holds (a
    /// `SpecMemory` line), so the copy stays a handful of loads.
    #[cfg(not(loom))]
    #[inline(always)]
    fn snapshot(&self) -> Option<core::mem::ManuallyDrop<T>> {
        if core::mem::needs_drop::<T>() || core::mem::size_of::<T>() > 64 {
            return None;
        }
        let count = self.lock.read_begin()?;
        // SAFETY: `copy_racy`'s contract: the copy is used only once validated below,
        // and then only as a bitwise copy of a value without drop glue.
        let copy = unsafe { self.value.copy_racy() };
        if !self.lock.read_validate(count) {
            return None;
        }
        // SAFETY: no lock holder ran between `read_begin` and `read_validate`, and only
        // lock holders write the value, so the bits are those the last holder left: a
        // valid `T`. `ManuallyDrop` keeps the copy from being dropped as a second owner
        // (a no-op for these types, stated for the reader).
        Some(core::mem::ManuallyDrop::new(unsafe { copy.assume_init() }))
    }

    /// Non-speculative access to the committed value.
    #[inline]
    pub(crate) fn with_committed<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.locked(|v, _| f(v))
    }

    /// Consumes the slot, returning the committed value.
    pub(crate) fn into_committed(self) -> T {
        self.value.into_inner()
    }

    /// Whether an uncommitted version of an epoch other than `except` is stored (used
    /// by `Drop` checks).
    pub(crate) fn has_versions_except(&self, except: Option<Tag>) -> bool {
        self.locked(|_, m| m.versions().iter().any(|v| Some(v.tag) != except))
    }

    /// A speculative read by the epoch `a`: `f` sees the value visible to `a`.
    #[inline]
    pub(crate) fn read_spec<R>(
        &self,
        a: &Access<'_>,
        load: &'static Location<'static>,
        f: impl FnOnce(&T) -> R,
    ) -> R {
        self.locked(|committed, st| {
            let (value, seen) = visible(committed, st.versions(), a);
            let r = f(value);
            if !a.homefree && seen.tag != a.tag {
                record_reader(st, a, seen, load);
            }
            r
        })
    }

    /// A speculative write of `value` by the epoch `a`.
    #[inline]
    pub(crate) fn write_spec(
        &self,
        a: &Access<'_>,
        store: &'static Location<'static>,
        value: T,
    ) -> WriteEffect {
        self.locked(|committed, st| {
            violate_readers(st, a, store, |seen| seen.tag <= a.tag);
            match own_version(st.versions(), a) {
                Own::CurrentSegment(i) => {
                    let v = &mut st.versions[i];
                    v.value = value;
                    v.store = store;
                    WriteEffect::NoNewVersion
                }
                Own::None if a.homefree => {
                    *committed = value;
                    WriteEffect::NoNewVersion
                }
                Own::None | Own::EarlierSegment(_) => {
                    insert_version(&mut st.versions, a, store, value);
                    WriteEffect::NewVersion
                }
            }
        })
    }

    /// A speculative read-modify-write by the epoch `a`: a read of the visible value
    /// followed by a write of the updated one, under one lock hold.
    #[inline]
    pub(crate) fn update_spec<R>(
        &self,
        a: &Access<'_>,
        site: &'static Location<'static>,
        f: impl FnOnce(&mut T) -> R,
    ) -> (R, WriteEffect)
    where
        T: Clone,
    {
        self.locked(|committed, st| {
            let (_, seen) = visible(committed, st.versions(), a);
            if !a.homefree && seen.tag != a.tag {
                record_reader(st, a, seen, site);
            }
            violate_readers(st, a, site, |seen| seen.tag <= a.tag);
            match own_version(st.versions(), a) {
                Own::CurrentSegment(i) => {
                    let v = &mut st.versions[i];
                    v.store = site;
                    (f(&mut v.value), WriteEffect::NoNewVersion)
                }
                Own::None if a.homefree => (f(committed), WriteEffect::NoNewVersion),
                Own::None => {
                    let mut value = visible(committed, st.versions(), a).0.clone();
                    let r = f(&mut value);
                    insert_version(&mut st.versions, a, site, value);
                    (r, WriteEffect::NewVersion)
                }
                Own::EarlierSegment(i) => {
                    let mut value = st.versions()[i].value.clone();
                    let r = f(&mut value);
                    insert_version(&mut st.versions, a, site, value);
                    (r, WriteEffect::NewVersion)
                }
            }
        })
    }

    /// Commits the epoch `tag`: its newest version becomes the committed value.
    ///
    /// Called in epoch order by the committing thread, once per logged version; the
    /// first call for a tag moves the value, later ones find nothing.
    pub(crate) fn commit(&self, tag: Tag) {
        self.locked(|committed, st| {
            let versions = &mut st.versions;
            let mut newest = None;
            let mut i = 0;
            while i < versions.len() {
                if versions[i].tag == tag {
                    // Versions of one tag are sorted by segment: the last one wins.
                    newest = Some(versions.remove(i).value);
                } else {
                    i += 1;
                }
            }
            if let Some(v) = newest {
                *committed = v;
            }
        })
    }

    /// Discards the versions the epoch `a.tag` wrote in segments `>= from_segment`, and
    /// violates the later readers that saw them (they read a value that never was).
    pub(crate) fn discard(&self, a: &Access<'_>, from_segment: u32) {
        self.locked(|_, st| {
            let mut store = None;
            st.versions.retain(|v| {
                let dropped = v.tag == a.tag && v.segment >= from_segment;
                if dropped {
                    store.get_or_insert(v.store);
                }
                !dropped
            });
            if let Some(store) = store {
                violate_readers(st, a, store, |seen| {
                    seen.tag == a.tag && seen.segment >= from_segment
                });
            }
        })
    }
}

/// The value epoch `a` sees, and which version it is: its own newest version, else the
/// newest version of an earlier epoch of the same loop, else the committed value.
fn visible<'v, T>(committed: &'v T, versions: &'v [Version<T>], a: &Access<'_>) -> (&'v T, Seen) {
    for v in versions.iter().rev() {
        if serial_of(v.tag) == serial_of(a.tag) && v.tag <= a.tag {
            let seen = Seen {
                tag: v.tag,
                segment: v.segment,
            };
            return (&v.value, seen);
        }
    }
    (committed, COMMITTED)
}

fn record_reader<T>(
    st: &mut SpecState<T>,
    a: &Access<'_>,
    seen: Seen,
    load: &'static Location<'static>,
) {
    st.retain_readers(|r| a.is_live(r.tag));
    if let Some(r) = st.reader_mut(a.tag) {
        // An earlier read by this epoch (or a record left by a rolled-back attempt):
        // keep the earliest segment so a violation rolls back far enough.
        if a.segment < r.segment {
            r.segment = a.segment;
            r.load = load;
            r.ordinal = a.ordinal;
        }
        r.seen = seen;
        return;
    }
    st.push_reader(Reader {
        tag: a.tag,
        segment: a.segment,
        seen,
        load,
        ordinal: a.ordinal,
    });
}

fn violate_readers<T>(
    st: &mut SpecState<T>,
    a: &Access<'_>,
    store: &'static Location<'static>,
    stale: impl Fn(Seen) -> bool,
) {
    if !st.has_readers() {
        return;
    }
    st.retain_readers(|r| {
        if !a.is_live(r.tag) {
            return false;
        }
        if r.tag > a.tag && stale(r.seen) {
            a.ring.violate(
                r.tag,
                r.segment,
                Cause {
                    store,
                    load: r.load,
                    load_ordinal: r.ordinal,
                },
            );
            // The reader rolls back and reads again; its record is no longer needed.
            return false;
        }
        true
    });
}

enum Own {
    None,
    CurrentSegment(usize),
    EarlierSegment(usize),
}

fn own_version<T>(versions: &[Version<T>], a: &Access<'_>) -> Own {
    match versions.iter().rposition(|v| v.tag == a.tag) {
        None => Own::None,
        Some(i) if versions[i].segment == a.segment => Own::CurrentSegment(i),
        Some(i) => Own::EarlierSegment(i),
    }
}

fn insert_version<T>(
    versions: &mut SmallVec<[Version<T>; 1]>,
    a: &Access<'_>,
    store: &'static Location<'static>,
    value: T,
) {
    let at = versions
        .iter()
        .rposition(|v| (v.tag, v.segment) < (a.tag, a.segment))
        .map_or(0, |i| i + 1);
    versions.insert(
        at,
        Version {
            tag: a.tag,
            segment: a.segment,
            value,
            store,
        },
    );
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::epoch::{EpochRing, NOT_VIOLATED, make_tag};
    use crate::sync::Ordering;

    fn at(ring: &EpochRing, index: u64, segment: u32) -> Access<'_> {
        Access {
            tag: make_tag(1, index),
            segment,
            homefree: false,
            ring,
            watermark: 0,
            ordinal: 0,
        }
    }

    fn ring(n: u64) -> EpochRing {
        let r = EpochRing::new(n as usize);
        for i in 0..n {
            r.slot(i).reset(make_tag(1, i));
        }
        r
    }

    fn pending(r: &EpochRing, i: u64) -> u32 {
        r.slot(i).pending(Ordering::Acquire)
    }

    #[test]
    fn later_epoch_reads_the_newest_earlier_version() {
        let r = ring(8);
        let s = Slot::new(10u32);
        assert_eq!(
            s.write_spec(&at(&r, 1, 0), Location::caller(), 11),
            WriteEffect::NewVersion
        );
        assert_eq!(
            s.write_spec(&at(&r, 3, 0), Location::caller(), 13),
            WriteEffect::NewVersion
        );
        assert_eq!(s.read_spec(&at(&r, 0, 0), Location::caller(), |v| *v), 10);
        assert_eq!(s.read_spec(&at(&r, 2, 0), Location::caller(), |v| *v), 11);
        assert_eq!(s.read_spec(&at(&r, 3, 0), Location::caller(), |v| *v), 13);
        assert_eq!(s.read_spec(&at(&r, 5, 0), Location::caller(), |v| *v), 13);
        // Rewriting one's own version in the same segment adds nothing to the log.
        assert_eq!(
            s.write_spec(&at(&r, 3, 0), Location::caller(), 23),
            WriteEffect::NoNewVersion
        );
        assert_eq!(
            s.read_committed(|v| *v),
            10,
            "writes are buffered until commit"
        );
    }

    #[test]
    fn write_violates_later_readers_that_saw_older_values_only() {
        let r = ring(8);
        let s = Slot::new(0u32);
        s.write_spec(&at(&r, 4, 0), Location::caller(), 4);
        // Epoch 5 sees epoch 4's version, epoch 3 sees the committed value.
        s.read_spec(&at(&r, 5, 2), Location::caller(), |_| ());
        s.read_spec(&at(&r, 3, 1), Location::caller(), |_| ());
        // Epoch 2 writes: epoch 3 saw an older value (violated, to its segment 1);
        // epoch 5 saw epoch 4's newer value (not violated).
        s.write_spec(&at(&r, 2, 0), Location::caller(), 2);
        assert_eq!(pending(&r, 3), 1);
        assert_eq!(pending(&r, 5), NOT_VIOLATED);
        // Epoch 4 writes again: epoch 5 saw its older version.
        s.write_spec(&at(&r, 4, 1), Location::caller(), 44);
        assert_eq!(pending(&r, 5), 2);
        // Earlier epochs are never violated by later writes.
        assert_eq!(pending(&r, 2), NOT_VIOLATED);
    }

    #[test]
    fn own_reads_and_homefree_reads_leave_no_record() {
        let r = ring(8);
        let s = Slot::new(0u32);
        s.write_spec(&at(&r, 3, 0), Location::caller(), 3);
        s.read_spec(&at(&r, 3, 0), Location::caller(), |_| ());
        let mut hf = at(&r, 1, 0);
        hf.homefree = true;
        s.read_spec(&hf, Location::caller(), |_| ());
        // A homefree write with no own version goes straight to the committed value.
        assert_eq!(
            s.write_spec(&hf, Location::caller(), 1),
            WriteEffect::NoNewVersion
        );
        assert_eq!(s.read_committed(|v| *v), 1);
        assert_eq!(pending(&r, 3), NOT_VIOLATED);
    }

    #[test]
    fn discarding_a_forwarded_version_violates_its_readers() {
        let r = ring(8);
        let s = Slot::new(0u32);
        s.write_spec(&at(&r, 1, 0), Location::caller(), 10);
        s.write_spec(&at(&r, 1, 2), Location::caller(), 12);
        assert_eq!(s.read_spec(&at(&r, 2, 1), Location::caller(), |v| *v), 12);
        // Epoch 1 rolls back to segment 2: the version epoch 2 saw is gone.
        s.discard(&at(&r, 1, 2), 2);
        assert_eq!(pending(&r, 2), 1);
        assert_eq!(s.read_spec(&at(&r, 6, 0), Location::caller(), |v| *v), 10);
        s.commit(make_tag(1, 1));
        assert_eq!(s.read_committed(|v| *v), 10);
    }

    #[test]
    fn commit_keeps_the_newest_segment_version() {
        let r = ring(4);
        let s = Slot::new(String::from("a"));
        s.write_spec(&at(&r, 0, 0), Location::caller(), "b".into());
        s.update_spec(&at(&r, 0, 1), Location::caller(), |v| v.push('c'));
        s.update_spec(&at(&r, 0, 3), Location::caller(), |v| v.push('d'));
        s.commit(make_tag(1, 0));
        assert_eq!(s.read_committed(|v| v.clone()), "bcd");
        assert!(!s.has_versions_except(None));
    }

    #[test]
    fn records_of_committed_epochs_are_dead() {
        let r = ring(8);
        let s = Slot::new(0u32);
        s.read_spec(&at(&r, 2, 0), Location::caller(), |_| ());
        // Epoch 2 has committed (watermark 3): a write by epoch 1 of a *new* loop run
        // with the same ring, or any later write, must not touch its slot.
        let mut w = at(&r, 1, 0);
        w.watermark = 3;
        s.write_spec(&w, Location::caller(), 9);
        assert_eq!(pending(&r, 2), NOT_VIOLATED);
    }

    #[test]
    fn records_of_other_loops_are_ignored() {
        let r = ring(8);
        let s = Slot::new(0u32);
        let mut other = at(&r, 5, 0);
        other.tag = make_tag(2, 5);
        s.read_spec(&other, Location::caller(), |_| ());
        s.write_spec(&at(&r, 1, 0), Location::caller(), 1);
        assert_eq!(pending(&r, 5), NOT_VIOLATED);
        // Versions of another loop are invisible too.
        let mut w = at(&r, 0, 0);
        w.tag = make_tag(2, 0);
        s.write_spec(&w, Location::caller(), 77);
        assert_eq!(s.read_spec(&at(&r, 3, 0), Location::caller(), |v| *v), 1);
    }

    #[test]
    fn a_slot_of_a_word_takes_two_cache_lines() {
        // The size the docs of `Slot` and of `SpecVec` users rely on.
        assert_eq!(core::mem::size_of::<Slot<u64>>(), 128);
    }

    #[test]
    fn committed_reads_of_plain_values_take_no_lock() {
        let s = Slot::new(5u64);
        let before = s.lock.read_begin();
        assert_eq!(s.read_committed(|v| *v), 5);
        assert_eq!(s.lock.read_begin(), before, "the read took the lock");
        // A value with drop glue is read under the lock.
        let s = Slot::new(String::from("x"));
        let before = s.lock.read_begin();
        assert_eq!(s.read_committed(|v| v.clone()), "x");
        assert_ne!(s.lock.read_begin(), before);
    }

    #[test]
    fn committed_reads_without_the_lock_are_never_torn() {
        // A writer keeps storing arrays whose elements are all equal; a reader on
        // another thread must never see a mix of two writes.
        struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let s = Slot::new([0u64; 8]);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            // Stops the writer even when an assertion below fails.
            let _stop = StopOnDrop(&stop);
            sc.spawn(|| {
                let mut k = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    k += 1;
                    s.with_committed(|v| *v = [k; 8]);
                }
            });
            // At least 2 million reads, and on until the reader has seen the writer
            // move a thousand times (a loaded machine may not run the writer at
            // first), within a generous bound.
            let (mut changes, mut last, mut reads) = (0, 0, 0u64);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while reads < 2_000_000 || (changes < 1000 && std::time::Instant::now() < deadline) {
                let v = s.read_committed(|v| *v);
                assert!(v.iter().all(|&x| x == v[0]), "torn read: {v:?}");
                changes += usize::from(v[0] != last);
                last = v[0];
                reads += 1;
            }
            assert!(changes > 1, "the reader never saw the writer");
        });
    }
}
