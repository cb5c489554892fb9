use tls_runtime::tls_loop;

#[tls_loop]
fn bump(v: &mut [u32], w: &[u32]) {
    for x in v.iter_mut() {
        let _ = x;
    }
    let _ = w;
}

fn main() {}
