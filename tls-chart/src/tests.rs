//! The chart's unit tests: bars, timelines, arguments and bad input.

use super::*;
use serde_json::json;

fn loop_json(name: &str, wall: u64, busy: u64, wasted: u64, wait: u64, idle: u64) -> Value {
    json!({"name": name, "threads": 2, "wall_ns": wall, "busy_ns": busy,
           "wasted_ns": wasted, "wait_ns": wait, "idle_ns": idle})
}

#[test]
fn bars_are_normalized_to_the_baseline() {
    let par = vec![loop_json("items", 600, 1000, 100, 50, 50)];
    let seq = vec![loop_json("items", 1000, 1000, 0, 0, 0)];
    let b = bars(&[("par.json".into(), par.clone())], &seq).unwrap();
    assert_eq!(b.len(), 1);
    assert!((b[0].height - 0.6).abs() < 1e-12);
    assert!((b[0].shares.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    assert!((b[0].shares[1] - 100.0 / 1200.0).abs() < 1e-12);
    // Without a baseline, the committed work stands for the sequential time.
    let b = bars(&[("par.json".into(), par)], &[]).unwrap();
    assert!((b[0].height - 0.6).abs() < 1e-12);
}

#[test]
fn timeline_keeps_the_spans_in_the_window() {
    let trace = json!({"traceEvents": [
        {"ph": "M", "tid": 7, "name": "thread_name", "args": {"name": "main"}},
        {"ph": "X", "tid": 7, "ts": 10.0, "dur": 5.0, "cat": "ran"},
        {"ph": "X", "tid": 9, "ts": 12.0, "dur": 3.0, "cat": "violated"},
        {"ph": "X", "tid": 7, "ts": 5000.0, "dur": 5.0, "cat": "ran"}
    ]});
    let (spans, lanes, window) = timeline_spans(&trace, None).unwrap();
    assert_eq!(lanes, vec!["main".to_string(), "thread 9".to_string()]);
    assert_eq!(window, (10.0, 2010.0));
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[1].lane, 1);
    assert_eq!(spans[1].cat, "violated");
    let (spans, _, _) = timeline_spans(&trace, Some((4000.0, 6000.0))).unwrap();
    assert_eq!(spans.len(), 1);
    assert!(timeline_spans(&json!({"traceEvents": []}), None).is_err());
}

#[test]
fn bad_input_is_an_error() {
    let bad = vec![json!({"name": "x"})];
    assert!(bars(&[("f".into(), bad)], &[]).is_err());
    assert!(parse_args(["r.json".to_string()].into_iter()).is_err());
    assert!(parse_args(["-o".to_string()].into_iter()).is_err());
    assert!(parse_args(["--frobnicate".to_string()].into_iter()).is_err());
    let args = |a: &[&str]| parse_args(a.iter().map(|s| s.to_string()));
    // The output must be SVG, named once, and not one of the inputs.
    assert!(args(&["-o", "c.png", "r.json"]).is_err());
    assert!(args(&["-o", "-", "r.json"]).is_err());
    assert!(args(&["-o", "a.svg", "-o", "b.svg", "r.json"]).is_err());
    assert!(args(&["-o", "c.SVG", "r.json"]).is_ok());
    let same = args(&["-o", "r.svg", "r.svg"]).unwrap().unwrap();
    assert!(check_output_is_not_an_input(&same).is_err());
    let baseline = args(&["--baseline", "b.svg", "-o", "b.svg", "r.json"]);
    assert!(check_output_is_not_an_input(&baseline.unwrap().unwrap()).is_err());
    // Options that belong to the other kind of chart.
    assert!(args(&["--window-us", "1,2", "-o", "c.svg", "r.json"]).is_err());
    assert!(args(&["--timeline", "t.json", "-o", "c.svg", "r.json"]).is_err());
    assert!(
        args(&[
            "--timeline",
            "t.json",
            "--baseline",
            "b.json",
            "-o",
            "c.svg"
        ])
        .is_err()
    );
    assert!(matches!(
        parse_args(["--help".to_string()].into_iter()),
        Ok(None)
    ));
    // Times that are not times.
    let negative = vec![loop_json("x", 100, 1, 0, 0, 5)]
        .into_iter()
        .map(|mut l| {
            l["wasted_ns"] = json!(-3);
            l
        })
        .collect();
    assert!(bars(&[("f".into(), negative)], &[]).is_err());
    let huge = vec![json!({"name": "x", "wall_ns": 1.0, "busy_ns": 1e308,
                           "wasted_ns": 1e308, "wait_ns": 0, "idle_ns": 0})];
    assert!(bars(&[("f".into(), huge)], &[]).is_err());
}

/// A window that is not a finite stretch made plotting panic (NaN) or hang (an
/// infinite end); a trace whose spans lie too far out to add a window to, too.
#[test]
fn a_window_that_cannot_be_drawn_is_an_error() {
    let trace = json!({"traceEvents": [{"ph": "X", "tid": 1, "ts": 10.0, "dur": 5.0}]});
    for w in [
        (f64::NAN, f64::NAN),
        (0.0, f64::INFINITY),
        (f64::NEG_INFINITY, 0.0),
        (-1e308, 1e308),
        (9.0, 1.0),
        (5.0, 5.0),
    ] {
        assert!(timeline_spans(&trace, Some(w)).is_err(), "{w:?}");
    }
    let far = json!({"traceEvents": [{"ph": "X", "tid": 1, "ts": 1e308, "dur": 5.0}]});
    assert!(timeline_spans(&far, None).is_err());
    assert!(timeline_spans(&trace, Some((0.0, 1e12))).is_ok());
}

/// A window with no span in it is an error naming where the spans are, not an
/// empty chart.
#[test]
fn a_window_without_spans_is_refused() {
    let trace = json!({"traceEvents": [
        {"ph": "X", "tid": 7, "ts": 10.0, "dur": 5.0, "cat": "ran"}
    ]});
    let e = timeline_spans(&trace, Some((-10.0, 5.0))).unwrap_err();
    assert!(
        e.contains("no span") && e.contains("from 10 to 15 us"),
        "{e}"
    );
}

/// More loops than a chart can show: the tallest, in order; a nameless loop is
/// named by its place.
#[test]
fn a_chart_keeps_its_tallest_bars() {
    let loops: Vec<Value> = (0..50u64)
        .map(|i| loop_json(&format!("l{i}"), 100 + (i * 37) % 50, 100, 0, 0, 0))
        .collect();
    let mut b = bars(&[("r.json".into(), loops)], &[]).unwrap();
    let shortest = b.iter().map(|b| b.height).fold(f64::INFINITY, f64::min);
    assert_eq!(keep_tallest(&mut b, 40), 10);
    assert_eq!(b.len(), 40);
    assert!(b.iter().all(|b| b.height > shortest));
    let labels: Vec<usize> = b
        .iter()
        .map(|b| b.label[1..b.label.find(' ').unwrap()].parse().unwrap())
        .collect();
    assert!(labels.windows(2).all(|w| w[0] < w[1]), "{labels:?}");
    // Ties before a taller bar do not take its room.
    let tied: Vec<Value> = [5, 5, 5, 9]
        .iter()
        .enumerate()
        .map(|(i, &h)| loop_json(&format!("t{i}"), h, 1, 0, 0, 0))
        .collect();
    let mut b = bars(&[("r.json".into(), tied)], &[]).unwrap();
    assert_eq!(keep_tallest(&mut b, 2), 2);
    let kept: Vec<f64> = b.iter().map(|b| b.height).collect();
    assert_eq!(kept, [5.0, 9.0]);
    let e = bars(&[("r.json".into(), vec![json!({"wall_ns": 1})])], &[]).unwrap_err();
    assert!(e.contains("loop 1 (counting from 1) has no name"), "{e}");
}
