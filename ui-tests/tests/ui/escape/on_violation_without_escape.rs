use tls_runtime::on_violation;

fn release(_: &u32) {}

#[on_violation(release)]
fn acquire(id: u32) -> u32 {
    id
}

fn main() {}
