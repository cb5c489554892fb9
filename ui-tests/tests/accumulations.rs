//! Sequential equivalence of accumulations through the macros (split from
//! `equivalence.rs`): every annotated function is run at 1, 2 and 4 threads and
//! compared with the same function written without annotations.

use std::collections::HashMap;
use tls_runtime::{checkpoint, tls_loop};

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
// Write-only accumulations.
// ---------------------------------------------------------------------------------------

#[derive(Debug, PartialEq)]
struct Totals {
    sum: f64,
    count: i64,
    flags: u32,
    order: Vec<usize>,
    words: Vec<String>,
    index: HashMap<u64, usize>,
    text: String,
}

#[tls_loop(threads = threads)]
fn accumulate(xs: &[u64], threads: usize, hits: &mut Vec<u64>) -> Totals {
    let mut sum = 0.0f64;
    let mut count = 1000i64;
    let mut flags = 0u32;
    let mut order = Vec::new();
    let mut words = Vec::new();
    let mut index = HashMap::new();
    let mut text = String::new();
    for (i, &x) in xs.iter().enumerate() {
        let w = work(x);
        sum += 1.0 / (w % 1000 + 1) as f64;
        count -= 1;
        flags |= 1 << (w % 32);
        order.push(i);
        words.extend((0..w % 3).map(|k| format!("{i}.{k}")));
        index.insert(w % 50, i);
        text.push_str(if w.is_multiple_of(2) { "e" } else { "o" });
        if w.is_multiple_of(5) {
            hits.push(x);
        }
    }
    Totals {
        sum,
        count,
        flags,
        order,
        words,
        index,
        text,
    }
}

fn accumulate_plain(xs: &[u64], hits: &mut Vec<u64>) -> Totals {
    let mut sum = 0.0f64;
    let mut count = 1000i64;
    let mut flags = 0u32;
    let mut order = Vec::new();
    let mut words = Vec::new();
    let mut index = HashMap::new();
    let mut text = String::new();
    for (i, &x) in xs.iter().enumerate() {
        let w = work(x);
        sum += 1.0 / (w % 1000 + 1) as f64;
        count -= 1;
        flags |= 1 << (w % 32);
        order.push(i);
        words.extend((0..w % 3).map(|k| format!("{i}.{k}")));
        index.insert(w % 50, i);
        text.push_str(if w.is_multiple_of(2) { "e" } else { "o" });
        if w.is_multiple_of(5) {
            hits.push(x);
        }
    }
    Totals {
        sum,
        count,
        flags,
        order,
        words,
        index,
        text,
    }
}

#[test]
fn accumulations_give_the_sequential_result_bit_for_bit() {
    let xs: Vec<u64> = (0..500).collect();
    let mut expected_hits = Vec::new();
    let expected = accumulate_plain(&xs, &mut expected_hits);
    for t in THREADS {
        let mut hits = Vec::new();
        let got = accumulate(&xs, t, &mut hits);
        assert_eq!(
            got.sum.to_bits(),
            expected.sum.to_bits(),
            "f64 sum, threads {t}"
        );
        assert_eq!(got, expected, "threads {t}");
        assert_eq!(hits, expected_hits, "threads {t}");
    }
}

/// Fields of a caller's value, accumulated through local `&mut` borrows.
#[derive(Debug, Default, PartialEq)]
struct Ledger {
    total: u64,
    seen: Vec<u64>,
    text: String,
}

#[tls_loop(threads = threads)]
fn into_fields(ledger: &mut Ledger, xs: &[u64], threads: usize) {
    let total = &mut ledger.total;
    let seen: &mut Vec<u64> = &mut ledger.seen;
    let text = &mut ledger.text;
    for &x in xs {
        let w = work(x);
        *total += w % 100;
        seen.push(w % 7);
        text.push_str(&format!("{},", w % 10));
    }
}

fn into_fields_plain(ledger: &mut Ledger, xs: &[u64]) {
    let total = &mut ledger.total;
    let seen: &mut Vec<u64> = &mut ledger.seen;
    let text = &mut ledger.text;
    for &x in xs {
        let w = work(x);
        *total += w % 100;
        seen.push(w % 7);
        text.push_str(&format!("{},", w % 10));
    }
}

#[test]
fn accumulations_through_local_mutable_borrows_give_the_sequential_result() {
    let xs: Vec<u64> = (0..500).collect();
    let mut expected = Ledger::default();
    into_fields_plain(&mut expected, &xs);
    for t in THREADS {
        let mut got = Ledger::default();
        into_fields(&mut got, &xs, t);
        assert_eq!(got, expected, "threads {t}");
    }
}

// ---------------------------------------------------------------------------------------
// Locals named like an accumulated variable: plain code in their scope.
// ---------------------------------------------------------------------------------------

#[tls_loop(threads = threads)]
fn shadowed(xs: &[u64], threads: usize) -> (u64, Vec<u64>) {
    let mut total = 0u64;
    let mut out = Vec::new();
    for &x in xs {
        let w = work(x);
        total += w % 1000;
        {
            let mut total = w % 7;
            total += 1;
            out.push(total);
        }
        match w % 4 {
            0 => {
                out.push(x);
            }
            mut out => {
                out += 1;
                total += out;
            }
        }
        let step = |total: u64| total % 5;
        let mut total = step(w);
        checkpoint!();
        total += 1;
        out.push(total);
    }
    (total, out)
}

fn shadowed_plain(xs: &[u64]) -> (u64, Vec<u64>) {
    let mut total = 0u64;
    let mut out = Vec::new();
    for &x in xs {
        let w = work(x);
        total += w % 1000;
        {
            let mut total = w % 7;
            total += 1;
            out.push(total);
        }
        match w % 4 {
            0 => {
                out.push(x);
            }
            mut out => {
                out += 1;
                total += out;
            }
        }
        let step = |total: u64| total % 5;
        let mut total = step(w);
        total += 1;
        out.push(total);
    }
    (total, out)
}

#[test]
fn shadowing_locals_stay_local_and_accumulations_stay_sequential() {
    let xs: Vec<u64> = (0..300).collect();
    let expected = shadowed_plain(&xs);
    for t in THREADS {
        assert_eq!(shadowed(&xs, t), expected, "threads {t}");
    }
}
