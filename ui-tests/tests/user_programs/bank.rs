//! A small bank: a struct holding a `SpecMap` (accounts by id) and a `SpecVec` (branch
//! totals); transfers parsed from text with `?`; a `#[tls_loop]` method with a
//! `checkpoint!()`, an `#[on_commit]` audit log behind a `Mutex`, and an early
//! `return Err` when an account would be overdrawn.

use crate::common::{ROUNDS, THREADS, assert_same, spin};
use std::collections::HashMap;
use std::sync::Mutex;
use tls_runtime::{SpecMap, SpecVec, checkpoint, on_commit, tls_loop};

#[derive(Debug, Clone, PartialEq)]
enum BankError {
    Parse(String),
    Overdrawn { account: u32, line: usize },
}

#[derive(Debug, Clone, PartialEq)]
struct Transfer {
    from: u32,
    to: u32,
    amount: i64,
}

fn parse(line: &str) -> Result<Transfer, BankError> {
    let mut it = line.split_whitespace();
    let mut num = |what: &str| -> Result<i64, BankError> {
        it.next()
            .ok_or_else(|| BankError::Parse(format!("missing {what} in {line:?}")))?
            .parse::<i64>()
            .map_err(|e| BankError::Parse(format!("{what}: {e}")))
    };
    Ok(Transfer {
        from: num("from")? as u32,
        to: num("to")? as u32,
        amount: num("amount")?,
    })
}

/// The audit log, written at commit. Only this file's test uses it, and it clears it
/// before each round.
static AUDIT: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[on_commit]
fn audit(entry: String) {
    AUDIT.lock().unwrap().push(entry);
}

struct Bank {
    accounts: SpecMap<u32, i64>,
    branch_totals: SpecVec<i64>,
}

const ACCOUNTS: u32 = 20;
const BRANCHES: usize = 4;

/// Lines per script: short enough that the plain script completes (with these
/// accounts its first overdraft would come at line 196).
const LINES: usize = 150;

impl Bank {
    fn new(n: u32) -> Self {
        let accounts = SpecMap::new();
        for a in 0..n {
            accounts.insert(a, 100);
        }
        Bank {
            accounts,
            branch_totals: SpecVec::from(vec![100 * (n as i64) / BRANCHES as i64; BRANCHES]),
        }
    }

    fn withdraw(&self, account: u32, amount: i64, line: usize) -> Result<i64, BankError> {
        let bal = self.accounts.get(&account).unwrap_or(0);
        if bal < amount {
            return Err(BankError::Overdrawn { account, line });
        }
        self.accounts.insert(account, bal - amount);
        Ok(bal - amount)
    }

    #[tls_loop(name = "bank", threads = threads)]
    fn apply(&self, lines: &[String], threads: usize) -> Result<(usize, i64), BankError> {
        let mut applied = 0usize;
        let mut fees = 0i64;
        for (n, line) in lines.iter().enumerate() {
            let t = parse(line)?;
            let fee = (t.amount / 50).max(1);
            spin(3);
            let left = self.withdraw(t.from, t.amount + fee, n)?;
            checkpoint!();
            self.accounts.update_or_insert(t.to, t.amount);
            self.branch_totals
                .update(t.from as usize % BRANCHES, |b| *b -= t.amount + fee);
            self.branch_totals
                .update(t.to as usize % BRANCHES, |b| *b += t.amount);
            audit(format!(
                "{n}: {} -> {} {} (left {left})",
                t.from, t.to, t.amount
            ));
            applied += 1;
            fees += fee;
        }
        Ok((applied, fees))
    }
}

trait UpdateOrInsert {
    fn update_or_insert(&self, k: u32, add: i64);
}

impl UpdateOrInsert for SpecMap<u32, i64> {
    fn update_or_insert(&self, k: u32, add: i64) {
        let cur = self.get(&k).unwrap_or(0);
        self.insert(k, cur + add);
    }
}

