//! A corruption harness: build a database with several tables and committed
//! data, close it (cleanly, or by a simulated crash), damage its files, and
//! reopen. Whatever the damage, the only allowed outcomes are
//!
//! * an `Err` (from `open`, or from the later operation that touches the
//!   damage), or
//! * exactly the committed data,
//!
//! checked operation by operation: every `Ok` answer (a full scan of every
//! table, a `get` of every committed key and of keys that must be absent,
//! `check_integrity`'s count, the catalog, writes read back afterwards) must
//! agree with an in-memory model of what was committed. Never a panic, never
//! a hang: each reopen-and-verify runs on its own thread and a case that
//! takes longer than [`CASE_TIMEOUT`] fails its test.
//!
//! Damage kinds: a flipped bit in a page (page 0 = file header, 1 = meta,
//! 2 = catalog root, others at random), a zeroed page, two pages swapped,
//! one page copied over another, the database file truncated; a flipped bit
//! in the log, the log truncated, a range of the log zeroed (the log cases
//! after a crash, so recovery must read the damaged part; everything
//! committed there was committed with `SyncMode::Full`).
//!
//! One more kind, `forged_pages_never_panic_or_hang`, forges pages with
//! valid checksums (meta page counts and free-list heads, right links and
//! child pointers into cycles or out of range, catalog entries pointing at
//! the wrong root). Nothing can tell a well-forged page from a written one,
//! so there wrong answers are allowed (and listed); panics and hangs are not.
//!
//! Positions come from a xorshift generator seeded per case, so a failure
//! names a case that reproduces.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use btree_db::{Database, Options, SyncMode};

const DB: &str = "t.db";
const PS: usize = 4096;
/// Small log segments: the log after the checkpoint spans several files.
const SEG: u64 = 64 << 10;
/// Rows in the big table.
const ROWS: u32 = 20_000;
/// A reopen-and-verify that takes longer than this is a hang.
const CASE_TIMEOUT: Duration = Duration::from_secs(20);

fn opts() -> Options {
    Options {
        page_size: PS,
        // Small pool: pages are evicted (and written) all the time.
        pool_pages: 64,
        sync: SyncMode::Full,
        lock_timeout: Duration::from_millis(500),
        checkpoint_log_bytes: 0,
        log_segment_bytes: SEG,
    }
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// A per-case generator.
fn rng_for(kind: u64, case: u64) -> u64 {
    let mut s = 0x9E37_79B9_7F4A_7C15u64 ^ kind.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ (case + 1);
    for _ in 0..4 {
        xorshift(&mut s);
    }
    s
}

fn below(s: &mut u64, n: u64) -> u64 {
    xorshift(s) % n.max(1)
}

fn big_key(i: u32) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

fn value(i: u32, gen_: u32) -> Vec<u8> {
    let h = i.wrapping_mul(2_654_435_761) ^ gen_.wrapping_mul(40_503);
    let len = 8 + (h % 90) as usize;
    (0..len)
        .map(|b| (b as u32 ^ i ^ gen_.rotate_left(3)) as u8)
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A database closed one way or the other, its files in memory and the
/// model of what it committed.
struct Fixture {
    name: &'static str,
    /// File name (relative to the directory) and contents.
    files: Vec<(String, Vec<u8>)>,
    /// Table name and committed contents, for every table and index.
    tables: Vec<(String, Model)>,
    /// Keys that must not be present (deleted, aborted, written by the
    /// transaction unfinished at the crash, never written).
    absent: Vec<(String, Vec<u8>)>,
    total: u64,
    /// Whole pages in the database file.
    pages: u32,
    /// Header's redo start and log start.
    checkpoint_lsn: u64,
    /// The end of the log on disk.
    log_end: u64,
    /// The end of the log before the last two transactions: log damage is
    /// put below this, so committed records always follow it.
    damage_end: u64,
}

impl Fixture {
    fn materialize(&self, dir: &Path) {
        for (name, bytes) in &self.files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }

    fn seg_name(seg: u64) -> String {
        format!("{DB}.wal.{seg:08}")
    }
}

fn read_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .filter(|(n, _)| n.starts_with(DB))
        .collect();
    files.sort();
    files
}

/// The end of the log: the last segment's number times the segment size
/// plus its length.
fn log_end(dir: &Path) -> u64 {
    let prefix = format!("{DB}.wal.");
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let seg: u64 = name.strip_prefix(&prefix)?.parse().ok()?;
            Some(seg * SEG + e.metadata().unwrap().len())
        })
        .max()
        .unwrap_or(0)
}

fn header_u64(db: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(db[off..off + 8].try_into().unwrap())
}

