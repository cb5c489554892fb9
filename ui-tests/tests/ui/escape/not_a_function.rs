use tls_runtime::escape;

#[escape]
static PAGES: u32 = 0;

fn main() {}
