//! The names reports carry for the loops of one `#[tls_loop]` function: each marked
//! loop is its own entry in `TLS_REPORT`, which aggregates runs by name.

use tls_runtime::{SpecVec, last_report, tls_loop};

/// Three marked loops under one function-level name; the last has a name of its own.
/// Returns after the first `loops` of them.
#[tls_loop(name = "passes", threads = 2)]
fn passes(v: &SpecVec<u64>, loops: usize) {
    #[tls_loop]
    for i in 0..v.len() {
        v.set(i, i as u64);
    }
    if loops == 1 {
        return;
    }
    #[tls_loop]
    for i in 0..v.len() {
        let x = v.get(i);
        v.set(i, x * 2);
    }
    if loops == 2 {
        return;
    }
    #[tls_loop(name = "own")]
    for i in 0..v.len() {
        let x = v.get(i);
        v.set(i, x + 1);
    }
}

/// One loop: the function's name as it is.
#[tls_loop(name = "single", threads = 2)]
fn single(v: &SpecVec<u64>) {
    for i in 0..v.len() {
        v.set(i, 7);
    }
}

#[test]
fn each_marked_loop_of_a_named_function_reports_under_its_own_name() {
    let v = SpecVec::from(vec![0u64; 64]);
    let name_after = |loops: usize| {
        passes(&v, loops);
        last_report().expect("a loop ran").name
    };
    assert_eq!(name_after(1), "passes #1");
    assert_eq!(name_after(2), "passes #2");
    assert_eq!(name_after(3), "own");
    assert_eq!(v.get(5), 11);
    single(&v);
    assert_eq!(last_report().expect("a loop ran").name, "single");
}
