//! The loop the book's "Reading the report" chapter walks through: a word counter whose
//! iterations all bump one shared statistic early on, then do their real work.
//!
//! `TLS_REPORT=stderr cargo run --release -p tls-runtime --example report_walkthrough [fixed]`

use tls_runtime::{Accumulator, Control, Loop, Spec, SpecVec};

fn score(doc: &str) -> u64 {
    // The real work: about 20 us of hashing per document.
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for _ in 0..40 {
        for b in doc.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn main() {
    let fixed = std::env::args().any(|a| a == "fixed");
    let docs: Vec<String> = (0..2000)
        .map(|i| format!("document {i} ").repeat(40))
        .collect();
    let scores = SpecVec::from(vec![0u64; docs.len()]);
    let scanned = Spec::new(0u64);
    let mut counted = 0u64;
    {
        // SAFETY: the accumulator outlives the loop below.
        let count = unsafe { Accumulator::new(&mut counted) };
        Loop::new()
            .name("score documents")
            .threads(2)
            .run(docs.iter().enumerate(), |(i, doc)| {
                if fixed {
                    // The count is only ever added to: a write-only accumulation,
                    // applied at commit in loop order, with no dependence between
                    // epochs.
                    scores.set(i, score(doc));
                    count.record(|n| *n += 1);
                } else {
                    // Read the statistic first, write it back after the real work:
                    // every epoch reads a value the epoch before it has yet to write.
                    let seen = scanned.get();
                    scores.set(i, score(doc));
                    scanned.set(seen + 1);
                }
                Control::<()>::Continue
            });
    }
    assert_eq!(scanned.get() + counted, docs.len() as u64);
    print!("{}", tls_runtime::last_report().unwrap());
}
