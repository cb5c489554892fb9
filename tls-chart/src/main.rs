//! `tls-chart`: the normalized-time breakdown of speculative loops as an SVG bar chart,
//! drawn from the JSON that `TLS_REPORT=<path>.json` writes.
//!
//! ```text
//! tls-chart [--baseline SEQUENTIAL.json] -o chart.svg REPORT.json [REPORT.json ...]
//! tls-chart --timeline TRACE.json [--window-us FROM,TO] -o timeline.svg
//! ```
//!
//! One stacked bar per loop and report file: its height is the loop's execution time
//! normalized to the sequential time (1.0 = as fast as the sequential loop; lower is
//! faster), split into the share of thread time spent busy on work that committed,
//! on work that violations threw away, waiting for room to run, and idle, the picture
//! of the CMU study of TLS on BerkeleyDB. The sequential time is the loop's wall time
//! in the `--baseline` report (a run with `TLS_MODE=sequential`), or else the work that
//! committed (busy time summed over threads).
//!
//! With `--timeline`, it draws a stretch of a `TLS_TRACE` file instead: one lane per
//! thread, one box per epoch attempt, coloured as the trace colours them (committed
//! work green, violated red, commits olive, waiting yellow, squashed grey, in-order
//! stretches blue): a still picture of what Perfetto shows.

use plotters::prelude::*;
use plotters::style::text_anchor;
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;

/// One bar of the chart.
#[derive(Debug, Clone, PartialEq)]
struct Bar {
    label: String,
    /// Execution time over sequential time.
    height: f64,
    /// Shares of thread time: busy, violated, waiting, idle (sum 1).
    shares: [f64; 4],
}

const CATEGORIES: [(&str, RGBColor); 4] = [
    ("busy", RGBColor(76, 145, 65)),
    ("violated", RGBColor(200, 60, 50)),
    ("waiting", RGBColor(235, 180, 50)),
    ("idle", RGBColor(170, 170, 170)),
];

fn usage() -> &'static str {
    "usage: tls-chart [--baseline SEQUENTIAL.json] -o OUT.svg REPORT.json [REPORT.json ...]\n       \
     tls-chart --timeline TRACE.json [--window-us FROM,TO] -o OUT.svg"
}

struct Args {
    baseline: Option<PathBuf>,
    out: PathBuf,
    reports: Vec<PathBuf>,
    timeline: Option<PathBuf>,
    window: Option<(f64, f64)>,
}

/// The arguments; `None` when they ask for the usage.
fn parse_args(args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut baseline = None;
    let mut out = None;
    let mut reports = Vec::new();
    let mut timeline = None;
    let mut window = None;
    let mut args = args.peekable();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--baseline" => {
                baseline = Some(args.next().ok_or("--baseline needs a file")?.into());
            }
            "-o" | "--out" => {
                let file: PathBuf = args.next().ok_or("-o needs a file")?.into();
                if out.replace(file).is_some() {
                    return Err("-o given twice: the chart is one file".into());
                }
            }
            "--timeline" => {
                timeline = Some(args.next().ok_or("--timeline needs a trace file")?.into());
            }
            "--window-us" => {
                let w = args.next().ok_or("--window-us needs FROM,TO")?;
                let (a, b) = w.split_once(',').ok_or("--window-us takes FROM,TO")?;
                let parse = |x: &str| {
                    x.trim()
                        .parse::<f64>()
                        .map_err(|_| format!("--window-us: {x:?} is not a number"))
                };
                window = Some((parse(a)?, parse(b)?));
            }
            "-h" | "--help" => return Ok(None),
            s if s.starts_with('-') => return Err(format!("unknown option {s}\n{}", usage())),
            _ => reports.push(a.into()),
        }
    }
    let out: PathBuf = out.ok_or_else(|| format!("missing -o OUT.svg\n{}", usage()))?;
    if reports.is_empty() && timeline.is_none() {
        return Err(format!("no report given\n{}", usage()));
    }
    if timeline.is_some() && (!reports.is_empty() || baseline.is_some()) {
        return Err(format!(
            "--timeline draws one trace: report files and --baseline go in a chart of \
             their own\n{}",
            usage()
        ));
    }
    if window.is_some() && timeline.is_none() {
        return Err(format!(
            "--window-us applies to --timeline only\n{}",
            usage()
        ));
    }
    if !out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
    {
        return Err(format!(
            "the chart is SVG: name the output file .svg (got {})",
            out.display()
        ));
    }
    Ok(Some(Args {
        baseline,
        out,
        reports,
        timeline,
        window,
    }))
}

