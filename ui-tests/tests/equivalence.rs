//! Sequential equivalence through the macros: every annotated function is run at 1, 2
//! and 4 threads and compared with the same function written without annotations.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use tls_runtime::{Spec, SpecMap, SpecVec, checkpoint, escape, on_commit, on_violation, tls_loop};

const THREADS: [usize; 3] = [1, 2, 4];

/// Busy work, so epochs overlap.
fn work(x: u64) -> u64 {
    let mut h = x ^ 0x9e37_79b9_7f4a_7c15;
    for _ in 0..200 {
        h = h.wrapping_mul(0x5851_f42d_4c95_7f2d).wrapping_add(1) ^ (h >> 29);
    }
    h
}

// ---------------------------------------------------------------------------------------
// Checkpoints: locals carried across sub-thread boundaries, conflicts after them.
// ---------------------------------------------------------------------------------------

#[tls_loop(threads = threads)]
fn transfer_all(accounts: &SpecVec<i64>, moves: &[(usize, usize, i64)], threads: usize) -> i64 {
    let mut fees = 0;
    for &(from, to, amount) in moves {
        let label = format!("{from}->{to}");
        let mut fee = (work(amount as u64) % 3) as i64;
        let a = accounts.get(from);
        accounts.set(from, a - amount);
        checkpoint!();
        fee += label.len() as i64 % 2;
        accounts.update(to, |b| *b += amount - fee);
        checkpoint!();
        let total = accounts.get(0);
        accounts.set(0, total + fee);
        fees += fee;
    }
    fees
}

fn transfer_all_plain(accounts: &SpecVec<i64>, moves: &[(usize, usize, i64)]) -> i64 {
    let mut fees = 0;
    for &(from, to, amount) in moves {
        let label = format!("{from}->{to}");
        let mut fee = (work(amount as u64) % 3) as i64;
        let a = accounts.get(from);
        accounts.set(from, a - amount);
        fee += label.len() as i64 % 2;
        accounts.update(to, |b| *b += amount - fee);
        let total = accounts.get(0);
        accounts.set(0, total + fee);
        fees += fee;
    }
    fees
}

fn moves() -> Vec<(usize, usize, i64)> {
    (0..300u64)
        .map(|i| {
            (
                (work(i) % 16) as usize,
                (work(i + 7) % 16) as usize,
                (i % 50) as i64,
            )
        })
        .collect()
}

#[test]
fn checkpoints_carry_locals_and_keep_sequential_results() {
    let moves = moves();
    let expected_accounts = SpecVec::from(vec![1000i64; 16]);
    let expected_fees = transfer_all_plain(&expected_accounts, &moves);
    for t in THREADS {
        let accounts = SpecVec::from(vec![1000i64; 16]);
        let fees = transfer_all(&accounts, &moves, t);
        assert_eq!(fees, expected_fees, "threads = {t}");
        assert_eq!(
            accounts.into_vec(),
            expected_accounts.clone_vec(),
            "threads = {t}"
        );
    }
}

trait CloneVec {
    fn clone_vec(&self) -> Vec<i64>;
}
impl CloneVec for SpecVec<i64> {
    fn clone_vec(&self) -> Vec<i64> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }
}

// ---------------------------------------------------------------------------------------
// Early exits: break, return, `?`, labelled jumps.
// ---------------------------------------------------------------------------------------

#[derive(Debug, PartialEq)]
enum Found {
    Index(usize),
    Nothing,
}

#[tls_loop(threads = threads)]
fn first_big(values: &SpecVec<u64>, limit: u64, threads: usize) -> Found {
    for i in 0..values.len() {
        let v = work(values.get(i)) % 1000;
        values.set(i, v);
        if v > limit {
            return Found::Index(i);
        }
    }
    Found::Nothing
}

fn first_big_plain(values: &SpecVec<u64>, limit: u64) -> Found {
    for i in 0..values.len() {
        let v = work(values.get(i)) % 1000;
        values.set(i, v);
        if v > limit {
            return Found::Index(i);
        }
    }
    Found::Nothing
}

#[tls_loop(threads = threads)]
fn parse_all(lines: &[&str], out: &SpecVec<i64>, threads: usize) -> Result<usize, String> {
    let mut parsed = 0;
    for (i, line) in lines.iter().enumerate() {
        let n: i64 = line.trim().parse().map_err(|e| format!("line {i}: {e}"))?;
        if n < 0 {
            break;
        }
        if n == 0 {
            continue;
        }
        out.set(i, n * 2);
        parsed += 1;
    }
    Ok(parsed)
}

fn parse_all_plain(lines: &[&str], out: &SpecVec<i64>) -> Result<usize, String> {
    let mut parsed = 0;
    for (i, line) in lines.iter().enumerate() {
        let n: i64 = line.trim().parse().map_err(|e| format!("line {i}: {e}"))?;
        if n < 0 {
            break;
        }
        if n == 0 {
            continue;
        }
        out.set(i, n * 2);
        parsed += 1;
    }
    Ok(parsed)
}

