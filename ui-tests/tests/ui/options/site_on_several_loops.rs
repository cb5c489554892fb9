use tls_runtime::{LoopSite, SpecVec, tls_loop};

static SITE: LoopSite = LoopSite::new();

// One site for two loops would mix what each learns: refused.
#[tls_loop(site = &SITE)]
fn two_passes(v: &SpecVec<u32>) {
    #[tls_loop]
    for i in 0..v.len() {
        v.set(i, 1);
    }
    #[tls_loop]
    for i in 0..v.len() {
        v.set(i, v.get(i) + 1);
    }
}

// Right: each loop its own (or none, and the default).
static FIRST: LoopSite = LoopSite::new();

#[tls_loop(threads = 2)]
fn two_passes_apart(v: &SpecVec<u32>) {
    #[tls_loop(site = &FIRST)]
    for i in 0..v.len() {
        v.set(i, 1);
    }
    #[tls_loop]
    for i in 0..v.len() {
        v.set(i, v.get(i) + 1);
    }
}

fn main() {}
