//! One transaction lent to several threads (`Txn::share`): the threads' changes are
//! the transaction's (committed or undone together, nothing left pinned or locked), a
//! thread waiting for another transaction's lock does not hold up its siblings, and a
//! handle forgotten with its locks is reported, not silently committed.

use std::time::{Duration, Instant};

use btree_db::{Database, Error, Options, SyncMode};

mod common;
use common::{key, open};

#[test]
fn threads_of_one_transaction_commit_or_abort_together() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Duration::from_secs(5));
    let t = db.create_table("t").unwrap();
    for commit in [true, false] {
        let mut txn = db.begin();
        {
            let s = txn.share();
            std::thread::scope(|sc| {
                for th in 0..4u32 {
                    let s = &s;
                    sc.spawn(move || {
                        for i in 0..200u32 {
                            let k = key(th * 1000 + i + if commit { 0 } else { 500 });
                            s.insert(t, &k, &[th as u8; 100]).unwrap();
                            let mut out = Vec::new();
                            assert!(s.get_into(t, &k, &mut out).unwrap());
                            s.update(t, &k, &[th as u8 + 1; 300]).unwrap();
                        }
                    });
                }
            });
            assert!(s.locks_held() >= 800);
        }
        if commit {
            txn.commit().unwrap();
        } else {
            txn.abort().unwrap();
        }
        assert_eq!(db.pins_and_locks(), (0, 0));
    }
    let mut txn = db.begin();
    let mut out = Vec::new();
    for th in 0..4u32 {
        for i in 0..200u32 {
            assert!(txn.get_into(t, &key(th * 1000 + i), &mut out).unwrap());
            assert_eq!(out, vec![th as u8 + 1; 300]);
            assert!(
                !txn.get_into(t, &key(th * 1000 + i + 500), &mut out)
                    .unwrap()
            );
        }
    }
    txn.commit().unwrap();
    db.check_integrity().unwrap();
}

#[test]
fn a_thread_waiting_for_a_lock_does_not_hold_up_its_siblings() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Duration::from_secs(3));
    let t = db.create_table("t").unwrap();
    let mut setup = db.begin();
    setup.insert(t, b"held", b"1").unwrap();
    setup.insert(t, b"contended", b"2").unwrap();
    setup.commit().unwrap();

    let mut blocker = db.begin();
    blocker.update(t, b"contended", b"3").unwrap(); // exclusive, held to its end
    let mut txn = db.begin();
    let mut out = Vec::new();
    assert!(txn.get_into(t, b"held", &mut out).unwrap());
    {
        let s = txn.share();
        std::thread::scope(|sc| {
            let waiter = sc.spawn(|| s.get_into(t, b"contended", &mut Vec::new()));
            std::thread::sleep(Duration::from_millis(100));
            let t0 = Instant::now();
            let mut out = Vec::new();
            assert!(s.get_into(t, b"held", &mut out).unwrap());
            s.unlock_once(t, b"held");
            assert!(
                t0.elapsed() < Duration::from_millis(1500),
                "a sibling waited {:?} for a lock it held",
                t0.elapsed()
            );
            assert!(matches!(waiter.join().unwrap(), Err(Error::LockTimeout)));
        });
    }
    txn.abort().unwrap();
    blocker.abort().unwrap();
    assert_eq!(db.pins_and_locks(), (0, 0));
}

#[test]
fn a_forgotten_handle_is_reported_not_committed() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Duration::from_millis(200));
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    {
        let s = txn.share();
        s.put(t, b"k", b"v").unwrap();
        std::mem::forget(s);
    }
    assert!(matches!(txn.commit(), Err(Error::LentOut)));
    // The change was undone; the locks went with the handle.
    let mut other = db.begin();
    assert!(matches!(other.put(t, b"k", b"w"), Err(Error::LockTimeout)));
    other.abort().unwrap();
    let mut reader = db.begin();
    let mut out = Vec::new();
    assert!(matches!(
        reader.get_into(t, b"k", &mut out),
        Err(Error::LockTimeout)
    ));
    reader.abort().unwrap();
}

