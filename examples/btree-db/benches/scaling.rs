//! How the database scales from 1 to 2 threads, measured side by side in
//! one run (the machine is shared and its second core comes and goes, so
//! each figure is the best of several runs):
//!
//! * **lookups**: random point lookups in a table of 1 million random u32
//!   keys (loaded once), `BENCH_BATCH` gets per read transaction;
//! * **lookups through one shared transaction**: the same lookups, `BENCH_BATCH`
//!   per transaction, but the threads share each transaction (`Txn::share`, as
//!   a speculative loop inside a transaction does): thread `t` of `n` does the
//!   lookups `t, t + n, ...` of each batch. The gap to the line above is the
//!   price of the lent transaction's shared state;
//! * **updates**: read-for-update and update of random rows of 300 bytes
//!   (TPC-C's stock rows are about that long) in a table of 100,000, 2,000 per
//!   transaction, through one shared transaction (thread `t` of `n` takes
//!   updates `t, t + n, ...`) and in separate transactions: the write path
//!   (record lock, leaf latch, log append) on two threads;
//! * **inserts**: the MxKernel workload, 5 million random u32 keys inserted
//!   into a fresh table (`BENCH_BATCH` puts per transaction, `sync = Off`),
//!   the threads inserting disjoint key streams.
//!
//! `cargo bench -p btree-db --bench scaling`. Environment: `BENCH_KEYS`
//! (lookup table size, default 1,000,000), `BENCH_INSERTS` (default
//! 5,000,000), `BENCH_LOOKUPS` (lookups per run, default 2,000,000),
//! `BENCH_UPDATES` (updates per run, default 200,000), `BENCH_BATCH`
//! (operations per transaction, default 100), `BENCH_RUNS`
//! (default 5), `BENCH_ONLY` (`lookups`, `updates` or `inserts`).

use std::sync::Arc;
use std::time::Instant;

use btree_db::{Database, Options, SharedTxn, SyncMode, TableId};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// A xorshift stream of u32 keys.
fn keys(n: usize, seed: u64) -> Vec<u32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u32
        })
        .collect()
}

fn open(dir: &tempfile::TempDir, keys: usize) -> Arc<Database> {
    Database::open(
        dir.path().join("bench.db"),
        Options {
            page_size: 4096,
            // Everything stays resident: this measures the CPU path.
            pool_pages: keys / 60 + 8192,
            sync: SyncMode::Off,
            checkpoint_log_bytes: 0,
            ..Options::default()
        },
    )
    .expect("open")
}

/// Runs `work(thread)` on `threads` threads at once; returns the seconds.
fn timed(threads: usize, work: impl Fn(usize) + Sync) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let work = &work;
            s.spawn(move || work(t));
        }
    });
    start.elapsed().as_secs_f64()
}

/// The loaded key that random probe `r` looks up.
fn probed_key(loaded: &[u32], r: u32) -> [u8; 4] {
    loaded[r as usize % loaded.len()].to_be_bytes()
}

fn lookups(
    db: &Database,
    table: TableId,
    loaded: &[u32],
    n: usize,
    threads: usize,
    batch: usize,
) -> f64 {
    let per = n / threads;
    let secs = timed(threads, |t| {
        let probe = keys(per, 0xA076_1D64_78BD_642F ^ ((t as u64 + 1) * 7919));
        let mut out = Vec::new();
        let mut found = 0usize;
        for chunk in probe.chunks(batch) {
            let mut txn = db.begin();
            for &r in chunk {
                found += txn
                    .get_into(table, &probed_key(loaded, r), &mut out)
                    .expect("get") as usize;
            }
            txn.commit().expect("commit");
        }
        assert_eq!(found, per, "every probed key was loaded");
    });
    (per * threads) as f64 / secs
}