/// The sequential twin.
fn apply_plain(
    accounts: &mut HashMap<u32, i64>,
    branches: &mut [i64],
    log: &mut Vec<String>,
    lines: &[String],
) -> Result<(usize, i64), BankError> {
    let mut applied = 0;
    let mut fees = 0;
    for (n, line) in lines.iter().enumerate() {
        let t = parse(line)?;
        let fee = (t.amount / 50).max(1);
        let bal = *accounts.get(&t.from).unwrap_or(&0);
        if bal < t.amount + fee {
            return Err(BankError::Overdrawn {
                account: t.from,
                line: n,
            });
        }
        accounts.insert(t.from, bal - t.amount - fee);
        *accounts.entry(t.to).or_insert(0) += t.amount;
        branches[t.from as usize % BRANCHES] -= t.amount + fee;
        branches[t.to as usize % BRANCHES] += t.amount;
        log.push(format!(
            "{n}: {} -> {} {} (left {})",
            t.from,
            t.to,
            t.amount,
            bal - t.amount - fee
        ));
        applied += 1;
        fees += fee;
    }
    Ok((applied, fees))
}

/// `n` transfer lines; variant 1 has a parse error midway, variant 2 an overdraft.
fn script(n: usize, variant: usize) -> Vec<String> {
    let mut lines: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "{} {} {}",
                (i * 7) % 20,
                (i * 3 + 1) % 20,
                1 + (i * 13) % 30
            )
        })
        .collect();
    match variant {
        1 => lines[n / 2] = "3 x 10".into(),
        2 => lines[2 * n / 3] = format!("5 6 {}", 10_000),
        _ => {}
    }
    lines
}

fn run_once(threads: usize, round: usize, variant: usize, n: usize) {
    let what = format!("bank, threads = {threads}, round {round}, variant {variant}");
    let lines = script(n, variant);
    AUDIT.lock().unwrap().clear();
    let bank = Bank::new(ACCOUNTS);
    let got = bank.apply(&lines, threads);

    let mut accounts: HashMap<u32, i64> = (0..ACCOUNTS).map(|a| (a, 100)).collect();
    let mut branches = vec![100 * ACCOUNTS as i64 / BRANCHES as i64; BRANCHES];
    let mut log = vec![];
    let want = apply_plain(&mut accounts, &mut branches, &mut log, &lines);
    // The twin itself ends as each variant means it to.
    match (variant, &want) {
        (0, Ok((applied, _))) => assert_eq!(*applied, n, "{what}: twin"),
        (1, Err(BankError::Parse(msg))) => assert!(msg.starts_with("to:"), "{what}: twin"),
        (2, Err(BankError::Overdrawn { account, line })) => {
            assert_eq!((*account, *line), (5, 2 * n / 3), "{what}: twin")
        }
        _ => panic!("{what}: the twin ended with {want:?}"),
    }

    assert_eq!(got, want, "{what}: result");
    assert_same(&AUDIT.lock().unwrap(), &log, &format!("{what}: audit log"));
    let Bank {
        accounts: acc,
        branch_totals,
    } = bank;
    let mut a: Vec<_> = acc.into_map().into_iter().collect();
    a.sort();
    let mut b: Vec<_> = accounts.into_iter().collect();
    b.sort();
    assert_same(&a, &b, &format!("{what}: accounts"));
    assert_same(
        &branch_totals.into_vec(),
        &branches,
        &format!("{what}: branch totals"),
    );
}

/// Transfers applied by a `#[tls_loop]` method of a struct holding a `SpecMap` and a
/// `SpecVec`, with a checkpoint, an `#[on_commit]` audit log and early `Err` returns
/// (from `?` on a parse error and from an overdraft), equal the sequential twin's:
/// result, audit log in order, balances and branch totals.
#[test]
fn bank_transfers_match_the_sequential_bank() {
    for threads in THREADS {
        for round in 0..ROUNDS {
            for variant in 0..3 {
                run_once(threads, round, variant, LINES);
            }
        }
    }
}
