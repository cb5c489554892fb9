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

#[tls_loop]
fn inner_mark(v: &SpecVec<u32>) {
    #[tls_loop]
    for i in 0..v.len() {
        let mut j = 0;
        #[tls_loop]
        while j < 3 {
            j += 1;
        }
        v.set(i, j);
    }
}
