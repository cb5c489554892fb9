use std::collections::HashSet;
use tls_runtime::tls_loop;

#[tls_loop]
fn dedup(xs: &[u32]) -> usize {
    let mut seen = HashSet::new();
    let mut firsts = Vec::new();
    for &x in xs {
        if seen.insert(x) {
            firsts.push(x);
        }
    }
    firsts.len()
}

fn main() {}