fn read_json(path: &PathBuf) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a TLS_REPORT JSON file: {e}", path.display()))?;
    match v {
        Value::Array(loops) => Ok(loops),
        _ => Err(format!(
            "{}: expected a JSON array of loops",
            path.display()
        )),
    }
}

fn num(l: &Value, key: &str, file: &str) -> Result<f64, String> {
    let v = l
        .get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("{file}: a loop has no numeric `{key}`"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{file}: a loop's `{key}` is {v}, not a time"))
    }
}

/// Turns report files into bars.
fn bars(reports: &[(String, Vec<Value>)], baseline: &[Value]) -> Result<Vec<Bar>, String> {
    let mut out = Vec::new();
    for (file, loops) in reports {
        for (i, l) in loops.iter().enumerate() {
            let name = l
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{file}: loop {} (counting from 1) has no name", i + 1))?;
            let wall = num(l, "wall_ns", file)?;
            let parts = [
                num(l, "busy_ns", file)?,
                num(l, "wasted_ns", file)?,
                num(l, "wait_ns", file)?,
                num(l, "idle_ns", file)?,
            ];
            let total: f64 = parts.iter().sum();
            if !total.is_finite() {
                return Err(format!(
                    "{file}: loop {name}'s times add up to more than a number holds"
                ));
            }
            let sequential = baseline
                .iter()
                .find(|b| b.get("name").and_then(Value::as_str) == Some(name))
                .and_then(|b| b.get("wall_ns").and_then(Value::as_f64))
                .unwrap_or(parts[0]);
            if sequential <= 0.0 || total <= 0.0 {
                continue;
            }
            let threads = l.get("threads").and_then(Value::as_u64).unwrap_or(1);
            let label = if reports.len() > 1 {
                format!("{name} ({threads}t, {file})")
            } else {
                format!("{name} ({threads}t)")
            };
            out.push(Bar {
                label,
                height: wall / sequential,
                shares: parts.map(|p| p / total),
            });
        }
    }
    Ok(out)
}

fn draw(bars: &[Bar], out: &PathBuf) -> Result<(), String> {
    let width = (220 + 140 * bars.len() as u32).max(520);
    let root = SVGBackend::new(out, (width, 420)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", out.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    // Room above the tallest bar for the legend, drawn in the upper right corner
    // (at 1.15 it covered the last bar's top when that bar was the tallest).
    let top = bars.iter().map(|b| b.height).fold(1.0f64, f64::max) * 1.45;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Execution time normalized to sequential",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..bars.len() as f64, 0f64..top)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("time / sequential time")
        .draw()
        .map_err(|e| err(&e))?;
    // Each bar's name, centred under it.
    for (i, b) in bars.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        let style = ("sans-serif", 12)
            .into_font()
            .color(&BLACK)
            .pos(text_anchor::Pos::new(
                text_anchor::HPos::Center,
                text_anchor::VPos::Top,
            ));
        root.draw(&Text::new(b.label.clone(), (x, y + 8), style))
            .map_err(|e| err(&e))?;
    }
    for (k, (cat, colour)) in CATEGORIES.iter().enumerate() {
        let rects = bars.iter().enumerate().map(|(i, b)| {
            let below: f64 = b.shares[..k].iter().sum::<f64>() * b.height;
            let h = b.shares[k] * b.height;
            let x = i as f64;
            Rectangle::new([(x + 0.2, below), (x + 0.8, below + h)], colour.filled())
        });
        chart
            .draw_series(rects)
            .map_err(|e| err(&e))?
            .label(*cat)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(0.0, 1.0), (bars.len() as f64, 1.0)],
            BLACK.stroke_width(1),
        )))
        .map_err(|e| err(&e))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

