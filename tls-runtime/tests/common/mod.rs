//! Helpers shared by the integration tests (each test file is its own crate and uses
//! some of them).
#![allow(dead_code)]

/// About `n` microseconds of work, so that epochs overlap.
pub(crate) fn spin(n: u64) -> u64 {
    spin_from(n, n)
}

/// About `n` microseconds of work whose result depends on `seed` (a chain's next
/// value).
pub(crate) fn spin_from(n: u64, seed: u64) -> u64 {
    let mut x = seed;
    for i in 0..n * 400 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// Keeps the panic hook quiet about panics whose message contains `marker` (the
/// iterations' own, expected ones), not about the test's.
pub(crate) fn quiet_panics_marked(marker: &'static str) {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.to_string().contains(marker) {
            hook(info);
        }
    }));
}

/// The process's threads whose name starts with `prefix` (Linux: from /proc; the
/// kernel keeps the first 15 bytes of a name).
pub(crate) fn threads_named(prefix: &str) -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}
