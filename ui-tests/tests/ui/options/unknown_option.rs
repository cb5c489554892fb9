use tls_runtime::{SpecVec, tls_loop};

#[tls_loop(thread = 2, name = "fill")]
fn fill(v: &SpecVec<u32>) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

#[tls_loop]
fn fill_marked(v: &SpecVec<u32>) {
    #[tls_loop(chunks = 8)]
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

fn main() {}

#[tls_loop("fast")]
fn fill_fast(v: &SpecVec<u32>) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

#[tls_loop(site)]
fn fill_bare(v: &SpecVec<u32>) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}
