use tls_runtime::{escape, on_violation};

pub struct Guard(u32);

fn release(_: &Guard) {}

#[escape]
#[on_violation(release)]
fn lock(id: u32) -> Guard {
    Guard(id)
}

#[escape]
#[on_violation(|_| {})]
fn borrow_page(pages: &[u8]) -> &u8 {
    &pages[0]
}

fn main() {}
