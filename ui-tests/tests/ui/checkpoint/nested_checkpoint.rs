use tls_runtime::{SpecVec, checkpoint, tls_loop};

#[tls_loop]
fn update(v: &SpecVec<u64>) {
    for i in 0..v.len() {
        let x = v.get(i);
        if x > 3 {
            checkpoint!();
            v.set(i, x - 3);
        }
        let _ = (0..2).map(|_| {
            checkpoint!();
        });
    }
}

fn main() {}
