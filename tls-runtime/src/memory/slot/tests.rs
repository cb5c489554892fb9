//! Unit tests of the slot protocol.
use super::*;
use crate::epoch::{EpochRing, NOT_VIOLATED, make_tag};
use crate::sync::Ordering;
use core::cell::Cell;

fn at(ring: &EpochRing, index: u64, segment: u32) -> Access<'_> {
    Access {
        tag: make_tag(1, index),
        segment,
        generation: 0,
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

/// Writes `v` as `a`; returns whether the write created a version (to be logged).
fn write<T>(s: &Slot<T>, a: &Access<'_>, v: T) -> bool {
    let logged = Cell::new(false);
    let _ = s.write_spec(a, Location::caller(), v, || logged.set(true));
    logged.get()
}

fn update<T: Clone>(s: &Slot<T>, a: &Access<'_>, f: impl FnOnce(&mut T)) -> bool {
    let logged = Cell::new(false);
    s.update_spec(a, Location::caller(), f, || logged.set(true));
    logged.get()
}

/// Applies the version (segment, generation) of `a`'s epoch, as a commit does.
fn apply<T>(s: &Slot<T>, a: &Access<'_>, segment: u32) {
    let mut drops = Drops::new();
    let h = LoggedSlot::lock(s);
    // SAFETY: we hold the lock.
    unsafe { LoggedSlot::apply(s, h, a, (a.tag, segment, 0), &mut drops) };
    LoggedSlot::unlock(s, h);
}

#[test]
fn later_epoch_reads_the_newest_earlier_version() {
    let r = ring(8);
    let s = Slot::new(10u32);
    assert!(write(&s, &at(&r, 1, 0), 11));
    assert!(write(&s, &at(&r, 3, 0), 13));
    assert_eq!(s.read_spec(&at(&r, 0, 0), Location::caller(), |v| *v), 10);
    assert_eq!(s.read_spec(&at(&r, 2, 0), Location::caller(), |v| *v), 11);
    assert_eq!(s.read_spec(&at(&r, 3, 0), Location::caller(), |v| *v), 13);
    assert_eq!(s.read_spec(&at(&r, 5, 0), Location::caller(), |v| *v), 13);
    // Rewriting one's own version in the same segment adds nothing to the log.
    assert!(!write(&s, &at(&r, 3, 0), 23));
    // After a commit-time action (a new generation), a write makes a new version.
    let mut later = at(&r, 3, 0);
    later.generation = 1;
    assert!(write(&s, &later, 33));
    assert_eq!(s.read_spec(&at(&r, 4, 0), Location::caller(), |v| *v), 33);
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
    write(&s, &at(&r, 4, 0), 4);
    // Epoch 5 sees epoch 4's version, epoch 3 sees the committed value.
    s.read_spec(&at(&r, 5, 2), Location::caller(), |_| ());
    s.read_spec(&at(&r, 3, 1), Location::caller(), |_| ());
    // Epoch 2 writes: epoch 3 saw an older value (violated, to its segment 1);
    // epoch 5 saw epoch 4's newer value (not violated).
    write(&s, &at(&r, 2, 0), 2);
    assert_eq!(pending(&r, 3), 1);
    assert_eq!(pending(&r, 5), NOT_VIOLATED);
    // Epoch 4 writes again: epoch 5 saw its older version.
    write(&s, &at(&r, 4, 1), 44);
    assert_eq!(pending(&r, 5), 2);
    // Earlier epochs are never violated by later writes.
    assert_eq!(pending(&r, 2), NOT_VIOLATED);
}

/// A writer that loaded the location itself at the same load before its store
/// (`x.set(x.get() + 1)`) says so in the cause of the violation it makes.
#[test]
fn a_violation_says_whether_the_writer_read_the_location_first() {
    let r = ring(8);
    let s = Slot::new(0u32);
    let load = Location::caller();
    // Epochs 1 and 2 read at the same load; epoch 1 then writes: a rewrite.
    s.read_spec(&at(&r, 1, 0), load, |_| ());
    s.read_spec(&at(&r, 2, 0), load, |_| ());
    write(&s, &at(&r, 1, 0), 1);
    let (_, cause) = r.slot(2).take_violation();
    assert_eq!(cause.expect("a cause").rewrite, Some(true));
    // Epoch 4 reads; epoch 3 writes without reading first: not one.
    s.read_spec(&at(&r, 4, 0), load, |_| ());
    write(&s, &at(&r, 3, 0), 3);
    let (_, cause) = r.slot(4).take_violation();
    assert_eq!(cause.expect("a cause").rewrite, Some(false));
}

#[test]
fn own_reads_leave_no_record() {
    let r = ring(8);
    let s = Slot::new(0u32);
    write(&s, &at(&r, 3, 0), 3);
    s.read_spec(&at(&r, 3, 0), Location::caller(), |_| ());
    // Epoch 1 writes: epoch 3 read only its own version, so it is not violated.
    write(&s, &at(&r, 1, 0), 1);
    assert_eq!(pending(&r, 3), NOT_VIOLATED);
}

#[test]
fn an_update_keeps_what_a_panicking_closure_changed() {
    let r = ring(4);
    let s = Slot::new(vec![1u32]);
    let a = at(&r, 1, 0);
    let logged = Cell::new(false);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s.update_spec(
            &a,
            Location::caller(),
            |v| {
                v.push(2);
                panic!("after the change");
            },
            || logged.set(true),
        )
    }));
    assert!(caught.is_err());
    assert!(
        logged.get(),
        "the version is logged before the closure runs"
    );
    assert_eq!(s.read_spec(&a, Location::caller(), Vec::clone), [1, 2]);
}

