use std::thread;
use tls_runtime::{SpecVec, tls_loop};

// Each iteration fans its work out to threads that write speculative data.
#[tls_loop]
fn scatter(out: &SpecVec<u64>, rows: &[Vec<u64>]) {
    for (i, row) in rows.iter().enumerate() {
        std::thread::scope(|s| {
            s.spawn(|| out.set(i, row.iter().sum()));
        });
    }
}

// A background thread per iteration, and a named one through the builder.
#[tls_loop]
fn log_each(out: &'static SpecVec<u64>, n: usize) {
    for i in 0..n {
        let t = thread::spawn(move || out.set(i, i as u64));
        t.join().unwrap();
        thread::Builder::new()
            .name(format!("row {i}"))
            .spawn(move || out.update(i, |v| *v += 1))
            .unwrap()
            .join()
            .unwrap();
    }
}

// Threads before and after the loop, and in a function the body calls, are not
// the body's: no error for those.
#[tls_loop]
fn around(out: &'static SpecVec<u64>, n: usize) {
    let warm = std::thread::spawn(|| 1u64);
    for i in 0..n {
        out.set(i, helper(i));
    }
    warm.join().unwrap();
}

// A thread started from an `on_commit` action runs when the iteration commits, or
// in an escaped call, outside speculation: accepted.
#[tls_loop]
fn notify(out: &'static SpecVec<u64>, n: usize) {
    for i in 0..n {
        out.set(i, i as u64);
        tls_runtime::on_commit(move || {
            std::thread::spawn(move || println!("row {i} committed"));
        });
    }
}

// Threads started once the iteration is homefree: accepted.
#[tls_loop]
fn fan_out(out: &SpecVec<u64>, rows: &[Vec<u64>]) {
    for (i, row) in rows.iter().enumerate() {
        tls_runtime::scope(|s| {
            s.spawn(|| out.set(i, row.iter().sum()));
        });
        let n = tls_runtime::when_homefree(|| std::thread::scope(|_| row.len()));
        out.update(i, |v| *v += n as u64);
    }
}

fn helper(i: usize) -> u64 {
    std::thread::scope(|_| i as u64)
}

fn main() {}
