//! The log cannot be written for a while (a full disk; here, a directory where the
//! next log segment file goes): a commit then says it took effect but is not durable,
//! and once the log can be written again nothing is lost.

use std::ops::Bound;

use btree_db::{Database, Error, Options, SyncMode};

fn opts() -> Options {
    Options {
        sync: SyncMode::Full,
        checkpoint_log_bytes: 0,
        log_segment_bytes: 64 << 10,
        ..Options::default()
    }
}

fn count(db: &Database) -> usize {
    let t = db.table("t").unwrap();
    let mut tx = db.begin();
    let mut c = tx.scan(t, Bound::Unbounded, Bound::Unbounded).unwrap();
    let mut n = 0;
    while c.next().unwrap().is_some() {
        n += 1;
    }
    c.close();
    n
}

/// A commit whose log write failed returned the I/O error although the transaction
/// had taken effect (its rows visible, and kept after a crash: a program that retried
/// it applied it twice); and the log bytes that failed to be written were dropped, so
/// the next successful write left a hole in the log, where recovery ended it.
#[test]
fn a_commit_the_log_could_not_keep_took_effect_and_is_kept_once_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let blocker = dir.path().join("t.db.wal.00000001");
    let row = vec![7u8; 900];
    let (mut committed, mut not_durable) = (0usize, 0usize);
    {
        let db = Database::open(&path, opts()).unwrap();
        let t = db.create_table("t").unwrap();
        db.checkpoint().unwrap();
        // The second log segment cannot be created.
        std::fs::create_dir(&blocker).unwrap();
        for i in 0..200u32 {
            let mut tx = db.begin();
            tx.put(t, &i.to_be_bytes(), &row).unwrap();
            match tx.commit() {
                Ok(()) => committed += 1,
                Err(Error::CommitNotDurable { cause }) => {
                    assert!(!cause.is_empty());
                    not_durable += 1;
                }
                Err(e) => panic!("commit {i}: {e}"),
            }
        }
        assert!(not_durable > 0, "the log never reached the blocked segment");
        assert_eq!(
            count(&db),
            200,
            "every transaction took effect, durable or not"
        );
        // The log can be written again: the next commit writes what failed before it.
        std::fs::remove_dir(&blocker).unwrap();
        let mut tx = db.begin();
        tx.put(t, b"after", b"the disk came back").unwrap();
        tx.commit().unwrap();
        db.simulate_crash_on_drop();
    }
    let db = Database::open(&path, opts()).unwrap();
    assert_eq!(
        count(&db),
        201,
        "{committed} committed, {not_durable} not durable, then one more"
    );
    db.check_integrity().unwrap();
}
