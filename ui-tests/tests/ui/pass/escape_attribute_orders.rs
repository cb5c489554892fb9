//! `#[escape]` with `#[on_violation]` in either order, on free functions and methods;
//! `#[escape(check = ...)]` with a path and a closure; plain calls outside loops.
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use tls_runtime::{Spec, escape, on_violation, tls_loop};

static PINNED: AtomicI64 = AtomicI64::new(0);

fn unpin(_: &u64) {
    PINNED.fetch_sub(1, Ordering::SeqCst);
}

fn small(id: &u64) -> bool {
    *id < 1000
}

#[escape(check = small)]
#[on_violation(unpin)]
fn pin(id: u64) -> u64 {
    PINNED.fetch_add(1, Ordering::SeqCst);
    id
}

#[on_violation(|_: &u64| { PINNED.fetch_sub(1, Ordering::SeqCst); })]
#[escape(check = |id: &u64| *id < 1000)]
fn pin_again(id: u64) -> u64 {
    PINNED.fetch_add(1, Ordering::SeqCst);
    id
}

struct Pool {
    frames: Mutex<Vec<u64>>,
}

impl Pool {
    #[escape(check = Pool::valid)]
    fn get_page(&self, id: u64) -> usize {
        let mut f = self.frames.lock().unwrap();
        f.push(id);
        f.len()
    }

    fn valid(&self, id: &u64) -> bool {
        *id < 1000
    }

    #[on_violation(|_: &u64| ())]
    #[escape]
    fn peek(&self, slot: usize) -> u64 {
        self.frames.lock().unwrap()[slot]
    }
}

#[tls_loop(threads = 2)]
fn work(pool: &Pool, ids: &[u64], sum: &Spec<u64>) {
    for &id in ids {
        let a = pin(id);
        let b = pin_again(id);
        let slot = pool.get_page(id);
        let _ = pool.peek(slot - 1);
        let s = sum.get();
        sum.set(s + a + b);
    }
}

fn main() {
    assert_eq!(pin(3), 3);
    assert_eq!(pin_again(4), 4);
    assert_eq!(PINNED.load(Ordering::SeqCst), 2);
    let pool = Pool {
        frames: Mutex::new(Vec::new()),
    };
    let ids: Vec<u64> = (0..100).collect();
    let sum = Spec::new(0);
    work(&pool, &ids, &sum);
    assert_eq!(sum.into_inner(), 2 * (0..100).sum::<u64>());
    assert_eq!(PINNED.load(Ordering::SeqCst), 202);
}
