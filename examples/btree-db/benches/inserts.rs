//! The MxKernel seed workload: random 32-bit key / value inserts into the
//! B-link tree with 1 and 2 threads, against `BTreeMap` behind a `Mutex`.
//!
//! `cargo bench -p btree-db --bench inserts` runs 5 million keys;
//! `BENCH_KEYS=200000` (or a first argument) runs fewer. Each transaction
//! inserts `BENCH_BATCH` keys (default 100) with `sync = Off`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use btree_db::{Database, Options, SyncMode};

fn keys(n: usize, seed: u64) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u32
        })
        .collect()
}

fn run_db(n: usize, threads: usize, batch: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("bench.db"),
        Options {
            page_size: 4096,
            pool_pages: (n / 80).max(1024) + 4096,
            sync: SyncMode::Off,
            checkpoint_log_bytes: 0,
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("kv").unwrap();
    let per = n / threads;
    let work: Vec<Vec<u32>> = (0..threads)
        .map(|i| keys(per, 0x9E37_79B9_7F4A_7C15 ^ ((i as u64 + 1) * 7919)))
        .collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for ks in &work {
            let db = &db;
            s.spawn(move || {
                for chunk in ks.chunks(batch) {
                    let mut txn = db.begin();
                    for &k in chunk {
                        txn.put(t, &k.to_be_bytes(), &k.wrapping_mul(31).to_le_bytes())
                            .unwrap();
                    }
                    txn.commit().unwrap();
                }
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    assert!(db.check_integrity().unwrap() > 0);
    (per * threads) as f64 / secs
}

fn run_map(n: usize, threads: usize) -> f64 {
    let map = Arc::new(Mutex::new(BTreeMap::new()));
    let per = n / threads;
    let work: Vec<Vec<u32>> = (0..threads)
        .map(|i| keys(per, 0x9E37_79B9_7F4A_7C15 ^ ((i as u64 + 1) * 7919)))
        .collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for ks in &work {
            let map = &map;
            s.spawn(move || {
                for &k in ks {
                    map.lock().unwrap().insert(k, k.wrapping_mul(31));
                }
            });
        }
    });
    (per * threads) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .or_else(|| {
            std::env::var("BENCH_KEYS")
                .ok()
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(5_000_000);
    let batch: usize = std::env::var("BENCH_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    println!("random u32 inserts: {n} keys, {batch} per transaction, sync off");
    println!(
        "{:<28} {:>8} {:>14} {:>10}",
        "engine", "threads", "ops/s", "vs map"
    );
    // BENCH_THREADS=2 runs only that thread count (for profiling).
    let counts: Vec<usize> = match std::env::var("BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(t) => vec![t],
        None => vec![1, 2],
    };
    for threads in counts {
        let map = run_map(n, threads);
        let db = run_db(n, threads, batch);
        println!(
            "{:<28} {:>8} {:>14.0} {:>10}",
            "BTreeMap + Mutex", threads, map, "1.00"
        );
        println!(
            "{:<28} {:>8} {:>14.0} {:>10.2}",
            "btree-db B-link tree",
            threads,
            db,
            db / map
        );
    }
}