/// Builds the crashed database in `dir` and returns the model.
#[allow(clippy::type_complexity)]
fn build(dir: &Path) -> (Vec<(String, Model)>, Vec<(String, Vec<u8>)>, u64) {
    let db = Database::open(dir.join(DB), opts()).unwrap();
    let big = db.create_table("big").unwrap();
    let small = db.create_table("small").unwrap();
    let idx = db.create_index("idx", big).unwrap();
    db.create_table("empty").unwrap();
    let gone = db.create_table("gone").unwrap();
    let (mut m_big, mut m_small, mut m_idx) = (Model::new(), Model::new(), Model::new());
    let mut absent: Vec<(String, Vec<u8>)> = Vec::new();
    let mut s = 0x5EED_0000_0000_0001u64;

    // Bulk load in random order (half-full leaves, scattered page order).
    let mut order: Vec<u32> = (0..ROWS).collect();
    for i in (1..order.len()).rev() {
        let j = below(&mut s, i as u64 + 1) as usize;
        order.swap(i, j);
    }
    for chunk in order.chunks(2000) {
        let mut txn = db.begin();
        for &i in chunk {
            let (k, v) = (big_key(2 * i), value(i, 0));
            txn.put(big, &k, &v).unwrap();
            m_big.insert(k.clone(), v.clone());
            if i % 10 == 0 {
                let mut ik = v[..4].to_vec();
                ik.extend_from_slice(&k);
                txn.put(idx, &ik, b"").unwrap();
                m_idx.insert(ik, Vec::new());
            }
        }
        txn.commit().unwrap();
    }
    let mut txn = db.begin();
    for i in 0..300u32 {
        let k = format!("small{i:05}").into_bytes();
        let v = value(i, 7);
        txn.insert(small, &k, &v).unwrap();
        m_small.insert(k, v);
    }
    txn.commit().unwrap();
    // A dropped table: its pages go to the free list.
    let mut txn = db.begin();
    for i in 0..2000u32 {
        txn.put(gone, &big_key(i), &value(i, 3)).unwrap();
    }
    txn.commit().unwrap();
    db.drop_table(gone).unwrap();
    db.checkpoint().unwrap();

    // After the checkpoint: committed transactions recovery must redo.
    let mut damage_end = 0;
    for round in 0..30u32 {
        let mut txn = db.begin();
        for _ in 0..25 {
            let i = below(&mut s, ROWS as u64) as u32;
            let (k, v) = (big_key(2 * i + 1), value(i, round + 100));
            txn.put(big, &k, &v).unwrap();
            m_big.insert(k, v);
        }
        for _ in 0..10 {
            let i = below(&mut s, ROWS as u64) as u32;
            let (k, v) = (big_key(2 * i), value(i, round + 200));
            txn.put(big, &k, &v).unwrap();
            m_big.insert(k, v);
        }
        for _ in 0..5 {
            let i = below(&mut s, ROWS as u64) as u32;
            let k = big_key(2 * i);
            let had = txn.delete(big, &k).unwrap();
            assert_eq!(had, m_big.remove(&k).is_some());
        }
        for _ in 0..2 {
            let i = below(&mut s, 300) as u32;
            let k = format!("small{i:05}").into_bytes();
            let v = value(i, round + 300);
            txn.put(small, &k, &v).unwrap();
            m_small.insert(k, v);
        }
        txn.commit().unwrap();
        if round == 14 {
            // An aborted transaction: its changes are undone.
            let mut txn = db.begin();
            for j in 0..20u32 {
                let k = format!("aborted{j}").into_bytes();
                txn.put(big, &k, b"no").unwrap();
                absent.push(("big".into(), k));
            }
            let i = below(&mut s, ROWS as u64) as u32;
            txn.put(big, &big_key(2 * i), b"aborted update").unwrap();
            txn.abort().unwrap();
        }
        if round == 28 {
            damage_end = log_end(dir);
        }
    }
    // A transaction unfinished at the crash (its records reach the log with
    // the next commit), then one more committed transaction.
    let mut loser = db.begin();
    for j in 0..20u32 {
        let k = format!("loser{j:03}").into_bytes();
        loser.put(big, &k, &[0xEE; 40]).unwrap();
        absent.push(("big".into(), k));
    }
    for _ in 0..5 {
        let i = below(&mut s, ROWS as u64) as u32;
        loser.put(big, &big_key(2 * i), b"loser update").unwrap();
    }
    let mut txn = db.begin();
    for j in 0..30u32 {
        let k = format!("last{j:03}").into_bytes();
        let v = value(j, 999);
        txn.put(small, &k, &v).unwrap();
        m_small.insert(k, v);
    }
    txn.commit().unwrap();
    db.simulate_crash_on_drop();
    std::mem::forget(loser);
    drop(db);

    // Keys never written, or deleted.
    for _ in 0..200 {
        let i = below(&mut s, 2 * ROWS as u64 + 10) as u32;
        let k = big_key(i);
        if !m_big.contains_key(&k) {
            absent.push(("big".into(), k));
        }
    }
    absent.push(("small".into(), b"small99999".to_vec()));
    absent.push(("empty".into(), b"anything".to_vec()));
    let tables = vec![
        ("big".to_string(), m_big),
        ("empty".to_string(), Model::new()),
        ("idx".to_string(), m_idx),
        ("small".to_string(), m_small),
    ];
    (tables, absent, damage_end)
}

fn fixture_from(
    name: &'static str,
    dir: &Path,
    tables: Vec<(String, Model)>,
    absent: Vec<(String, Vec<u8>)>,
    damage_end: u64,
) -> Fixture {
    let files = read_files(dir);
    let db = &files.iter().find(|(n, _)| n == DB).unwrap().1;
    let total = tables.iter().map(|(_, m)| m.len() as u64).sum();
    Fixture {
        name,
        pages: (db.len() / PS) as u32,
        checkpoint_lsn: header_u64(db, 16),
        log_end: log_end(dir),
        damage_end,
        files,
        tables,
        absent,
        total,
    }
}

