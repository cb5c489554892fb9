// An accumulation's update runs at commit, after the iteration. Arguments written as
// a borrow (`&s`) and the copying appends (`push_str`, `extend`) copy what they
// borrow; any other borrow of the iteration's data is refused.
use tls_runtime::tls_loop;

#[tls_loop]
fn words(xs: &[u64]) -> String {
    let mut text = String::new();
    for &x in xs {
        let s = format!("{x} ");
        text += s.as_str();
    }
    text
}

fn main() {
    println!("{}", words(&[1, 2, 3]));
}
