use tls_runtime::{SpecVec, checkpoint, tls_loop};

#[tls_loop]
fn update(v: &SpecVec<u64>) {
    checkpoint!();
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

fn main() {}