#[tls_loop(threads = threads)]
fn grid(cells: &SpecVec<u64>, threads: usize) -> Option<u64> {
    let mut visited = 0u64;
    'rows: for row in 0..20u64 {
        let mut col = 0;
        while col < 20 {
            col += 1;
            let v = work(row * 20 + col) % 97;
            if v == 3 {
                continue 'rows;
            }
            if v == 5 && row > 15 {
                break 'rows;
            }
            cells.set((row * 20 + col - 1) as usize, v);
            visited += 1;
        }
        let first = cells.get((row * 20) as usize);
        first.checked_sub(100)?;
    }
    Some(visited)
}

fn grid_plain(cells: &SpecVec<u64>) -> Option<u64> {
    let mut visited = 0u64;
    'rows: for row in 0..20u64 {
        let mut col = 0;
        while col < 20 {
            col += 1;
            let v = work(row * 20 + col) % 97;
            if v == 3 {
                continue 'rows;
            }
            if v == 5 && row > 15 {
                break 'rows;
            }
            cells.set((row * 20 + col - 1) as usize, v);
            visited += 1;
        }
        let first = cells.get((row * 20) as usize);
        first.checked_sub(100)?;
    }
    Some(visited)
}

#[test]
fn early_exits_match_the_sequential_loop() {
    for limit in [990, 998, 1000] {
        let seq = SpecVec::from((0..200).collect::<Vec<u64>>());
        let expected = first_big_plain(&seq, limit);
        for t in THREADS {
            let v = SpecVec::from((0..200).collect::<Vec<u64>>());
            assert_eq!(
                first_big(&v, limit, t),
                expected,
                "limit {limit}, threads {t}"
            );
            assert_eq!(v.into_vec(), seq.clone_u64(), "limit {limit}, threads {t}");
        }
    }
    let inputs: [&[&str]; 3] = [
        &["1", "2", "0", "4", "5", "6"],
        &["1", "2", "x", "4", "-1"],
        &["1", "2", "3", "-4", "oops"],
    ];
    for lines in inputs {
        let seq = SpecVec::from(vec![0i64; lines.len()]);
        let expected = parse_all_plain(lines, &seq);
        for t in THREADS {
            let out = SpecVec::from(vec![0i64; lines.len()]);
            assert_eq!(
                parse_all(lines, &out, t),
                expected,
                "{lines:?}, threads {t}"
            );
            assert_eq!(out.into_vec(), seq.clone_vec(), "{lines:?}, threads {t}");
        }
    }
    let seq = SpecVec::from(vec![0u64; 400]);
    let expected = grid_plain(&seq);
    for t in THREADS {
        let cells = SpecVec::from(vec![0u64; 400]);
        assert_eq!(grid(&cells, t), expected, "threads {t}");
        assert_eq!(cells.into_vec(), seq.clone_u64(), "threads {t}");
    }
}

trait CloneU64 {
    fn clone_u64(&self) -> Vec<u64>;
}
impl CloneU64 for SpecVec<u64> {
    fn clone_u64(&self) -> Vec<u64> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }
}

// ---------------------------------------------------------------------------------------
// Escapes with undo actions, commit-time calls.
// ---------------------------------------------------------------------------------------

static PINS: AtomicI64 = AtomicI64::new(0);
static UNDONE: AtomicUsize = AtomicUsize::new(0);
static UNPINNED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

fn page_exists(id: &u64) -> bool {
    *id < 1_000_000
}

fn put_page_undo(id: &u64) {
    let _ = id;
    PINS.fetch_sub(1, Ordering::SeqCst);
    UNDONE.fetch_add(1, Ordering::SeqCst);
}

/// Pins a page: runs for real even from a speculative epoch.
#[escape(check = page_exists)]
#[on_violation(put_page_undo)]
fn get_page(id: u64) -> u64 {
    PINS.fetch_add(1, Ordering::SeqCst);
    id
}

/// Unpins at commit, in epoch order.
#[on_commit]
fn put_page(id: u64) {
    PINS.fetch_sub(1, Ordering::SeqCst);
    UNPINNED.lock().unwrap().push(id);
}

#[tls_loop(threads = threads)]
fn touch_pages(counter: &Spec<u64>, ids: &[u64], threads: usize) -> u64 {
    for &id in ids {
        let page = get_page(id);
        let w = work(page) % 7;
        // Every epoch depends on the one before: violations and rollbacks.
        let c = counter.get();
        counter.set(c + w);
        put_page(page);
    }
    counter.get()
}

fn touch_pages_plain(counter: &Spec<u64>, ids: &[u64]) -> u64 {
    for &id in ids {
        let w = work(id) % 7;
        let c = counter.get();
        counter.set(c + w);
    }
    counter.get()
}

#[test]
fn escapes_are_undone_and_commit_calls_run_in_order() {
    let ids: Vec<u64> = (0..300).map(|i| i * 3).collect();
    let expected = touch_pages_plain(&Spec::new(0), &ids);
    for t in THREADS {
        UNPINNED.lock().unwrap().clear();
        let counter = Spec::new(0);
        assert_eq!(touch_pages(&counter, &ids, t), expected, "threads {t}");
        assert_eq!(PINS.load(Ordering::SeqCst), 0, "pins balanced, threads {t}");
        assert_eq!(*UNPINNED.lock().unwrap(), ids, "unpin order, threads {t}");
    }
    // Called outside any loop, they are plain calls.
    assert_eq!(get_page(5), 5);
    put_page(5);
    assert_eq!(PINS.load(Ordering::SeqCst), 0);
}

