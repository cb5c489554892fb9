//! Locals of a loop body named like an outer accumulated variable: in an inner block,
//! after a `let`, as closure parameters, `for` / `while let` / `match` / `if let` /
//! `let else` bindings, a nested `fn` item, across a checkpoint. From its binding to the
//! end of its scope the local is plain code; elsewhere the outer variable is still
//! accumulated into. Each result is the sequential one.
use tls_runtime::{checkpoint, tls_loop};

/// The shape of the issue: a `let` in an inner block, then one for the rest of the body.
#[tls_loop(threads = 2)]
fn blocks_and_lets(v: &[u64]) -> u64 {
    let mut total = 0;
    for &x in v {
        total += x;
        {
            let mut total = 1;
            total += x;
            assert!(total > 0);
        }
        let mut total = x;
        total += 1;
        let _ = total;
    }
    total
}

/// A shadowed `out` assigned, borrowed `&mut` and pushed to.
#[tls_loop(threads = 2)]
fn pushes(v: &[u64]) -> (Vec<u64>, usize) {
    let mut out = Vec::new();
    let mut lens = 0;
    for &x in v {
        out.push(x);
        let len = {
            let mut out = vec![x; 2];
            out.push(x + 1);
            out = out.into_iter().rev().collect();
            let r = &mut out;
            r.push(0);
            out.len()
        };
        lens += len;
    }
    (out, lens)
}

/// Closure parameters and pattern bindings.
#[tls_loop(threads = 2)]
fn patterns(v: &[u64]) -> (u64, Vec<u64>) {
    let mut total = 0;
    let mut out = Vec::new();
    for &x in v {
        let double = |total: u64| total * 2;
        let pushed = |mut out: Vec<u64>, y| {
            out.push(y);
            out
        };
        total += double(x);
        out.push(pushed(Vec::new(), x).len() as u64);
        for mut total in 0..x % 3 {
            total += 1;
            assert!(total >= 1);
        }
        let mut rest = vec![x, x + 1].into_iter();
        while let Some(mut total) = rest.next() {
            total += 1;
            assert!(total > x);
        }
        match x % 3 {
            0 => total += 1,
            mut total => {
                total += 10;
                out.push(total);
            }
        }
        if let Some(mut out) = x.is_multiple_of(2).then(Vec::new) {
            out.push(x);
            assert_eq!(out, [x]);
        } else {
            // The `if let` binding ends with its block: this is the outer `out`.
            out.push(0);
        }
        let Some(mut total) = x.checked_add(1) else {
            continue;
        };
        total += 1;
        assert_eq!(total, x + 2);
    }
    (total, out)
}

/// A nested `fn` item names its value in its whole block.
#[tls_loop(threads = 2)]
fn items(v: &[u64]) -> (u64, u64) {
    let mut total = 0;
    let mut calls = 0;
    for &x in v {
        total += x;
        {
            calls += total();
            fn total() -> u64 {
                let mut total = 2;
                total += 1;
                total
            }
        }
    }
    (total, calls)
}

/// Not `Clone`: a local that must not be carried across a checkpoint.
struct Guard(u64);

/// Top-level lets of one segment shadow in the next; a local only shadowed after the
/// checkpoint is not carried.
#[tls_loop(threads = 2)]
fn across_checkpoints(v: &[u64]) -> (u64, u64) {
    let mut total = 0;
    let mut sum = 0;
    for &x in v {
        total += x;
        let mut total = x * 2;
        let guard = Guard(x);
        assert_eq!(guard.0, x);
        checkpoint!();
        total += 1;
        sum += total;
        {
            let guard = 5;
            sum += guard;
        }
    }
    (total, sum)
}

fn main() {
    let v: Vec<u64> = (0..40).collect();
    let n = v.len() as u64;
    let sum: u64 = v.iter().sum();

    assert_eq!(blocks_and_lets(&v), sum);

    assert_eq!(pushes(&v), (v.clone(), 4 * v.len()));

    let mut expected_out = Vec::new();
    for &x in &v {
        expected_out.push(1);
        if x % 3 != 0 {
            expected_out.push(x % 3 + 10);
        }
        if x % 2 == 1 {
            expected_out.push(0);
        }
    }
    let threes = v.iter().filter(|x| *x % 3 == 0).count() as u64;
    assert_eq!(patterns(&v), (2 * sum + threes, expected_out));

    assert_eq!(items(&v), (sum, 3 * n));

    assert_eq!(across_checkpoints(&v), (sum, 2 * sum + n + 5 * n));
}
