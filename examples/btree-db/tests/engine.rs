//! Transactions, locks, the buffer pool, concurrency and bad input.

use std::ops::Bound;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use btree_db::{Database, Error, Options, SyncMode, TableId};

fn open(dir: &tempfile::TempDir, page_size: usize, pool_pages: usize) -> Arc<Database> {
    Database::open(
        dir.path().join("t.db"),
        Options {
            page_size,
            pool_pages,
            sync: SyncMode::Off,
            lock_timeout: Duration::from_millis(300),
            ..Options::default()
        },
    )
    .unwrap()
}

fn k(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

fn dump(db: &Database, t: TableId) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut txn = db.begin();
    let mut cur = txn.scan(t, Bound::Unbounded, Bound::Unbounded).unwrap();
    let mut out = Vec::new();
    while let Some(kv) = cur.next().unwrap() {
        out.push(kv);
    }
    cur.close();
    txn.commit().unwrap();
    out
}

#[test]
fn abort_undoes_everything() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 512, 64);
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..500 {
        txn.insert(t, &k(i * 2), &[i as u8; 20]).unwrap();
    }
    txn.commit().unwrap();
    let before = dump(&db, t);
    let mut txn = db.begin();
    for i in 0..1500 {
        // Inserts between existing keys (splits), updates with other sizes, deletes.
        match i % 3 {
            0 => txn.insert(t, &k(i * 2 + 1), &[7; 30]).unwrap(),
            1 => txn
                .put(t, &k(i % 1000), &vec![9; (i % 50) as usize])
                .unwrap(),
            _ => {
                txn.delete(t, &k((i * 7) % 1000)).unwrap();
            }
        }
    }
    txn.abort().unwrap();
    assert_eq!(dump(&db, t), before);
    db.check_integrity().unwrap();
    // Dropping an unfinished transaction aborts it too.
    {
        let mut txn = db.begin();
        txn.delete(t, &k(0)).unwrap();
    }
    assert_eq!(dump(&db, t), before);
}

#[test]
fn lock_conflict_blocks_then_times_out() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough that the waiting reader below outlasts the writer's
    // sleep-then-commit even on a loaded machine.
    let db = Database::open(
        dir.path().join("t.db"),
        Options {
            sync: SyncMode::Off,
            lock_timeout: Duration::from_millis(1500),
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.begin();
    w.put(t, b"x", b"1").unwrap();
    // A reader in another thread must not see the uncommitted write: it
    // waits for the exclusive lock and gives up with a clear error.
    let db2 = db.clone();
    let r = std::thread::spawn(move || {
        let mut txn = db2.begin();
        let e = txn.get(t, b"x").unwrap_err();
        assert!(matches!(e, Error::LockTimeout), "{e}");
    });
    r.join().unwrap();
    // Once the writer commits, a waiting reader gets the committed value.
    let db3 = db.clone();
    let r = std::thread::spawn(move || {
        let mut txn = db3.begin();
        txn.get(t, b"x").unwrap()
    });
    std::thread::sleep(Duration::from_millis(50));
    w.commit().unwrap();
    assert_eq!(r.join().unwrap().as_deref(), Some(&b"1"[..]));
    // Shared locks are compatible.
    let mut a = db.begin();
    let mut b = db.begin();
    assert!(a.get(t, b"x").unwrap().is_some());
    assert!(b.get(t, b"x").unwrap().is_some());
}

#[test]
fn deadlock_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("t.db"),
        Options {
            sync: SyncMode::Off,
            lock_timeout: Duration::from_secs(20),
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = [(b"a", b"b"), (b"b", b"a")]
        .into_iter()
        .map(|(first, second)| {
            let db = db.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut txn = db.begin();
                txn.put(t, first, b"1").unwrap();
                barrier.wait();
                match txn.put(t, second, b"2") {
                    Ok(()) => txn.commit().map(|_| true),
                    Err(Error::Deadlock) => {
                        txn.abort().unwrap();
                        Ok(false)
                    }
                    Err(e) => Err(e),
                }
            })
        })
        .collect();
    let results: Vec<bool> = threads
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    // Exactly one victim; the other transaction completes (long before the timeout).
    assert_eq!(results.iter().filter(|&&ok| ok).count(), 1, "{results:?}");
    assert_eq!(db.stats().deadlocks, 1);
}

