//! The expansions draw no lint on the user's own code: a one-expression body of an
//! `#[on_commit]` or an escaped function with a consumed sibling attribute kept its
//! braces as a block of its own (`unused_braces`, whose suggested fix does not
//! compile), and `(*x)?` in a loop body passed `(*x)` to a call (`unused_parens`,
//! whose suggested fix `*x ?` means `*(x?)`); a loop body or segment ending in
//! `return` left the step the macro adds after it unreachable (`unreachable_code`).
#![deny(warnings)]
use tls_runtime::{SpecVec, checkpoint, escape, on_commit, on_violation, tls_loop};

#[on_commit]
fn run(f: Box<dyn Fn() + Send>) { f() }

fn forget<T>(_: &T) {}

#[escape]
#[on_violation(forget)]
fn same<T: Clone + Send + 'static>(x: T) -> T { x }

#[tls_loop]
fn copy(xs: &[Option<u32>], out: &SpecVec<u32>) -> Option<()> {
    for (i, x) in xs.iter().enumerate() {
        let v = (*x)?;
        out.set(i, v);
    }
    Some(())
}

#[tls_loop]
fn first_at_least(xs: &[u32], at_least: u32, out: &SpecVec<u32>) -> Option<usize> {
    #[tls_loop]
    for (i, &x) in xs.iter().enumerate() {
        out.set(i, x);
        if x < at_least {
            continue;
        }
        return Some(i);
    }
    #[tls_loop]
    for i in 0..xs.len() {
        out.set(i, 0);
        return None;
    }
    #[tls_loop]
    for i in 0..xs.len() {
        out.set(i, 1);
        checkpoint!();
        return Some(i);
    }
    None
}

fn main() {
    run(Box::new(|| ()));
    assert_eq!(same(5u8), 5);
    let out = SpecVec::from(vec![0; 2]);
    assert_eq!(copy(&[Some(1), Some(2)], &out), Some(()));
    assert_eq!(copy(&[Some(1), None], &out), None);
    assert_eq!(first_at_least(&[1, 7], 5, &out), Some(1));
}
