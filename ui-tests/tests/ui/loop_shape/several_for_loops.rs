use tls_runtime::{SpecVec, tls_loop};

#[tls_loop]
fn twice(v: &SpecVec<u32>) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
    for i in 0..v.len() {
        v.set(i, 2);
    }
}

fn main() {}
