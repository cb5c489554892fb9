//! The buffer pool's lock-free paths under pressure: optimistic descents,
//! lock-free hits and pins, racing evictions and reloads of the same frames.
//! A pool far smaller than the tree makes every lookup race an eviction;
//! every value names its own key, so a read through a frame that had been
//! reused for another page would show.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use btree_db::{Database, Error, Options, SyncMode};

fn value(key: u32, version: u32) -> Vec<u8> {
    let mut v = key.to_be_bytes().repeat(4);
    v.extend_from_slice(&version.to_le_bytes());
    v
}

#[test]
fn lookups_race_evictions_and_splits() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("t.db"),
        Options {
            page_size: 512,
            pool_pages: 24,
            sync: SyncMode::Off,
            lock_timeout: Duration::from_secs(2),
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    const KEYS: u32 = 3000;
    for chunk in (0..KEYS).step_by(2).collect::<Vec<_>>().chunks(100) {
        let mut txn = db.begin();
        for &k in chunk {
            txn.put(t, &k.to_be_bytes(), &value(k, 0)).unwrap();
        }
        txn.commit().unwrap();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        // Writers: new odd keys (splits) and new versions of even ones.
        for w in 0..2u32 {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let mut x = 0x9E37_79B9u32 ^ w;
                for round in 0..3000u32 {
                    let mut txn = db.begin();
                    let mut ok = true;
                    for _ in 0..5 {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        let k = x % KEYS;
                        if let Err(e) = txn.put(t, &k.to_be_bytes(), &value(k, round)) {
                            assert!(matches!(e, Error::Deadlock | Error::LockTimeout), "{e}");
                            ok = false;
                            break;
                        }
                    }
                    if ok {
                        txn.commit().unwrap();
                    } else {
                        txn.abort().unwrap();
                    }
                }
                stop.store(true, Ordering::Relaxed);
            });
        }
        // Readers: every value found names its key.
        for r in 0..3u32 {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let mut x = 0x2545_F491u32 ^ (r + 7);
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let mut txn = db.begin();
                    for _ in 0..20 {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        let k = x % KEYS;
                        match txn.get_into(t, &k.to_be_bytes(), &mut out) {
                            Ok(true) => assert_eq!(out[..16], value(k, 0)[..16], "key {k}"),
                            Ok(false) => assert!(k % 2 == 1, "loaded key {k} missing"),
                            Err(Error::Deadlock | Error::LockTimeout) => break,
                            Err(e) => panic!("get {k}: {e}"),
                        }
                    }
                    drop(txn);
                }
            });
        }
    });
    let n = db.check_integrity().unwrap();
    assert!(n >= (KEYS / 2) as u64);
    let mut txn = db.begin();
    for k in (0..KEYS).step_by(2) {
        let v = txn.get(t, &k.to_be_bytes()).unwrap().expect("loaded key");
        assert_eq!(v[..16], value(k, 0)[..16]);
    }
}

/// A pool of 16 pages whose probation frames are all pinned still finds a
/// victim among the rest; and an abort that cannot get a frame at all keeps
/// its locks (nobody sees its half-undone rows) and its log, so the next open
/// undoes it: the aborted values never become visible, before or after.
#[test]
fn pinned_frames_and_an_abort_that_cannot_get_a_frame() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let opts = || Options {
        page_size: 512,
        pool_pages: 16,
        sync: SyncMode::Off,
        lock_timeout: Duration::from_millis(200),
        ..Options::default()
    };
    let k = |i: u32| i.to_be_bytes();
    {
        let db = Database::open(&path, opts()).unwrap();
        let t = db.create_table("t").unwrap();
        let mut txn = db.begin();
        for i in 0..3000u32 {
            txn.insert(t, &k(i), b"original-value-original-value")
                .unwrap();
        }
        txn.commit().unwrap();
        db.checkpoint().unwrap();
        let mut writer = db.begin();
        for i in (0..1000).step_by(10) {
            writer.update(t, &k(i), b"UNCOMMITTED").unwrap();
        }
        // Pin a leaf per cursor until nothing is left: every frame is used
        // before the pool says it is exhausted.
        let mut readers: Vec<_> = (0..20).map(|_| db.begin()).collect();
        let mut cursors = Vec::new();
        for (j, r) in readers.iter_mut().enumerate() {
            let lo = k(1000 + 60 * j as u32);
            match r.scan(
                t,
                std::ops::Bound::Included(&lo),
                std::ops::Bound::Unbounded,
            ) {
                Ok(c) => cursors.push(c),
                Err(e) => {
                    assert!(matches!(e, Error::PoolExhausted), "{e}");
                    break;
                }
            }
        }
        assert!(
            cursors.len() >= 14,
            "only {} cursors fit in 16 frames",
            cursors.len()
        );
        let r = writer.abort();
        assert!(matches!(r, Err(Error::AbortIncomplete { .. })), "{r:?}");
        drop(cursors);
        drop(readers);
        // Its locks are still held: the aborted value is never read.
        let mut txn = db.begin();
        match txn.get(t, &k(0)) {
            Err(Error::LockTimeout) => {}
            other => panic!("read a row of the unfinished abort: {other:?}"),
        }
        drop(txn);
        // A clean close (with its checkpoint) keeps the log the undo needs.
    }
    let db = Database::open(&path, opts()).unwrap();
    let t = db.table("t").unwrap();
    let mut txn = db.begin();
    for i in (0..1000).step_by(10) {
        assert_eq!(
            txn.get(t, &k(i)).unwrap().as_deref(),
            Some(&b"original-value-original-value"[..]),
            "key {i}"
        );
    }
    assert_eq!(db.check_integrity().unwrap(), 3000);
}

/// Checkpoints in a loop while writers split pages in a 16-page pool: a
/// checkpoint that waited for a frame's latch while keeping the pool's miss
/// lock would deadlock with a writer that holds the latch and waits to load
/// a page. Bounded by a watchdog rather than left to hang.
#[test]
fn checkpoints_racing_writers_in_a_tiny_pool() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("c.db"),
        Options {
            page_size: 512,
            pool_pages: 16,
            sync: SyncMode::Off,
            lock_timeout: Duration::from_secs(2),
            checkpoint_log_bytes: 0,
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let done = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let (db, done) = (&db, &done);
        s.spawn(move || {
            while !done.load(Ordering::Relaxed) {
                db.checkpoint().unwrap();
            }
        });
        let writers: Vec<_> = (0..4u32)
            .map(|w| {
                s.spawn(move || {
                    for round in 0..1500u32 {
                        let mut txn = db.begin();
                        for j in 0..20u32 {
                            let key = (w * 100_000 + round * 20 + j).to_be_bytes();
                            txn.put(t, &key, &[w as u8; 40]).unwrap();
                        }
                        txn.commit().unwrap();
                    }
                })
            })
            .collect();
        s.spawn(move || {
            for h in writers {
                h.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
            tx.send(()).unwrap();
        });
        if rx.recv_timeout(Duration::from_secs(180)).is_err() {
            eprintln!("writers and checkpoints did not finish in 180 s: deadlock");
            std::process::abort();
        }
    });
    assert_eq!(db.check_integrity().unwrap(), 4 * 1500 * 20);
}
