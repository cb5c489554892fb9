use tls_runtime::{SpecVec, checkpoint, tls_loop};

struct Connection {
    id: usize,
}

#[tls_loop]
fn update(v: &SpecVec<usize>) {
    for i in 0..v.len() {
        let conn = Connection { id: i };
        checkpoint!();
        v.set(i, conn.id);
    }
}

fn main() {}