/// One box of the timeline: thread lane, start and end (us), trace category.
#[derive(Debug, Clone, PartialEq)]
struct Span {
    lane: usize,
    from: f64,
    to: f64,
    cat: String,
}

fn colour_of(cat: &str) -> RGBColor {
    match cat {
        "ran" | "re-run" => RGBColor(76, 145, 65),
        "violated" => RGBColor(200, 60, 50),
        "commit" => RGBColor(128, 128, 0),
        "waiting" => RGBColor(235, 180, 50),
        "squashed" => RGBColor(150, 150, 150),
        "in order" => RGBColor(70, 110, 190),
        _ => RGBColor(220, 220, 220),
    }
}

/// What a timeline shows: spans, lane names, and the window (us).
type Timeline = (Vec<Span>, Vec<String>, (f64, f64));

/// The spans of a trace inside `window` (us), and the lanes' thread names.
fn timeline_spans(trace: &Value, window: Option<(f64, f64)>) -> Result<Timeline, String> {
    let events = trace
        .get("traceEvents")
        .and_then(Value::as_array)
        .ok_or("the trace has no traceEvents array")?;
    let mut lanes: Vec<(u64, String)> = Vec::new();
    let lane_of = |tid: u64, lanes: &mut Vec<(u64, String)>| {
        lanes.iter().position(|l| l.0 == tid).unwrap_or_else(|| {
            lanes.push((tid, format!("thread {tid}")));
            lanes.len() - 1
        })
    };
    let mut spans = Vec::new();
    for e in events {
        let tid = e.get("tid").and_then(Value::as_u64).unwrap_or(0);
        match e.get("ph").and_then(Value::as_str) {
            Some("M") => {
                let i = lane_of(tid, &mut lanes);
                if let Some(n) = e.pointer("/args/name").and_then(Value::as_str) {
                    lanes[i].1 = n.to_owned();
                }
            }
            Some("X") => {
                let ts = e
                    .get("ts")
                    .and_then(Value::as_f64)
                    .ok_or("a span has no ts")?;
                let dur = e.get("dur").and_then(Value::as_f64).unwrap_or(0.0);
                let cat = e
                    .get("cat")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let lane = lane_of(tid, &mut lanes);
                spans.push(Span {
                    lane,
                    from: ts,
                    to: ts + dur,
                    cat,
                });
            }
            _ => {}
        }
    }
    if spans.is_empty() {
        return Err("the trace has no spans".into());
    }
    let start = spans.iter().map(|s| s.from).fold(f64::INFINITY, f64::min);
    let (from, to) = window.unwrap_or((start, start + 2000.0));
    // Plotting hangs or panics on a window that is not a finite stretch.
    if !(from.is_finite() && to.is_finite() && (to - from).is_finite() && from < to) {
        return Err(match window {
            Some(_) => {
                format!("--window-us {from},{to}: FROM and TO must be numbers, FROM below TO")
            }
            None => format!("the trace's spans start at {start} us, too far out to draw"),
        });
    }
    let end = spans.iter().map(|s| s.to).fold(f64::NEG_INFINITY, f64::max);
    spans.retain(|s| s.to > from && s.from < to);
    if spans.is_empty() {
        return Err(format!(
            "no span of the trace lies in --window-us {from},{to} (its spans run from \
             {start:.0} to {end:.0} us)"
        ));
    }
    Ok((spans, lanes.into_iter().map(|l| l.1).collect(), (from, to)))
}

fn draw_timeline(
    spans: &[Span],
    lanes: &[String],
    (from, to): (f64, f64),
    out: &PathBuf,
) -> Result<(), String> {
    let height = 120 + 40 * lanes.len() as u32;
    let root = SVGBackend::new(out, (900, height)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", out.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Epochs per thread over time (us)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(110)
        .build_cartesian_2d(from..to, 0f64..lanes.len() as f64)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc("microseconds into the run")
        .draw()
        .map_err(|e| err(&e))?;
    for (i, name) in lanes.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(from, i as f64 + 0.5));
        let style = ("sans-serif", 12)
            .into_font()
            .color(&BLACK)
            .pos(text_anchor::Pos::new(
                text_anchor::HPos::Right,
                text_anchor::VPos::Center,
            ));
        root.draw(&Text::new(name.clone(), (x - 6, y), style))
            .map_err(|e| err(&e))?;
    }
    chart
        .draw_series(spans.iter().map(|s| {
            let y = s.lane as f64;
            Rectangle::new(
                [(s.from.max(from), y + 0.15), (s.to.min(to), y + 0.85)],
                colour_of(&s.cat).filled(),
            )
        }))
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