/// The database after a crash (recovery has work to do) and after a clean
/// close (recovered once, then checkpointed).
fn fixtures() -> &'static (Fixture, Fixture) {
    static F: OnceLock<(Fixture, Fixture)> = OnceLock::new();
    F.get_or_init(|| {
        let t0 = Instant::now();
        let dir = tempfile::tempdir().unwrap();
        let (tables, absent, damage_end) = build(dir.path());
        let crashed = fixture_from(
            "crashed",
            dir.path(),
            tables.clone(),
            absent.clone(),
            damage_end,
        );
        assert!(
            crashed.damage_end > crashed.checkpoint_lsn + 4 * SEG,
            "the log after the checkpoint should span several segments: {} .. {}",
            crashed.checkpoint_lsn,
            crashed.damage_end
        );
        // Recover once (undamaged: must be exact) and close cleanly.
        let v = verify_only_reads(&dir.path().join(DB), &crashed);
        assert!(
            matches!(v, Verdict::Exact),
            "undamaged crashed database: {v:?}"
        );
        let clean = fixture_from("clean", dir.path(), tables, absent, 0);
        eprintln!(
            "fixtures built in {:.1?}: {} pages, log after the checkpoint {} bytes",
            t0.elapsed(),
            clean.pages,
            crashed.log_end - crashed.checkpoint_lsn
        );
        (crashed, clean)
    })
}

#[derive(Debug)]
enum Verdict {
    /// Every operation succeeded and returned the committed data.
    Exact,
    /// Something returned an error; everything that succeeded was right.
    Errored(String),
    /// Some operation succeeded with data that differs from the model.
    Wrong(String),
    Panicked(String),
    Hung,
}

/// Collects what a verification saw.
#[derive(Default)]
struct Seen {
    errors: Vec<String>,
    wrong: Vec<String>,
    wrong_count: usize,
}

impl Seen {
    fn err(&mut self, what: impl FnOnce() -> String) {
        if self.errors.len() < 3 {
            self.errors.push(what());
        }
    }
    fn wrong(&mut self, what: impl FnOnce() -> String) {
        self.wrong_count += 1;
        if self.wrong.len() < 4 {
            self.wrong.push(what());
        }
    }
    fn verdict(self) -> Verdict {
        if !self.wrong.is_empty() {
            Verdict::Wrong(format!(
                "{} wrong results, e.g. [{}]; errors seen: [{}]",
                self.wrong_count,
                self.wrong.join("; "),
                self.errors.join("; ")
            ))
        } else if !self.errors.is_empty() {
            Verdict::Errored(self.errors.join("; "))
        } else {
            Verdict::Exact
        }
    }
}

fn verify_only_reads(path: &Path, fx: &Fixture) -> Verdict {
    verify(path, fx, false)
}

/// Reopens and checks every answer against the model; with `writes`, also
/// writes (splits, allocation, two `create_table`s) and reads them back.
fn verify(path: &Path, fx: &Fixture, writes: bool) -> Verdict {
    let db = match Database::open(path, opts()) {
        Ok(db) => db,
        Err(e) => return Verdict::Errored(format!("open: {e}")),
    };
    let mut seen = Seen::default();
    match db.check_integrity() {
        Ok(n) if n == fx.total => {}
        Ok(n) => seen.wrong(|| {
            format!(
                "check_integrity counted {n} entries, {} committed",
                fx.total
            )
        }),
        Err(e) => seen.err(|| format!("check_integrity: {e}")),
    }
    let names: Vec<String> = db.tables().into_iter().map(|t| t.name).collect();
    let expect: Vec<String> = fx.tables.iter().map(|(n, _)| n.clone()).collect();
    if names != expect {
        seen.wrong(|| format!("catalog lists {names:?}, committed {expect:?}"));
    }
    for (name, model) in &fx.tables {
        let t = match db.table(name) {
            Ok(t) => t,
            Err(e) => {
                seen.wrong(|| format!("committed table {name} missing: {e}"));
                continue;
            }
        };
        // A full scan: a prefix of the model, in order, ended by the end of
        // the table or an error.
        {
            let mut txn = db.begin();
            match txn.scan(t, Bound::Unbounded, Bound::Unbounded) {
                Err(e) => seen.err(|| format!("scan {name}: {e}")),
                Ok(mut cur) => {
                    let mut it = model.iter();
                    loop {
                        match cur.next() {
                            Ok(Some((k, v))) => {
                                match it.next() {
                                    Some((mk, mv)) if *mk == k && *mv == v => {}
                                    Some((mk, _)) if *mk == k => {
                                        seen.wrong(|| {
                                            format!(
                                                "scan {name}: key {} has a wrong value",
                                                hex(&k)
                                            )
                                        });
                                        break;
                                    }
                                    Some((mk, _)) => {
                                        seen.wrong(|| {
                                        format!(
                                            "scan {name}: returned key {} where committed key {} is next",
                                            hex(&k),
                                            hex(mk)
                                        )
                                    });
                                        break;
                                    }
                                    None => {
                                        seen.wrong(|| format!("scan {name}: extra key {} past the last committed one", hex(&k)));
                                        break;
                                    }
                                }
                            }
                            Ok(None) => {
                                if let Some((mk, _)) = it.next() {
                                    let left = 1 + it.count();
                                    seen.wrong(|| {
                                        format!(
                                            "scan {name} ended without error {left} keys early, at committed key {}",
                                            hex(mk)
                                        )
                                    });
                                }
                                break;
                            }
                            Err(e) => {
                                seen.err(|| format!("scan {name}: {e}"));
                                break;
                            }
                        }
                    }
                    cur.close();
                }
            }
            let _ = txn.abort();
        }
        // A get of every committed key.
        let mut txn = db.begin();
        let mut out = Vec::new();
        let (mut missing, mut differ, mut failed) = (0usize, 0usize, 0usize);
        for (k, v) in model {
            match txn.get_into(t, k, &mut out) {
                Ok(true) if out == *v => {}
                Ok(true) => {
                    differ += 1;
                    if differ == 1 {
                        seen.wrong(|| format!("get {name} {}: wrong value", hex(k)));
                    }
                }
                Ok(false) => {
                    missing += 1;
                    if missing == 1 {
                        seen.wrong(|| format!("get {name} {}: committed key not found", hex(k)));
                    }
                }
                Err(e) => {
                    failed += 1;
                    if failed == 1 {
                        seen.err(|| format!("get {name} {}: {e}", hex(k)));
                    }
                }
            }
        }
        if missing + differ > 1 {
            seen.wrong(|| {
                format!(
                    "get {name}: {missing} committed keys missing, {differ} wrong values of {}",
                    model.len()
                )
            });
        }
        for (tn, k) in fx.absent.iter().filter(|(tn, _)| tn == name) {
            if let Ok(true) = txn.get_into(t, k, &mut out) {
                seen.wrong(|| {
                    format!(
                        "get {tn} {}: key that was never committed is present",
                        hex(k)
                    )
                });
            }
        }
        let _ = txn.abort();
    }
    if writes {
        write_and_read_back(&db, &mut seen);
    }
    drop(db);
    seen.verdict()
}

