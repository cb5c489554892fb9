//! The B-link tree against `BTreeMap` as a model under random operation
//! sequences, with small pages so trees reach height three and more.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use btree_db::{Database, Error, Options, SyncMode, TableId};
use proptest::prelude::*;

fn small_db(dir: &tempfile::TempDir, pool_pages: usize) -> Arc<Database> {
    Database::open(
        dir.path().join("t.db"),
        Options {
            page_size: 512,
            pool_pages,
            sync: SyncMode::Off,
            ..Options::default()
        },
    )
    .unwrap()
}

#[derive(Clone, Debug)]
enum Op {
    Put(u16, u8, u8),
    Insert(u16, u8),
    Delete(u16),
    DeleteRange(u16, u16),
    Scan(u16, u16),
    Get(u16),
    Abort(u16, u8),
}

fn key(k: u16) -> Vec<u8> {
    // A variable-length key: the number plus a suffix that depends on it.
    let mut v = k.to_be_bytes().to_vec();
    v.extend(std::iter::repeat_n(b'k', (k % 7) as usize));
    v
}

fn value(seed: u8, len: u8) -> Vec<u8> {
    (0..len % 60).map(|i| seed.wrapping_add(i)).collect()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u16>(), any::<u8>(), any::<u8>()).prop_map(|(k, s, l)| Op::Put(k % 3000, s, l)),
        2 => (any::<u16>(), any::<u8>()).prop_map(|(k, s)| Op::Insert(k % 3000, s)),
        2 => any::<u16>().prop_map(|k| Op::Delete(k % 3000)),
        1 => (any::<u16>(), 0u16..300).prop_map(|(k, n)| Op::DeleteRange(k % 3000, n)),
        1 => (any::<u16>(), 0u16..500).prop_map(|(k, n)| Op::Scan(k % 3000, n)),
        2 => any::<u16>().prop_map(|k| Op::Get(k % 3000)),
        1 => (any::<u16>(), any::<u8>()).prop_map(|(k, s)| Op::Abort(k % 3000, s)),
    ]
}

fn check_all(db: &Database, t: TableId, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut txn = db.begin();
    let mut cur = txn.scan(t, Bound::Unbounded, Bound::Unbounded).unwrap();
    let mut got = Vec::new();
    while let Some(kv) = cur.next().unwrap() {
        got.push(kv);
    }
    cur.close();
    txn.commit().unwrap();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "scan differs from the model");
    assert_eq!(db.check_integrity().unwrap(), model.len() as u64);
}

fn run(ops: Vec<Op>, bulk: u16) {
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(&dir, 64);
    let t = db.create_table("t").unwrap();
    let mut model = BTreeMap::new();
    // A bulk load first so the tree is tall before the random operations.
    let mut txn = db.begin();
    for i in 0..bulk {
        let k = key(i.wrapping_mul(7919) % 3000);
        let v = value(i as u8, i as u8);
        txn.put(t, &k, &v).unwrap();
        model.insert(k, v);
    }
    txn.commit().unwrap();
    let height = db.path_to(t, &key(0)).unwrap().len();
    assert!(height >= 3, "bulk load gave height {height}");
    for op in ops {
        let mut txn = db.begin();
        match op {
            Op::Put(k, s, l) => {
                let (k, v) = (key(k), value(s, l));
                txn.put(t, &k, &v).unwrap();
                model.insert(k, v);
            }
            Op::Insert(k, s) => {
                let (k, v) = (key(k), value(s, s));
                match txn.insert(t, &k, &v) {
                    Ok(()) => assert!(model.insert(k, v).is_none()),
                    Err(Error::DuplicateKey) => assert!(model.contains_key(&k)),
                    Err(e) => panic!("{e}"),
                }
            }
            Op::Delete(k) => {
                let k = key(k);
                assert_eq!(txn.delete(t, &k).unwrap(), model.remove(&k).is_some());
            }
            Op::DeleteRange(k, n) => {
                let lo = key(k);
                let doomed: Vec<Vec<u8>> = model
                    .range(lo.clone()..)
                    .take(n as usize)
                    .map(|(k, _)| k.clone())
                    .collect();
                for d in &doomed {
                    assert!(txn.delete(t, d).unwrap());
                    model.remove(d);
                }
            }
            Op::Scan(k, n) => {
                let lo = key(k);
                let hi = key(k.saturating_add(n));
                let mut cur = txn
                    .scan(t, Bound::Included(&lo), Bound::Excluded(&hi))
                    .unwrap();
                let mut got = Vec::new();
                while let Some(kv) = cur.next().unwrap() {
                    got.push(kv);
                }
                cur.close();
                let want: Vec<_> = model
                    .range(lo..hi)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want);
            }
            Op::Get(k) => {
                let k = key(k);
                assert_eq!(txn.get(t, &k).unwrap().as_ref(), model.get(&k));
            }
            Op::Abort(k, s) => {
                for i in 0..40u16 {
                    let kk = key(k.wrapping_add(i * 13) % 3000);
                    if i % 3 == 0 {
                        txn.delete(t, &kk).unwrap();
                    } else {
                        txn.put(t, &kk, &value(s, i as u8 * 5)).unwrap();
                    }
                }
                txn.abort().unwrap();
                continue;
            }
        }
        txn.commit().unwrap();
    }
    check_all(&db, t, &model);
    // Reopen: everything committed survives a clean close.
    drop(db);
    let db = small_db(&dir, 64);
    let t = db.table("t").unwrap();
    check_all(&db, t, &model);
}

proptest! {
    // BTREE_DB_SOAK=1 runs ten times as many sequences.
    #![proptest_config(ProptestConfig {
        cases: if std::env::var_os("BTREE_DB_SOAK").is_some() { 240 } else { 24 },
        ..ProptestConfig::default()
    })]
    #[test]
    fn blink_tree_matches_btreemap(ops in proptest::collection::vec(op(), 1..300), bulk in 1500u16..2600) {
        run(ops, bulk);
    }
}

#[test]
fn tree_reaches_height_three() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(&dir, 256);
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..3000u16 {
        txn.put(t, &key(i), &value(i as u8, 40)).unwrap();
    }
    txn.commit().unwrap();
    let path = db.path_to(t, &key(1500)).unwrap();
    assert!(path.len() >= 3, "height {}", path.len());
    assert_eq!(db.check_integrity().unwrap(), 3000);
}

#[test]
fn maximum_size_entries_split_until_they_fit() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(&dir, 64);
    let t = db.create_table("t").unwrap();
    let lim = db.limits();
    let mut model = BTreeMap::new();
    let mut s = 0x1234_5678u64;
    for round in 0..3000u32 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let klen = 1 + (s % lim.max_key as u64) as usize;
        let k: Vec<u8> = (0..klen).map(|i| (s >> (i % 8)) as u8).collect();
        // Mostly maximum-size entries, so a split half may still be too full.
        let vlen = if round % 4 == 0 {
            (s >> 20) as usize % (lim.max_entry - klen + 1)
        } else {
            lim.max_entry - klen
        };
        let v = vec![round as u8; vlen];
        let mut txn = db.begin();
        txn.put(t, &k, &v).unwrap();
        txn.commit().unwrap();
        model.insert(k, v);
    }
    check_all(&db, t, &model);
}
