//! The expansions draw no lint on the user's own code: a one-expression body of an
//! `#[on_commit]` or an escaped function with a consumed sibling attribute kept its
//! braces as a block of its own (`unused_braces`, whose suggested fix does not
//! compile), and `(*x)?` in a loop body passed `(*x)` to a call (`unused_parens`,
//! whose suggested fix `*x ?` means `*(x?)`).
#![deny(warnings)]
use tls_runtime::{SpecVec, escape, on_commit, on_violation, tls_loop};

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

fn main() {
    run(Box::new(|| ()));
    assert_eq!(same(5u8), 5);
    let out = SpecVec::from(vec![0; 2]);
    assert_eq!(copy(&[Some(1), Some(2)], &out), Some(()));
    assert_eq!(copy(&[Some(1), None], &out), None);
}