/// Writes enough to split and allocate pages, creates two tables, and
/// checks what succeeded reads back.
fn write_and_read_back(db: &Database, seen: &mut Seen) {
    if let Ok(big) = db.table("big") {
        let key = |i: u32| (0x8000_0000u32 + 3 * i).to_be_bytes();
        let mut txn = db.begin();
        let mut ok = true;
        for i in 0..300u32 {
            if let Err(e) = txn.put(big, &key(i), &value(i, 55)) {
                seen.err(|| format!("put after reopen: {e}"));
                ok = false;
                break;
            }
        }
        if ok {
            match txn.commit() {
                Ok(()) => {
                    let mut txn = db.begin();
                    for i in 0..300u32 {
                        match txn.get(big, &key(i)) {
                            Ok(Some(v)) if v == value(i, 55) => {}
                            Ok(got) => {
                                seen.wrong(|| {
                                    format!(
                                        "key {} committed after reopen reads back as {:?}",
                                        hex(&key(i)),
                                        got.map(|v| hex(&v))
                                    )
                                });
                                break;
                            }
                            Err(e) => {
                                seen.err(|| format!("get after reopen's commit: {e}"));
                                break;
                            }
                        }
                    }
                    let _ = txn.abort();
                }
                Err(e) => seen.err(|| format!("commit after reopen: {e}")),
            }
        } else {
            let _ = txn.abort();
        }
    }
    // Twice: a first failure must not leave the meta page latched.
    for name in ["extra_a", "extra_b"] {
        match db.create_table(name) {
            Ok(t) => {
                let mut txn = db.begin();
                let r = txn.put(t, b"x", b"y").and_then(|()| txn.commit());
                match r {
                    Ok(()) => match db.begin().get(t, b"x") {
                        Ok(Some(v)) if v == b"y" => {}
                        Ok(v) => seen.wrong(|| format!("new table {name} reads back {v:?}")),
                        Err(e) => seen.err(|| format!("get in new table {name}: {e}")),
                    },
                    Err(e) => seen.err(|| format!("put into new table {name}: {e}")),
                }
            }
            Err(e) => seen.err(|| format!("create_table {name}: {e}")),
        }
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic".into()
    }
}

/// Copies the fixture into a fresh directory, damages it, and reopens and
/// verifies on a thread bounded by [`CASE_TIMEOUT`].
fn run_case(fx: &'static Fixture, damage: impl FnOnce(&Path)) -> Verdict {
    let dir = tempfile::tempdir().unwrap();
    fx.materialize(dir.path());
    damage(dir.path());
    let path = dir.path().join(DB);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(|| verify(&path, fx, true)));
        let _ = tx.send(r.map_err(panic_message));
    });
    match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(Ok(v)) => v,
        Ok(Err(msg)) => Verdict::Panicked(msg),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            // The thread still uses the files.
            std::mem::forget(dir);
            Verdict::Hung
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Verdict::Panicked("verifier thread died".into())
        }
    }
}

/// Hung cases after which a kind stops (a hung thread keeps running, and
/// may keep a core busy).
const MAX_HANGS: usize = 3;

/// Runs the cases of one damage kind; fails listing every case that broke
/// the contract. Stops after [`MAX_HANGS`] hangs.
fn run_kind(kind: &str, cases: Vec<Case>) {
    run_cases(kind, cases, true)
}