/// Runs `probe` in transactions of `batch`, each lent to `threads` threads at
/// once (`Txn::share`, as a speculative loop inside a transaction does), thread
/// `t` doing `work(shared, t, batch)` (its share: probes `t, t + threads, ...`);
/// returns the sum of what the calls returned and the probes per second.
fn in_shared_txns(
    db: &Database,
    probe: &[u32],
    batch: usize,
    threads: usize,
    work: impl Fn(&SharedTxn<'_, '_>, usize, &[u32]) -> usize + Sync,
) -> (usize, f64) {
    let start = Instant::now();
    let mut total = 0usize;
    for chunk in probe.chunks(batch) {
        let mut txn = db.begin();
        {
            let shared = txn.share();
            let (shared, work) = (&shared, &work);
            total += std::thread::scope(|s| {
                let parts: Vec<_> = (0..threads)
                    .map(|t| s.spawn(move || work(shared, t, chunk)))
                    .collect();
                parts
                    .into_iter()
                    .map(|p| p.join().expect("thread"))
                    .sum::<usize>()
            });
        }
        txn.commit().expect("commit");
    }
    (total, probe.len() as f64 / start.elapsed().as_secs_f64())
}

fn shared_lookups(
    db: &Database,
    table: TableId,
    loaded: &[u32],
    n: usize,
    threads: usize,
    batch: usize,
) -> f64 {
    let probe = keys(n, 0xA076_1D64_78BD_642F);
    let (found, rate) = in_shared_txns(db, &probe, batch, threads, |shared, t, chunk| {
        let mut out = Vec::new();
        chunk
            .iter()
            .skip(t)
            .step_by(threads)
            .map(|&r| {
                shared
                    .get_into(table, &probed_key(loaded, r), &mut out)
                    .expect("get") as usize
            })
            .sum()
    });
    assert_eq!(found, n, "every probed key was loaded");
    rate
}

/// A row of the updates workload: 300 bytes that depend on `k`.
fn row(k: u32) -> [u8; 300] {
    let mut r = [0u8; 300];
    for (i, b) in r.iter_mut().enumerate() {
        *b = (k as usize + i * 7) as u8;
    }
    r
}

fn shared_updates(db: &Database, table: TableId, rows: u32, n: usize, threads: usize) -> f64 {
    let probe = keys(n, 0x5851_F42D_4C95_7F2D);
    let (updated, rate) = in_shared_txns(db, &probe, 2000, threads, |shared, t, chunk| {
        let mut out = Vec::new();
        let mine = chunk.iter().skip(t).step_by(threads);
        for &r in mine.clone() {
            // Read for update and written back changed, as New Order does to a
            // stock row.
            let key = (r % rows).to_be_bytes();
            assert!(shared.get_for_update(table, &key, &mut out).expect("get"));
            out[0] = out[0].wrapping_add(1);
            shared.update(table, &key, &out).expect("update");
        }
        mine.count()
    });
    assert_eq!(updated, n);
    rate
}

fn separate_updates(db: &Database, table: TableId, rows: u32, n: usize, threads: usize) -> f64 {
    let per = n / threads;
    let secs = timed(threads, |t| {
        let probe = keys(per, 0x5851_F42D_4C95_7F2D ^ ((t as u64 + 1) * 7919));
        let mut out = Vec::new();
        for chunk in probe.chunks(2000) {
            let mut txn = db.begin();
            for &r in chunk {
                // Each thread its own rows: no lock waits between the two.
                let k = (r % (rows / threads as u32)) * threads as u32 + t as u32;
                let key = k.to_be_bytes();
                assert!(txn.get_for_update(table, &key, &mut out).expect("get"));
                out[0] = out[0].wrapping_add(1);
                txn.update(table, &key, &out).expect("update");
            }
            txn.commit().expect("commit");
        }
    });
    (per * threads) as f64 / secs
}

