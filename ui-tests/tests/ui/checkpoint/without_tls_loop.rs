use tls_runtime::{SpecVec, checkpoint};

fn update(v: &SpecVec<u64>) {
    for i in 0..v.len() {
        v.set(i, 1);
        checkpoint!();
    }
}

fn main() {}
