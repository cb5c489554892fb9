//! The `tpcc` command line: exit codes and messages.

use std::path::Path;
use std::process::{Command, Output};

const SMALL: [&str; 4] = ["--items", "2000", "--customers", "60"];

fn tpcc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tpcc"))
        .args(args)
        .output()
        .expect("running tpcc")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[track_caller]
fn ok(args: &[&str]) -> String {
    let o = tpcc(args);
    assert!(o.status.success(), "tpcc {args:?} failed:\n{}", text(&o));
    text(&o)
}

#[track_caller]
fn fails(args: &[&str], message: &str) -> String {
    let o = tpcc(args);
    assert!(
        !o.status.success(),
        "tpcc {args:?} succeeded:\n{}",
        text(&o)
    );
    let t = text(&o);
    assert!(
        t.contains(message),
        "tpcc {args:?}: expected {message:?} in:\n{t}"
    );
    assert!(!t.contains("panicked"), "tpcc {args:?} panicked:\n{t}");
    t
}

fn load_run_check(mode: &str, dir: &Path) {
    let db = dir.join(format!("{mode}.db"));
    let db = db.to_str().unwrap();
    let ack = dir.join(format!("{mode}.ack"));
    let ack = ack.to_str().unwrap();
    let mut load = vec!["load", "--db", db, "--warehouses", "2", "--mode", mode];
    load.extend(SMALL);
    assert!(ok(&load).contains("loaded 2 warehouse(s)"));
    fails(&load, "already exists");
    let out = ok(&[
        "run",
        "--db",
        db,
        "--transactions",
        "400",
        "--ack-log",
        ack,
        "--seed",
        "4",
    ]);
    assert!(out.contains("400 transactions"), "{out}");
    let acked = std::fs::read_to_string(ack).unwrap().lines().count();
    assert!(acked > 100, "only {acked} orders acknowledged");
    let out = ok(&["check", "--db", db, "--expect-orders", ack]);
    assert!(out.contains("conditions 1-4 hold"), "{out}");
    assert!(
        out.contains(&format!("all {acked} expected orders")),
        "{out}"
    );

    // A run by duration, appending to the same ack log.
    ok(&["run", "--db", db, "--duration", "0.5", "--ack-log", ack]);
    ok(&["check", "--db", db, "--expect-orders", ack]);

    // Several terminals at once, where the engine runs them.
    let terminals = [
        "run",
        "--db",
        db,
        "--transactions",
        "300",
        "--terminals",
        "3",
    ];
    if mode == "sqlite" {
        fails(&terminals, "runs one terminal");
    } else {
        // In mode tls: the terminals' loops run as speculative epochs.
        let mut args = terminals.to_vec();
        args.extend(["--ack-log", ack, "--mode", "tls"]);
        let out = ok(&args);
        assert!(out.contains("on 3 terminal(s)"), "{out}");
        ok(&["check", "--db", db, "--expect-orders", ack]);
    }
    fails(
        &["run", "--db", db, "--transactions", "1", "--terminals", "0"],
        "at least 1",
    );
    // An ack log that is the database, or its log, is refused: the acks written
    // into it took the database with them at the first crash.
    let wal = format!("{db}.wal.00000000");
    for not_an_ack_log in [db, wal.as_str()] {
        if Path::new(not_an_ack_log).exists() {
            fails(
                &[
                    "run",
                    "--db",
                    db,
                    "--transactions",
                    "1",
                    "--ack-log",
                    not_an_ack_log,
                ],
                "is the database",
            );
        }
    }
    // A run without `--seed` says which it drew, to be repeated.
    let out = ok(&["run", "--db", db, "--transactions", "5"]);
    assert!(out.contains("; seed "), "{out}");

    // An order that was never placed must make the check fail.
    let mut lines = std::fs::read_to_string(ack).unwrap();
    lines.push_str("2 7 99999\n");
    let bogus = dir.join(format!("{mode}.bogus"));
    std::fs::write(&bogus, lines).unwrap();
    let t = fails(
        &[
            "check",
            "--db",
            db,
            "--expect-orders",
            bogus.to_str().unwrap(),
        ],
        "MISSING",
    );
    assert!(t.contains("o_id 99999"), "{t}");

    std::fs::write(&bogus, "1 2 x\n").unwrap();
    fails(
        &[
            "check",
            "--db",
            db,
            "--expect-orders",
            bogus.to_str().unwrap(),
        ],
        "expected `w_id d_id o_id`",
    );
}

#[test]
fn load_run_check_sequential() {
    let dir = tempfile::tempdir().unwrap();
    load_run_check("sequential", dir.path());
}

#[test]
fn load_run_check_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    load_run_check("sqlite", dir.path());
}

