//! Early returns from functions whose return type cannot be written in the body
//! (`impl Trait`, elided lifetimes), `write!` to standard streams, polls in inner loops.
use std::io::Write;
use tls_runtime::{SpecVec, tls_loop};

#[tls_loop(threads = 2)]
fn evens(v: &SpecVec<u32>) -> impl Iterator<Item = u32> {
    for i in 0..v.len() {
        if v.get(i) == 7 {
            return vec![7].into_iter();
        }
    }
    (0..v.len() as u32).filter(|x| x % 2 == 0).collect::<Vec<_>>().into_iter()
}

#[tls_loop(threads = 2)]
fn first_long<'a>(words: &[&'a str]) -> Option<&'a str> {
    for w in words {
        let mut spins = 0;
        loop {
            spins += 1;
            if spins > 3 {
                break;
            }
        }
        writeln!(std::io::stdout(), "checking {w}").unwrap();
        write!(std::io::stderr(), "{spins}").unwrap();
        if w.len() > 4 {
            return Some(w);
        }
    }
    None
}

#[tls_loop(threads = 2)]
fn longest(words: &[&str]) -> &'static str {
    for w in words {
        if w.is_empty() {
            return "empty";
        }
    }
    "none"
}

fn main() {
    assert_eq!(evens(&SpecVec::from(vec![1, 2, 7, 3])).collect::<Vec<_>>(), [7]);
    assert_eq!(evens(&SpecVec::from(vec![1, 2, 3])).collect::<Vec<_>>(), [0, 2]);
    assert_eq!(first_long(&["a", "abc", "abcdef", "xyzzyx"]), Some("abcdef"));
    assert_eq!(longest(&["a", ""]), "empty");
}
