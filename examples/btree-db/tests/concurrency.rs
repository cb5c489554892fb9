//! Concurrency: splits (root and non-root) under concurrent readers, and
//! scans against concurrent writers checked for serializability.
//!
//! * `concurrent_root_and_nonroot_splits`: many rounds of a fresh table with
//!   512-byte pages, 2, 4 or 8 writer threads each putting its own keys
//!   (root splits, three levels), while a reader `get`s keys already
//!   committed and a scanner scans the table. A committed key that reads as
//!   missing, a wrong value, keys out of order, or any error fails.
//!   After each round every key is there, `check_integrity` counts them and a
//!   full scan returns exactly them in order.
//! * `scans_see_consistent_sums`: four accounts summing to 400; writers move
//!   money between two accounts in one transaction (some then roll back), a
//!   churn thread inserts and deletes other rows between the accounts
//!   (splits under the scans), readers sum the accounts with a scan (and
//!   with gets) in one transaction: every sum must be 400.
//!
//! Everything is bounded: a watchdog aborts the process with a message if a
//! test stops making progress (a deadlock or a livelock must fail CI, not
//! hang it).

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use btree_db::{Database, Error, Options, SyncMode};

/// Aborts the process if no progress is reported for `stall`, or if the
/// test runs longer than `total`.
struct Watchdog {
    done: Arc<AtomicBool>,
    progress: Arc<AtomicU64>,
    status: Arc<Mutex<String>>,
}