/// With `strict` false, wrong data is allowed (pages forged with valid
/// checksums are indistinguishable from written ones); panics and hangs
/// still fail.
fn run_cases(kind: &str, cases: Vec<Case>, strict: bool) {
    let t0 = Instant::now();
    let n = cases.len();
    let (mut exact, mut errored, mut wrong) = (0, 0, 0);
    let mut error_kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut hangs = 0;
    for (label, fx, damage) in cases {
        let label = format!("{}/{label}", fx.name);
        match run_case(fx, damage) {
            Verdict::Exact => exact += 1,
            Verdict::Errored(e) => {
                errored += 1;
                // The first error, without the numbers in it.
                let first = e.split("; ").next().unwrap_or_default();
                let class: String = first.chars().filter(|c| !c.is_ascii_digit()).collect();
                *error_kinds.entry(class).or_default() += 1;
            }
            Verdict::Wrong(w) if !strict => {
                wrong += 1;
                eprintln!(
                    "  {label}: wrong data (allowed here): {}",
                    w.chars().take(200).collect::<String>()
                );
            }
            Verdict::Wrong(w) => failures.push(format!("{label}: WRONG DATA without error: {w}")),
            Verdict::Panicked(m) => failures.push(format!("{label}: PANIC: {m}")),
            Verdict::Hung => {
                hangs += 1;
                if hangs == MAX_HANGS {
                    failures.push(format!(
                        "{label}: HANG (no result after {CASE_TIMEOUT:?}); later cases of this kind skipped"
                    ));
                    break;
                }
                failures.push(format!("{label}: HANG (no result after {CASE_TIMEOUT:?})"));
            }
        }
    }
    eprintln!(
        "{kind}: {n} cases in {:.1?}: {exact} exact, {errored} errors, {wrong} wrong data (allowed: {}), {} broke the contract",
        t0.elapsed(),
        !strict,
        failures.len()
    );
    for (class, n) in &error_kinds {
        eprintln!("  {n} x {class}");
    }
    if !failures.is_empty() {
        panic!(
            "{kind}: {} of {n} cases broke the contract ({}):\n  {}",
            failures.len(),
            if strict {
                "an error or exactly the committed data"
            } else {
                "no panic, no hang"
            },
            failures.join("\n  ")
        );
    }
}

