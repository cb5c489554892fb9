//! Independent iterations of about 1 us: automatic chunking at work.
use std::time::Instant;
use tls_runtime::{Control, Loop, LoopSite, SpecVec};
#[inline(never)]
fn work(iters: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    for i in 0..iters {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}
fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let n = 20000usize;
    let out = SpecVec::from(vec![0u64; n]);
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    for round in 0..5 {
        let t = Instant::now();
        for i in 0..n {
            out.set(i, work(iters, i as u64));
        }
        let plain = t.elapsed();
        let t = Instant::now();
        Loop::new().threads(2).site(site).run(0..n, |i| {
            out.set(i, work(iters, i as u64));
            Control::<()>::Continue
        });
        let spec = t.elapsed();
        let r = tls_runtime::last_report().unwrap();
        println!(
            "round {round}: plain {plain:?} tls {spec:?} ratio {:.2}",
            plain.as_secs_f64() / spec.as_secs_f64()
        );
        print!("{r}");
    }
}