#[test]
fn one_lock_acquisition_can_be_undone() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 4096, 64);
    let t = db.create_table("t").unwrap();
    let mut a = db.begin();
    a.get_for_update(t, b"k", &mut Vec::new()).unwrap();
    a.get_for_update(t, b"k", &mut Vec::new()).unwrap();
    let held = a.locks_held();
    a.unlock_once(t, b"k");
    assert_eq!(a.locks_held(), held, "still held once");
    let db2 = db.clone();
    let blocked = std::thread::spawn(move || db2.begin().get(t, b"k").map(|_| ()));
    assert!(matches!(blocked.join().unwrap(), Err(Error::LockTimeout)));
    a.unlock_once(t, b"k");
    assert_eq!(a.locks_held(), held - 1);
    let db2 = db.clone();
    let free = std::thread::spawn(move || db2.begin().get(t, b"k").map(|_| ()));
    free.join().unwrap().unwrap();
}

#[test]
fn concurrent_writers_and_readers() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 512, 128);
    let t = db.create_table("t").unwrap();
    let threads = 4u32;
    let per = 3000u32;
    let handles: Vec<_> = (0..threads)
        .map(|th| {
            let db = db.clone();
            std::thread::spawn(move || {
                // Interleaved keys: every thread splits the same leaves.
                for i in 0..per {
                    let mut txn = db.begin();
                    let key = k(i * threads + th);
                    txn.insert(t, &key, &[th as u8; 24]).unwrap();
                    if i % 50 == 0 {
                        let mut cur = txn
                            .scan(t, Bound::Included(&k(i)), Bound::Unbounded)
                            .unwrap();
                        let mut prev: Option<Vec<u8>> = None;
                        for _ in 0..40 {
                            // Other threads' uncommitted keys make us wait or time out.
                            match cur.next() {
                                Ok(Some((key, _))) => {
                                    assert!(prev.as_ref().is_none_or(|p| *p < key));
                                    prev = Some(key);
                                }
                                Ok(None) | Err(Error::LockTimeout | Error::Deadlock) => break,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    }
                    txn.commit().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(db.check_integrity().unwrap(), (threads * per) as u64);
    let all = dump(&db, t);
    assert_eq!(all.len(), (threads * per) as usize);
    for (i, (key, v)) in all.iter().enumerate() {
        assert_eq!(key.as_slice(), &k(i as u32));
        assert_eq!(v[0] as u32, i as u32 % threads);
    }
}

#[test]
fn long_scan_does_not_evict_the_hot_set() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 4096, 64);
    let hot = db.create_table("hot").unwrap();
    let big = db.create_table("big").unwrap();
    let mut txn = db.begin();
    for i in 0..200 {
        txn.insert(hot, &k(i), &[1; 150]).unwrap();
    }
    // About 250 leaves: four times the pool.
    for i in 0..5000 {
        txn.insert(big, &k(i), &[2; 180]).unwrap();
    }
    txn.commit().unwrap();
    db.checkpoint().unwrap();
    let mut hot_pages = std::collections::BTreeSet::new();
    for _ in 0..3 {
        let mut txn = db.begin();
        for i in 0..200 {
            txn.get(hot, &k(i)).unwrap().unwrap();
            hot_pages.extend(db.path_to(hot, &k(i)).unwrap());
        }
        txn.commit().unwrap();
    }
    assert!(hot_pages.len() >= 8, "hot set of {} pages", hot_pages.len());
    let mut txn = db.begin();
    let mut cur = txn.scan(big, Bound::Unbounded, Bound::Unbounded).unwrap();
    let (mut key, mut val) = (Vec::new(), Vec::new());
    let mut n = 0;
    while cur.next_into(&mut key, &mut val).unwrap() {
        n += 1;
    }
    cur.close();
    txn.commit().unwrap();
    assert_eq!(n, 5000);
    for p in &hot_pages {
        assert!(
            db.page_is_resident(*p),
            "hot page {p} was evicted by the scan"
        );
    }
    let reads = db.stats().page_reads;
    let mut txn = db.begin();
    for i in 0..200 {
        txn.get(hot, &k(i)).unwrap().unwrap();
    }
    txn.commit().unwrap();
    assert_eq!(db.stats().page_reads, reads, "hot set reads went to disk");
}

#[test]
fn pool_pressure_and_exhaustion() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 512, 16);
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..4000 {
        txn.put(t, &k(i), &[i as u8; 30]).unwrap();
    }
    txn.commit().unwrap();
    assert_eq!(db.check_integrity().unwrap(), 4000);
    assert!(
        db.stats().page_writes > 100,
        "the small pool wrote back pages"
    );
    // Every frame pinned by an open cursor: the next page needs a frame.
    // (Each cursor pins one leaf; the descents above it pin nothing.)
    let mut txns: Vec<_> = (0..20).map(|_| db.begin()).collect();
    let mut cursors = Vec::new();
    let mut failed = None;
    for (i, txn) in txns.iter_mut().enumerate() {
        match txn.scan(t, Bound::Included(&k(i as u32 * 190)), Bound::Unbounded) {
            Ok(c) => cursors.push(c),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    assert!(matches!(failed, Some(Error::PoolExhausted)), "{failed:?}");
    assert!(
        cursors.len() >= 15,
        "exhausted with {} of 16 frames pinned",
        cursors.len()
    );
    drop(cursors);
    drop(txns);
    let mut txn = db.begin();
    assert_eq!(
        txn.get(t, &k(3999)).unwrap().unwrap(),
        vec![3999u32 as u8; 30]
    );
}

#[test]
fn size_limits_and_unknown_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 4096, 64);
    let t = db.create_table("t").unwrap();
    let lim = db.limits();
    assert_eq!((lim.max_key, lim.max_entry), (494, 1000));
    let mut txn = db.begin();
    assert!(matches!(
        txn.put(t, &vec![1; lim.max_key + 1], b""),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        txn.put(t, b"k", &vec![1; lim.max_entry]),
        Err(Error::ValueTooLarge { .. })
    ));
    // A name too long for the catalog says so (it said "key of 495 bytes").
    let long = "n".repeat(lim.max_key + 1);
    let e = db.create_table(&long).unwrap_err();
    assert!(
        matches!(e, Error::NameTooLong { len: 495, max: 494 }),
        "{e}"
    );
    assert!(e.to_string().contains("name"), "{e}");
    txn.put(
        t,
        &vec![1; lim.max_key],
        &vec![2; lim.max_entry - lim.max_key],
    )
    .unwrap();
    txn.commit().unwrap();
    assert!(matches!(db.table("nope"), Err(Error::UnknownTable(_))));
    assert!(matches!(db.create_table("t"), Err(Error::TableExists(_))));
    let idx = db.create_index("t_by_x", t).unwrap();
    assert_eq!(db.tables().len(), 2);
    db.drop_table(idx).unwrap();
    let mut txn = db.begin();
    assert!(matches!(
        txn.put(idx, b"a", b"b"),
        Err(Error::UnknownTableId(_))
    ));
}

#[test]
fn dropped_pages_are_reused() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 512, 64);
    let fill = |name: &str| {
        let t = db.create_table(name).unwrap();
        let mut txn = db.begin();
        for i in 0..2000 {
            txn.put(t, &k(i), &[5; 40]).unwrap();
        }
        txn.commit().unwrap();
        t
    };
    let a = fill("a");
    db.checkpoint().unwrap();
    let len1 = std::fs::metadata(dir.path().join("t.db")).unwrap().len();
    db.drop_table(a).unwrap();
    let b = fill("b");
    db.checkpoint().unwrap();
    let len2 = std::fs::metadata(dir.path().join("t.db")).unwrap().len();
    assert!(
        len2 <= len1 + 4 * 512,
        "file grew from {len1} to {len2}: pages not reused"
    );
    assert_eq!(db.check_integrity().unwrap(), 2000);
    assert_eq!(dump(&db, b).len(), 2000);
}

