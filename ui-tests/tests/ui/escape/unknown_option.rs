use tls_runtime::escape;

fn valid(_: &u32) -> bool {
    true
}

#[escape(chek = valid)]
fn get_page(id: u32) -> u32 {
    id
}

#[escape(check = valid, check = valid)]
fn get_page_twice(id: u32) -> u32 {
    id
}

fn main() {}
