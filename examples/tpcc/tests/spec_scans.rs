//! Range scans inside a speculative loop (`SpecRows`' tracked buckets), where
//! epochs insert and delete rows in the very ranges later epochs scan: the loop must
//! give what the same body run in order gives, on the in-memory store and on
//! btree-db, at 1, 2 and 4 threads, and with violations injected. TPC-C's Delivery
//! never has two epochs in one bucket, so its runs alone would not exercise the
//! merge of the store's rows with the loop's own inserts and deletes. (A file of its
//! own: injection is process-wide.)

use anyhow::Result;
use tls_runtime::{SpecVec, tls_loop};
use tpcc::codec::new_order_key;
use tpcc::engine::kv::journey::Grain;
use tpcc::engine::kv::spec::{SpecRows, with_spec_rows};
use tpcc::engine::kv::{KvOps, KvStore, KvTxn, SharedKv, Table};
use tpcc::engine::memory::MemoryKv;
use tpcc::engine::sequential;
use tpcc::engine::{Mode, Sync};

const N: usize = 240;
const BUCKETS: u8 = 4;

/// One iteration: inserts a row, deletes the first row of a bucket, or scans a
/// bucket; returns what it saw (a digest of the rows in order, or the key deleted).
fn step<T: KvOps>(tx: &mut T, i: usize) -> Result<u64> {
    if i.is_multiple_of(16) {
        // A slow iteration, so that the ones after it run speculatively ahead of
        // it however the runtime's policy judged the loop so far.
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_micros(300) {
            std::hint::spin_loop();
        }
    }
    let d = (i * 7 % usize::from(BUCKETS)) as u8 + 1;
    let (from, to) = (new_order_key(1, d, 0), new_order_key(1, d + 1, 0));
    match i % 5 {
        0 | 3 => {
            let o = (i * 37 % 500) as u32 + 1;
            let mut existing = Vec::new();
            if tx.get(Table::NewOrder, &new_order_key(1, d, o), &mut existing)? {
                tx.update(
                    Table::NewOrder,
                    &new_order_key(1, d, o),
                    &(i as u32).to_le_bytes(),
                )?;
            } else {
                tx.insert(
                    Table::NewOrder,
                    &new_order_key(1, d, o),
                    &(i as u32).to_le_bytes(),
                )?;
            }
            Ok(u64::from(o))
        }
        1 => {
            let mut first = None;
            tx.scan(Table::NewOrder, &from, Some(&to), |k, _| {
                first = Some(k.to_vec());
                Ok(false)
            })?;
            match first {
                Some(k) => {
                    tx.delete(Table::NewOrder, &k)?;
                    Ok(u64::from(u32::from_be_bytes(k[3..7].try_into()?)))
                }
                None => Ok(0),
            }
        }
        _ => {
            let mut digest = 0u64;
            tx.scan(Table::NewOrder, &from, Some(&to), |k, v| {
                for &b in k.iter().chain(v) {
                    digest = digest.wrapping_mul(1_000_003).wrapping_add(u64::from(b));
                }
                Ok(true)
            })?;
            Ok(digest)
        }
    }
}

#[tls_loop(threads = rows.threads())]
fn speculative<S: SharedKv>(rows: &SpecRows<'_, '_, S>, out: &SpecVec<u64>) -> Result<()> {
    for i in 0..N {
        let mut tx = rows;
        out.set(i, step(&mut tx, i)?);
    }
    Ok(())
}

/// Seeds each bucket with a few rows, then runs the loop once in order and once
/// speculatively (on a second, identical store): the outputs and the rows after.
fn compare<S: KvStore>(mut make: impl FnMut() -> S, threads: usize, context: &str) {
    let seed = |s: &mut S| {
        let mut tx = s.begin().unwrap();
        for d in 1..=BUCKETS {
            for o in (3..400).step_by(61) {
                tx.insert(Table::NewOrder, &new_order_key(1, d, o), b"seed")
                    .unwrap();
            }
        }
        tx.commit().unwrap();
    };
    let dump = |s: &mut S| {
        let mut rows = Vec::new();
        let mut tx = s.begin().unwrap();
        tx.scan(Table::NewOrder, &[], None, |k, v| {
            rows.push((k.to_vec(), v.to_vec()));
            Ok(true)
        })
        .unwrap();
        tx.commit().unwrap();
        rows
    };

    let mut in_order = make();
    seed(&mut in_order);
    let mut tx = in_order.begin().unwrap();
    let expected: Vec<u64> = (0..N).map(|i| step(&mut tx, i).unwrap()).collect();
    tx.commit().unwrap();
    let expected_rows = dump(&mut in_order);

    let mut spec = make();
    seed(&mut spec);
    let out = SpecVec::from(vec![0u64; N]);
    let mut tx = spec.begin().unwrap();
    with_spec_rows(
        &tx.share(),
        &[Table::NewOrder],
        &[(Table::NewOrder, 3)],
        Some(threads),
        Grain::Row,
        |rows| speculative(rows, &out),
    )
    .unwrap();
    tx.commit().unwrap();
    assert_eq!(out.into_vec(), expected, "{context}: outputs");
    assert_eq!(dump(&mut spec), expected_rows, "{context}: rows");
}

#[test]
fn scans_see_the_loops_own_inserts_and_deletes_in_order() {
    for inject in [0, 200_000] {
        tls_runtime::inject_violations(inject);
        for threads in [1, 2, 4] {
            let context = format!("{threads} threads, {inject} per million injected");
            compare(MemoryKv::new, threads, &format!("memory, {context}"));
            let dir = tempfile::tempdir().unwrap();
            let mut n = 0;
            compare(
                || {
                    n += 1;
                    let path = dir.path().join(format!("{n}.db"));
                    let e = sequential::create(
                        &path,
                        Sync::Off,
                        1,
                        tpcc::schema::Scale::SMALL,
                        Mode::Tls,
                    )
                    .unwrap();
                    e.into_store()
                },
                threads,
                &format!("btree-db, {context}"),
            );
        }
    }
    tls_runtime::inject_violations(0);
}

/// A scan of a written table that was not declared, or that leaves its bucket, is an
/// error, not an answer from the store alone.
#[test]
fn undeclared_and_wide_scans_are_refused() {
    let mut s = MemoryKv::new();
    let mut tx = s.begin().unwrap();
    let shared = tx.share();
    let err = with_spec_rows(
        &shared,
        &[Table::NewOrder],
        &[],
        Some(2),
        Grain::Row,
        |rows| {
            let mut tx = rows;
            tx.scan(
                Table::NewOrder,
                &new_order_key(1, 1, 0),
                Some(&new_order_key(1, 2, 0)),
                |_, _| Ok(true),
            )
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("without declaring the scan"),
        "{err:#}"
    );
    let err = with_spec_rows(
        &shared,
        &[Table::NewOrder],
        &[(Table::NewOrder, 3)],
        Some(2),
        Grain::Row,
        |rows| {
            let mut tx = rows;
            tx.scan(
                Table::NewOrder,
                &new_order_key(1, 1, 0),
                Some(&new_order_key(1, 3, 0)),
                |_, _| Ok(true),
            )
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("within one 3-byte key prefix"),
        "{err:#}"
    );
}
