use std::rc::Rc;
use tls_runtime::{escape, on_violation};

struct Pool;

impl Pool {
    fn unpin(&self, _: u32) {}
}

#[escape]
#[on_violation(|id: &u32| pool.unpin(*id))]
fn get_page(pool: &Pool, id: u32) -> u32 {
    let _ = pool;
    id
}

#[escape]
#[on_violation({ let counter = Rc::new(0); move |_: &u32| drop(counter) })]
fn get_other(id: u32) -> u32 {
    id
}

fn main() {}
