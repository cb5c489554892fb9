use tls_runtime::{escape, on_commit, on_violation};

fn release(_: &u32) {}

#[escape]
#[on_violation(release)]
#[on_violation(release)]
fn acquire(id: u32) -> u32 {
    id
}

#[on_commit]
#[on_commit]
fn log(line: String) {
    println!("{line}");
}

#[escape]
#[escape]
fn pin(id: u32) -> u32 {
    id
}

fn main() {}
