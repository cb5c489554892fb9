//! `?` inside the arguments of `println!`, `assert!` and a named format argument
//! returns from the loop as `?` in the body does: the first bad string ends the loop
//! with its error, after the iterations before it.
use std::num::ParseIntError;
use tls_runtime::{SpecVec, tls_loop};

#[tls_loop(threads = 2)]
fn parse_all(v: &SpecVec<u32>, s: &[&str]) -> Result<(), ParseIntError> {
    for i in 0..v.len() {
        println!("{}", s[i].parse::<u32>()?);
        assert!(s[i].parse::<u32>()? < 1000, "small numbers only");
        println!("again: {n}", n = s[i].parse::<u32>()?);
        v.set(i, s[i].parse()?);
    }
    Ok(())
}

fn main() {
    let good = ["1", "2", "3", "4"];
    let v = SpecVec::from(vec![0u32; 4]);
    assert_eq!(parse_all(&v, &good), Ok(()));
    assert_eq!(v.into_vec(), [1, 2, 3, 4]);

    let bad = ["1", "2", "x", "4"];
    let v = SpecVec::from(vec![0u32; 4]);
    assert!(parse_all(&v, &bad).is_err());
    // The iterations before the bad one ran, none after it.
    assert_eq!(v.into_vec(), [1, 2, 0, 0]);
}