#[test]
fn check_detects_an_inconsistent_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let db_s = db.to_str().unwrap();
    let mut load = vec!["load", "--db", db_s, "--mode", "sqlite"];
    load.extend(SMALL);
    ok(&load);
    ok(&["check", "--db", db_s]);
    // Break condition 1 behind the engine's back.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE warehouse SET w_ytd = w_ytd + 1", [])
        .unwrap();
    drop(conn);
    fails(&["check", "--db", db_s], "condition 1");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing.db");
    let missing = missing.to_str().unwrap();
    fails(&["check", "--db", missing], "no database at");
    fails(
        &["run", "--db", missing, "--transactions", "1"],
        "no database at",
    );
    // A SQLite file that is not ours is refused and left as it was.
    let foreign = dir.path().join("foreign.sqlite");
    let conn = rusqlite::Connection::open(&foreign).unwrap();
    conn.execute_batch("CREATE TABLE t (x)").unwrap();
    drop(conn);
    fails(
        &["check", "--db", foreign.to_str().unwrap()],
        "not a loaded TPC-C database",
    );
    let conn = rusqlite::Connection::open(&foreign).unwrap();
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(journal, "delete", "the foreign file was changed");
    // No work at all is a mistake, not a run of zero transactions.
    fails(
        &["run", "--db", missing, "--transactions", "0"],
        "must be at least 1",
    );
    fails(
        &["run", "--db", missing, "--duration", "0"],
        "more than 0 seconds",
    );
    fails(&["compare", "--transactions", "0"], "must be at least 1");
    fails(
        &["run", "--db", missing, "--duration", "1e300"],
        "more seconds than a run can last",
    );
    fails(
        &[
            "run",
            "--db",
            missing,
            "--transactions",
            "1",
            "--mode",
            "bogus",
        ],
        "sequential",
    );
    fails(&["run", "--db", missing], "--transactions");
    fails(
        &[
            "run",
            "--db",
            missing,
            "--transactions",
            "1",
            "--duration",
            "1",
        ],
        "cannot be used with",
    );
    fails(&["load", "--db", "/no/such/dir/x.db"], "does not exist");
    fails(&["load", "--db", missing, "--warehouses", "0"], "0");
    fails(&["load", "--db", missing, "--items", "5"], "items");
    fails(
        &["run", "--db", missing, "--duration", "nan"],
        "--duration must be",
    );
    fails(
        &["run", "--db", missing, "--duration=-1"],
        "--duration must be",
    );

    // A file that is not a database of either kind.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"this is not a database, just some bytes").unwrap();
    let t = tpcc(&["check", "--db", junk.to_str().unwrap()]);
    assert!(!t.status.success());
    assert!(!text(&t).contains("panicked"), "{}", text(&t));

    // A SQLite database is not run as a sequential one.
    let db = dir.path().join("s.db");
    let db = db.to_str().unwrap();
    let mut load = vec!["load", "--db", db, "--mode", "sqlite"];
    load.extend(SMALL);
    ok(&load);
    fails(
        &[
            "run",
            "--db",
            db,
            "--mode",
            "sequential",
            "--transactions",
            "1",
        ],
        "is a sqlite database",
    );
    fails(
        &["run", "--db", db, "--mode", "tls", "--transactions", "1"],
        "is a sqlite database",
    );

    // Found by an outside probe: a pipe as the database waited for a writer for ever;
    // tens of thousands of terminals aborted the process; a file where the database's
    // directory should be was called missing; a killed load's file was not named.
    let pipe = dir.path().join("pipe.db");
    let made = std::process::Command::new("mkfifo").arg(&pipe).status();
    if made.is_ok_and(|s| s.success()) {
        let pipe = pipe.to_str().unwrap();
        fails(&["check", "--db", pipe], "not a regular file");
        fails(
            &["run", "--db", pipe, "--transactions", "1"],
            "not a regular file",
        );
    }
    fails(
        &[
            "run",
            "--db",
            db,
            "--terminals",
            "100000",
            "--transactions",
            "1",
        ],
        "more than 1024",
    );
    let inside_a_file = format!("{db}/x.db");
    fails(&["load", "--db", &inside_a_file], "is not a directory");
}