fn inserts(n: usize, threads: usize, batch: usize) -> f64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, n);
    let table = db.create_table("kv").expect("create");
    let per = n / threads;
    let work: Vec<Vec<u32>> = (0..threads)
        .map(|t| keys(per, 0x9E37_79B9_7F4A_7C15 ^ ((t as u64 + 1) * 7919)))
        .collect();
    let secs = timed(threads, |t| {
        for chunk in work[t].chunks(batch) {
            let mut txn = db.begin();
            for &k in chunk {
                txn.put(table, &k.to_be_bytes(), &k.wrapping_mul(31).to_le_bytes())
                    .expect("put");
            }
            txn.commit().expect("commit");
        }
    });
    assert!(db.check_integrity().expect("integrity") > 0);
    (per * threads) as f64 / secs
}

/// Best of `runs` for 1 and 2 threads, alternating so both see the same
/// machine state; prints one line per workload.
fn compare(name: &str, runs: usize, mut run: impl FnMut(usize) -> f64) {
    let (mut one, mut two) = (0f64, 0f64);
    for _ in 0..runs {
        one = one.max(run(1));
        two = two.max(run(2));
    }
    println!("{name:<34} {:>12.0} {:>12.0} {:>8.2}x", one, two, two / one);
}

fn main() {
    let runs = env("BENCH_RUNS", 5);
    let batch = env("BENCH_BATCH", 100).max(1);
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    println!(
        "best of {runs} runs, {batch} operations per transaction, sync off, pool holds everything"
    );
    println!(
        "{:<34} {:>12} {:>12} {:>9}",
        "workload (ops/s)", "1 thread", "2 threads", "2 over 1"
    );
    if only.is_empty() || only == "lookups" {
        let n = env("BENCH_KEYS", 1_000_000);
        let probes = env("BENCH_LOOKUPS", 2_000_000);
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(&dir, n);
        let table = db.create_table("kv").expect("create");
        let mut loaded = keys(n, 0x2545_F491_4F6C_DD1D);
        loaded.sort_unstable();
        loaded.dedup();
        for chunk in loaded.chunks(1000) {
            let mut txn = db.begin();
            for &k in chunk {
                txn.put(table, &k.to_be_bytes(), &k.to_le_bytes())
                    .expect("load");
            }
            txn.commit().expect("commit");
        }
        compare(
            &format!("random lookups, {} keys", loaded.len()),
            runs,
            |t| lookups(&db, table, &loaded, probes, t, batch),
        );
        // Threads are spawned per transaction here (a scope per batch), which the
        // speculative loop's pool does not pay: larger batches keep that apart.
        let shared_batch = batch.max(2000);
        compare(
            &format!("  through one shared txn, {shared_batch}/txn"),
            runs,
            |t| shared_lookups(&db, table, &loaded, probes / 4, t, shared_batch),
        );
        compare(&format!("  separate txns, {shared_batch}/txn"), runs, |t| {
            lookups(&db, table, &loaded, probes / 4, t, shared_batch)
        });
    }
    if only.is_empty() || only == "updates" {
        let rows = 100_000u32;
        let n = env("BENCH_UPDATES", 200_000);
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(&dir, rows as usize * 8);
        let table = db.create_table("rows").expect("create");
        for chunk in (0..rows).collect::<Vec<_>>().chunks(1000) {
            let mut txn = db.begin();
            for &k in chunk {
                txn.put(table, &k.to_be_bytes(), &row(k)).expect("load");
            }
            txn.commit().expect("commit");
        }
        compare(
            &format!("random updates, {rows} rows of 300 B"),
            runs,
            |t| separate_updates(&db, table, rows, n, t),
        );
        compare("  through one shared txn, 2000/txn", runs, |t| {
            shared_updates(&db, table, rows, n / 4, t)
        });
    }
    if only.is_empty() || only == "inserts" {
        let n = env("BENCH_INSERTS", 5_000_000);
        compare(&format!("random inserts, {n} keys"), runs, |t| {
            inserts(n, t, batch)
        });
    }
}