// ---------------------------------------------------------------------------------------
// Output: printed in sequential order (checked in a child process), commit-time log.
// ---------------------------------------------------------------------------------------

static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[on_commit]
fn log(line: String) {
    LOG.lock().unwrap().push(line);
}

#[tls_loop(threads = threads)]
fn report(table: &SpecMap<u64, u64>, n: u64, threads: usize) {
    for i in 0..n {
        let v = work(i) % 10;
        table.insert(i % 7, v);
        log(format!("{i}:{v}"));
        println!("line {i} {v}");
        if v == 3 {
            eprintln!("three at {i}");
        }
    }
}

fn report_plain(table: &SpecMap<u64, u64>, n: u64) -> Vec<String> {
    let mut lines = Vec::new();
    for i in 0..n {
        let v = work(i) % 10;
        table.insert(i % 7, v);
        lines.push(format!("{i}:{v}"));
    }
    lines
}

#[test]
fn commit_time_calls_keep_epoch_order() {
    let expected = report_plain(&SpecMap::new(), 200);
    for t in THREADS {
        LOG.lock().unwrap().clear();
        report(&SpecMap::new(), 200, t);
        assert_eq!(*LOG.lock().unwrap(), expected, "threads {t}");
    }
}

/// Runs only as the child of `printing_keeps_sequential_order`.
#[test]
fn printing_child() {
    let Ok(t) = std::env::var("TLS_UI_PRINT_CHILD") else {
        return;
    };
    report(&SpecMap::new(), 200, t.parse().unwrap());
}

#[test]
fn printing_keeps_sequential_order() {
    let expected: Vec<String> = (0..200)
        .map(|i| format!("line {i} {}", work(i) % 10))
        .collect();
    for t in THREADS {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "printing_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TLS_UI_PRINT_CHILD", t.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "child failed: {out:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<String> = stdout
            .lines()
            // libtest prints "test printing_child ... " before the first line.
            .filter_map(|l| l.find("line ").map(|p| l[p..].to_string()))
            .collect();
        assert_eq!(lines, expected, "threads {t}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        let threes: Vec<&str> = stderr.lines().filter(|l| l.starts_with("three")).collect();
        let expected_threes: Vec<String> = (0..200)
            .filter(|&i| work(i) % 10 == 3)
            .map(|i| format!("three at {i}"))
            .collect();
        assert_eq!(threes, expected_threes, "threads {t}");
    }
}

// ---------------------------------------------------------------------------------------
// Loop sources that mention an accumulated variable; names that look like variables.
// ---------------------------------------------------------------------------------------

#[tls_loop(threads = threads)]
fn doubled(start: Option<Vec<u64>>, threads: usize) -> Vec<u64> {
    let mut log = match start {
        Some(v) => v,
        None => vec![1, 2, 3],
    };
    // The source is evaluated once, before the body runs, as sequentially.
    for x in log.clone() {
        let extra = if x > 100 { Some(x) } else { None };
        log.push(x * 10 + extra.map_or(0, |e| e % 2));
        println!("{}", [x].len());
    }
    log
}

#[test]
fn loop_source_is_evaluated_before_accumulating() {
    for t in THREADS {
        assert_eq!(doubled(None, t), [1, 2, 3, 10, 20, 30], "threads {t}");
        assert_eq!(doubled(Some(vec![5]), t), [5, 50], "threads {t}");
    }
}

// ---------------------------------------------------------------------------------------
// Reports name the loop and point at the user's `for`.
// ---------------------------------------------------------------------------------------

#[tls_loop(name = "squares", threads = 2, chunk = 2)]
fn squares(v: &SpecVec<u64>) {
    for i in 0..v.len() {
        v.set(i, (i * i) as u64);
    }
}

#[tls_loop(threads = 2)]
fn unnamed(v: &SpecVec<u64>) {
    for i in 0..v.len() {
        v.set(i, i as u64);
    }
}

#[test]
fn reports_name_the_loop_and_its_source_line() {
    let v = SpecVec::from(vec![0u64; 64]);
    squares(&v);
    let r = tls_runtime::last_report().expect("a report");
    assert_eq!(r.name, "squares");
    assert!(
        r.location.file().ends_with("equivalence.rs"),
        "{}",
        r.location.file()
    );
    assert_eq!(v.get(7), 49);
    unnamed(&v);
    let r = tls_runtime::last_report().expect("a report");
    let src = include_str!("equivalence.rs");
    let for_line = src
        .lines()
        .position(|l| l.contains("fn unnamed("))
        .map(|i| i as u32 + 2)
        .unwrap();
    assert_eq!(
        r.location.line(),
        for_line,
        "the report points at the `for`"
    );
}
