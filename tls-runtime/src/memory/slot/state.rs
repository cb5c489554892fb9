//! A slot's speculative state: the uncommitted versions and the reader records, and the
//! rules that find the value an epoch sees and the readers a write violates.

use crate::epoch::{Access, Cause, Tag, index_of, serial_of};
use crate::live_loops;
use core::panic::Location;
use smallvec::SmallVec;

/// Which version a reader saw: the committed value, or the version of (epoch, segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    /// The writer's tag; `0` for the committed value (no real tag is 0).
    pub(super) tag: Tag,
    pub(super) segment: u32,
}

pub(super) const COMMITTED: Seen = Seen { tag: 0, segment: 0 };

/// An uncommitted value written by epoch `tag` in `segment`, between its `gen`-th and
/// next commit-time action (see `EpochCx::generation`).
#[derive(Debug)]
pub(super) struct Version<T> {
    pub(super) tag: Tag,
    pub(super) segment: u32,
    pub(super) generation: u32,
    pub(super) value: T,
    pub(super) store: &'static Location<'static>,
}

impl<T> Version<T> {
    fn key(&self) -> (Tag, u32, u32) {
        (self.tag, self.segment, self.generation)
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Reader {
    pub(super) tag: Tag,
    pub(super) segment: u32,
    pub(super) seen: Seen,
    pub(super) load: &'static Location<'static>,
    pub(super) ordinal: u32,
}

/// The rarely needed part of a slot's speculative state, allocated on first need:
/// reader records beyond the first.
#[derive(Debug, Default)]
pub(super) struct Meta {
    more_readers: Vec<Reader>,
}

/// A slot's speculative state. The first reader record and the first uncommitted
/// version live inline, so the common cases (one epoch reads a location nobody
/// writes; one epoch writes it) allocate nothing and follow no pointer.
#[derive(Debug)]
pub(crate) struct SpecState<T> {
    /// `first.tag == 0` means no record.
    pub(super) first: Reader,
    /// Uncommitted versions, sorted by (tag, segment, generation).
    pub(super) versions: SmallVec<[Version<T>; 1]>,
    pub(super) meta: Option<Box<Meta>>,
}

pub(super) const NO_READER: Reader = Reader {
    tag: 0,
    segment: 0,
    seen: COMMITTED,
    load: Location::caller(),
    ordinal: 0,
};

impl<T> SpecState<T> {
    pub(super) fn new() -> Self {
        SpecState {
            first: NO_READER,
            versions: SmallVec::new(),
            meta: None,
        }
    }

    fn meta(&mut self) -> &mut Meta {
        self.meta.get_or_insert_with(Default::default)
    }

    /// Keeps the reader records for which `keep` is true.
    pub(super) fn retain_readers(&mut self, mut keep: impl FnMut(&Reader) -> bool) {
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

    pub(super) fn has_readers(&self) -> bool {
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

/// Whether the record of epoch `tag` can still matter to an access by `a`: an epoch of
/// `a`'s loop not yet committed, or an epoch of another loop that still runs.
fn is_live(a: &Access<'_>, tag: Tag) -> bool {
    if serial_of(tag) == serial_of(a.tag) {
        index_of(tag) >= a.watermark
    } else {
        live_loops::is_running(serial_of(tag))
    }
}

/// The value epoch `a` sees, and which version it is: its own newest version, else the
/// newest version of an earlier epoch of the same loop, else the committed value.
/// Versions of other loops are invisible until they commit.
pub(super) fn visible<'v, T>(
    committed: &'v T,
    versions: &'v [Version<T>],
    a: &Access<'_>,
) -> (&'v T, Seen) {
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

pub(super) fn record_reader<T>(
    st: &mut SpecState<T>,
    a: &Access<'_>,
    seen: Seen,
    load: &'static Location<'static>,
) {
    st.retain_readers(|r| is_live(a, r.tag));
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

/// The cause of `r`'s violation by `store`; `own_load`: where the storing epoch
/// loaded the location itself (`Some(None)`: it did not), `None` if not known.
fn cause(
    store: &'static Location<'static>,
    r: &Reader,
    own_load: Option<Option<&'static Location<'static>>>,
    distance: u64,
) -> Cause {
    Cause {
        store,
        load: r.load,
        load_ordinal: r.ordinal,
        real: true,
        rewrite: own_load.map(|own| own == Some(r.load)),
        distance,
    }
}

/// What a write can tell of its writer's own read of the location, for the causes
/// of the violations it makes (`Cause::rewrite`).
#[derive(Clone, Copy)]
pub(super) enum WriterRead {
    /// A speculative writer: its reads are recorded, so no record means no read.
    Recorded,
    /// A homefree writer of the committed value: a record of a read made while it
    /// was speculative is there; one made since it became homefree is not.
    IfRecorded,
    /// Not a store (a discarded version): nothing to tell.
    Unknown,
}

/// A speculative write by `a` (a new version, or an update of its own): violates the
/// later readers of `a`'s loop for which `stale(seen)` holds. Records of other loops
/// stay: a version is invisible to them. `writer`: what the causes may say of `a`'s
/// own read of the location.
pub(super) fn violate_readers<T>(
    st: &mut SpecState<T>,
    a: &Access<'_>,
    store: &'static Location<'static>,
    writer: WriterRead,
    stale: impl Fn(Seen) -> bool,
) {
    if !st.has_readers() {
        return;
    }
    // The writer's own read of the location, if any (`x.set(x.get() + 1)`).
    let own_load = match (writer, st.reader_mut(a.tag)) {
        (WriterRead::Unknown, _) => None,
        (_, Some(r)) => Some(Some(r.load)),
        (WriterRead::Recorded, None) => Some(None),
        (WriterRead::IfRecorded, None) => None,
    };
    st.retain_readers(|r| {
        if !is_live(a, r.tag) {
            return false;
        }
        if serial_of(r.tag) == serial_of(a.tag) && r.tag > a.tag && stale(r.seen) {
            let distance = index_of(r.tag).saturating_sub(index_of(a.tag));
            a.ring
                .violate(r.tag, r.segment, cause(store, r, own_load, distance));
            // The reader rolls back and reads again; its record is no longer needed.
            return false;
        }
        true
    });
}

/// The committed value changes, written by epoch `by` (a commit or a homefree write)
/// or by plain code (`None`): every live reader of another loop (of any loop, for
/// plain code) read a value that is no longer current, so it is violated.
pub(super) fn violate_other_loops<T>(
    st: &mut SpecState<T>,
    by: Option<&Access<'_>>,
    store: &'static Location<'static>,
) {
    if !st.has_readers() {
        return;
    }
    let own = by.map(|a| serial_of(a.tag));
    st.retain_readers(|r| {
        let serial = serial_of(r.tag);
        if Some(serial) == own {
            // `by`'s own loop: `violate_readers` and the watermark deal with these.
            return by.is_some_and(|a| is_live(a, r.tag));
        }
        if !live_loops::is_running(serial) {
            return false;
        }
        live_loops::violate(r.tag, r.segment, cause(store, r, None, 0));
        false
    });
}

/// Where epoch `a`'s newest version stands relative to its current write position.
pub(super) enum Own {
    None,
    /// A version of the current segment and generation: a write may overwrite it.
    Current(usize),
    /// A version of an earlier segment or generation: a write adds a new one.
    Earlier,
}

pub(super) fn own_version<T>(versions: &[Version<T>], a: &Access<'_>) -> Own {
    match versions.iter().rposition(|v| v.tag == a.tag) {
        None => Own::None,
        Some(i) if versions[i].segment == a.segment && versions[i].generation == a.generation => {
            Own::Current(i)
        }
        Some(_) => Own::Earlier,
    }
}

pub(super) fn insert_version<T>(
    versions: &mut SmallVec<[Version<T>; 1]>,
    a: &Access<'_>,
    store: &'static Location<'static>,
    value: T,
) {
    let key = (a.tag, a.segment, a.generation);
    let at = versions
        .iter()
        .rposition(|v| v.key() < key)
        .map_or(0, |i| i + 1);
    versions.insert(
        at,
        Version {
            tag: a.tag,
            segment: a.segment,
            generation: a.generation,
            value,
            store,
        },
    );
}

/// Removes the version `(tag, segment, generation)`, if present.
pub(super) fn take_version<T>(
    versions: &mut SmallVec<[Version<T>; 1]>,
    key: (Tag, u32, u32),
) -> Option<Version<T>> {
    let i = versions.iter().position(|v| v.key() == key)?;
    Some(versions.remove(i))
}