#[test]
fn compare_prints_a_table_and_json() {
    let small = ["--items", "1000", "--customers", "30"];
    let mut args = vec!["compare", "--transactions", "300"];
    args.extend(small);
    let table = ok(&args);
    for needle in [
        "sequential",
        "tls",
        "sqlite",
        "new_order",
        "stock_level",
        "p50 us",
        "same answers on every mode: yes",
        "same final database totals: yes",
    ] {
        assert!(table.contains(needle), "{needle:?} missing from:\n{table}");
    }
    args.push("--json");
    let o = tpcc(&args);
    assert!(o.status.success(), "{}", text(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    for kind in [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
    ] {
        for key in [
            "sequential_p50_us",
            "sequential_p95_us",
            "tls_p50_us",
            "tls_p95_us",
            "sqlite_p50_us",
            "sqlite_p95_us",
        ] {
            assert!(
                json[kind][key].is_number(),
                "{kind}.{key} missing in {json}"
            );
        }
        let p50 = json[kind]["sqlite_p50_us"].as_f64().unwrap();
        let p95 = json[kind]["sqlite_p95_us"].as_f64().unwrap();
        assert!(p50 > 0.0 && p50 <= p95);
    }
    assert_eq!(json["same_answers"], true, "{json}");
    assert_eq!(json["same_totals"], true, "{json}");
    // What the table's last lines say, the JSON has too.
    for key in [
        "rolled_back_new_orders",
        "orders_in_database",
        "transactions",
        "warehouses",
    ] {
        assert!(json[key].is_u64(), "{key} missing in {json}");
    }
    assert!(json["sync"].is_string(), "{json}");
    assert!(
        json["all"]["sqlite_tps"].as_f64().is_some_and(|t| t > 0.0),
        "{json}"
    );
    assert!(json["load_s"]["sqlite"].is_number(), "{json}");
    // Where the process may use two CPUs, the run says how fast they passed a line.
    let two = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    let trip = &json["cache_line_round_trip"];
    if two {
        assert!(
            trip["before_ns"].as_u64().is_some_and(|ns| ns > 0),
            "{json}"
        );
        assert!(trip["after_ns"].as_u64().is_some_and(|ns| ns > 0), "{json}");
        let verdict = trip["placement"].as_str().unwrap_or_default();
        assert!(["near", "far", "changed"].contains(&verdict), "{json}");
        assert!(
            table.contains("cache-line round trip between two threads"),
            "{table}"
        );
    } else {
        assert!(trip.is_null(), "{json}");
    }
}

/// Output piped into a reader that has gone (`tpcc load ... | head -c 5`) ends the
/// program quietly, as other Unix tools end, not with a panic.
#[cfg(unix)]
#[test]
fn a_closed_output_pipe_ends_the_program_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tpcc"))
        .args(["load", "--db", db.to_str().unwrap()])
        .args(["--items", "200", "--customers", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running tpcc");
    // Nobody will read what it prints.
    drop(child.stdout.take());
    let o = child.wait_with_output().expect("waiting for tpcc");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        o.status.success() || o.status.signal() == Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        o.status
    );
}

/// Output that cannot be written (a full disk) fails the command with a message,
/// not a panic; with one mode, `compare --json` says nothing was compared.
#[test]
fn an_unwritable_output_is_an_error_and_one_mode_compares_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let db = db.to_str().unwrap();
    ok(&["load", "--db", db, "--items", "200", "--customers", "30"]);
    if let Ok(full) = std::fs::File::create("/dev/full") {
        let o = Command::new(env!("CARGO_BIN_EXE_tpcc"))
            .args(["check", "--db", db])
            .stdout(full)
            .output()
            .expect("running tpcc");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(stderr.contains("writing to stdout"), "{stderr}");
        assert_eq!(o.status.code(), Some(1), "{stderr}");
    }
    let out = ok(&[
        "compare",
        "--items",
        "200",
        "--customers",
        "30",
        "--transactions",
        "20",
        "--modes",
        "sqlite",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out[out.find('{').unwrap()..]).unwrap();
    assert!(
        v["same_answers"].is_null() && v["same_totals"].is_null(),
        "{v}"
    );
}

/// Ctrl-C ends a run after the transaction in hand, with its summary printed, and
/// exit status 130 (killed at once, a long run's figures were all lost).
#[test]
fn an_interrupted_run_prints_what_ran() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let db = db.to_str().unwrap();
    let ack = dir.path().join("acks");
    ok(&["load", "--db", db, "--items", "200", "--customers", "30"]);
    let child = Command::new(env!("CARGO_BIN_EXE_tpcc"))
        .args(["run", "--db", db, "--duration", "60", "--ack-log"])
        .arg(&ack)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running tpcc");
    // Acknowledged orders: transactions run, so the handler is in place.
    let t = Instant::now();
    while std::fs::metadata(&ack).map_or(0, |m| m.len()) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no order acknowledged"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill sends a signal to a child process this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let o = child.wait_with_output().expect("waiting for tpcc");
    let out = text(&o);
    assert_eq!(o.status.code(), Some(130), "{out}");
    assert!(out.contains("interrupted (Ctrl-C)"), "{out}");
    assert!(out.contains("new_order"), "{out}");
}
