//! `TLS_REPORT=<path>.json` and `TLS_TRACE=<path>.json` are written when the process
//! exits: these tests run this test binary as a child with them set, then read the
//! files back.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use tls_runtime::{Control, Loop, Spec, SpecVec};

static LOAD_LINE: AtomicU32 = AtomicU32::new(0);
static STORE_LINE: AtomicU32 = AtomicU32::new(0);

fn planted_loop(name: &'static str) -> (u32, u32) {
    let cell = Spec::new(0u64);
    let out = SpecVec::from(vec![0u64; 40]);
    Loop::new()
        .name(name)
        .threads(2)
        .chunk(1)
        .run(0..40u64, |i| {
            if i % 2 == 0 {
                std::thread::sleep(std::time::Duration::from_micros(300));
            }
            LOAD_LINE.store(line!() + 1, Ordering::Relaxed);
            let v = cell.get();
            STORE_LINE.store(line!() + 1, Ordering::Relaxed);
            cell.set(v + 1);
            out.set(i as usize, v);
            Control::<()>::Continue
        });
    assert_eq!(out.into_vec(), (0..40).collect::<Vec<_>>());
    (
        LOAD_LINE.load(Ordering::Relaxed),
        STORE_LINE.load(Ordering::Relaxed),
    )
}

#[test]
fn child() {
    if std::env::var_os("TLS_FILES_CHILD").is_some() {
        let (load, store) = planted_loop("planted");
        planted_loop("planted");
        println!("LINES {load} {store}");
    }
}

#[test]
fn report_and_trace_files_hold_what_they_claim() {
    let dir = std::env::temp_dir().join(format!("tls-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report.json");
    let trace = dir.join("trace.json");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env("TLS_FILES_CHILD", "1")
        .env("TLS_REPORT", &report)
        .env("TLS_TRACE", &trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<u32> = stdout
        .lines()
        .find_map(|l| l.find("LINES ").map(|at| &l[at + 6..]))
        .expect("child printed its lines")
        .split(' ')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    let (load_line, store_line) = (lines[0], lines[1]);

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let loops = report.as_array().unwrap();
    assert_eq!(loops.len(), 1, "aggregated by name: {report}");
    let l = &loops[0];
    assert_eq!(l["name"], "planted");
    assert_eq!(l["count"], 2);
    assert_eq!(l["items"], 80);
    for key in [
        "epochs",
        "violations",
        "wall_ns",
        "busy_ns",
        "wasted_ns",
        "idle_ns",
        "wait_ns",
    ] {
        assert!(l[key].is_u64(), "{key} in {l}");
    }
    assert!(l["violations"].as_u64().unwrap() > 0, "{l}");
    let deps = l["dependences"].as_array().unwrap();
    assert_eq!(deps.len(), 1, "{l}");
    let d = &deps[0];
    assert!(
        d["load"]
            .as_str()
            .unwrap()
            .contains(&format!("report_files.rs:{load_line}:")),
        "{d}"
    );
    assert!(
        d["store"]
            .as_str()
            .unwrap()
            .contains(&format!("report_files.rs:{store_line}:")),
        "{d}"
    );
    assert_eq!(d["count"], l["violations"]);
    assert!(d["wasted_ns"].as_u64().unwrap() > 0);

    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let spans: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == "thread_name")
    );
    // A violation shows either on the attempt it cut short ("violated") or, when it hit
    // an epoch that had already finished, on the re-run at commit ("re-run"). Once the
    // site synchronizes the load (it violates every epoch), an epoch that waits there
    // too long (a thread descheduled, on a busy machine) re-runs once homefree
    // without a violation: that span names the load it waited at.
    let violated: Vec<_> = spans
        .iter()
        .filter(|e| e["cat"] == "violated" || e["cat"] == "re-run")
        .collect();
    assert!(!violated.is_empty(), "no violated span");
    for v in &violated {
        let detail = v["args"]["detail"].as_str().expect("a re-run says why");
        if detail.starts_with("re-run once homefree") {
            assert_eq!(v["cat"], "re-run", "{v}");
            assert!(detail.contains("synchronized load"), "{detail}");
        } else {
            assert!(detail.contains(&format!(":{store_line}:")), "{detail}");
        }
        assert!(detail.contains(&format!(":{load_line}:")), "{detail}");
    }
    // Every iteration shows: as an epoch that ran to its end, or inside a stretch run
    // in order by the adaptive fallback.
    let ran = spans.iter().filter(|e| e["cat"] == "ran").count();
    let in_order: usize = spans
        .iter()
        .filter(|e| e["cat"] == "in order")
        .map(|e| {
            let d = e["args"]["detail"].as_str().unwrap();
            d.split(' ').next().unwrap().parse::<usize>().unwrap()
        })
        .sum();
    assert!(ran + in_order >= 80, "ran {ran}, in order {in_order}");
    for s in &spans {
        assert!(s["ts"].as_f64().unwrap() >= 0.0 && s["dur"].as_f64().unwrap() > 0.0);
        assert_eq!(s["args"]["loop"], "planted");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Run in order on one thread (`TLS_MODE=sequential`; `TLS_THREADS=1` takes the same
/// path), or recorded in order (`TLS_MODE=profile`), with no report asked for: the
/// trace is still written, one in-order span per run of the loop.
#[test]
fn a_trace_is_written_for_loops_run_on_one_thread() {
    for mode in ["sequential", "profile"] {
        let dir = std::env::temp_dir().join(format!("tls-trace-one-{mode}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("trace.json");
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
            .env("TLS_FILES_CHILD", "1")
            .env("TLS_MODE", mode)
            .env_remove("TLS_REPORT")
            .env("TLS_TRACE", &trace)
            .output()
            .unwrap();
        assert!(out.status.success(), "{mode}: {out:?}");
        let text = std::fs::read_to_string(&trace).expect("the trace file was written");
        let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
        let spans: Vec<_> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .collect();
        assert_eq!(spans.len(), 2, "{mode}: one span per run: {text}");
        for s in &spans {
            assert_eq!(s["cat"], "in order", "{mode}: {s}");
            assert_eq!(s["args"]["loop"], "planted");
            let detail = s["args"]["detail"].as_str().unwrap();
            assert!(detail.starts_with("40 iterations"), "{mode}: {detail}");
            assert!(s["dur"].as_f64().unwrap() > 0.0, "{mode}: {s}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