impl Watchdog {
    fn start(name: &'static str, stall: Duration, total: Duration) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(AtomicU64::new(0));
        let status = Arc::new(Mutex::new(String::from("starting")));
        {
            let (done, progress, status) = (done.clone(), progress.clone(), status.clone());
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut last = progress.load(Ordering::Relaxed);
                let mut last_change = Instant::now();
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    let p = progress.load(Ordering::Relaxed);
                    if p != last {
                        last = p;
                        last_change = Instant::now();
                    }
                    if last_change.elapsed() > stall || start.elapsed() > total {
                        if done.load(Ordering::Relaxed) {
                            return;
                        }
                        let st = status
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .clone();
                        eprintln!(
                            "\n{name}: HANG: no progress for {:.1?} ({:.1?} since the start; limit \
                             {stall:?} without progress, {total:?} in all) while: {st}\n\
                             aborting the test process",
                            last_change.elapsed(),
                            start.elapsed()
                        );
                        std::process::abort();
                    }
                }
            });
        }
        Watchdog {
            done,
            progress,
            status,
        }
    }

    fn tick(&self) -> Arc<AtomicU64> {
        self.progress.clone()
    }

    fn set_status(&self, s: String) {
        *self.status.lock().unwrap_or_else(PoisonError::into_inner) = s;
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// The first failures seen by any thread; `stop` tells every thread to quit.
#[derive(Default)]
struct Failures {
    list: Mutex<Vec<String>>,
    stop: AtomicBool,
}

impl Failures {
    fn add(&self, msg: String) {
        let mut l = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if l.len() < 20 {
            l.push(msg);
        }
        self.stop.store(true, Ordering::Relaxed);
    }
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    fn check(&self, what: &str) {
        let l = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if !l.is_empty() {
            panic!("{what}: {} failures:\n  {}", l.len(), l.join("\n  "));
        }
    }
}

// ---------------------------------------------------------------------------
// Concurrent splits.

const SPLIT_ROUNDS: u32 = 300;
/// Keys per round (all threads together): with 512-byte pages, enough for
/// two root splits (three levels) and many leaf and branch splits.
const SPLIT_KEYS: u32 = 1200;

fn split_key(i: u32) -> [u8; 4] {
    // Spread: neighbouring ids of different threads land in one leaf.
    i.wrapping_mul(2_654_435_761).rotate_left(7).to_be_bytes()
}

fn split_value(i: u32) -> Vec<u8> {
    let len = 12 + (i % 23) as usize;
    (0..len).map(|b| (i as usize + b * 31) as u8).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One round: `threads` writers on a fresh table, a reader and a scanner.
fn split_round(round: u32, threads: u32, fails: &Arc<Failures>, tick: &Arc<AtomicU64>) {
    let dir = tempfile::tempdir().unwrap();
    let small_pool = round % 4 == 3;
    let db = Database::open(
        dir.path().join("s.db"),
        Options {
            page_size: 512,
            // Every fourth round: a pool smaller than the tree (evictions and
            // write-backs during splits) and checkpoints while it runs.
            pool_pages: if small_pool { 64 } else { 4096 },
            sync: SyncMode::Off,
            lock_timeout: Duration::from_secs(10),
            checkpoint_log_bytes: if small_pool { 128 << 10 } else { 0 },
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    // Committed key ids, in commit order.
    let committed: Arc<Mutex<Vec<u32>>> = Arc::new(Mutex::new(Vec::new()));
    let writers_left = Arc::new(AtomicU64::new(threads as u64));
    let ascending = round % 2 == 1;
    let where_ = |what: &str| {
        format!(
            "round {round} ({threads} writers, {}): {what}",
            if ascending {
                "ascending"
            } else {
                "random order"
            }
        )
    };

    std::thread::scope(|s| {
        for th in 0..threads {
            let (db, committed, fails, writers_left, tick) =
                (&db, &committed, fails, &writers_left, tick);
            let where_ = &where_;
            s.spawn(move || {
                // This thread's ids: th, th + threads, ...
                let mut ids: Vec<u32> = (0..SPLIT_KEYS / threads)
                    .map(|j| j * threads + th)
                    .collect();
                let mut seed = 0xC0FF_EE00_0000_0001u64 ^ ((round as u64) << 32) ^ (th as u64 + 1);
                if !ascending {
                    for i in (1..ids.len()).rev() {
                        let j = (xorshift(&mut seed) % (i as u64 + 1)) as usize;
                        ids.swap(i, j);
                    }
                }
                let mut pos = 0;
                while pos < ids.len() && !fails.stopped() {
                    let batch = (1 + xorshift(&mut seed) % 4) as usize;
                    let end = (pos + batch).min(ids.len());
                    let mut txn = db.begin();
                    let mut r = Ok(());
                    for &i in &ids[pos..end] {
                        r = txn.put(t, &split_key(i), &split_value(i));
                        if r.is_err() {
                            break;
                        }
                    }
                    let r = r.and_then(|()| txn.commit());
                    if let Err(e) = r {
                        fails.add(where_(&format!("writer {th}: put/commit failed: {e}")));
                        break;
                    }
                    committed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend_from_slice(&ids[pos..end]);
                    tick.fetch_add(1, Ordering::Relaxed);
                    pos = end;
                }
                writers_left.fetch_sub(1, Ordering::Relaxed);
            });
        }
        // Reader: gets of committed keys (half of them among the newest,
        // which sit in freshly split pages).
        {
            let (db, committed, fails, writers_left, tick) =
                (&db, &committed, fails, &writers_left, tick);
            let where_ = &where_;
            s.spawn(move || {
                let mut seed = 0xBEEF_0000_0000_0001u64 ^ round as u64;
                let mut out = Vec::new();
                let mut txn = db.begin();
                let mut in_txn = 0;
                while writers_left.load(Ordering::Relaxed) > 0 && !fails.stopped() {
                    let i = {
                        let c = committed.lock().unwrap_or_else(PoisonError::into_inner);
                        if c.is_empty() {
                            None
                        } else {
                            let r = xorshift(&mut seed) as usize;
                            let n = c.len();
                            Some(if r.is_multiple_of(2) {
                                c[n - 1 - (r / 2) % n.min(16)]
                            } else {
                                c[(r / 2) % n]
                            })
                        }
                    };
                    let Some(i) = i else {
                        std::thread::yield_now();
                        continue;
                    };
                    match txn.get_into(t, &split_key(i), &mut out) {
                        Ok(true) if out == split_value(i) => {}
                        Ok(true) => fails.add(where_(&format!(
                            "get of committed key {}: wrong value {}",
                            hex(&split_key(i)),
                            hex(&out)
                        ))),
                        Ok(false) => fails.add(where_(&format!(
                            "get of committed key {}: not found",
                            hex(&split_key(i))
                        ))),
                        Err(e) => fails.add(where_(&format!(
                            "get of committed key {}: {e}",
                            hex(&split_key(i))
                        ))),
                    }
                    // Short transactions: shared locks do not pile up.
                    in_txn += 1;
                    if in_txn == 32 {
                        let _ = txn.commit();
                        txn = db.begin();
                        in_txn = 0;
                        tick.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let _ = txn.commit();
            });
        }
        // Scanner: every key committed before the scan began must be seen,
        // in strictly ascending order, with its value.
        {
            let (db, committed, fails, writers_left, tick) =
                (&db, &committed, fails, &writers_left, tick);
            let where_ = &where_;
            s.spawn(move || {
                while writers_left.load(Ordering::Relaxed) > 0 && !fails.stopped() {
                    let mut before: Vec<[u8; 4]> = committed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .iter()
                        .map(|&i| split_key(i))
                        .collect();
                    before.sort_unstable();
                    let mut txn = db.begin();
                    let mut cur = match txn.scan(t, Bound::Unbounded, Bound::Unbounded) {
                        Ok(c) => c,
                        Err(e) => {
                            fails.add(where_(&format!("scan open: {e}")));
                            break;
                        }
                    };
                    let mut prev: Option<Vec<u8>> = None;
                    let mut need = before.iter().peekable();
                    loop {
                        match cur.next() {
                            Ok(Some((k, v))) => {
                                if prev.as_ref().is_some_and(|p| *p >= k) {
                                    fails.add(where_(&format!(
                                        "scan: key {} after {}",
                                        hex(&k),
                                        hex(prev.as_ref().unwrap())
                                    )));
                                    break;
                                }
                                // The value is a function of the key.
                                let known = k.len() == 4 && need_value_matches(&k, &v);
                                if !known {
                                    fails.add(where_(&format!(
                                        "scan: key {} with value {} was never written",
                                        hex(&k),
                                        hex(&v)
                                    )));
                                    break;
                                }
                                while need.peek().is_some_and(|n| n[..] < k[..]) {
                                    let n = need.next().unwrap();
                                    fails.add(where_(&format!(
                                        "scan: committed key {} skipped (next returned {})",
                                        hex(n),
                                        hex(&k)
                                    )));
                                }
                                if need.peek().is_some_and(|n| n[..] == k[..]) {
                                    need.next();
                                }
                                prev = Some(k);
                            }
                            Ok(None) => {
                                if let Some(n) = need.next() {
                                    fails.add(where_(&format!(
                                        "scan: ended before committed key {} ({} more)",
                                        hex(n),
                                        1 + need.count()
                                    )));
                                }
                                break;
                            }
                            Err(e) => {
                                fails.add(where_(&format!("scan: {e}")));
                                break;
                            }
                        }
                    }
                    cur.close();
                    let _ = txn.commit();
                    tick.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    if fails.stopped() {
        return;
    }

    // After the round: everything there, checked, and in order.
    let total = (SPLIT_KEYS / threads) * threads;
    match db.check_integrity() {
        Ok(n) if n == total as u64 => {}
        Ok(n) => fails.add(where_(&format!(
            "check_integrity counted {n}, {total} committed"
        ))),
        Err(e) => fails.add(where_(&format!("check_integrity: {e}"))),
    }
    // Root splits happened: the tree has at least three levels.
    match db.path_to(t, &split_key(0)) {
        Ok(path) if path.len() >= 3 => {}
        Ok(path) => fails.add(where_(&format!("the tree has only {} levels", path.len()))),
        Err(e) => fails.add(where_(&format!("path_to: {e}"))),
    }
    let mut want: Vec<(Vec<u8>, Vec<u8>)> = (0..total)
        .map(|i| (split_key(i).to_vec(), split_value(i)))
        .collect();
    want.sort();
    let mut txn = db.begin();
    for (k, v) in &want {
        match txn.get(t, k) {
            Ok(Some(got)) if got == *v => {}
            other => {
                fails.add(where_(&format!(
                    "after the round, get {}: {:?}",
                    hex(k),
                    other.map(|o| o.map(|v| hex(&v)))
                )));
                break;
            }
        }
    }
    let mut got = Vec::new();
    match txn.scan(t, Bound::Unbounded, Bound::Unbounded) {
        Ok(mut cur) => {
            loop {
                match cur.next() {
                    Ok(Some(kv)) => got.push(kv),
                    Ok(None) => break,
                    Err(e) => {
                        fails.add(where_(&format!("final scan: {e}")));
                        break;
                    }
                }
            }
            cur.close();
        }
        Err(e) => fails.add(where_(&format!("final scan: {e}"))),
    }
    if got != want {
        let first = got
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        fails.add(where_(&format!(
            "final scan returned {} entries, {} committed; first difference at #{first}",
            got.len(),
            want.len()
        )));
    }
    txn.commit().unwrap();
}

/// Whether `v` is the value written for key `k` (some id below SPLIT_KEYS).
fn need_value_matches(k: &[u8], v: &[u8]) -> bool {
    // split_key is a bijection on u32; invert it.
    let x = u32::from_be_bytes(k.try_into().unwrap()).rotate_right(7);
    // 2654435761 * 244002641 == 1 (mod 2^32)
    let i = x.wrapping_mul(244_002_641);
    i < SPLIT_KEYS && split_value(i) == v
}

#[test]
fn concurrent_root_and_nonroot_splits() {
    assert_eq!(2_654_435_761u32.wrapping_mul(244_002_641), 1);
    let dog = Watchdog::start(
        "concurrent_root_and_nonroot_splits",
        Duration::from_secs(60),
        Duration::from_secs(240),
    );
    let fails = Arc::new(Failures::default());
    let t0 = Instant::now();
    let mut rounds = 0;
    for round in 0..SPLIT_ROUNDS {
        let threads = [2, 4, 8][round as usize % 3];
        dog.set_status(format!("round {round} with {threads} writers"));
        split_round(round, threads, &fails, &dog.tick());
        rounds += 1;
        if fails.stopped() {
            break;
        }
        // A slow machine runs fewer rounds rather than time out.
        if t0.elapsed() > Duration::from_secs(45) {
            eprintln!("time budget spent after {rounds} rounds");
            break;
        }
    }
    eprintln!("{rounds} split rounds in {:.1?}", t0.elapsed());
    fails.check("concurrent_root_and_nonroot_splits");
}

// ---------------------------------------------------------------------------
// Serializability of scans.

const ACCOUNTS: u32 = 4;
/// Scans (all scanners together) before the test stops, or [`SCAN_TIME`].
const SCANS: u64 = 4000;
const SCAN_TIME: Duration = Duration::from_secs(5);
const TOTAL: i64 = 400;

fn acct(j: u32) -> Vec<u8> {
    format!("acct{j}").into_bytes()
}

fn is_acct(k: &[u8]) -> bool {
    k.len() == 5 && k.starts_with(b"acct")
}

fn filler(j: u32, n: u64) -> Vec<u8> {
    format!("acct{j}/{n:08}").into_bytes()
}

fn retryable(e: &Error) -> bool {
    matches!(e, Error::Deadlock | Error::LockTimeout)
}

#[test]
fn scans_see_consistent_sums() {
    let dog = Watchdog::start(
        "scans_see_consistent_sums",
        Duration::from_secs(60),
        Duration::from_secs(180),
    );
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("b.db"),
        Options {
            // Small pages: the accounts sit in different leaves, and the
            // churn splits them while scans run.
            page_size: 512,
            pool_pages: 1024,
            sync: SyncMode::Off,
            lock_timeout: Duration::from_millis(300),
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("bank").unwrap();
    {
        let mut txn = db.begin();
        for j in 0..ACCOUNTS {
            txn.insert(t, &acct(j), &(TOTAL / ACCOUNTS as i64).to_le_bytes())
                .unwrap();
            for n in 0..20 {
                txn.insert(t, &filler(j, n * 1000), &[j as u8; 40]).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    let fails = Arc::new(Failures::default());
    let stop = AtomicBool::new(false);
    let tick = dog.tick();
    let scans_done = AtomicU64::new(0);
    let get_sums_done = AtomicU64::new(0);
    let transfers = AtomicU64::new(0);
    let rollbacks = AtomicU64::new(0);
    let retries = AtomicU64::new(0);
    let t0 = Instant::now();
    dog.set_status("transfers, churn and scans running".into());
    std::thread::scope(|s| {
        // Writers: transfers; one in three is rolled back after both updates
        // (a scan that used a value read before its lock could see it).
        for w in 0..3u64 {
            let (db, fails, stop, tick, transfers, rollbacks, retries) =
                (&db, &fails, &stop, &tick, &transfers, &rollbacks, &retries);
            s.spawn(move || {
                let mut seed = 0xA11C_E000_0000_0001u64 ^ (w + 1);
                let mut buf = Vec::new();
                while !stop.load(Ordering::Relaxed) && !fails.stopped() {
                    let a = (xorshift(&mut seed) % ACCOUNTS as u64) as u32;
                    let b =
                        (a + 1 + (xorshift(&mut seed) % (ACCOUNTS as u64 - 1)) as u32) % ACCOUNTS;
                    let amount = (xorshift(&mut seed) % 30) as i64 + 1;
                    let roll_back = xorshift(&mut seed).is_multiple_of(3);
                    let mut txn = db.begin();
                    let r = (|| -> btree_db::Result<()> {
                        if !txn.get_for_update(t, &acct(a), &mut buf)? {
                            return Err(Error::NotFound);
                        }
                        let va = i64::from_le_bytes(buf[..8].try_into().unwrap());
                        txn.update(t, &acct(a), &(va - amount).to_le_bytes())?;
                        if !txn.get_for_update(t, &acct(b), &mut buf)? {
                            return Err(Error::NotFound);
                        }
                        let vb = i64::from_le_bytes(buf[..8].try_into().unwrap());
                        txn.update(t, &acct(b), &(vb + amount).to_le_bytes())?;
                        Ok(())
                    })();
                    match r {
                        Ok(()) if roll_back => {
                            if let Err(e) = txn.abort() {
                                fails.add(format!("writer {w}: abort: {e}"));
                            }
                            rollbacks.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(()) => {
                            if let Err(e) = txn.commit() {
                                fails.add(format!("writer {w}: commit: {e}"));
                            }
                            transfers.fetch_add(1, Ordering::Relaxed);
                            tick.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if retryable(&e) => {
                            retries.fetch_add(1, Ordering::Relaxed);
                            if let Err(e) = txn.abort() {
                                fails.add(format!("writer {w}: abort after {e}"));
                            }
                        }
                        Err(e) => {
                            fails.add(format!("writer {w}: transfer {a}->{b}: {e}"));
                            let _ = txn.abort();
                        }
                    }
                }
            });
        }
        // A writer that only ever rolls back: a large change to one account,
        // undone at once (many short windows for a dirty read).
        {
            let (db, fails, stop, rollbacks) = (&db, &fails, &stop, &rollbacks);
            s.spawn(move || {
                let mut seed = 0x0B5E_0000_0000_0001u64;
                let mut buf = Vec::new();
                while !stop.load(Ordering::Relaxed) && !fails.stopped() {
                    let a = (xorshift(&mut seed) % ACCOUNTS as u64) as u32;
                    let mut txn = db.begin();
                    let r = (|| -> btree_db::Result<()> {
                        if txn.get_for_update(t, &acct(a), &mut buf)? {
                            let va = i64::from_le_bytes(buf[..8].try_into().unwrap());
                            txn.update(t, &acct(a), &(va + 1_000_000).to_le_bytes())?;
                        }
                        Ok(())
                    })();
                    match r {
                        Ok(()) => {
                            rollbacks.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if retryable(&e) => {}
                        Err(e) => fails.add(format!("rollback writer: {e}")),
                    }
                    if let Err(e) = txn.abort() {
                        fails.add(format!("rollback writer: abort: {e}"));
                    }
                }
            });
        }
        // Churn: inserts and deletes rows between the accounts (splits of
        // the accounts' leaves while scans walk them).
        {
            let (db, fails, stop, retries) = (&db, &fails, &stop, &retries);
            s.spawn(move || {
                let mut seed = 0xC4A2_0000_0000_0001u64;
                let mut live: Vec<Vec<u8>> = Vec::new();
                while !stop.load(Ordering::Relaxed) && !fails.stopped() {
                    let mut txn = db.begin();
                    let mut added = Vec::new();
                    let mut removed = Vec::new();
                    let r = (|| -> btree_db::Result<()> {
                        for _ in 0..4 {
                            let j = (xorshift(&mut seed) % ACCOUNTS as u64) as u32;
                            let k = filler(j, 1 + xorshift(&mut seed) % 99_999_999);
                            txn.put(t, &k, &[0xCC; 60])?;
                            added.push(k);
                        }
                        if live.len() > 200 {
                            for _ in 0..6 {
                                let i = (xorshift(&mut seed) % live.len() as u64) as usize;
                                let k = live[i].clone();
                                txn.delete(t, &k)?;
                                removed.push(i);
                            }
                        }
                        Ok(())
                    })();
                    match r.and_then(|()| txn.commit()) {
                        Ok(()) => {
                            removed.sort_unstable();
                            removed.dedup();
                            for &i in removed.iter().rev() {
                                live.swap_remove(i);
                            }
                            live.extend(added);
                        }
                        Err(e) if retryable(&e) => {
                            retries.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => fails.add(format!("churn: {e}")),
                    }
                }
            });
        }
        // Readers: two sum with a scan, one with gets in random order.
        let scanners: Vec<_> = (0..2).map(|_| {
            let (db, fails, tick, scans_done, retries) = (&db, &fails, &tick, &scans_done, &retries);
            s.spawn(move || {
                while scans_done.load(Ordering::Relaxed) < SCANS && t0.elapsed() < SCAN_TIME && !fails.stopped() {
                    let mut txn = db.begin();
                    let r = (|| -> btree_db::Result<(i64, u32, Vec<String>)> {
                        let mut cur = txn.scan(t, Bound::Unbounded, Bound::Unbounded)?;
                        let (mut sum, mut seen) = (0i64, 0u32);
                        let mut names = Vec::new();
                        let mut prev: Option<Vec<u8>> = None;
                        while let Some((k, v)) = cur.next()? {
                            if prev.as_ref().is_some_and(|p| *p >= k) {
                                names.push(format!("OUT OF ORDER {}", String::from_utf8_lossy(&k)));
                            }
                            if is_acct(&k) {
                                sum += i64::from_le_bytes(v[..8].try_into().unwrap());
                                seen += 1;
                                names.push(format!("{}={}", String::from_utf8_lossy(&k), i64::from_le_bytes(v[..8].try_into().unwrap())));
                            }
                            prev = Some(k);
                        }
                        cur.close();
                        Ok((sum, seen, names))
                    })();
                    match r {
                        Ok((sum, seen, names)) => {
                            if sum != TOTAL || seen != ACCOUNTS || names.iter().any(|n| n.starts_with("OUT")) {
                                fails.add(format!(
                                    "scan #{} summed {sum} over {seen} accounts (want {TOTAL} over {ACCOUNTS}): {names:?}",
                                    scans_done.load(Ordering::Relaxed)
                                ));
                            }
                            let _ = txn.commit();
                            scans_done.fetch_add(1, Ordering::Relaxed);
                            tick.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if retryable(&e) => {
                            retries.fetch_add(1, Ordering::Relaxed);
                            let _ = txn.abort();
                        }
                        Err(e) => {
                            fails.add(format!("scan: {e}"));
                            let _ = txn.abort();
                        }
                    }
                }
            })
        }).collect();
        {
            let (db, fails, stop, get_sums_done, retries) =
                (&db, &fails, &stop, &get_sums_done, &retries);
            s.spawn(move || {
                let mut seed = 0x6E75_0000_0000_0001u64;
                let mut buf = Vec::new();
                while !stop.load(Ordering::Relaxed) && !fails.stopped() {
                    let mut order: Vec<u32> = (0..ACCOUNTS).collect();
                    for i in (1..order.len()).rev() {
                        let j = (xorshift(&mut seed) % (i as u64 + 1)) as usize;
                        order.swap(i, j);
                    }
                    let mut txn = db.begin();
                    let r = (|| -> btree_db::Result<i64> {
                        let mut sum = 0;
                        for &j in &order {
                            if !txn.get_into(t, &acct(j), &mut buf)? {
                                return Err(Error::NotFound);
                            }
                            sum += i64::from_le_bytes(buf[..8].try_into().unwrap());
                        }
                        Ok(sum)
                    })();
                    match r {
                        Ok(sum) => {
                            if sum != TOTAL {
                                fails.add(format!("gets summed {sum}, want {TOTAL}"));
                            }
                            let _ = txn.commit();
                            get_sums_done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if retryable(&e) => {
                            retries.fetch_add(1, Ordering::Relaxed);
                            let _ = txn.abort();
                        }
                        Err(e) => {
                            fails.add(format!("get sum: {e}"));
                            let _ = txn.abort();
                        }
                    }
                }
            });
        }
        for sc in scanners {
            let _ = sc.join();
        }
        stop.store(true, Ordering::Relaxed);
    });
    dog.set_status("final checks".into());
    eprintln!(
        "{} scans, {} get sums, {} transfers, {} rollbacks, {} deadlock/timeout retries in {:.1?}",
        scans_done.load(Ordering::Relaxed),
        get_sums_done.load(Ordering::Relaxed),
        transfers.load(Ordering::Relaxed),
        rollbacks.load(Ordering::Relaxed),
        retries.load(Ordering::Relaxed),
        t0.elapsed()
    );
    fails.check("scans_see_consistent_sums");
    assert!(
        scans_done.load(Ordering::Relaxed) >= 20,
        "too few scans completed"
    );
    assert!(
        transfers.load(Ordering::Relaxed) >= 20,
        "too few transfers committed"
    );
    let mut txn = db.begin();
    let sum: i64 = (0..ACCOUNTS)
        .map(|j| {
            i64::from_le_bytes(
                txn.get(t, &acct(j)).unwrap().unwrap()[..8]
                    .try_into()
                    .unwrap(),
            )
        })
        .sum();
    assert_eq!(sum, TOTAL);
    txn.commit().unwrap();
    db.check_integrity().unwrap();
}
