use tls_runtime::{SpecVec, tls_loop};

const C: usize = 8;

// A negative chunk, before another option.
#[tls_loop(chunk = -2, threads = 2)]
fn negative_chunk(v: &SpecVec<u32>) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

// A constant: the attribute takes a literal.
#[tls_loop(chunk = C)]
fn constant_chunk(v: &SpecVec<u32>) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

// A value in parentheses.
#[tls_loop(threads(2))]
fn listed_threads(v: &SpecVec<u32>) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

// A string where an expression goes.
#[tls_loop(threads = "2")]
fn quoted_threads(v: &SpecVec<u32>) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

fn main() {}
