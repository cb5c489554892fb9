//! Says so when a loop waits on a *zombie* that cannot be rolled back.
//!
//! A violated epoch learns of the violation at its next tracked access, checkpoint or
//! poll. One that reaches none (plain code that loops until values it read from stale
//! data agree, in a function the macro does not see) never unwinds, and the loop
//! cannot end before it does: its body borrows the caller's data, so the loop cannot
//! return while the epoch still runs, and safe code cannot stop a thread. What the
//! runtime can do is make the wait loud. The caller, waiting for the loop to settle,
//! looks now and then at the oldest unfinished epoch; once that epoch has stayed
//! violated for `TLS_ZOMBIE_WARN_MS`, the loop names it on stderr (once per epoch) and
//! counts it in the report (`LoopReport::stuck_zombies`).
//!
//! A violated epoch that has *finished* is re-run by the committer at once, so only a
//! running one can stay violated that long; an epoch doing that much pure computation
//! after a violation is named too (it is wasting that work).
//!
//! Not seen: a zombie on the calling thread itself (the workers leave a loop when
//! they have nothing to claim, so no thread is left to watch), and the time before
//! the caller first saw the epoch violated (the message says "at least").

use super::Shared;
use crate::config::env;
use crate::control::Step;
use crate::epoch::NOT_VIOLATED;
use crate::report::ThreadStats;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What the waiting caller last saw of the oldest unfinished epoch.
#[derive(Default)]
pub(super) struct ZombieWatch {
    /// That epoch's index and since when it has been seen violated.
    violated: Option<(u64, Instant)>,
    /// The last epoch named on stderr.
    named: Option<u64>,
}

/// Look once every this many back-offs (a clock read costs tens of nanoseconds).
const EVERY: u32 = 256;

impl<It, S, R, St, Sp> Shared<'_, It, S, R, St, Sp>
where
    It: Iterator + Send,
    It::Item: Clone + Send,
    S: Clone + Send,
    R: Send,
    St: Fn(It::Item) -> S + Sync,
    Sp: Fn(S) -> Step<S, R> + Sync,
{
    /// Called by the caller while it waits for the loop to settle (`spins`: its
    /// back-off count).
    pub(super) fn watch_zombie(&self, watch: &mut ZombieWatch, spins: u32, ts: &mut ThreadStats) {
        if !spins.is_multiple_of(EVERY) {
            return;
        }
        let oldest = self.watermark.load(Ordering::Acquire);
        if self.ring.slot(oldest).pending(Ordering::Acquire) == NOT_VIOLATED {
            watch.violated = None;
            return;
        }
        let since = match watch.violated {
            Some((index, since)) if index == oldest => since,
            _ => {
                watch.violated = Some((oldest, Instant::now()));
                return;
            }
        };
        let waited = since.elapsed();
        if waited < env().zombie_warn || watch.named == Some(oldest) {
            return;
        }
        watch.named = Some(oldest);
        ts.stuck_zombies += 1;
        let place = self.label.location.to_string();
        let loop_name = if self.label.name == place {
            format!("loop at {place}")
        } else {
            format!("loop `{}` ({place})", self.label.name)
        };
        eprintln!(
            "tls-runtime: {loop_name}: epoch {oldest} has been violated (an earlier epoch \
             changed data it had read) for at least {:.1} s and has reached no tracked \
             access, checkpoint or poll since, so it cannot be rolled back and the loop \
             waits for it. If it runs code that only ends once values it read agree, it will never \
             end: call `tls_runtime::poll()` in that code's loops. (TLS_ZOMBIE_WARN_MS \
             sets how long a loop waits before this message.)",
            waited.as_secs_f64()
        );
    }
}