type Case = (String, &'static Fixture, Box<dyn FnOnce(&Path)>);

fn edit_db(dir: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let path = dir.join(DB);
    let mut bytes = std::fs::read(&path).unwrap();
    f(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
}

/// Pages to damage: the explicit ones, then random ones.
fn pick_pages(fx: &Fixture, kind: u64, explicit: &[u32], random: u64) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = explicit
        .iter()
        .enumerate()
        .map(|(i, &p)| (p, rng_for(kind, i as u64)))
        .collect();
    for c in 0..random {
        let mut s = rng_for(kind, 1000 + c);
        let p = 3 + below(&mut s, fx.pages as u64 - 3) as u32;
        out.push((p, s));
    }
    out
}

fn both() -> [&'static Fixture; 2] {
    let (crashed, clean) = fixtures();
    [clean, crashed]
}

#[test]
fn undamaged_files_reopen_exactly() {
    for fx in both() {
        let v = run_case(fx, |_| {});
        assert!(matches!(v, Verdict::Exact), "{}: {v:?}", fx.name);
    }
}

#[test]
fn flipped_bit_in_a_page() {
    let mut cases: Vec<Case> = Vec::new();
    for (fx, random) in both().into_iter().zip([40, 15]) {
        for (page, mut s) in pick_pages(fx, 1, &[0, 1, 2], random) {
            // Page 0: within one of the two header copies.
            let byte = if page == 0 {
                below(&mut s, 48) as usize + 256 * below(&mut s, 2) as usize
            } else {
                below(&mut s, PS as u64) as usize
            };
            let bit = below(&mut s, 8) as u8;
            cases.push((
                format!("page {page} byte {byte} bit {bit}"),
                fx,
                Box::new(move |d: &Path| edit_db(d, |b| b[page as usize * PS + byte] ^= 1 << bit)),
            ));
        }
    }
    run_kind("flipped_bit_in_a_page", cases);
}

#[test]
fn zeroed_page() {
    let mut cases: Vec<Case> = Vec::new();
    for (fx, random) in both().into_iter().zip([25, 10]) {
        for (page, _) in pick_pages(fx, 2, &[1, 2], random) {
            cases.push((
                format!("page {page} zeroed"),
                fx,
                Box::new(move |d: &Path| {
                    edit_db(d, |b| {
                        b[page as usize * PS..(page as usize + 1) * PS].fill(0)
                    })
                }),
            ));
        }
    }
    run_kind("zeroed_page", cases);
}

#[test]
fn swapped_pages() {
    let mut cases: Vec<Case> = Vec::new();
    for (fx, random) in both().into_iter().zip([30u64, 10]) {
        // The catalog root and the meta page with a random page, then random pairs.
        let mut pairs = Vec::new();
        for c in 0..random {
            let mut s = rng_for(3, c + if fx.name == "clean" { 0 } else { 500 });
            let a = match c {
                0 => 1,
                1 => 2,
                _ => 3 + below(&mut s, fx.pages as u64 - 3) as u32,
            };
            let mut b = 3 + below(&mut s, fx.pages as u64 - 3) as u32;
            if b == a {
                b = if a + 1 < fx.pages { a + 1 } else { 3 };
            }
            pairs.push((a, b));
        }
        for (a, b) in pairs {
            cases.push((
                format!("pages {a} and {b} swapped"),
                fx,
                Box::new(move |d: &Path| {
                    edit_db(d, |bytes| {
                        let (a, b) = (a as usize * PS, b as usize * PS);
                        let pa = bytes[a..a + PS].to_vec();
                        bytes.copy_within(b..b + PS, a);
                        bytes[b..b + PS].copy_from_slice(&pa);
                    })
                }),
            ));
        }
    }
    run_kind("swapped_pages", cases);
}

#[test]
fn duplicated_page() {
    let mut cases: Vec<Case> = Vec::new();
    for (fx, random) in both().into_iter().zip([30u64, 10]) {
        for c in 0..random {
            let mut s = rng_for(4, c + if fx.name == "clean" { 0 } else { 500 });
            let from = 3 + below(&mut s, fx.pages as u64 - 3) as u32;
            let to = match c {
                0 => 1,
                1 => 2,
                _ => {
                    let t = 3 + below(&mut s, fx.pages as u64 - 3) as u32;
                    if t == from {
                        if t + 1 < fx.pages { t + 1 } else { 3 }
                    } else {
                        t
                    }
                }
            };
            cases.push((
                format!("page {from} copied over page {to}"),
                fx,
                Box::new(move |d: &Path| {
                    edit_db(d, |bytes| {
                        bytes.copy_within(
                            from as usize * PS..(from as usize + 1) * PS,
                            to as usize * PS,
                        )
                    })
                }),
            ));
        }
    }
    run_kind("duplicated_page", cases);
}

#[test]
fn truncated_database_file() {
    let mut cases: Vec<Case> = Vec::new();
    for (fx, random) in both().into_iter().zip([20u64, 12]) {
        for c in 0..random {
            let mut s = rng_for(5, c + if fx.name == "clean" { 0 } else { 500 });
            let pages = 1 + below(&mut s, fx.pages as u64 - 1);
            // Every other case also cuts a page in half.
            let extra = if c % 2 == 1 {
                below(&mut s, PS as u64 - 1) + 1
            } else {
                0
            };
            let len = pages * PS as u64 + extra;
            cases.push((
                format!("file cut to {len} bytes ({pages} pages + {extra})"),
                fx,
                Box::new(move |d: &Path| {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(d.join(DB))
                        .unwrap()
                        .set_len(len)
                        .unwrap()
                }),
            ));
        }
    }
    run_kind("truncated_database_file", cases);
}

/// A position in the log after the checkpoint with committed records after it.
fn log_position(fx: &Fixture, s: &mut u64) -> (String, u64) {
    let lsn = fx.checkpoint_lsn + below(s, fx.damage_end - fx.checkpoint_lsn);
    (Fixture::seg_name(lsn / SEG), lsn)
}

#[test]
fn flipped_bit_in_the_log() {
    let (crashed, _) = fixtures();
    let mut cases: Vec<Case> = Vec::new();
    for c in 0..80 {
        let mut s = rng_for(6, c);
        let (seg, lsn) = log_position(crashed, &mut s);
        let bit = below(&mut s, 8) as u8;
        cases.push((
            format!("log byte {lsn} ({seg}) bit {bit}"),
            crashed,
            Box::new(move |d: &Path| {
                let p = d.join(&seg);
                let mut b = std::fs::read(&p).unwrap();
                b[(lsn % SEG) as usize] ^= 1 << bit;
                std::fs::write(&p, &b).unwrap();
            }),
        ));
    }
    run_kind("flipped_bit_in_the_log", cases);
}

/// Cuts the log file holding `lsn` there; returns the file's name.
fn cut_log(d: &Path, lsn: u64) -> String {
    let seg = Fixture::seg_name(lsn / SEG);
    std::fs::OpenOptions::new()
        .write(true)
        .open(d.join(&seg))
        .unwrap()
        .set_len(lsn % SEG)
        .unwrap();
    seg
}

#[test]
fn truncated_log() {
    let (crashed, _) = fixtures();
    let mut cases: Vec<Case> = Vec::new();
    for c in 0..40 {
        let mut s = rng_for(7, c);
        let (seg, lsn) = log_position(crashed, &mut s);
        // Even cases: cut one segment file, later ones stay; odd cases: cut
        // the log there (later segments removed too).
        let whole = c % 2 == 1;
        cases.push((
            format!(
                "log cut at {lsn} ({seg}{})",
                if whole {
                    ", later segments removed"
                } else {
                    " only"
                }
            ),
            crashed,
            Box::new(move |d: &Path| {
                cut_log(d, lsn);
                if whole {
                    for later in (lsn / SEG + 1).. {
                        let p = d.join(Fixture::seg_name(later));
                        if std::fs::remove_file(p).is_err() {
                            break;
                        }
                    }
                }
            }),
        ));
    }
    run_kind("truncated_log", cases);
}

#[test]
fn zeroed_range_of_the_log() {
    let (crashed, _) = fixtures();
    let mut cases: Vec<Case> = Vec::new();
    for c in 0..50 {
        let mut s = rng_for(8, c);
        let (seg, lsn) = log_position(crashed, &mut s);
        let off = (lsn % SEG) as usize;
        let len = (1 + below(&mut s, 3000) as usize).min(SEG as usize - off);
        let len = len.min((crashed.damage_end - lsn) as usize).max(1);
        cases.push((
            format!("log bytes {lsn}..{} ({seg}) zeroed", lsn + len as u64),
            crashed,
            Box::new(move |d: &Path| {
                let p = d.join(&seg);
                let mut b = std::fs::read(&p).unwrap();
                let end = (off + len).min(b.len());
                b[off..end].fill(0);
                std::fs::write(&p, &b).unwrap();
            }),
        ));
    }
    run_kind("zeroed_range_of_the_log", cases);
}

/// The log cut below the checkpoint, or its files deleted: the records after the
/// checkpoint (and a crashed run's committed transactions among them) are gone,
/// which must be refused, not opened as an older database. (A log cut exactly at a
/// checkpoint that is also its start, on a segment boundary, looks like a log that
/// ended there; after a clean close that loses nothing.)
#[test]
fn log_cut_before_the_checkpoint_or_deleted() {
    let mut cases: Vec<Case> = Vec::new();
    for fx in both() {
        let db = &fx.files.iter().find(|(n, _)| n == DB).unwrap().1;
        let log_start = header_u64(db, 24);
        let segs: Vec<String> = fx
            .files
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| n.starts_with(&format!("{DB}.wal.")))
            .collect();
        let all = segs.clone();
        cases.push((
            "every log file deleted".into(),
            fx,
            Box::new(move |d: &Path| {
                for n in &all {
                    std::fs::remove_file(d.join(n)).unwrap();
                }
            }),
        ));
        let first = Fixture::seg_name(log_start / SEG);
        cases.push((
            format!("the log file holding the log start ({first}) deleted"),
            fx,
            Box::new(move |d: &Path| std::fs::remove_file(d.join(&first)).unwrap()),
        ));
        // Cuts between the start of the log start's segment and the checkpoint,
        // later segments removed.
        let from = (log_start / SEG) * SEG;
        for c in 0..6 {
            let mut s = rng_for(9, c + 100 * u64::from(fx.name == "clean"));
            let lsn = from + below(&mut s, (fx.checkpoint_lsn - from).max(1));
            let later = segs.clone();
            cases.push((
                format!(
                    "log cut at {lsn}, below the checkpoint at {}",
                    fx.checkpoint_lsn
                ),
                fx,
                Box::new(move |d: &Path| {
                    let seg = cut_log(d, lsn);
                    for n in later.iter().filter(|n| **n > seg) {
                        std::fs::remove_file(d.join(n)).unwrap();
                    }
                }),
            ));
        }
    }
    run_kind("log_cut_before_the_checkpoint_or_deleted", cases);
}

