use std::rc::Rc;
use tls_runtime::on_commit;

#[on_commit]
fn release(page: Rc<Vec<u8>>) {
    drop(page);
}

fn main() {}
