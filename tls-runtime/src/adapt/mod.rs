//! Adaptive fallback: speculation that does not pay is turned off, per loop site, and
//! tried again later.
//!
//! Participants tally their commits ([`Votes`]) and hand them to the loop run's
//! [`Window`] a few epochs at a time. When more than half of a window's epochs were
//! rolled back, the site switches to *in-order* execution: once no epoch is in flight,
//! one thread runs the following iterations itself, like the plain loop, with no
//! tracking and no per-epoch bookkeeping (a full dependence chain then costs about what
//! the plain loop does). After `backoff` in-order epochs the site probes speculation
//! again for one window; each failed probe doubles `backoff` (up to
//! [`site::MAX_BACKOFF`]) and a successful one resets it. The state lives in the site
//! ([`LoopSite`]), so it carries across runs of the same loop (a transaction's items
//! loop runs once per transaction).
//!
//! A window's gain is the work its epochs did over its wall time; where the site has
//! run in order, that work is credited with at most [`window::OVERHEAD_BOUND`] times
//! what the same iterations cost in order, so that per-epoch overhead on very short
//! iterations does not pass for work.
//!
//! A window that cannot pay, however its remaining votes fall, is judged before it
//! fills ([`window::HOPELESS`]), so that a probe on a busy machine costs a few epochs
//! rather than two windows of them.
//!
//! A window is judged on at least [`window::MIN_WINDOW`] of wall time, and only on
//! epochs committed while it was open; the first worker to join a window the caller
//! started alone (workers park while a site runs in order) starts it over, so a probe
//! is not judged on the wake-up. Without any worker for [`window::WAIT_FOR_HELPERS`],
//! speculation gains nothing and the site runs in order, until a worker comes for
//! the loop: a stretch held back for want of a worker ends at the next iteration
//! when one arrives (it was starting, or waking), so that a new site's first run
//! speculates as soon as it has the threads to.
//!
//! The site also chooses how many iterations make one epoch when the loop does not
//! say (`chunk.rs`): iterations much shorter than [`crate::rules::TARGET_EPOCH`] are
//! grouped, into epochs of [`crate::rules::QUIET_TARGET_EPOCH`] while none of the
//! site's epochs has ever rolled back.
//!
//! Memory ordering: all fields are `Relaxed` counters and a flag. They steer
//! scheduling, not correctness: any interleaving of their updates yields a valid
//! schedule, since every epoch is protected by the violation protocol either way.
//!
//! The files: `site.rs` (the site's state and the verdict on a window), `window.rs`
//! (judging a window), `votes.rs` (a participant's tally), `chunk.rs` (automatic
//! chunking).

mod chunk;
mod site;
mod stretch_cost;
mod synced;
#[cfg(test)]
mod tests;
mod votes;
mod window;

pub use site::LoopSite;
pub(crate) use site::{HeldBack, now_ns, site_for};
pub(crate) use stretch_cost::{BLOCK, StretchCost};
#[cfg(test)]
pub(crate) use synced::SYNC_AFTER;
pub(crate) use synced::{Distances, Stretch, SyncedLoads, wait_until_committed};
pub(crate) use votes::{Committed, Votes};
pub(crate) use window::{MEASURE_FOR, Window};

/// Epochs per decision window.
pub(crate) const WINDOW: u32 = 8;
