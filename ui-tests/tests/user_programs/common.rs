//! Helpers shared by the programs.

/// The thread counts every program runs at.
pub(crate) const THREADS: [usize; 4] = [1, 2, 4, 8];

/// Rounds per thread count.
pub(crate) const ROUNDS: usize = 5;

/// Roughly `n * 100` ns of private work, so that epochs overlap.
pub(crate) fn spin(n: u64) -> u64 {
    let mut x = n;
    for i in 0..n * 40 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// The text of a caught panic.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "<non-string panic>".into())
}

/// Asserts that two sequences are equal, naming the first differing element (and
/// `what`, the program, thread count and round) rather than printing both whole.
pub(crate) fn assert_same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{what}: element {i}");
    }
}
