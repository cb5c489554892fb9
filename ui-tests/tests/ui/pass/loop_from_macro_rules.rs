//! `#[tls_loop]` added to functions by a `macro_rules!` macro, the functions written
//! in the macro's call: `?`, `return`, labelled `continue` and accumulations in the
//! body work as they do when the attribute is written by hand.
use std::num::ParseIntError;
use tls_runtime::SpecVec;

macro_rules! speculative {
    ($($item:item)*) => { $( #[tls_runtime::tls_loop(threads = 2)] $item )* };
}

speculative! {
    fn parse(lines: &[&str], out: &SpecVec<u64>) -> Result<u64, ParseIntError> {
        let mut total = 0;
        'lines: for (i, l) in lines.iter().enumerate() {
            if l.is_empty() {
                continue 'lines;
            }
            if *l == "stop" {
                return Ok(u64::MAX);
            }
            let n: u64 = l.parse()?;
            out.set(i, n);
            total += n;
        }
        Ok(total)
    }
}

fn main() {
    let v = SpecVec::from(vec![0; 4]);
    assert_eq!(parse(&["1", "", "3", "stop"], &v), Ok(u64::MAX));
    assert_eq!(v.into_vec(), [1, 0, 3, 0]);
    let v = SpecVec::from(vec![0; 4]);
    assert!(parse(&["1", "x", "3", "4"], &v).is_err());
    assert_eq!(v.into_vec(), [1, 0, 0, 0]);
}
