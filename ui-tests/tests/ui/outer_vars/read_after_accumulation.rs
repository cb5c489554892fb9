use tls_runtime::tls_loop;

#[tls_loop]
fn budget(costs: &[u64]) -> u64 {
    let mut total = 0;
    for &c in costs {
        total += c;
        if total > 100 {
            println!("over budget: {total}");
        }
    }
    total
}

fn main() {}
