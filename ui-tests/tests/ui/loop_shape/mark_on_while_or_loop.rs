use tls_runtime::{SpecVec, tls_loop};

#[tls_loop]
fn marks(v: &SpecVec<u32>) {
    let mut i = 0;
    #[tls_loop]
    while i < v.len() {
        v.set(i, 1);
        i += 1;
    }
    #[tls_loop]
    loop {
        break;
    }
}

fn main() {}