#[test]
fn discarding_a_forwarded_version_violates_its_readers() {
    let r = ring(8);
    let s = Slot::new(0u32);
    write(&s, &at(&r, 1, 0), 10);
    write(&s, &at(&r, 1, 2), 12);
    assert_eq!(s.read_spec(&at(&r, 2, 1), Location::caller(), |v| *v), 12);
    // Epoch 1 rolls back to segment 2: the version epoch 2 saw is gone.
    drop(s.discard(&at(&r, 1, 2), 2));
    assert_eq!(pending(&r, 2), 1);
    assert_eq!(s.read_spec(&at(&r, 6, 0), Location::caller(), |v| *v), 10);
    apply(&s, &at(&r, 1, 0), 0);
    assert_eq!(s.read_committed(|v| *v), 10);
}

#[test]
fn commit_applies_versions_in_write_order() {
    let r = ring(4);
    let s = Slot::new(String::from("a"));
    let a = at(&r, 0, 0);
    write(&s, &a, "b".into());
    update(&s, &at(&r, 0, 1), |v| v.push('c'));
    update(&s, &at(&r, 0, 3), |v| v.push('d'));
    apply(&s, &a, 0);
    assert_eq!(s.read_committed(|v| v.clone()), "b");
    apply(&s, &a, 1);
    apply(&s, &a, 3);
    assert_eq!(s.read_committed(|v| v.clone()), "bcd");
    assert!(!s.locked(|_, st| !st.versions.is_empty()));
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
    write(&s, &w, 9);
    assert_eq!(pending(&r, 2), NOT_VIOLATED);
}

#[test]
fn versions_of_other_loops_are_invisible() {
    let r = ring(8);
    let s = Slot::new(0u32);
    write(&s, &at(&r, 1, 0), 1);
    let mut w = at(&r, 0, 0);
    w.tag = make_tag(2, 0);
    write(&s, &w, 77);
    assert_eq!(s.read_spec(&at(&r, 3, 0), Location::caller(), |v| *v), 1);
}

#[test]
fn a_write_from_plain_code_violates_readers_of_running_loops() {
    let live = crate::live_loops::LiveLoop::start();
    let serial = live.serial();
    let r = EpochRing::new(4);
    r.slot(1).reset(make_tag(serial, 1));
    live.attach(&r);
    let s = Slot::new(0u32);
    let mut a = at(&r, 1, 2);
    a.tag = make_tag(serial, 1);
    s.read_spec(&a, Location::caller(), |_| ());
    let _ = s.write_committed(None, Location::caller(), 5);
    assert_eq!(pending(&r, 1), 2, "the reader of the old value is violated");
    drop(live);
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
                let _ = s.write_committed(None, Location::caller(), [k; 8]);
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
