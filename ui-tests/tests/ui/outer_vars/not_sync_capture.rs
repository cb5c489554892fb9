use std::cell::Cell;
use tls_runtime::tls_loop;

#[tls_loop]
fn count(xs: &[u32]) -> u32 {
    let hits = Cell::new(0);
    for &x in xs {
        if x > 3 {
            hits.set(hits.get() + 1);
        }
    }
    hits.get()
}

fn main() {}