/// A write handed the hint of a read for update holds the row's lock whatever became
/// of that read's acquisition: undone since, made for another key, or made in an
/// earlier lending of the transaction. Each time, another transaction must find the
/// written row locked. (The write counts an acquisition of its own: a hint that let it
/// skip the lock would leave the row unlocked once the read's acquisition is undone.)
#[test]
fn a_write_after_a_read_for_update_holds_the_lock_however_the_hint_came() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Duration::from_millis(100));
    let t = db.create_table("t").unwrap();
    let mut setup = db.begin();
    for i in 0..4u32 {
        setup.insert(t, &key(i), &[1; 16]).unwrap();
    }
    setup.commit().unwrap();
    let locked_out = |k: u32| {
        let mut other = db.begin();
        let r = other.get_into(t, &key(k), &mut Vec::new());
        other.abort().unwrap();
        matches!(r, Err(Error::LockTimeout))
    };

    let mut txn = db.begin();
    let mut out = Vec::new();
    let from_before = {
        let s = txn.share();
        let (_, at) = s.get_for_update_at(t, &key(3), &mut out).unwrap();
        s.unlock_once(t, &key(3));
        at
    };
    assert!(!locked_out(3), "the undone acquisition released the lock");
    {
        let s = txn.share();
        // A hint from the lending before, whose lock was undone there (first, while
        // this lending has undone nothing).
        s.update_at(t, &key(3), &[2; 16], from_before).unwrap();
        // Read, then the read's acquisition undone: the write locks again.
        let (_, at) = s.get_for_update_at(t, &key(0), &mut out).unwrap();
        s.unlock_once(t, &key(0));
        assert!(!locked_out(0));
        s.update_at(t, &key(0), &[2; 16], at).unwrap();
        // A hint made for key 1, handed to a write of key 2 (never read).
        let (_, at) = s.get_for_update_at(t, &key(1), &mut out).unwrap();
        s.update_at(t, &key(2), &[2; 16], at).unwrap();
        // The plain case: the read's lock carries the write.
        let (_, at) = s.get_for_update_at(t, &key(1), &mut out).unwrap();
        s.update_at(t, &key(1), &[2; 16], at).unwrap();
    }
    for k in 0..4 {
        assert!(locked_out(k), "key {k} written without its lock");
    }
    txn.commit().unwrap();
    let mut check = db.begin();
    for k in 0..4 {
        assert!(check.get_into(t, &key(k), &mut out).unwrap());
        assert_eq!(out, vec![2; 16], "key {k}");
    }
    check.commit().unwrap();
    assert_eq!(db.pins_and_locks(), (0, 0));
}

/// Four threads of one transaction change the same 300 existing rows (and insert 300
/// new ones) in different orders, several times each, so that their log records and
/// undo entries interleave; then the transaction is either aborted, or left
/// unfinished with its records durable and the process crashed. Either way every row
/// must be back to its committed value and no inserted row may remain.
#[test]
fn parallel_writes_of_one_transaction_are_undone_by_abort_and_by_recovery() {
    undone_by_abort_and_by_recovery(4, 3);
}

/// As above with more threads than the handle has stripes (16): threads that share a
/// stripe record their undo entries there in whatever order they get its mutex,
/// which need not be the order of their log records; the chain sorts them back.
#[test]
fn writes_of_threads_sharing_a_stripe_are_undone_in_log_order() {
    undone_by_abort_and_by_recovery(20, 1);
}

