//! Compile-time diagnostics of the macros (trybuild). The `.stderr` snapshots were made
//! with rustc 1.95.0 by `TRYBUILD=overwrite`; another compiler words errors differently,
//! so there the test is skipped with a message.

/// The compiler the snapshots were made with.
const SNAPSHOT_RUSTC: &str = "rustc 1.95.0";

fn rustc_version() -> Option<String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = std::process::Command::new(rustc).arg("-V").output().ok()?;
    String::from_utf8(out.stdout).ok()
}

#[test]
fn ui() {
    let version = rustc_version().unwrap_or_default();
    if !version.starts_with(SNAPSHOT_RUSTC) {
        eprintln!(
            "skipping the UI tests: their snapshots were made with {SNAPSHOT_RUSTC}, this is `{}`",
            version.trim()
        );
        return;
    }
    let t = trybuild::TestCases::new();
    for topic in [
        "loop_shape",
        "outer_vars",
        "checkpoint",
        "control",
        "options",
        "escape",
        "on_commit",
    ] {
        t.compile_fail(format!("tests/ui/{topic}/*.rs"));
    }
    t.pass("tests/ui/pass/*.rs");
}
