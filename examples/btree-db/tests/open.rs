//! Opening and creating a database file: a failed open changes nothing on
//! disk, the log's segment size belongs to the files, a first open killed
//! halfway leaves no file that cannot open, racing openers of one new path
//! get `InUse`, and options that cannot work are refused.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use btree_db::{Database, Error, Options, SyncMode};

fn opts() -> Options {
    Options {
        page_size: 4096,
        pool_pages: 4096,
        sync: SyncMode::Normal,
        checkpoint_log_bytes: 0,
        ..Options::default()
    }
}

/// Every row of table `t`.
fn rows(db: &Database) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let t = db.table("t").unwrap();
    let mut tx = db.begin();
    let mut c = tx.scan(t, Bound::Unbounded, Bound::Unbounded).unwrap();
    let mut m = BTreeMap::new();
    while let Some((k, v)) = c.next().unwrap() {
        m.insert(k, v);
    }
    c.close();
    m
}

/// The database file and its log files, each with its contents.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().into_string().unwrap();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// A recovery that fails (here: the undo of an unfinished transaction meets a
/// damaged page) leaves the files as they were, so that once the damage is
/// repaired the next open redoes and undoes everything. Dropping the half-open
/// database used to take a checkpoint that named the end of the log as the
/// recovery start: the repaired database then opened with the unfinished
/// transaction's 125 updates made permanent.
#[test]
fn a_failed_open_changes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.db");
    let mut committed = BTreeMap::new();
    {
        let db = Database::open(&path, opts()).unwrap();
        let t = db.create_table("t").unwrap();
        let mut tx = db.begin();
        for i in 0..5000u32 {
            let (k, v) = (i.to_be_bytes().to_vec(), vec![1u8; 300]);
            tx.put(t, &k, &v).unwrap();
            committed.insert(k, v);
        }
        tx.commit().unwrap();
        db.checkpoint().unwrap();
        let mut unfinished = db.begin();
        for i in (0..5000u32).step_by(40) {
            unfinished.put(t, &i.to_be_bytes(), b"UNCOMMITTED").unwrap();
        }
        // A later commit writes the unfinished transaction's records to the log.
        let mut w = db.begin();
        w.put(t, b"last", b"row").unwrap();
        committed.insert(b"last".to_vec(), b"row".to_vec());
        w.commit().unwrap();
        std::mem::forget(unfinished);
        db.simulate_crash_on_drop();
    }
    // The table's root: a branch page that no log record touches, and that the
    // undo descends through.
    let root = {
        let copy = tempfile::tempdir().unwrap();
        for (name, bytes) in files(dir.path()) {
            std::fs::write(copy.path().join(name), bytes).unwrap();
        }
        let db = Database::open(copy.path().join("f.db"), opts()).unwrap();
        assert_eq!(rows(&db), committed, "recovered from an undamaged copy");
        db.path_to(db.table("t").unwrap(), b"").unwrap()[0]
    };
    let at = u64::from(root) * 4096;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut page = vec![0u8; 4096];
    file.read_exact_at(&mut page, at).unwrap();
    let mut damaged = page.clone();
    damaged[100] ^= 0x40;
    file.write_all_at(&damaged, at).unwrap();
    let before = files(dir.path());
    let failed = Database::open(&path, opts());
    assert!(
        matches!(failed, Err(Error::BadChecksum { page }) if page == root),
        "{:?}",
        failed.map(|_| ())
    );
    let after = files(dir.path());
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "a failed open deleted or made files"
    );
    assert!(
        before["f.db"][..4096] == after["f.db"][..4096],
        "a failed open rewrote the file header"
    );
    file.write_all_at(&page, at).unwrap();
    let db = Database::open(&path, opts()).unwrap();
    assert_eq!(
        rows(&db),
        committed,
        "after the repair, the unfinished transaction is undone"
    );
}

/// A lock timeout too long to add to the clock (`Duration::MAX`: "wait as long
/// as it takes") waits; it used to panic at the first wait, leaving a waits-for
/// edge behind that made the other transaction a false deadlock victim.
#[test]
fn a_lock_timeout_past_the_clock_waits() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        lock_timeout: Duration::MAX,
        ..opts()
    };
    let db = Database::open(dir.path().join("t.db"), options).unwrap();
    let t = db.create_table("t").unwrap();
    let mut a = db.begin();
    a.put(t, b"x", b"a").unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut b = db.begin();
            b.put(t, b"x", b"b")?;
            b.commit()
        });
        std::thread::sleep(Duration::from_millis(50));
        a.put(t, b"y", b"a").unwrap();
        a.commit().unwrap();
        waiter.join().unwrap().unwrap();
    });
    let mut r = db.begin();
    assert_eq!(r.get(t, b"x").unwrap().as_deref(), Some(&b"b"[..]));
}

