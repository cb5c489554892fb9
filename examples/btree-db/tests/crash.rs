//! Crash recovery under `kill -9`: a child process (this test binary,
//! re-executed with an environment variable) runs transfer transactions with
//! `sync = Full` on two threads while a third thread checkpoints in a loop,
//! and acknowledges each commit to a file. The parent kills it with SIGKILL
//! at a random moment (usually inside a checkpoint), reopens the database
//! (crash recovery) and checks that every acknowledged commit is there, that
//! no transfer is half applied and that every tree is well formed.
//!
//! `BTREE_DB_SOAK=1` runs many more rounds.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use btree_db::{Database, Error, Options, SyncMode};

const ACCOUNTS: u32 = 16;
const INITIAL: i64 = 1000;

fn options() -> Options {
    Options {
        page_size: 4096,
        // Small pool: dirty pages are evicted (WAL rule) while the child runs.
        pool_pages: 48,
        sync: SyncMode::Full,
        checkpoint_log_bytes: 512 << 10,
        lock_timeout: Duration::from_secs(2),
        // Small segments: records span files and checkpoints delete files.
        log_segment_bytes: 64 << 10,
    }
}

fn acct(j: u32) -> Vec<u8> {
    format!("acct{j:04}").into_bytes()
}

fn record_key(round: u32, thread: u32, i: u32) -> Vec<u8> {
    let mut k = b"rec".to_vec();
    k.extend_from_slice(&round.to_be_bytes());
    k.extend_from_slice(&thread.to_be_bytes());
    k.extend_from_slice(&i.to_be_bytes());
    k
}

fn record_value(round: u32, thread: u32, i: u32) -> Vec<u8> {
    let len = 50 + ((round * 31 + thread * 7 + i * 13) % 400) as usize;
    (0..len).map(|b| (b as u32 ^ i ^ round) as u8).collect()
}

fn rng(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The child: runs until killed.
fn child(dir: &Path, round: u32) {
    let db = Database::open(dir.join("bank.db"), options()).unwrap();
    let ack = Arc::new(std::sync::Mutex::new(
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("acks"))
            .unwrap(),
    ));
    let bank = db.table("bank").unwrap();
    let records = db.table("records").unwrap();
    let ckpt = {
        let db = db.clone();
        std::thread::spawn(move || {
            loop {
                db.checkpoint().unwrap();
            }
        })
    };
    let workers: Vec<_> = (0..2u32)
        .map(|thread| {
            let db = db.clone();
            let ack = ack.clone();
            std::thread::spawn(move || {
                let mut seed = 0x9E37_79B9 ^ ((round as u64) << 20) ^ (thread as u64 + 1);
                let mut buf = Vec::new();
                for i in 0.. {
                    loop {
                        let a = (rng(&mut seed) % ACCOUNTS as u64) as u32;
                        let b =
                            (a + 1 + (rng(&mut seed) % (ACCOUNTS as u64 - 1)) as u32) % ACCOUNTS;
                        let amount = (rng(&mut seed) % 50) as i64;
                        let abort = rng(&mut seed).is_multiple_of(10);
                        let slow = rng(&mut seed).is_multiple_of(3);
                        let mut txn = db.begin();
                        let r = (|| -> btree_db::Result<()> {
                            txn.get_for_update(bank, &acct(a), &mut buf)?;
                            let va = i64::from_le_bytes(buf[..8].try_into().unwrap());
                            txn.update(bank, &acct(a), &(va - amount).to_le_bytes())?;
                            if slow {
                                // Stay half done for a while: the checkpointer
                                // writes the debit to the log, and a kill here
                                // leaves a loser that recovery must undo.
                                std::thread::sleep(Duration::from_millis(3));
                            }
                            txn.get_for_update(bank, &acct(b), &mut buf)?;
                            let vb = i64::from_le_bytes(buf[..8].try_into().unwrap());
                            txn.update(bank, &acct(b), &(vb + amount).to_le_bytes())?;
                            txn.insert(
                                records,
                                &record_key(round, thread, i),
                                &record_value(round, thread, i),
                            )?;
                            Ok(())
                        })();
                        match r {
                            Ok(()) if abort => txn.abort().unwrap(),
                            Ok(()) => {
                                txn.commit().unwrap();
                                // One write call per line: a kill never leaves half a line.
                                let line = format!("{round} {thread} {i}\n");
                                ack.lock().unwrap().write_all(line.as_bytes()).unwrap();
                                break;
                            }
                            Err(Error::Deadlock | Error::LockTimeout) => txn.abort().unwrap(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    ckpt.join().unwrap();
}

fn setup(dir: &Path) {
    let db = Database::open(dir.join("bank.db"), options()).unwrap();
    let bank = db.create_table("bank").unwrap();
    db.create_table("records").unwrap();
    let mut txn = db.begin();
    for j in 0..ACCOUNTS {
        txn.insert(bank, &acct(j), &INITIAL.to_le_bytes()).unwrap();
    }
    txn.commit().unwrap();
}

fn verify(dir: &Path) -> usize {
    let db = Database::open(dir.join("bank.db"), options()).unwrap();
    db.check_integrity().unwrap();
    let bank = db.table("bank").unwrap();
    let records = db.table("records").unwrap();
    let mut txn = db.begin();
    let mut total = 0;
    for j in 0..ACCOUNTS {
        let v = txn.get(bank, &acct(j)).unwrap().expect("account present");
        total += i64::from_le_bytes(v[..8].try_into().unwrap());
    }
    assert_eq!(
        total,
        INITIAL * ACCOUNTS as i64,
        "a transfer was half applied"
    );
    let acks = std::fs::read_to_string(dir.join("acks")).unwrap_or_default();
    let mut n = 0;
    for line in acks.lines() {
        let f: Vec<u32> = line.split(' ').map(|x| x.parse().unwrap()).collect();
        let (round, thread, i) = (f[0], f[1], f[2]);
        let got = txn.get(records, &record_key(round, thread, i)).unwrap();
        assert_eq!(
            got,
            Some(record_value(round, thread, i)),
            "acknowledged commit {line} lost"
        );
        n += 1;
    }
    txn.commit().unwrap();
    n
}

#[test]
fn crash_child() {
    // Only does something when re-executed by `kill_nine_recovery`.
    if let Ok(dir) = std::env::var("BTREE_DB_CRASH_DIR") {
        let round = std::env::var("BTREE_DB_CRASH_ROUND")
            .unwrap()
            .parse()
            .unwrap();
        child(&PathBuf::from(dir), round);
    }
}

#[test]
fn kill_nine_recovery() {
    let rounds = if std::env::var("BTREE_DB_SOAK").is_ok() {
        60
    } else {
        6
    };
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let exe = std::env::current_exe().unwrap();
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut last = 0;
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env("BTREE_DB_CRASH_DIR", dir.path())
            .env("BTREE_DB_CRASH_ROUND", round.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // Every fourth round kills early, often inside the child's own
        // recovery or its checkpoint at open: recovery must be restartable.
        let delay = if round % 4 == 3 {
            rng(&mut seed) % 60
        } else {
            150 + rng(&mut seed) % 700
        };
        std::thread::sleep(Duration::from_millis(delay));
        // Child::kill sends SIGKILL.
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(status.code().is_none(), "child exited by itself: {status}");
        let acked = verify(dir.path());
        assert!(acked >= last);
        eprintln!("round {round}: {acked} acknowledged commits verified");
        last = acked;
    }
    assert!(last > 0, "no commit was acknowledged");
}
