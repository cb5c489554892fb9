use tls_runtime::{escape, on_commit, on_violation};

fn valid(_: &(u32, u32)) -> bool {
    true
}

#[escape]
#[on_violation]
fn acquire(id: u32) -> u32 {
    id
}

#[on_commit(now)]
fn flush(id: u32) {
    let _ = id;
}

#[escape]
async fn fetch(id: u32) -> u32 {
    id
}

#[escape(check = valid)]
fn pair((a, b): (u32, u32)) -> u32 {
    a + b
}

#[escape = "fast"]
fn named(id: u32) -> u32 {
    id
}

fn main() {}
