use tls_runtime::tls_loop;

struct Stats {
    max: u64,
}

#[tls_loop]
fn scan(xs: &[u64]) -> u64 {
    let mut last = 0;
    let mut stats = Stats { max: 0 };
    let mut seen = vec![false; 10];
    for &x in xs {
        last = x;
        stats.max += x;
        seen[x as usize % 10] = true;
    }
    last + stats.max + seen.len() as u64
}

fn main() {}