/// Options no machine can meet are `InvalidOptions`, not a panic, and leave no file:
/// past the largest database (a panic, "capacity overflow"), and within it but past
/// the machine's memory (2^26 pages of 32 KiB, 2 TiB: the process aborted when
/// allocation failed, or under overcommit was killed).
#[test]
fn a_pool_larger_than_memory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    for (pool_pages, page_size) in [
        (usize::MAX, 4096),
        (usize::MAX / 2, 4096),
        (1 << 40, 4096),
        (1 << 26, 32768),
    ] {
        let options = Options {
            pool_pages,
            page_size,
            ..opts()
        };
        let r = Database::open(&path, options);
        assert!(
            matches!(r, Err(Error::InvalidOptions(_))),
            "pool_pages {pool_pages}: {:?}",
            r.map(|_| ())
        );
        assert!(
            files(dir.path()).is_empty(),
            "{:?}",
            files(dir.path()).keys()
        );
    }
    // An existing file's own page size counts (4 KiB here): a pool that would fit
    // in memory with the option's 512-byte pages does not with the file's.
    drop(Database::open(&path, opts()).unwrap());
    let Some(memory) = physical_memory() else {
        return;
    };
    let options = Options {
        pool_pages: (memory / 1024) as usize,
        page_size: 512,
        ..opts()
    };
    let r = Database::open(&path, options);
    assert!(
        matches!(r, Err(Error::InvalidOptions(_))),
        "{:?}",
        r.map(|_| ())
    );
}

/// `MemTotal` of `/proc/meminfo` in bytes.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// Threads opening one new path at once: one opens it, the others get `InUse`. The
/// loser of the race to create the file got `Io(AlreadyExists)` (52 times in 200),
/// after deleting log files it took for stale, which may have been the winner's.
#[test]
fn racing_first_opens_of_one_path_get_in_use() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..30 {
        let path = dir.path().join(format!("r{round}.db"));
        let barrier = std::sync::Barrier::new(4);
        let results: Vec<Result<(), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        match Database::open(&path, opts()) {
                            // Held until every thread has tried.
                            Ok(db) => {
                                barrier.wait();
                                drop(db);
                                Ok(())
                            }
                            Err(Error::InUse) => {
                                barrier.wait();
                                Err("in use".to_string())
                            }
                            Err(e) => {
                                barrier.wait();
                                Err(format!("{e:?}"))
                            }
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let opened = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(opened, 1, "round {round}: {results:?}");
        assert!(
            results
                .iter()
                .all(|r| r.is_ok() || r.as_ref().unwrap_err() == "in use"),
            "round {round}: {results:?}"
        );
        let db = Database::open(&path, opts()).unwrap();
        db.check_integrity().unwrap();
    }
}

/// A first open killed while it built the file leaves at most the temporary file,
/// which the next first open replaces; never a file at the path that cannot open.
#[test]
fn a_first_open_killed_halfway_leaves_nothing_that_fails_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    std::fs::write(dir.path().join("k.db.creating"), [0xAB; 700]).unwrap();
    let db = Database::open(&path, opts()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut tx = db.begin();
    tx.put(t, b"k", b"v").unwrap();
    tx.commit().unwrap();
    drop(db);
    assert!(!dir.path().join("k.db.creating").exists());
    let db = Database::open(&path, opts()).unwrap();
    assert_eq!(rows(&db).len(), 1);
}

/// The log's segment size belongs to the files: a database made with one and opened
/// with another keeps its own. Opened with another, a cleanly closed database gave
/// `LogDamaged` ("restore from a backup"), and that failed open deleted the log, so
/// that it failed with the right size too.
#[test]
fn a_database_keeps_its_log_segment_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let with = |log_segment_bytes| Options {
        log_segment_bytes,
        ..opts()
    };
    let mut committed = BTreeMap::new();
    for (round, seg) in [64u64 << 10, 64 << 20, 128 << 10, 64 << 10]
        .into_iter()
        .enumerate()
    {
        let db = Database::open(&path, with(seg)).unwrap();
        let t = match db.table("t") {
            Ok(t) => t,
            Err(_) => db.create_table("t").unwrap(),
        };
        let mut tx = db.begin();
        for i in 0..300u32 {
            let k = (round as u32 * 1000 + i).to_be_bytes().to_vec();
            tx.put(t, &k, &[round as u8; 500]).unwrap();
            committed.insert(k, vec![round as u8; 500]);
        }
        tx.commit().unwrap();
        assert_eq!(rows(&db), committed, "round {round}");
        // Every other round ends in a crash, so the next open replays the log.
        if round % 2 == 1 {
            db.simulate_crash_on_drop();
        }
    }
    let db = Database::open(&path, with(1 << 20)).unwrap();
    assert_eq!(rows(&db), committed);
}

