//! Demo (being written).

fn main() {}