fn undone_by_abort_and_by_recovery(threads: u32, rounds: u32) {
    for crash in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let opts = || Options {
            sync: SyncMode::Full,
            lock_timeout: Duration::from_secs(5),
            ..Options::default()
        };
        let committed = |i: u32| vec![(i % 251) as u8; 40 + (i % 7) as usize];
        {
            let db = Database::open(&path, opts()).unwrap();
            let t = db.create_table("t").unwrap();
            let mut setup = db.begin();
            for i in 0..300u32 {
                setup.insert(t, &key(i), &committed(i)).unwrap();
            }
            setup.commit().unwrap();
            let other = db.create_table("other").unwrap();

            let mut txn = db.begin();
            {
                let s = txn.share();
                std::thread::scope(|sc| {
                    for th in 0..threads {
                        let s = &s;
                        sc.spawn(move || {
                            for round in 0..rounds {
                                for j in 0..300u32 {
                                    // A different order per thread and round.
                                    let i = (j * (2 * th + 1) + round * 37) % 300;
                                    let v = [(th * 3 + round) as u8; 120];
                                    s.put(t, &key(i), &v[..40 + (j % 80) as usize]).unwrap();
                                }
                                for j in 0..25u32 {
                                    let k = key(10_000 + th * 100 + round * 25 + j);
                                    s.insert(t, &k, &[9; 200]).unwrap();
                                }
                            }
                        });
                    }
                });
            }
            if crash {
                // A committed transaction's flush makes the unfinished one's records
                // durable too; then the process dies.
                let mut flusher = db.begin();
                flusher.put(other, b"x", b"y").unwrap();
                flusher.commit().unwrap();
                db.simulate_crash_on_drop();
                std::mem::forget(txn);
            } else {
                txn.abort().unwrap();
                assert_eq!(db.pins_and_locks(), (0, 0));
            }
        }
        let db = Database::open(&path, opts()).unwrap();
        let t = db.table("t").unwrap();
        let mut check = db.begin();
        let mut out = Vec::new();
        for i in 0..300u32 {
            assert!(check.get_into(t, &key(i), &mut out).unwrap());
            assert_eq!(
                out,
                committed(i),
                "row {i} after {}",
                if crash { "recovery" } else { "abort" }
            );
        }
        for i in 10_000..10_000 + threads * 100 {
            assert!(!check.get_into(t, &key(i), &mut out).unwrap());
        }
        check.commit().unwrap();
        assert_eq!(db.check_integrity().unwrap(), 300 + u64::from(crash));
    }
}

/// `SharedTxn::scan` from several threads at once: each sees exactly the committed
/// entries of its range plus the transaction's own changes, in key order; stopping
/// early and a panicking callback leave no pin behind.
#[test]
fn scans_of_a_lent_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Duration::from_secs(5));
    let t = db.create_table("t").unwrap();
    let mut setup = db.begin();
    for i in (0..2000u32).step_by(2) {
        setup.insert(t, &key(i), &i.to_le_bytes()).unwrap();
    }
    setup.commit().unwrap();
    let mut txn = db.begin();
    {
        let s = txn.share();
        // The transaction's own change is visible to its scans.
        s.delete(t, &key(100)).unwrap();
        s.insert(t, &key(101), b"new").unwrap();
        std::thread::scope(|sc| {
            for th in 0..4u32 {
                let s = &s;
                sc.spawn(move || {
                    for round in 0..20u32 {
                        let lo = (th * 97 + round * 31) % 1900;
                        let (lo, hi) = (lo, lo + 100);
                        let mut seen = Vec::new();
                        s.scan(t, &key(lo), Some(&key(hi)), |k, _| {
                            seen.push(u32::from_be_bytes(k.try_into().unwrap()));
                            Ok(true)
                        })
                        .unwrap();
                        let expected: Vec<u32> = (lo..hi)
                            .filter(|&i| (i % 2 == 0 && i != 100) || i == 101)
                            .collect();
                        assert_eq!(seen, expected, "[{lo}, {hi})");
                        // The first entry only.
                        let mut first = None;
                        s.scan(t, &key(lo), None, |k, _| {
                            first = Some(k.to_vec());
                            Ok(false)
                        })
                        .unwrap();
                        assert_eq!(first.as_deref(), Some(&key(expected[0])[..]));
                    }
                });
            }
        });
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = s.scan(t, &key(0), None, |_, _| -> btree_db::Result<bool> {
                panic!("a callback that panics")
            });
        }));
        assert!(unwound.is_err());
    }
    txn.abort().unwrap();
    assert_eq!(db.pins_and_locks(), (0, 0));
}

