use tls_runtime::{SpecVec, tls_loop};

#[tls_loop]
fn search(grid: &[SpecVec<u32>]) -> usize {
    let mut rows = 0;
    'rows: for row in grid {
        #[tls_loop]
        for i in 0..row.len() {
            if row.get(i) == 0 {
                continue 'rows;
            }
            if row.get(i) == 9 {
                break 'rows;
            }
        }
        rows += 1;
    }
    rows
}

fn main() {}
