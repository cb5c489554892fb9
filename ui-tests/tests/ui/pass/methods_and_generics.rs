//! `#[tls_loop]` on `&self` methods and generic functions, with options on the
//! function and on marked loops, and a thread count from a parameter.
use tls_runtime::{Spec, SpecVec, tls_loop};

struct Ledger {
    balances: SpecVec<i64>,
}

impl Ledger {
    #[tls_loop(name = "ledger.apply", threads = 2, chunk = 4)]
    fn apply(&self, moves: &[(usize, i64)]) -> i64 {
        let mut applied = 0;
        for (i, &(to, amount)) in moves.iter().enumerate() {
            if amount == 0 {
                continue;
            }
            self.balances.update(to, |b| *b += amount);
            applied += i as i64;
        }
        applied
    }
}

#[tls_loop(threads = threads)]
fn total<T: Copy + Into<i64> + Send + Sync>(xs: &[T], cell: &Spec<i64>, threads: usize) -> i64 {
    let mut sum = 0i64;
    for x in xs.iter().copied() {
        let v: i64 = x.into();
        cell.update(|c| *c += v);
        sum += v;
    }
    sum
}

#[tls_loop(threads = 2)]
fn two_loops(a: &SpecVec<u32>, b: &SpecVec<u32>) -> u32 {
    let mut marked = 0;
    #[tls_loop(name = "first")]
    for i in 0..a.len() {
        a.set(i, i as u32);
        marked += 1;
    }
    for i in 0..b.len() {
        b.set(i, a.get(i) * 2);
    }
    #[tls_loop(threads = 4)]
    for i in 0..b.len() {
        let x = b.get(i);
        // A nested marked loop runs sequentially inside the epoch.
        #[tls_loop]
        for j in 0..2 {
            b.set(i, x + j);
        }
        marked += 1;
    }
    marked
}

fn main() {
    let ledger = Ledger {
        balances: SpecVec::from(vec![0; 4]),
    };
    let moves: Vec<(usize, i64)> = (0..40).map(|i| (i % 4, i as i64 % 3)).collect();
    let expected: i64 = moves
        .iter()
        .enumerate()
        .filter(|(_, m)| m.1 != 0)
        .map(|(i, _)| i as i64)
        .sum();
    assert_eq!(ledger.apply(&moves), expected);
    assert_eq!(ledger.balances.into_vec().iter().sum::<i64>(), 39);

    for t in [1, 2, 4] {
        let cell = Spec::new(0);
        assert_eq!(total(&[1u8, 2, 3, 4], &cell, t), 10);
        assert_eq!(cell.into_inner(), 10);
    }

    let a = SpecVec::from(vec![0u32; 10]);
    let b = SpecVec::from(vec![0u32; 10]);
    assert_eq!(two_loops(&a, &b), 20);
    assert_eq!(b.into_vec(), (0..10).map(|i| i * 2 + 1).collect::<Vec<u32>>());
}
