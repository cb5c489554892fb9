//! A program whose standard error is a pipe nobody reads any more (`prog 2>&1 | head`
//! after `head` has exited) still runs its loops to the end: the runtime's own
//! messages and `TLS_REPORT=stderr` reports are dropped when they cannot be written,
//! as a diagnostic should be, rather than panicking in a thread the loop waits for.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tls_runtime::{Control, Loop, Spec, SpecVec};

/// Loops with violations (each report has a dependence to print), run many times.
fn loops() -> u64 {
    let total = Spec::new(0u64);
    for run in 0..200u64 {
        let out = SpecVec::from(vec![0u64; 16]);
        Loop::new()
            .name("closed stderr")
            .threads(2)
            .run(0..16u64, |i| {
                let t = total.get();
                total.set(t + i + run);
                out.set(i as usize, t);
                Control::<()>::Continue
            });
    }
    total.get()
}

#[test]
fn child() {
    if std::env::var_os("TLS_CLOSED_STDERR_CHILD").is_some() {
        let expected: u64 = (0..200u64)
            .map(|run| (0..16u64).map(|i| i + run).sum::<u64>())
            .sum();
        assert_eq!(loops(), expected);
        println!("done");
    }
}

#[test]
fn loops_run_to_the_end_when_stderr_is_a_closed_pipe() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("TLS_CLOSED_STDERR_CHILD", "1")
        .env("TLS_REPORT", "stderr")
        .env("TLS_THREADS", "2")
        .env_remove("TLS_MODE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close our end of its standard error before it writes anything.
    drop(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().ok();
            panic!("the program did not end in 60 s with its stderr closed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(status.success(), "exit {status:?}, stdout: {out}");
    assert!(out.contains("done"), "stdout: {out}");
}