/// A link to a database whose target is missing (a volume not mounted) is not a
/// new database: the open fails and leaves the log and the link alone. It created
/// a database over the link, deleting the real one's log files.
#[test]
fn a_dangling_link_is_not_a_new_database() {
    let dir = tempfile::tempdir().unwrap();
    let vol = dir.path().join("vol");
    std::fs::create_dir(&vol).unwrap();
    let link = dir.path().join("x.db");
    drop(Database::open(vol.join("data.db"), opts()).unwrap());
    std::os::unix::fs::symlink(vol.join("data.db"), &link).unwrap();
    {
        let db = Database::open(&link, opts()).unwrap();
        let t = db.create_table("t").unwrap();
        let mut tx = db.begin();
        tx.put(t, b"k", b"v").unwrap();
        tx.commit().unwrap();
        db.simulate_crash_on_drop();
    }
    // Log files beside the link or in the volume (the log lies beside the file
    // the link leads to), wherever the volume is.
    let logs = |d: &Path| {
        let here = |d: &Path| {
            std::fs::read_dir(d)
                .unwrap()
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy().contains(".wal.")
                })
                .count()
        };
        here(d)
            + ["vol", "unmounted"]
                .iter()
                .map(|v| d.join(v))
                .filter(|v| v.is_dir())
                .map(|v| here(&v))
                .sum::<usize>()
    };
    let before = logs(dir.path());
    assert!(before > 0);
    std::fs::rename(&vol, dir.path().join("unmounted")).unwrap();
    let e = Database::open(&link, opts()).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("target is missing"), "{e}");
    assert_eq!(logs(dir.path()), before, "the log files are kept");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    std::fs::rename(dir.path().join("unmounted"), &vol).unwrap();
    let db = Database::open(&link, opts()).unwrap();
    assert_eq!(rows(&db).len(), 1);
    assert!(Database::open("", opts()).is_err(), "an empty path");
}

/// A first open on a full disk fails and leaves nothing behind: the file being built
/// (`<path>.creating`, here a link to `/dev/full`, where every write fails with "no
/// space left") is removed; it stayed, and with it the half-made file.
#[test]
fn a_first_open_on_a_full_disk_leaves_nothing() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    std::os::unix::fs::symlink("/dev/full", dir.path().join("t.db.creating")).unwrap();
    let r = Database::open(&path, opts());
    assert!(matches!(r, Err(Error::Io(_))), "{:?}", r.map(|_| ()));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The next open, with space, makes the database.
    drop(Database::open(&path, opts()).unwrap());
    assert!(path.is_file());
}

/// Rewrites both header copies of the file at `path` in the version 2 layout (no
/// segment size): version at 8..12, CRC-32 of 0..40 at 40..44.
fn downgrade_to_version_2(path: &Path) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    for off in [0u64, 256] {
        let mut b = [0u8; 56];
        f.read_exact_at(&mut b, off).unwrap();
        b[8..12].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32fast::hash(&b[0..40]);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
        b[44..].fill(0);
        f.write_all_at(&b, off).unwrap();
    }
    f.sync_all().unwrap();
}

