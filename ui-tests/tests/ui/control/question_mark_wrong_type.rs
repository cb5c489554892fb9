use tls_runtime::{SpecVec, tls_loop};

#[tls_loop]
fn first_even(v: &SpecVec<u32>) -> Result<u32, String> {
    for i in 0..v.len() {
        let x = v.get(i).checked_sub(1)?;
        if x % 2 == 0 {
            return Ok(x);
        }
    }
    Err("none".into())
}

fn main() {}