fn populated(dir: &tempfile::TempDir) {
    let db = open(dir, 4096, 64);
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..3000 {
        txn.put(t, &k(i), &[3; 100]).unwrap();
    }
    txn.commit().unwrap();
}

#[test]
fn bad_files_give_clear_errors() {
    let opts = Options::default;
    // Not a database.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.db"), vec![0x41; 8192]).unwrap();
    assert!(matches!(
        Database::open(dir.path().join("t.db"), opts()),
        Err(Error::BadMagic)
    ));
    // Too short to hold a header.
    std::fs::write(dir.path().join("t.db"), b"BTRE").unwrap();
    assert!(matches!(
        Database::open(dir.path().join("t.db"), opts()),
        Err(Error::Truncated { .. })
    ));

    // Wrong format version (both header copies).
    let dir = tempfile::tempdir().unwrap();
    populated(&dir);
    let path = dir.path().join("t.db");
    let mut bytes = std::fs::read(&path).unwrap();
    for off in [0usize, 256] {
        bytes[off + 8] = 99;
    }
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        Database::open(&path, opts()),
        Err(Error::UnsupportedVersion {
            found: 99,
            expected: 3
        })
    ));

    // Truncated to fewer pages than allocated.
    let dir = tempfile::tempdir().unwrap();
    populated(&dir);
    let path = dir.path().join("t.db");
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2 / 4096 * 4096)
        .unwrap();
    let e = Database::open(&path, opts())
        .err()
        .expect("truncated file must not open");
    assert!(
        matches!(e, Error::Truncated { .. } | Error::Corrupt { .. }),
        "{e}"
    );
    // Cut mid-page.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2 / 4096 * 4096 + 100)
        .unwrap();
    assert!(matches!(
        Database::open(&path, opts()),
        Err(Error::Truncated { .. })
    ));

    // A flipped byte in a data page: a checksum error, and nothing lost once
    // the byte is restored.
    let dir = tempfile::tempdir().unwrap();
    populated(&dir);
    let path = dir.path().join("t.db");
    let pristine = std::fs::read(&path).unwrap();
    let victim = (pristine.len() / 4096 - 2) * 4096 + 2000;
    let mut bytes = pristine.clone();
    bytes[victim] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    {
        let db = Database::open(&path, opts()).unwrap();
        let e = db.check_integrity().unwrap_err();
        assert!(matches!(e, Error::BadChecksum { .. }), "{e}");
    }
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[victim] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let db = Database::open(&path, opts()).unwrap();
    assert_eq!(db.check_integrity().unwrap(), 3000);
}

