use tls_runtime::{escape, on_violation};

fn put_page(id: u32) {
    let _ = id;
}

#[escape]
#[on_violation(put_page)]
fn get_page(id: u32) -> u32 {
    id
}

fn main() {}
