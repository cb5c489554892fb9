//! [`Loop`]: a speculative loop configured (name, threads, chunking, site). Running it
//! is in `run.rs` (choosing how) and `parallel.rs` (speculatively, on several threads).

use crate::adapt::LoopSite;
use core::panic::Location;
use std::borrow::Cow;

/// A speculative loop, configured: name, threads, chunking.
///
/// ```
/// use tls_runtime::{Control, Loop, LoopOutcome, SpecVec};
/// let v = SpecVec::from(vec![1u32, 2, 3, 4, 5]);
/// let outcome = Loop::new().name("find").threads(2).run(0..v.len(), |i| {
///     if v.get(i) == 4 { Control::Return(i) } else { Control::Continue }
/// });
/// assert_eq!(outcome, LoopOutcome::Returned(3));
/// ```
#[derive(Debug, Clone)]
pub struct Loop {
    name: Option<Cow<'static, str>>,
    pub(crate) threads: Option<usize>,
    pub(crate) chunk: Option<usize>,
    pub(crate) location: &'static Location<'static>,
    pub(crate) site: Option<&'static LoopSite>,
    /// The runtime's own loop (calibration): its report stays on this thread for
    /// the caller that ran it and never reaches `TLS_REPORT` or `TLS_TRACE`.
    pub(crate) internal: bool,
}

impl Default for Loop {
    #[track_caller]
    fn default() -> Self {
        Loop::new()
    }
}

impl Loop {
    /// A loop located at the caller, with the default settings.
    #[track_caller]
    pub fn new() -> Self {
        Loop {
            name: None,
            threads: None,
            chunk: None,
            location: Location::caller(),
            site: None,
            internal: false,
        }
    }

    /// Names the loop in reports.
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Threads that may run this loop's epochs, the caller included (default:
    /// `TLS_THREADS`, else all cores). `1` runs the loop in order, and so does `0`;
    /// more than [`MAX_THREADS`](crate::MAX_THREADS) runs on that many.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads.clamp(1, crate::config::MAX_THREADS));
        self
    }

    /// Iterations per epoch. By default the runtime chooses: one, or more when
    /// iterations are so short that the per-epoch cost would show (epochs of about
    /// 10 us; about 80 us for a loop none of whose epochs has ever rolled back, cut
    /// shorter where a run would leave a thread fewer than 16 epochs).
    ///
    /// Up to 4 epochs per thread are in flight, so what escaped calls take and
    /// commit-time actions give back (a pool's slots) is held for up to `4 * threads *
    /// chunk` iterations at once; `chunk(1)` bounds it to `4 * threads`.
    pub fn chunk(mut self, chunk: usize) -> Self {
        self.chunk = Some(chunk.max(1));
        self
    }

    /// Sets the source location reported for the loop.
    pub fn at(mut self, location: &'static Location<'static>) -> Self {
        self.location = location;
        self
    }

    /// Uses `site` to keep the loop's adaptive state (the macro gives each loop a
    /// `static` one; without it the state is looked up by location and name).
    pub fn site(mut self, site: &'static LoopSite) -> Self {
        self.site = Some(site);
        self
    }

    /// The loop's name in reports: its name, else its source location.
    pub(crate) fn display_name(&self) -> String {
        match &self.name {
            Some(n) => n.to_string(),
            None => format!(
                "{}:{}:{}",
                self.location.file(),
                self.location.line(),
                self.location.column()
            ),
        }
    }
}
