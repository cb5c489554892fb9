//! A speculative loop at work: the same loop run plainly and as speculative epochs,
//! with the speedup and the runtime's report.
//!
//! The loop settles a batch of transfers between accounts. Each transfer does some
//! real work (it hashes its memo, as a payment system would sign it), then moves money
//! between two accounts. Most transfers touch different accounts, but some collide, and
//! one in fifty also updates a shared daily total: the kind of loop whose iterations
//! *probably* do not depend on each other.
//!
//! `cargo run --release -p tls-demo [-- transfers]`

use std::time::{Duration, Instant};
use tls_runtime::{Loop, Spec, SpecVec};

const ACCOUNTS: usize = 10_000;

/// Signs a memo: about 10 us of hashing.
fn sign(memo: u64) -> u64 {
    let mut h = memo ^ 0x9e37_79b9_7f4a_7c15;
    for i in 0..6_000u64 {
        h = (h ^ i).wrapping_mul(0x0100_0000_01b3).rotate_left(5);
    }
    h
}

#[derive(Clone, Copy)]
struct Transfer {
    from: usize,
    to: usize,
    amount: i64,
    memo: u64,
}

fn transfers(n: usize) -> Vec<Transfer> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|i| Transfer {
            from: (next() % ACCOUNTS as u64) as usize,
            to: (next() % ACCOUNTS as u64) as usize,
            amount: (next() % 500) as i64 + 1,
            memo: i as u64,
        })
        .collect()
}

struct Books {
    balances: SpecVec<i64>,
    signatures: SpecVec<u64>,
    daily_total: Spec<i64>,
}

impl Books {
    fn new(n: usize) -> Self {
        Books {
            balances: SpecVec::from(vec![1_000_000i64; ACCOUNTS]),
            signatures: SpecVec::from(vec![0u64; n]),
            daily_total: Spec::new(0),
        }
    }

    /// One iteration of the loop, identical in both runs.
    fn settle(&self, i: usize, t: &Transfer) {
        let signature = sign(t.memo);
        self.signatures.set(i, signature);
        self.balances.update(t.from, |b| *b -= t.amount);
        self.balances.update(t.to, |b| *b += t.amount);
        if i.is_multiple_of(50) {
            self.daily_total.update(|d| *d += t.amount);
        }
    }

    fn fingerprint(self) -> (Vec<i64>, Vec<u64>, i64) {
        (
            self.balances.into_vec(),
            self.signatures.into_vec(),
            self.daily_total.into_inner(),
        )
    }
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000usize);
    let batch = transfers(n);
    let threads = tls_runtime::default_threads();
    println!("settling {n} transfers among {ACCOUNTS} accounts, {threads} threads\n");

    let plain = Books::new(n);
    let t = Instant::now();
    for (i, tr) in batch.iter().enumerate() {
        plain.settle(i, tr);
    }
    let plain_time = t.elapsed();

    let spec = Books::new(n);
    let t = Instant::now();
    Loop::new()
        .name("settle transfers")
        .run(batch.iter().enumerate(), |(i, tr)| {
            spec.settle(i, tr);
            tls_runtime::Control::<()>::Continue
        });
    let spec_time = t.elapsed();
    let report = tls_runtime::last_report().expect("the loop left a report");

    assert!(
        plain.fingerprint() == spec.fingerprint(),
        "the speculative loop must give the sequential result"
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("plain loop        {:8.1} ms", ms(plain_time));
    println!("speculative loop  {:8.1} ms", ms(spec_time));
    println!(
        "speedup           {:8.2}x  (same final balances, signatures and total)\n",
        plain_time.as_secs_f64() / spec_time.as_secs_f64()
    );
    print!("{report}");
}
