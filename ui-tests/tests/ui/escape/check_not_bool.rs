use tls_runtime::escape;

fn page_count(id: &u32) -> u32 {
    *id
}

#[escape(check = page_count)]
fn get_page(id: u32) -> u32 {
    id
}

fn main() {}
