use tls_runtime::{escape, on_commit};

#[on_commit]
#[escape]
fn flush(id: u32) {
    let _ = id;
}

fn main() {}
