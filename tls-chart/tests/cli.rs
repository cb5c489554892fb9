//! Runs `tls-chart` on report files and checks the SVG it draws.

use std::process::Command;

fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn draws_one_bar_per_loop_with_a_legend() {
    let dir = std::env::temp_dir().join(format!("tls-chart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = write(
        &dir,
        "par.json",
        r#"[{"name": "new_order.items", "threads": 2, "wall_ns": 700, "busy_ns": 1000,
             "wasted_ns": 200, "wait_ns": 100, "idle_ns": 100, "dependences": []},
            {"name": "delivery", "threads": 2, "wall_ns": 550, "busy_ns": 1000,
             "wasted_ns": 0, "wait_ns": 50, "idle_ns": 50, "dependences": []}]"#,
    );
    let base = write(
        &dir,
        "seq.json",
        r#"[{"name": "new_order.items", "threads": 1, "wall_ns": 1000, "busy_ns": 1000,
             "wasted_ns": 0, "wait_ns": 0, "idle_ns": 0, "dependences": []}]"#,
    );
    let svg = dir.join("chart.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_tls-chart"))
        .arg("--baseline")
        .arg(&base)
        .arg("-o")
        .arg(&svg)
        .arg(&report)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("new_order.items (2t)"), "{stdout}");
    assert!(stdout.contains(" 0.700 "), "{stdout}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    for text in [
        "busy",
        "violated",
        "waiting",
        "idle",
        "new_order.items (2t)",
        "delivery (2t)",
    ] {
        assert!(svg.contains(text), "no {text} in the chart");
    }
    // Four categories for two bars, plus the legend swatches.
    assert!(svg.matches("<rect").count() >= 8 + 4);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn unreadable_input_fails_with_a_message() {
    let chart = std::env::temp_dir().join("tls-chart-unreadable-input.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_tls-chart"))
        .arg("-o")
        .arg(&chart)
        .arg("/nonexistent/report.json")
        .output()
        .unwrap();
    assert!(!chart.exists(), "nothing written for a failed run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/report.json"));
}

#[test]
fn an_output_that_is_an_input_is_refused_and_left_alone() {
    let dir = std::env::temp_dir().join(format!("tls-chart-same-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A report whose name ends in .svg, given as the output too.
    let report = dir.join("report.svg");
    let text = r#"[{"name": "l", "threads": 2, "wall_ns": 10, "busy_ns": 20, "wasted_ns": 0, "wait_ns": 0, "idle_ns": 0}]"#;
    std::fs::write(&report, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tls-chart"))
        .arg("-o")
        .arg(dir.join(".").join("report.svg"))
        .arg(&report)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is also an input"));
    assert_eq!(std::fs::read_to_string(&report).unwrap(), text);
    std::fs::remove_dir_all(&dir).ok();
}