#[test]
fn second_open_of_one_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 4096, 64);
    let again = Database::open(dir.path().join("t.db"), Options::default());
    assert!(matches!(again, Err(Error::InUse)), "{:?}", again.err());
    drop(db);
    Database::open(dir.path().join("t.db"), Options::default()).unwrap();
}

#[test]
fn database_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Database>();
    assert_send::<btree_db::Txn<'static>>();
}

#[test]
fn group_commit_and_sync_modes() {
    for sync in [SyncMode::Off, SyncMode::Normal, SyncMode::Full] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(
            dir.path().join("t.db"),
            Options {
                sync,
                ..Options::default()
            },
        )
        .unwrap();
        let t = db.create_table("t").unwrap();
        let before = db.stats();
        std::thread::scope(|s| {
            for th in 0..4u32 {
                let db = &db;
                s.spawn(move || {
                    for i in 0..50u32 {
                        let mut txn = db.begin();
                        txn.put(t, &k(th * 1000 + i), b"v").unwrap();
                        txn.commit().unwrap();
                    }
                });
            }
        });
        let st = db.stats();
        let (flushes, syncs) = (
            st.log_flushes - before.log_flushes,
            st.log_syncs - before.log_syncs,
        );
        eprintln!("{sync:?}: {flushes} log writes, {syncs} syncs for 200 commits");
        match sync {
            SyncMode::Off => {
                assert_eq!((flushes, syncs), (0, 0), "sync off never writes at commit")
            }
            SyncMode::Normal => assert!(flushes > 0 && flushes <= 200 && syncs == 0),
            // Committers waiting behind one sync share the next one.
            SyncMode::Full => assert!(syncs > 0 && syncs < 200, "{syncs} syncs for 200 commits"),
        }
        drop(db);
        let db = Database::open(dir.path().join("t.db"), Options::default()).unwrap();
        assert_eq!(db.check_integrity().unwrap(), 200);
    }
}

