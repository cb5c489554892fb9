use tls_runtime::{SpecVec, tls_loop};

#[tls_loop(name = 5, chunk = "eight")]
fn fill(v: &SpecVec<u32>) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

#[tls_loop(threads = 2, threads = 4)]
fn fill_twice(v: &SpecVec<u32>) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

fn main() {}
