//! Shows one loop's report (a quick look at the runtime at work).
use tls_runtime::{Control, Loop, Spec};
fn main() {
    let cell = Spec::new(0u64);
    Loop::new().threads(2).run(0..20u64, |i| {
        if i % 2 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let v = cell.get();
        cell.set(v + 1);
        eprintln!("epoch {i} on {:?} read {v}", std::thread::current().name());
        Control::<()>::Continue
    });
    println!("{}", tls_runtime::last_report().unwrap());
    println!("cell = {}", cell.get());
}