#[test]
fn missing_log_segment_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        sync: SyncMode::Normal,
        log_segment_bytes: 64 << 10,
        checkpoint_log_bytes: 0,
        ..Options::default()
    };
    let path = dir.path().join("t.db");
    {
        let db = Database::open(&path, opts()).unwrap();
        let t = db.create_table("t").unwrap();
        for i in 0..2000u32 {
            let mut txn = db.begin();
            txn.put(t, &k(i), &[1; 100]).unwrap();
            txn.commit().unwrap();
        }
        // A crash: no clean close, so recovery needs the log.
        db.simulate_crash_on_drop();
    }
    let mut segs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".wal."))
        .collect();
    segs.sort();
    assert!(segs.len() >= 3, "{segs:?}");
    std::fs::remove_file(&segs[1]).unwrap();
    let e = Database::open(&path, opts())
        .err()
        .expect("a hole in the log must not open");
    assert!(matches!(e, Error::LogDamaged { .. }), "{e}");
}

#[test]
fn torn_or_garbage_log_tail_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let opts = || Options {
        sync: SyncMode::Normal,
        checkpoint_log_bytes: 0,
        ..Options::default()
    };
    {
        let db = Database::open(&path, opts()).unwrap();
        let t = db.create_table("t").unwrap();
        for i in 0..300u32 {
            let mut txn = db.begin();
            txn.put(t, &k(i), &[7; 50]).unwrap();
            txn.commit().unwrap();
        }
        db.simulate_crash_on_drop();
    }
    let seg = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".wal."))
        .max()
        .unwrap();
    // Garbage after the last record, as a torn write could leave.
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    std::io::Write::write_all(&mut f, &[0xA5; 777]).unwrap();
    drop(f);
    let db = Database::open(&path, opts()).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(db.check_integrity().unwrap(), 300);
    let mut txn = db.begin();
    for i in 0..300u32 {
        assert!(txn.get(t, &k(i)).unwrap().is_some());
    }
    txn.commit().unwrap();
    // New commits after recovery land where the garbage was and survive.
    let mut txn = db.begin();
    txn.put(t, &k(1000), b"after").unwrap();
    txn.commit().unwrap();
    db.simulate_crash_on_drop();
    drop(db);
    let db = Database::open(&path, opts()).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(
        db.begin().get(t, &k(1000)).unwrap().as_deref(),
        Some(&b"after"[..])
    );
}

#[test]
fn torn_page_is_rebuilt_from_its_full_page_image() {
    // 8 KiB pages: a kill (or power loss) can tear a page write.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let opts = || Options {
        page_size: 8192,
        sync: SyncMode::Normal,
        checkpoint_log_bytes: 0,
        ..Options::default()
    };
    let leaf;
    {
        let db = Database::open(&path, opts()).unwrap();
        let t = db.create_table("t").unwrap();
        let mut txn = db.begin();
        for i in 0..3000u32 {
            txn.put(t, &k(i), &[1; 60]).unwrap();
        }
        txn.commit().unwrap();
        db.checkpoint().unwrap();
        // After the checkpoint: the first change to each page logs its image.
        let mut txn = db.begin();
        for i in (0..3000u32).step_by(3) {
            txn.put(t, &k(i), &[2; 60]).unwrap();
        }
        txn.commit().unwrap();
        leaf = *db.path_to(t, &k(1500)).unwrap().last().unwrap();
        db.simulate_crash_on_drop();
    }
    // Tear the leaf on disk: its second half is garbage.
    let mut bytes = std::fs::read(&path).unwrap();
    let off = leaf as usize * 8192 + 4096;
    bytes[off..off + 4096].fill(0x5A);
    std::fs::write(&path, &bytes).unwrap();
    let db = Database::open(&path, opts()).unwrap();
    assert_eq!(db.check_integrity().unwrap(), 3000);
    let t = db.table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..3000u32 {
        let want = if i % 3 == 0 { 2 } else { 1 };
        assert_eq!(
            txn.get(t, &k(i)).unwrap().unwrap(),
            vec![want; 60],
            "key {i}"
        );
    }
}
