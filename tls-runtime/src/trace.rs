//! The epoch timeline of `TLS_TRACE=<path>.json`, in Chrome trace event format: one
//! track per thread, one span per epoch attempt, coloured by what became of it
//! (committed work, violated, squashed), with waits and in-order stretches, and the
//! dependence named on each violated span. Perfetto and chrome://tracing open it.
//!
//! Threads buffer their spans locally and hand them over when they leave a loop, so
//! tracing adds no shared write per epoch.

use crate::json::json_str;
use crate::sync::lock_std;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// What a span shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanKind {
    /// An attempt that ran to the end of the epoch.
    Ran,
    /// An attempt cut short by a violation.
    Violated,
    /// A re-run of a finished epoch that was violated while it waited to commit.
    Rerun,
    /// Committing an epoch.
    Commit,
    /// An epoch squashed because an earlier one ended the loop.
    Squashed,
    /// A thread waiting for room in the window of epochs in flight.
    Waiting,
    /// A thread with nothing to run.
    Idle,
    /// Iterations run in order (adaptive fallback).
    InOrder,
}

impl SpanKind {
    fn name(self) -> &'static str {
        match self {
            SpanKind::Ran => "ran",
            SpanKind::Violated => "violated",
            SpanKind::Rerun => "re-run",
            SpanKind::Commit => "commit",
            SpanKind::Squashed => "squashed",
            SpanKind::Waiting => "waiting",
            SpanKind::Idle => "idle",
            SpanKind::InOrder => "in order",
        }
    }

    /// Chrome's reserved colour names.
    fn colour(self) -> &'static str {
        match self {
            SpanKind::Ran | SpanKind::Rerun => "good",
            SpanKind::Commit => "olive",
            SpanKind::Violated => "terrible",
            SpanKind::Squashed => "grey",
            SpanKind::Waiting => "yellow",
            SpanKind::Idle => "white",
            SpanKind::InOrder => "generic_work",
        }
    }
}

struct Span {
    start: Instant,
    end: Instant,
    kind: SpanKind,
    epoch: u64,
    name: Arc<str>,
    detail: Option<String>,
}

struct ThreadTrace {
    tid: u64,
    thread_name: String,
    spans: Vec<Span>,
}

static DONE: Mutex<Vec<ThreadTrace>> = Mutex::new(Vec::new());

thread_local! {
    static LOCAL: RefCell<Option<ThreadTrace>> = const { RefCell::new(None) };
}

/// Whether `TLS_TRACE` asks for a timeline.
#[inline]
pub(crate) fn enabled() -> bool {
    crate::config::env().trace.is_some()
}

pub(crate) fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Records a span of this thread (call only when `enabled()`).
pub(crate) fn span(
    kind: SpanKind,
    name: &Arc<str>,
    epoch: u64,
    start: Instant,
    end: Instant,
    detail: Option<String>,
) {
    base();
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let t = l.get_or_insert_with(|| {
            static NEXT: AtomicU64 = AtomicU64::new(1);
            ThreadTrace {
                tid: NEXT.fetch_add(1, Ordering::Relaxed),
                thread_name: std::thread::current()
                    .name()
                    .unwrap_or("<unnamed>")
                    .to_owned(),
                spans: Vec::new(),
            }
        });
        t.spans.push(Span {
            start,
            end,
            kind,
            epoch,
            name: name.clone(),
            detail,
        });
    });
}

/// Hands this thread's spans over (when it leaves a loop).
pub(crate) fn flush_thread() {
    if !enabled() {
        return;
    }
    // At process exit this thread's storage may already be gone: nothing to hand over.
    let Ok(Some(t)) = LOCAL.try_with(|l| {
        let mut l = l.borrow_mut();
        let t = l.as_mut()?;
        if t.spans.is_empty() {
            return None;
        }
        Some(ThreadTrace {
            tid: t.tid,
            thread_name: t.thread_name.clone(),
            spans: std::mem::take(&mut t.spans),
        })
    }) else {
        return;
    };
    lock_std(&DONE).push(t);
}

/// The whole timeline as Chrome trace event JSON.
pub(crate) fn to_json() -> String {
    let done = lock_std(&DONE);
    let base = base();
    let us = |t: Instant| t.saturating_duration_since(base).as_nanos() as f64 / 1000.0;
    let mut out = String::from("{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
    let mut first = true;
    let mut named = std::collections::HashSet::new();
    for t in done.iter() {
        if named.insert(t.tid) {
            let _ = write!(
                out,
                "{}{{\"ph\": \"M\", \"pid\": 1, \"tid\": {}, \"name\": \"thread_name\", \
                 \"args\": {{\"name\": {}}}}}",
                if first { "" } else { ",\n" },
                t.tid,
                json_str(&t.thread_name)
            );
            first = false;
        }
        for s in &t.spans {
            let label = match s.kind {
                SpanKind::Waiting | SpanKind::Idle => s.kind.name().to_owned(),
                SpanKind::InOrder => format!("{} in order", s.name),
                _ => format!("{} epoch {}", s.name, s.epoch),
            };
            let _ = write!(
                out,
                ",\n{{\"ph\": \"X\", \"pid\": 1, \"tid\": {}, \"name\": {}, \"cat\": \"{}\", \
                 \"cname\": \"{}\", \"ts\": {:.3}, \"dur\": {:.3}, \"args\": {{\"loop\": {}, \
                 \"epoch\": {}",
                t.tid,
                json_str(&label),
                s.kind.name(),
                s.kind.colour(),
                us(s.start),
                (us(s.end) - us(s.start)).max(0.001),
                json_str(&s.name),
                s.epoch
            );
            if let Some(d) = &s.detail {
                let _ = write!(out, ", \"detail\": {}", json_str(d));
            }
            out.push_str("}}");
        }
    }
    out.push_str("\n]}\n");
    out
}
