use tls_runtime::tls_loop;

#[tls_loop]
fn sort_each(rows: &[Vec<u32>]) -> Vec<u32> {
    let mut scratch = Vec::new();
    for row in rows {
        let s = &mut scratch;
        s.clear();
        s.extend_from_slice(row);
    }
    scratch
}

fn main() {}