/// Commits `rows` rows of 500 bytes to table `t` of a database made at `path` with
/// `segment` bytes per log segment, then crashes; returns the rows.
fn crashed_with_rows(path: &Path, segment: u64, rows: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Database::open(
        path,
        Options {
            log_segment_bytes: segment,
            ..opts()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let mut committed = BTreeMap::new();
    let mut tx = db.begin();
    for i in 0..rows {
        tx.put(t, &i.to_be_bytes(), &[7; 500]).unwrap();
        committed.insert(i.to_be_bytes().to_vec(), vec![7; 500]);
    }
    tx.commit().unwrap();
    db.simulate_crash_on_drop();
    committed
}

/// A file from before the header recorded the segment size (version 2) takes the
/// size its log files show, whatever the option says. It took the option: a log of
/// several 64 KiB segments opened with 1 MiB read as damaged; and a log of one
/// segment longer than the option, opened with it and killed before open's
/// checkpoint rewrote the header, had appended in the option's numbering and read
/// as damaged with every size ("a log segment file is short", 6 kills in 80).
#[test]
fn a_version_2_file_takes_the_segment_size_its_log_shows() {
    let dir = tempfile::tempdir().unwrap();
    let with = |log_segment_bytes| Options {
        log_segment_bytes,
        ..opts()
    };
    // Several segments.
    let path = dir.path().join("many.db");
    let committed = crashed_with_rows(&path, 64 << 10, 400);
    downgrade_to_version_2(&path);
    let db = Database::open(&path, with(1 << 20)).unwrap();
    assert_eq!(rows(&db), committed);
    drop(db);
    let db = Database::open(&path, with(128 << 10)).unwrap();
    assert_eq!(rows(&db), committed);
    drop(db);
    // One segment longer than the option, and the empty next segment that a killed
    // open appending in the option's numbering left.
    let path = dir.path().join("one.db");
    let committed = crashed_with_rows(&path, 1 << 20, 150);
    downgrade_to_version_2(&path);
    let seg0 = std::fs::metadata(dir.path().join("one.db.wal.00000000"))
        .unwrap()
        .len();
    assert!(seg0 > 64 << 10, "{seg0}");
    std::fs::write(dir.path().join("one.db.wal.00000001"), b"").unwrap();
    for seg in [64u64 << 10, 1 << 20, 64 << 20] {
        let db = Database::open(&path, with(seg)).unwrap();
        assert_eq!(rows(&db), committed, "opened with {seg}");
        db.simulate_crash_on_drop();
    }
}

/// `drop_table` while the calling thread's own transaction has the table open waits
/// for that transaction, which cannot end meanwhile: after the lock timeout it says
/// so (`TableInUse`, naming the table), where it said "lock wait timed out; abort the
/// transaction" of a call that has no transaction of the caller's.
#[test]
fn dropping_a_table_this_thread_uses_fails_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("d.db"),
        Options {
            lock_timeout: std::time::Duration::from_millis(50),
            ..opts()
        },
    )
    .unwrap();
    let t = db.create_table("orders").unwrap();
    let mut tx = db.begin();
    tx.put(t, b"k", b"v").unwrap();
    let e = db.drop_table(t).unwrap_err();
    assert!(
        matches!(&e, Error::TableInUse(name) if name == "orders"),
        "{e}"
    );
    tx.commit().unwrap();
    db.drop_table(t).unwrap();
    // An I/O error's message carries the OS error once: no `source` repeats it.
    let io = Error::Io(std::io::Error::other("disk on fire"));
    assert!(std::error::Error::source(&io).is_none());
    assert_eq!(io.to_string(), "i/o error: disk on fire");
}

/// A database opens through a symbolic link to it (its log beside it, named after
/// the file the link leads to); under a name its log is not named after (a hard
/// link), the error says so rather than calling the log damaged by a copy.
#[test]
fn a_database_opens_through_a_link_and_another_name_is_named_as_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let path = real.join("db");
    {
        let db = Database::open(&path, opts()).unwrap();
        let t = db.create_table("t").unwrap();
        let mut tx = db.begin();
        tx.put(t, b"k", b"v").unwrap();
        tx.commit().unwrap();
        db.checkpoint().unwrap();
    }
    let want: BTreeMap<Vec<u8>, Vec<u8>> = [(b"k".to_vec(), b"v".to_vec())].into();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    {
        let db = Database::open(&link, opts()).unwrap();
        assert_eq!(rows(&db), want);
        let t = db.table("t").unwrap();
        let mut tx = db.begin();
        tx.put(t, b"k2", b"v2").unwrap();
        tx.commit().unwrap();
    }
    // Written through the link, read under the file's own name: one log.
    let db = Database::open(&path, opts()).unwrap();
    assert_eq!(rows(&db).len(), 2);
    drop(db);
    let hard = dir.path().join("hard");
    std::fs::hard_link(&path, &hard).unwrap();
    match Database::open(&hard, opts()) {
        Err(e @ Error::LogDamaged { .. }) => {
            assert!(e.to_string().contains("named after the path"), "{e}")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened without its log"),
    }
    // Nothing changed: it still opens under its name.
    assert_eq!(rows(&Database::open(&path, opts()).unwrap()).len(), 2);
}
