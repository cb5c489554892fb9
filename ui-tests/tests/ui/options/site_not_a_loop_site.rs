use tls_runtime::{LoopSite, SpecVec, tls_loop};

static SITES: [LoopSite; 2] = [LoopSite::new(), LoopSite::new()];

// A site per caller must be a `&'static LoopSite`: an index is not one.
#[tls_loop(site = k)]
fn fill(v: &SpecVec<u32>, k: usize) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

// Right: the caller's site.
#[tls_loop(site = &SITES[k])]
fn fill_on(v: &SpecVec<u32>, k: usize) {
    for i in 0..v.len() {
        v.set(i, 1);
    }
}

fn main() {}
