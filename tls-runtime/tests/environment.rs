//! `TLS_THREADS` and `TLS_MODE` are read once per process, so these tests re-run this
//! test binary as a child with the variables set and check what the child saw.

use std::process::Command;
use tls_runtime::{Control, Loop, RunMode, SpecVec};

/// Runs the loop the children check; prints its report's mode and thread count.
fn child_body() {
    let v = SpecVec::from(vec![0u32; 64]);
    Loop::new().run(0..64usize, |i| {
        v.set(i, i as u32);
        Control::<()>::Continue
    });
    let r = tls_runtime::last_report().unwrap();
    assert_eq!(v.into_vec(), (0..64).collect::<Vec<_>>());
    // A loop that panics is reported too, in every mode, with the iterations that
    // ran (the sequential loop's: up to the panicking one).
    let panicked = std::panic::catch_unwind(|| {
        Loop::new().name("panics").run(0..10usize, |i| {
            assert!(i != 5, "iteration 5 fails");
            Control::<()>::Continue
        })
    });
    assert!(panicked.is_err());
    let p = tls_runtime::last_report().unwrap();
    assert_eq!(p.name, "panics", "{p}");
    assert!(p.items >= 6, "{p}");
    println!("CHILD mode={:?} threads={}", r.mode, r.threads);
    if let Ok(ms) = std::env::var("TLS_ENV_CHILD_LINGER") {
        // For what the workers say in the background: `ms` milliseconds.
        let ms = ms.parse().unwrap_or(1000);
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

#[test]
fn child() {
    if std::env::var_os("TLS_ENV_CHILD").is_some() {
        child_body();
    }
}

/// Runs `child` in a new process with `vars` set; returns its stdout and stderr.
fn spawn_child(vars: &[(&str, &str)]) -> (String, String) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env("TLS_ENV_CHILD", "1");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (text(&out.stdout), text(&out.stderr))
}

/// The child's report line.
fn run_child(vars: &[(&str, &str)]) -> String {
    let (stdout, _) = spawn_child(vars);
    stdout
        .lines()
        .find_map(|l| l.find("CHILD ").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no report line in {stdout}"))
        .to_string()
}

#[test]
fn sequential_mode_runs_loops_in_order() {
    let line = run_child(&[("TLS_MODE", "sequential"), ("TLS_THREADS", "4")]);
    assert_eq!(
        line,
        format!("CHILD mode={:?} threads=1", RunMode::Sequential)
    );
}

#[test]
fn profile_mode_reports_every_loop() {
    let line = run_child(&[("TLS_MODE", "profile"), ("TLS_THREADS", "2")]);
    assert_eq!(line, format!("CHILD mode={:?} threads=1", RunMode::Profile));
}

#[test]
fn thread_count_comes_from_the_environment() {
    let line = run_child(&[("TLS_MODE", "parallel"), ("TLS_THREADS", "3")]);
    assert_eq!(
        line,
        format!("CHILD mode={:?} threads=3", RunMode::Parallel)
    );
    let line = run_child(&[("TLS_THREADS", "1")]);
    assert_eq!(
        line,
        format!("CHILD mode={:?} threads=1", RunMode::Sequential)
    );
}

#[test]
fn bad_settings_fall_back_with_a_warning() {
    let (_, stderr) = spawn_child(&[("TLS_MODE", "fast"), ("TLS_THREADS", "zero")]);
    assert!(stderr.contains("unknown TLS_MODE=\"fast\""), "{stderr}");
    assert!(
        stderr.contains("TLS_THREADS=\"zero\" is not a positive integer"),
        "{stderr}"
    );
    let (_, stderr) = spawn_child(&[("TLS_MODE", "sequential"), ("TLS_SPIN_US", "abc")]);
    assert!(
        stderr.contains("TLS_SPIN_US=\"abc\" is not a whole number of microseconds"),
        "{stderr}"
    );
}

/// A mode written with spaces or capitals, as a script may, means what it says.
#[test]
fn a_mode_is_read_trimmed_and_in_any_case() {
    let line = run_child(&[("TLS_MODE", " Profile "), ("TLS_THREADS", "2")]);
    assert_eq!(line, format!("CHILD mode={:?} threads=1", RunMode::Profile));
}

/// A thread count no loop could use is cut to `MAX_THREADS`, with a warning; it
/// panicked inside the runtime (an overflow, an index out of bounds), then hung. In
/// sequential mode, so that the child starts no workers.
#[test]
fn a_thread_count_past_the_limit_is_cut() {
    let count = u64::MAX.to_string();
    let (_, stderr) = spawn_child(&[("TLS_MODE", "sequential"), ("TLS_THREADS", &count)]);
    let want = format!(
        "TLS_THREADS={} is more than a loop may use; using {}",
        u64::MAX,
        tls_runtime::MAX_THREADS
    );
    assert!(stderr.contains(&want), "{stderr}");
}

/// Many times more threads than cores: a warning, from a worker (in the background,
/// as it reads the core count); a few more: none.
#[test]
fn many_more_threads_than_cores_are_warned_of() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in [cores + 1, 4 * cores + 1] {
        let n = threads.to_string();
        let want = format!("TLS_THREADS={n} on {cores} cores");
        let run = |linger: &str| {
            let (_, stderr) = spawn_child(&[
                ("TLS_MODE", "parallel"),
                ("TLS_THREADS", &n),
                ("TLS_ENV_CHILD_LINGER", linger),
            ]);
            (stderr.contains(&want), stderr)
        };
        if threads > 4 * cores {
            // Awaited longer each time it has not come: on a loaded machine (a
            // debug build beside many test processes) a worker took more than a
            // second to start and read the core count.
            let mut last = String::new();
            let warned = ["1000", "5000", "20000"].into_iter().any(|linger| {
                let (warned, stderr) = run(linger);
                last = stderr;
                warned
            });
            assert!(warned, "{threads} threads: no warning in 20 s: {last}");
        } else {
            let (warned, stderr) = run("1000");
            assert!(!warned, "{threads} threads: {stderr}");
        }
    }
}

/// A report or a timeline that cannot be written is said at once, not only at exit.
#[test]
fn an_output_that_cannot_be_written_is_said_at_once() {
    let (stdout, stderr) = spawn_child(&[
        ("TLS_MODE", "sequential"),
        ("TLS_REPORT", "/nonexistent-tls-dir/r.json"),
        ("TLS_TRACE", "/nonexistent-tls-dir/t.json"),
    ]);
    for var in ["TLS_REPORT", "TLS_TRACE"] {
        let want = format!("{var}=\"/nonexistent-tls-dir/");
        let at = stderr.find(&want).unwrap_or_else(|| panic!("{stderr}"));
        assert!(stderr[at..].contains("is not a directory"), "{stderr}");
    }
    assert!(stdout.contains("CHILD "), "{stdout}");
    let dir = std::env::temp_dir();
    let (_, stderr) = spawn_child(&[
        ("TLS_MODE", "sequential"),
        ("TLS_REPORT", dir.to_str().unwrap()),
    ]);
    assert!(stderr.contains("it is a directory"), "{stderr}");
}
