use tls_runtime::{SpecVec, tls_loop};

#[tls_loop]
async fn fetch_all(v: &SpecVec<u32>, pages: Vec<std::future::Ready<u32>>) {
    for (i, page) in pages.into_iter().enumerate() {
        v.set(i, page.await);
    }
}

#[tls_loop]
const fn count(n: usize) -> usize {
    let mut total = 0;
    for _ in 0..n {
        total += 1;
    }
    total
}

fn main() {}