/// The lent lock set counts every acquisition: the locks held before the share,
/// those taken during it by several threads (the same rows too) and single
/// acquisitions undone add up exactly, and every lock comes back to the
/// transaction (another transaction can take none of them until it ends).
#[test]
fn the_lent_lock_set_counts_every_acquisition_once_and_gives_every_lock_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Duration::from_millis(200));
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..64u32 {
        txn.put(t, &key(i), b"before").unwrap();
    }
    let before = txn.locks_held();
    {
        let s = txn.share();
        assert_eq!(s.locks_held(), before, "the locks held before the share");
        std::thread::scope(|sc| {
            for th in 0..4u32 {
                let s = &s;
                sc.spawn(move || {
                    let mut out = Vec::new();
                    for i in 0..256u32 {
                        // Rows of the others too: shared names, counted twice.
                        let k = key((i * 7 + th) % 256);
                        s.get_into(t, &k, &mut out).unwrap();
                        s.get_into(t, &k, &mut out).unwrap();
                        s.unlock_once(t, &k); // one of the two undone
                    }
                });
            }
        });
        // 192 rows more than the 64 locked before.
        assert_eq!(s.locks_held(), before + 192);
        for i in 0..256u32 {
            s.get_into(t, &key(1000 + i), &mut Vec::new()).unwrap();
        }
        assert_eq!(s.locks_held(), before + 192 + 256);
        for i in 0..256u32 {
            s.unlock_once(t, &key(1000 + i));
        }
        assert_eq!(
            s.locks_held(),
            before + 192,
            "each single acquisition undone"
        );
        // Undo one acquisition of a row read before the share: still held.
        s.unlock_once(t, &key(3));
    }
    assert_eq!(txn.locks_held(), before + 192);
    // Another transaction cannot update a row the first one read.
    let mut other = db.begin();
    assert!(matches!(
        other.put(t, &key(3), b"other"),
        Err(Error::LockTimeout) | Err(Error::Deadlock)
    ));
    other.abort().unwrap();
    txn.commit().unwrap();
    assert_eq!(db.pins_and_locks(), (0, 0));
}

/// A table first opened during the share, by one thread, is opened for all: the other
/// threads, reading it afterwards, take no table lock of their own (a second one could
/// wait behind a table drop that waits for the first). Every lock still comes back.
#[test]
fn a_table_opened_by_one_thread_is_opened_for_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Duration::from_millis(200));
    let t = db.create_table("t").unwrap();
    let mut setup = db.begin();
    for i in 0..8u32 {
        setup.put(t, &key(i), b"v").unwrap();
    }
    setup.commit().unwrap();
    let mut txn = db.begin();
    {
        let s = txn.share();
        assert_eq!(s.locks_held(), 0, "nothing opened yet");
        // Opened here, on this thread: its table lock and one record lock.
        s.get_into(t, &key(0), &mut Vec::new()).unwrap();
        assert_eq!(s.locks_held(), 2);
        std::thread::scope(|sc| {
            for th in 1..4u32 {
                let s = &s;
                sc.spawn(move || {
                    s.get_into(t, &key(th), &mut Vec::new()).unwrap();
                });
            }
        });
        // Three record locks more, and no other table lock.
        assert_eq!(s.locks_held(), 5);
    }
    assert_eq!(txn.locks_held(), 5);
    txn.commit().unwrap();
    assert_eq!(db.pins_and_locks(), (0, 0));
}

/// Past the tables a lent transaction keeps in its lock-free set (30), a table one
/// thread opened is still opened for the others: they take no table lock of their own.
#[test]
fn with_many_tables_open_a_table_opened_by_one_thread_is_opened_for_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Duration::from_millis(200));
    let tables: Vec<_> = (0..34)
        .map(|i| db.create_table(&format!("t{i}")).unwrap())
        .collect();
    let mut setup = db.begin();
    for &t in &tables {
        setup.put(t, &key(0), b"v").unwrap();
    }
    setup.commit().unwrap();
    let mut txn = db.begin();
    {
        let s = txn.share();
        // Every table opened here, on this thread: a table lock and a record lock each.
        for &t in &tables {
            s.get_into(t, &key(0), &mut Vec::new()).unwrap();
        }
        assert_eq!(s.locks_held(), 2 * tables.len());
        std::thread::scope(|sc| {
            for th in 1..4u32 {
                let (s, tables) = (&s, &tables);
                sc.spawn(move || {
                    for &t in tables {
                        assert!(!s.get_into(t, &key(th), &mut Vec::new()).unwrap());
                    }
                });
            }
        });
        // A record lock per key read, and no other table lock.
        assert_eq!(s.locks_held(), 2 * tables.len() + 3 * tables.len());
    }
    txn.commit().unwrap();
    assert_eq!(db.pins_and_locks(), (0, 0));
}
