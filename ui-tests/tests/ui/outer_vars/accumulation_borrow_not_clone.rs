// A right side written as a borrow (`a += &x`) is kept as a copy where its type has
// one, since the update runs at commit, after the iteration; a type without one
// (not `Clone`) keeps the borrow, which must outlive the loop: a borrow of the
// iteration's own value is refused, on that borrow.
use std::ops::AddAssign;
use tls_runtime::tls_loop;

#[derive(Default, Debug)]
struct Total(u64);

struct Reading(u64);

impl AddAssign<&Reading> for Total {
    fn add_assign(&mut self, r: &Reading) {
        self.0 += r.0;
    }
}

#[tls_loop]
fn total(n: u64) -> Total {
    let mut sum = Total::default();
    for i in 0..n {
        let r = Reading(i);
        sum += &r;
    }
    sum
}

fn main() {
    println!("{:?}", total(10));
}
