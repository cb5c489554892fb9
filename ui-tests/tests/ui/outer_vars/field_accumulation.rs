use tls_runtime::{SpecVec, tls_loop};

struct Stats {
    count: u64,
}

impl Stats {
    // Accumulating into a field of `self` is not an accumulation the loop can
    // reduce: the message says what to write instead.
    #[tls_loop]
    fn tally(&mut self, v: &SpecVec<u64>) {
        for i in 0..v.len() {
            if v.get(i) > 10 {
                self.count += 1;
            }
        }
    }
}

fn main() {
    let mut s = Stats { count: 0 };
    s.tally(&SpecVec::from(vec![1, 20, 30]));
}
