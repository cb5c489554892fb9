use tls_runtime::tls_loop;

#[tls_loop]
fn drain(items: &mut Vec<u32>) {
    while let Some(x) = items.pop() {
        let _ = x;
    }
}

fn main() {}
