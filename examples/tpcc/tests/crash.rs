//! Kill -9 during `tpcc run --sync full`, then `tpcc check`: the database must recover
//! consistent, with every acknowledged New Order present.
//!
//! A few kills per engine by default; `TPCC_SOAK=1` runs many more.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};

fn tpcc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tpcc"))
}

fn iterations(default: usize) -> usize {
    if std::env::var_os("TPCC_SOAK").is_some_and(|v| v != "0") {
        default * 10
    } else {
        default
    }
}

fn kill_and_check(mode: &str, dir: &Path, rounds: usize) {
    let db = dir.join(format!("{mode}.db"));
    let ack = dir.join(format!("{mode}.ack"));
    let status = tpcc()
        .args([
            "load",
            "--mode",
            mode,
            "--items",
            "2000",
            "--customers",
            "60",
            "--db",
        ])
        .arg(&db)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("{mode}: kill delays from seed {seed}");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut total_acked = 0;
    for round in 0..rounds {
        let mut child = tpcc()
            .args([
                "run",
                "--mode",
                mode,
                "--sync",
                "full",
                "--duration",
                "60",
                "--seed",
            ])
            .arg(round.to_string())
            .arg("--db")
            .arg(&db)
            .arg("--ack-log")
            .arg(&ack)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Even rounds kill at a random time after the start, which may fall in opening
        // and recovery; odd rounds first wait for this run's first acknowledged order, so
        // that every test kills a run that is committing, however slow the machine.
        let acked_before = std::fs::metadata(&ack).map(|m| m.len()).unwrap_or(0);
        let started = Instant::now();
        if round % 2 == 1 {
            while std::fs::metadata(&ack).map(|m| m.len()).unwrap_or(0) == acked_before {
                exited_early(mode, &mut child);
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "{mode}: no order acknowledged within a minute"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let delay = Duration::from_millis(rng.random_range(if round % 2 == 1 {
            0..600
        } else {
            100..1200
        }));
        let waited = Instant::now();
        while waited.elapsed() < delay {
            exited_early(mode, &mut child);
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let acked = std::fs::read_to_string(&ack)
            .map(|s| s.lines().count())
            .unwrap_or(0);
        let out = tpcc()
            .arg("check")
            .arg("--db")
            .arg(&db)
            .arg("--expect-orders")
            .arg(&ack)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{mode}: check failed after kill {round} at {delay:?} ({acked} acknowledged):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        total_acked = acked;
    }
    assert!(total_acked > 0, "{mode}: no order was ever acknowledged");
}

/// Fails the test if the run ended by itself: it only ends early when it failed.
fn exited_early(mode: &str, child: &mut std::process::Child) {
    if let Some(status) = child.try_wait().unwrap() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        panic!("{mode}: run exited early ({status}): {err}");
    }
}

#[test]
fn kill_during_sync_full_run_sequential() {
    let dir = tempfile::tempdir().unwrap();
    kill_and_check("sequential", dir.path(), iterations(3));
}

#[test]
fn kill_during_sync_full_run_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    kill_and_check("sqlite", dir.path(), iterations(2));
}

#[test]
fn kill_during_sync_full_run_tls() {
    let dir = tempfile::tempdir().unwrap();
    kill_and_check("tls", dir.path(), iterations(3));
}