/// Refuses an output file that is one of the inputs: writing the chart would
/// destroy the report or trace it is drawn from.
fn check_output_is_not_an_input(args: &Args) -> Result<(), String> {
    let same = |input: &PathBuf| {
        input == &args.out
            || matches!(
                (std::fs::canonicalize(input), std::fs::canonicalize(&args.out)),
                (Ok(a), Ok(b)) if a == b
            )
    };
    let inputs = args
        .reports
        .iter()
        .chain(&args.baseline)
        .chain(&args.timeline);
    for input in inputs {
        if same(input) {
            return Err(format!(
                "-o {} is also an input: writing the chart there would destroy it",
                args.out.display()
            ));
        }
    }
    Ok(())
}

fn run() -> Result<(), String> {
    let Some(args) = parse_args(std::env::args().skip(1))? else {
        println!("{}", usage());
        return Ok(());
    };
    check_output_is_not_an_input(&args)?;
    if let Some(path) = &args.timeline {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let trace: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a TLS_TRACE file: {e}", path.display()))?;
        let (spans, lanes, window) = timeline_spans(&trace, args.window)?;
        draw_timeline(&spans, &lanes, window, &args.out)?;
        println!(
            "{} spans on {} threads from {:.0} to {:.0} us; wrote {}",
            spans.len(),
            lanes.len(),
            window.0,
            window.1,
            args.out.display()
        );
        return Ok(());
    }
    let baseline = match &args.baseline {
        Some(p) => read_json(p)?,
        None => Vec::new(),
    };
    let mut reports = Vec::new();
    for p in &args.reports {
        let name = p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        reports.push((name, read_json(p)?));
    }
    let mut bars = bars(&reports, &baseline)?;
    if bars.is_empty() {
        return Err("the reports hold no loop with any time to draw".into());
    }
    let left_out = keep_tallest(&mut bars, MAX_BARS);
    draw(&bars, &args.out)?;
    for b in &bars {
        println!(
            "{:<40} {:>6.3}  busy {:>5.1}%  violated {:>5.1}%  waiting {:>5.1}%  idle {:>5.1}%",
            b.label,
            b.height,
            100.0 * b.shares[0],
            100.0 * b.shares[1],
            100.0 * b.shares[2],
            100.0 * b.shares[3]
        );
    }
    if left_out > 0 {
        println!(
            "{left_out} more loops, each shorter (against its sequential time) than those \
             above, not drawn: a chart of more than {MAX_BARS} bars cannot be read"
        );
    }
    println!("wrote {}", args.out.display());
    Ok(())
}

/// The most bars a chart draws (an outside probe's report of 5,000 loops made an
/// SVG 700,000 pixels wide).
const MAX_BARS: usize = 40;

/// Keeps the `max` tallest of `bars` (the loops that took longest against their
/// sequential time), in their order; returns how many it dropped.
fn keep_tallest(bars: &mut Vec<Bar>, max: usize) -> usize {
    if bars.len() <= max {
        return 0;
    }
    let mut heights: Vec<f64> = bars.iter().map(|b| b.height).collect();
    heights.sort_by(|a, b| b.total_cmp(a));
    let cut = heights[max - 1];
    // Every bar above the cut stays (fewer than `max`); ties at the cut fill the
    // rest, the first ones in order. (Filling in order regardless, ties early in
    // the report took the room of a taller bar after them.)
    let mut ties = max - bars.iter().filter(|b| b.height > cut).count();
    let before = bars.len();
    bars.retain(|b| {
        let tie = b.height == cut && ties > 0;
        ties -= usize::from(tie);
        b.height > cut || tie
    });
    before - bars.len()
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tls-chart: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests;
