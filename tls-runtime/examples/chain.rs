//! A full dependence chain, to look at the adaptive fallback's report.
use std::time::Instant;
use tls_runtime::{Control, Loop, LoopSite, Spec};
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
        .unwrap_or(1000);
    let acc = Spec::new(1u64);
    let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
    for round in 0..4 {
        let t = Instant::now();
        for i in 0..20000u64 {
            let a = acc.get();
            acc.set(work(iters, a ^ i));
        }
        let plain = t.elapsed();
        let t = Instant::now();
        Loop::new().threads(2).site(site).run(0..20000u64, |i| {
            let a = acc.get();
            acc.set(work(iters, a ^ i));
            Control::<()>::Continue
        });
        let spec = t.elapsed();
        let r = tls_runtime::last_report().unwrap();
        println!(
            "round {round}: plain {plain:?} tls {spec:?} ratio {:.3}",
            plain.as_secs_f64() / spec.as_secs_f64()
        );
        print!("{r}");
    }
}