/// The same damage where the committed rows past the checkpoint are in the log
/// alone: a pool large enough that no page is written after a clean close's
/// checkpoint, then 100 rows committed (synced) and a crash. Nothing on the pages
/// tells that the log lost them, so the log itself must: opening is refused
/// (`LogDamaged`), or, where the damage left them readable, all 200 rows are there.
#[test]
fn a_log_that_lost_what_followed_a_clean_checkpoint_is_refused() {
    let big_pool = Options {
        pool_pages: 4096,
        ..opts()
    };
    let src = tempfile::tempdir().unwrap();
    let path = src.path().join(DB);
    let row = |i: u32| (format!("key{i:05}").into_bytes(), value(i, 7));
    // Rows `rows` in one transaction; a crash after it, or a clean close.
    let session = |rows: std::ops::Range<u32>, crash: bool| {
        let db = Database::open(&path, big_pool.clone()).unwrap();
        let t = db.table("t").or_else(|_| db.create_table("t")).unwrap();
        let mut txn = db.begin();
        for i in rows {
            let (k, v) = row(i);
            txn.put(t, &k, &v).unwrap();
        }
        txn.commit().unwrap();
        if crash {
            db.simulate_crash_on_drop();
        }
    };
    session(0..100, false);
    session(100..200, true);
    let files = read_files(src.path());
    let header = &files.iter().find(|(n, _)| n == DB).unwrap().1;
    let log_start = header_u64(header, 24);
    assert!(
        !log_start.is_multiple_of(SEG),
        "the log should start inside a segment: {log_start}"
    );
    let start_seg = Fixture::seg_name(log_start / SEG);
    type Cut<'a> = (String, Box<dyn Fn(&Path) + 'a>);
    let cuts: Vec<Cut> = vec![
        (
            "every log file deleted".into(),
            Box::new(|d: &Path| {
                for (n, _) in files.iter().filter(|(n, _)| n != DB) {
                    std::fs::remove_file(d.join(n)).unwrap();
                }
            }),
        ),
        (
            format!("{start_seg} (holding the log start {log_start}) deleted"),
            Box::new(|d: &Path| std::fs::remove_file(d.join(&start_seg)).unwrap()),
        ),
        (
            format!("{start_seg} cut to half its bytes below the log start"),
            Box::new(|d: &Path| {
                cut_log(d, log_start - log_start % SEG / 2);
            }),
        ),
    ];
    for (what, cut) in cuts {
        let dir = tempfile::tempdir().unwrap();
        for (n, b) in &files {
            std::fs::write(dir.path().join(n), b).unwrap();
        }
        cut(dir.path());
        match Database::open(dir.path().join(DB), big_pool.clone()) {
            Err(btree_db::Error::LogDamaged { .. }) => {}
            Err(e) => panic!("{what}: refused, but not as a damaged log: {e}"),
            Ok(db) => {
                let t = db.table("t").unwrap();
                let mut txn = db.begin();
                let present = (0..200)
                    .filter(|&i| txn.get(t, &row(i).0).unwrap().is_some())
                    .count();
                assert_eq!(present, 200, "{what}: opened with {present} of 200 rows");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Forged pages: structurally hostile pages that pass the checksum.

/// Re-stamps page `id`'s checksum the way the database computes it (CRC-32
/// of the page number, then bytes 4..). Should the format change, the
/// forged pages merely fail their checksum, which the contract allows.
fn reseal(bytes: &mut [u8], id: u32) {
    let page = &mut bytes[id as usize * PS..(id as usize + 1) * PS];
    let mut h = crc32fast::Hasher::new();
    h.update(&id.to_le_bytes());
    h.update(&page[4..]);
    let c = h.finalize();
    page[0..4].copy_from_slice(&c.to_le_bytes());
}

fn page_u8(b: &[u8], id: u32, off: usize) -> u8 {
    b[id as usize * PS + off]
}

fn page_u16(b: &[u8], id: u32, off: usize) -> usize {
    let o = id as usize * PS + off;
    u16::from_le_bytes([b[o], b[o + 1]]) as usize
}

fn page_u32(b: &[u8], id: u32, off: usize) -> u32 {
    let o = id as usize * PS + off;
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn put_u32(b: &mut [u8], id: u32, off: usize, v: u32) {
    let o = id as usize * PS + off;
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

/// A forgery: change page `id` with `f`, then reseal it.
fn forge(id: u32, f: impl FnOnce(&mut [u8]) + 'static) -> Box<dyn FnOnce(&Path)> {
    Box::new(move |d: &Path| {
        edit_db(d, |b| {
            f(b);
            reseal(b, id);
        })
    })
}

/// Byte offset, within its page, of the value of cell `slot`.
fn cell_value_off(b: &[u8], id: u32, slot: usize) -> usize {
    let off = page_u16(b, id, 32 + 2 * slot);
    off + 4 + page_u16(b, id, off)
}

/// Pages forged with valid checksums: a meta page with impossible counts
/// or free-list heads (then `create_table` twice), right links and child
/// pointers into cycles, the meta page or out of range, a catalog entry
/// pointing a table at the meta page, the catalog or another table's root.
/// Wrong answers are allowed here (nothing can tell a well-forged page from
/// a written one); panics and hangs are not.
#[test]
fn forged_pages_never_panic_or_hang() {
    let (_, fx) = fixtures();
    let db: &'static [u8] = &fx.files.iter().find(|(n, _)| n == DB).unwrap().1;
    let count = page_u32(db, 1, 32);
    let kind = |id: u32| page_u8(db, id, 12);
    let leaves: Vec<u32> = (3..fx.pages)
        .filter(|&id| kind(id) == 1 && page_u32(db, id, 16) != 0)
        .collect();
    let branches: Vec<u32> = (3..fx.pages).filter(|&id| kind(id) == 2).collect();
    assert!(leaves.len() > 10 && !branches.is_empty());
    let mut cases: Vec<Case> = Vec::new();

    for v in [0, 1, 2, 3, count - 1, count + 1000, u32::MAX] {
        cases.push((
            format!("meta page count {v}"),
            fx,
            forge(1, move |b| put_u32(b, 1, 32, v)),
        ));
    }
    for v in [1, 2, leaves[0], branches[0], count, u32::MAX] {
        cases.push((
            format!("meta free-list head {v}"),
            fx,
            forge(1, move |b| put_u32(b, 1, 36, v)),
        ));
    }
    let mut s = rng_for(9, 0);
    for c in 0..12 {
        let leaf = leaves[below(&mut s, leaves.len() as u64) as usize];
        let other = leaves[below(&mut s, leaves.len() as u64) as usize];
        let to = match c % 6 {
            0 => leaf,
            1 => other,
            2 => 1,
            3 => 2,
            4 => 0,
            _ => u32::MAX - 7,
        };
        cases.push((
            format!("leaf {leaf} right link {to}"),
            fx,
            forge(leaf, move |b| put_u32(b, leaf, 16, to)),
        ));
    }
    for c in 0..10 {
        let br = branches[below(&mut s, branches.len() as u64) as usize];
        let n = page_u16(db, br, 14);
        if n == 0 {
            continue;
        }
        let slot = below(&mut s, n as u64) as usize;
        let to = match c % 5 {
            0 => br,
            1 => 1,
            2 => 2,
            3 => leaves[below(&mut s, leaves.len() as u64) as usize],
            _ => branches[below(&mut s, branches.len() as u64) as usize],
        };
        let off = cell_value_off(db, br, slot);
        cases.push((
            format!("branch {br} child #{slot} -> {to}"),
            fx,
            forge(br, move |b| put_u32(b, br, off, to)),
        ));
    }
    // A leaf that says it is a branch, and a level out of place.
    for (c, &leaf) in leaves.iter().take(3).enumerate() {
        let (off, v) = if c == 0 { (12, 2u8) } else { (13, c as u8) };
        cases.push((
            format!("leaf {leaf} byte {off} = {v}"),
            fx,
            forge(leaf, move |b| b[leaf as usize * PS + off] = v),
        ));
    }
    // Catalog entries: each table's root pointed elsewhere.
    let n = page_u16(db, 2, 14);
    for slot in 0..n {
        let off = cell_value_off(db, 2, slot);
        for to in [
            1,
            2,
            0,
            leaves[1],
            page_u32(db, 2, cell_value_off(db, 2, (slot + 1) % n)),
        ] {
            cases.push((
                format!("catalog entry #{slot} root -> {to}"),
                fx,
                forge(2, move |b| put_u32(b, 2, off, to)),
            ));
        }
    }
    run_cases("forged_pages_never_panic_or_hang", cases, false);
}
