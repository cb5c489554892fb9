use std::fmt::Write;
use tls_runtime::{SpecVec, tls_loop};

#[tls_loop]
fn list(v: &SpecVec<u32>) -> String {
    let mut s = String::new();
    for i in 0..v.len() {
        write!(s, "{i},").unwrap();
        v.set(i, 1);
    }
    s
}

// Right: each piece an accumulation, joined after the loop.
#[tls_loop]
fn list_joined(v: &SpecVec<u32>) -> String {
    let mut parts = Vec::new();
    for i in 0..v.len() {
        parts.push(format!("{i},"));
        v.set(i, 1);
    }
    parts.concat()
}

fn main() {}
