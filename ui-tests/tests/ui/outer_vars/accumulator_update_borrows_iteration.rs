// An update recorded through the public `Accumulator` runs at commit, after the
// iteration: it may not borrow the iteration's own data.
use tls_runtime::{Accumulator, for_each};

fn main() {
    let mut out = String::new();
    {
        // SAFETY: the accumulator outlives the loop.
        let acc = unsafe { Accumulator::new(&mut out) };
        for_each(0..10u32, |i| {
            let piece = format!("{i},");
            let piece = &piece;
            acc.record(move |t| t.push_str(piece));
        });
    }
    println!("{out}");
}
