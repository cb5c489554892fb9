//! Writes of a lent transaction that start from where a read ended (`LeafHint`):
//! correct after splits moved the key, and a hint from another transaction, table or
//! database is not followed.

use std::time::Duration;

mod common;
use common::{key, open};

#[test]
fn writes_from_where_a_read_ended_survive_splits_and_foreign_hints() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Duration::from_secs(5));
    let t = db.create_table("t").unwrap();
    let u = db.create_table("u").unwrap();
    let mut setup = db.begin();
    for i in 0..300u32 {
        setup.insert(t, &key(i * 10), &[1; 64]).unwrap();
        setup.insert(u, &key(i * 10), &[1; 64]).unwrap();
    }
    setup.commit().unwrap();

    // A hint from another transaction.
    let mut first = db.begin();
    let foreign = {
        let s = first.share();
        let mut out = Vec::new();
        s.get_for_update_at(u, &key(50), &mut out).unwrap().1
    };
    first.abort().unwrap();

    let mut txn = db.begin();
    {
        let s = txn.share();
        let mut out = Vec::new();
        let hints: Vec<_> = (0..300u32)
            .map(|i| s.get_for_update_at(t, &key(i * 10), &mut out).unwrap())
            .collect();
        let (_, in_u) = s.get_for_update_at(u, &key(50), &mut out).unwrap();
        // Splits move keys off the leaves the reads ended on.
        for i in 0..300u32 {
            s.insert(t, &key(i * 10 + 5), &[2; 200]).unwrap();
        }
        for (i, (found, at)) in hints.into_iter().enumerate() {
            assert!(found);
            s.update_at(t, &key(i as u32 * 10), &[3; 80], at).unwrap();
        }
        // A hint for table `u` or from another transaction is not used for `t`.
        s.update_at(t, &key(50), &[4; 80], in_u).unwrap();
        s.update_at(t, &key(60), &[5; 80], foreign).unwrap();
    }
    txn.commit().unwrap();
    db.check_integrity().unwrap();
    let mut check = db.begin();
    let mut out = Vec::new();
    for i in 0..300u32 {
        assert!(check.get_into(t, &key(i * 10), &mut out).unwrap());
        let want = match i {
            5 => vec![4; 80],
            6 => vec![5; 80],
            _ => vec![3; 80],
        };
        assert_eq!(out, want, "key {}", i * 10);
        assert!(check.get_into(u, &key(i * 10), &mut out).unwrap());
        assert_eq!(out, vec![1; 64]);
    }
    check.commit().unwrap();
    assert_eq!(db.pins_and_locks(), (0, 0));
}

/// A hint from another database whose transaction and table ids are this one's (two
/// databases that ran the same DDL) is not followed: it led into another tree's leaf
/// of this database, which the write changed, unlocked, and an abort then "undid"
/// with the other row's value.
#[test]
fn a_hint_from_another_database_is_ignored() {
    for abort in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a_dir).unwrap();
        std::fs::create_dir_all(&b_dir).unwrap();
        let (a, b) = (
            open(&a_dir, Duration::from_secs(5)),
            open(&b_dir, Duration::from_secs(5)),
        );
        let (ax, _) = (a.create_table("x").unwrap(), a.create_table("y").unwrap());
        let (bx, by) = (b.create_table("x").unwrap(), b.create_table("y").unwrap());
        assert_eq!(ax, bx);
        // In `a`, `x`'s leaves hold the key; in `b`, `y`'s do, and `x` holds it alone.
        let mut t = a.begin();
        for i in 0..1000u32 {
            t.put(ax, &key(i), &[1; 32]).unwrap();
        }
        t.commit().unwrap();
        let mut t = b.begin();
        for i in 0..1000u32 {
            t.put(by, &key(i), &[2; 32]).unwrap();
        }
        t.put(bx, &key(500), &[3; 8]).unwrap();
        t.commit().unwrap();
        let (mut ta, mut tb) = (a.begin(), b.begin());
        assert_eq!(ta.id(), tb.id(), "the case needs equal transaction ids");
        {
            let (sa, sb) = (ta.share(), tb.share());
            let mut out = Vec::new();
            let (_, foreign) = sa.get_for_update_at(ax, &key(500), &mut out).unwrap();
            sb.update_at(bx, &key(500), &[4; 8], foreign).unwrap();
        }
        ta.commit().unwrap();
        if abort {
            tb.abort().unwrap();
        } else {
            tb.commit().unwrap();
        }
        let mut t = b.begin();
        let x = if abort { vec![3; 8] } else { vec![4; 8] };
        assert_eq!(t.get(bx, &key(500)).unwrap(), Some(x), "abort: {abort}");
        assert_eq!(
            t.get(by, &key(500)).unwrap(),
            Some(vec![2; 32]),
            "abort: {abort}"
        );
        t.commit().unwrap();
    }
}
