use tls_runtime::tls_loop;

#[tls_loop]
struct Accounts {
    balances: Vec<i64>,
}

fn main() {}
