//! Tables and indexes made and dropped: a table's indexes go with it, in the
//! catalog on disk as in memory.

use btree_db::{Database, Error, Options, SyncMode, TableKind};

fn open(path: &std::path::Path) -> std::sync::Arc<Database> {
    Database::open(
        path,
        Options {
            sync: SyncMode::Off,
            ..Options::default()
        },
    )
    .unwrap()
}

/// Dropping a table drops its indexes (they named its id, which a later table may
/// take), and no other table's; after a reopen too.
#[test]
fn a_table_is_dropped_with_its_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    {
        let db = open(&path);
        let t = db.create_table("t").unwrap();
        let other = db.create_table("other").unwrap();
        let by_x = db.create_index("t_by_x", t).unwrap();
        db.create_index("t_by_y", t).unwrap();
        db.create_index("other_by_x", other).unwrap();
        let mut txn = db.begin();
        for i in 0..500u32 {
            txn.put(t, &i.to_be_bytes(), b"row").unwrap();
            txn.put(by_x, &i.to_be_bytes(), b"").unwrap();
        }
        txn.commit().unwrap();
        db.drop_table(t).unwrap();
        let names =
            |db: &Database| -> Vec<String> { db.tables().into_iter().map(|i| i.name).collect() };
        assert_eq!(names(&db), ["other", "other_by_x"]);
        assert!(matches!(db.table("t_by_x"), Err(Error::UnknownTable(_))));
        let mut txn = db.begin();
        assert!(matches!(
            txn.put(by_x, b"a", b""),
            Err(Error::UnknownTableId(_))
        ));
        txn.abort().unwrap();
        // The ids may come back, for new tables only: no index names the new one.
        let u = db.create_table("u").unwrap();
        assert_eq!(names(&db), ["other", "other_by_x", "u"]);
        assert!(
            db.tables()
                .iter()
                .all(|i| i.kind != TableKind::Index { table: u })
        );
        db.check_integrity().unwrap();
    }
    let db = open(&path);
    let names: Vec<String> = db.tables().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["other", "other_by_x", "u"]);
    db.check_integrity().unwrap();
}

/// An index in use keeps its table from being dropped, and nothing is dropped.
#[test]
fn a_table_whose_index_is_in_use_is_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("t.db"),
        Options {
            sync: SyncMode::Off,
            lock_timeout: std::time::Duration::from_millis(50),
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let idx = db.create_index("t_idx", t).unwrap();
    let db2 = db.clone();
    let (opened, release) = (
        std::sync::mpsc::channel::<()>(),
        std::sync::mpsc::channel::<()>(),
    );
    let user = std::thread::spawn(move || {
        let mut txn = db2.begin();
        txn.put(idx, b"k", b"").unwrap();
        opened.0.send(()).unwrap();
        release.1.recv().unwrap();
        txn.commit().unwrap();
    });
    opened.1.recv().unwrap();
    match db.drop_table(t) {
        Err(Error::TableInUse(name)) => assert_eq!(name, "t_idx"),
        other => panic!("{other:?}"),
    }
    assert_eq!(db.tables().len(), 2);
    release.0.send(()).unwrap();
    user.join().unwrap();
    db.drop_table(t).unwrap();
    assert!(db.tables().is_empty());
}
