//! Says so when a loop waits on a *zombie* that cannot be rolled back.
//!
//! A violated epoch learns of the violation at its next tracked access, checkpoint or
//! poll. One that reaches none (plain code that loops until values it read from stale
//! data agree, in a function the macro does not see) never unwinds, and the loop
//! cannot end before it does: its body borrows the caller's data, so the loop cannot
//! return while the epoch still runs, and safe code cannot stop a thread. What the
//! runtime can do is make the wait loud, whichever thread the zombie holds: the loop's
//! caller, a worker, or all of them.
//!
//! So no participant watches: a *watchdog* thread of the process does. Only a violated
//! or squashed epoch can be a zombie, so the watchdog starts after the process's first
//! violation ([`note_violation`]): at the next commit (the epoch that violated
//! another commits before that one is the oldest and can hold the loop up) or when a
//! worker goes idle ([`watch_if_violated`]). Started with the workers instead, its
//! thread start (0.1 ms on the 2-core development machine) fell in the first loop of
//! every process. Each running loop shows it a [`Board`] (its commit
//! watermark, its epoch ring, its name) through its entry in `live_loops`; every
//! [`PERIOD`] (or a quarter of `TLS_ZOMBIE_WARN_MS`, if shorter) the watchdog looks at
//! each loop's oldest uncommitted epoch. Once that epoch has stayed violated for
//! `TLS_ZOMBIE_WARN_MS`, it names the epoch on stderr (once per epoch) and counts it
//! on the board, which the loop's report takes (`LoopReport::stuck_zombies`).
//!
//! The oldest epoch, when violated, is running: a violated epoch that has finished is
//! re-run by the committer as soon as it is the oldest. So only a zombie, or an epoch
//! doing that much pure computation after a violation (wasting it), is named. The
//! message says "at least": the watchdog saw the violation up to a period late.
//!
//! Memory ordering: the board is reached under `live_loops`' `users` protocol
//! (`SeqCst`), so it outlives every look at it. The watermark is read with `Acquire`
//! and the violation word with `Acquire`; a stale view only delays or skips one
//! look, never names a loop that is not waiting, since the epoch must be seen
//! violated at the same watermark across a whole `TLS_ZOMBIE_WARN_MS`.

// The loom models run no loop, so they build the board but no watchdog.
#![cfg_attr(loom, allow(unused_imports, dead_code))]

use crate::config::env;
use crate::epoch::{EpochRing, NOT_VIOLATED, make_tag};
use crate::live_loops;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the watchdog looks at the running loops, at most.
const PERIOD: Duration = Duration::from_millis(100);

/// What the watchdog may read of one running loop. It lives in the loop's
/// `scheduler::run` frame, and is reachable only while the loop's
/// [`live_loops::Watching`] guard lives (dropped before the board and the state it
/// points into).
pub(crate) struct Board {
    watermark: *const crate::sync::AtomicU64,
    ring: *const EpochRing,
    name: *const str,
    location: &'static Location<'static>,
    /// Zombies named in this loop run.
    stuck: AtomicU64,
}

// SAFETY: the pointers are read only by the watchdog, under the `live_loops` users
// protocol, while the loop that owns what they point to still runs; what they point
// to is `Sync` (atomics, the ring's atomics, a `str`).
unsafe impl Send for Board {}
// SAFETY: as above; `stuck` is atomic.
unsafe impl Sync for Board {}

impl Board {
    /// A board for a loop with this commit watermark, ring and name.
    pub(crate) fn new(
        watermark: &crate::sync::AtomicU64,
        ring: &EpochRing,
        name: &str,
        location: &'static Location<'static>,
    ) -> Self {
        Board {
            watermark,
            ring,
            name,
            location,
            stuck: AtomicU64::new(0),
        }
    }

    /// How many zombies the watchdog named in this loop run.
    pub(crate) fn stuck(&self) -> u64 {
        self.stuck.load(Ordering::Relaxed)
    }
}

/// Whether an epoch of this process was ever violated or squashed.
static VIOLATED: AtomicBool = AtomicBool::new(false);

/// An epoch was violated or squashed: a zombie may follow. Called where a rollback
/// target is lowered; costs a load after the first time.
#[inline]
pub(crate) fn note_violation() {
    if !VIOLATED.load(Ordering::Relaxed) && !VIOLATED.swap(true, Ordering::Relaxed) {
        // Parked workers look again: a violation by plain code (outside any loop)
        // is followed by no commit, and a loop whose caller holds the zombie may
        // have no other thread at work.
        // One is enough: it starts the watchdog.
        #[cfg(not(loom))]
        crate::workers::wake(1);
    }
}

/// Starts the watchdog if an epoch was ever violated (a load when not, or once
/// started). Called by a thread about to commit, and by idle workers.
#[inline]
pub(crate) fn watch_if_violated() {
    if VIOLATED.load(Ordering::Relaxed) {
        watchdog();
    }
}

/// Starts the watchdog once per process (not in the loom models, which run no loop).
#[cfg(loom)]
fn watchdog() {}

/// Starts the watchdog once per process.
#[cfg(not(loom))]
fn watchdog() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("tls-zombie-watch".into())
            .spawn(watch_forever);
        // Without a watchdog the loops still run right; only the message is lost.
        if let Err(e) = spawned {
            say!("tls-runtime: no thread for the zombie watchdog ({e})");
        }
    });
}

/// Since when the watchdog has seen a loop's oldest epoch violated.
#[cfg(not(loom))]
struct Seen {
    index: u64,
    since: Instant,
    named: bool,
}

#[cfg(not(loom))]
fn watch_forever() {
    let warn = env().zombie_warn;
    let period = (warn / 4).clamp(Duration::from_millis(5), PERIOD);
    let mut seen: HashMap<u32, Seen> = HashMap::new();
    loop {
        std::thread::sleep(period);
        let now = Instant::now();
        seen.retain(|&serial, _| live_loops::is_running(serial));
        live_loops::for_each_board(|serial, board| look(serial, board, &mut seen, now, warn));
    }
}

/// One look at one running loop's oldest epoch.
#[cfg(not(loom))]
fn look(serial: u32, board: &Board, seen: &mut HashMap<u32, Seen>, now: Instant, warn: Duration) {
    // SAFETY: `for_each_board` hands out a board only while its loop runs, so the
    // watermark and the ring it points to are alive.
    let (watermark, ring) = unsafe { (&*board.watermark, &*board.ring) };
    let oldest = watermark.load(Ordering::Acquire);
    let slot = ring.slot(oldest);
    if slot.tag(Ordering::Acquire) != make_tag(serial, oldest)
        || slot.pending(Ordering::Acquire) == NOT_VIOLATED
    {
        seen.remove(&serial);
        return;
    }
    let fresh = || Seen {
        index: oldest,
        since: now,
        named: false,
    };
    let s = seen.entry(serial).or_insert_with(fresh);
    if s.index != oldest {
        // The watermark moved on: a later epoch is the oldest now.
        *s = fresh();
    }
    let waited = now.saturating_duration_since(s.since);
    if s.named || waited < warn {
        return;
    }
    s.named = true;
    board.stuck.fetch_add(1, Ordering::Relaxed);
    // SAFETY: as above: the name lives as long as the loop runs.
    let name = unsafe { &*board.name };
    let place = board.location.to_string();
    let loop_name = if name == place {
        format!("loop at {place}")
    } else {
        format!("loop `{name}` ({place})")
    };
    say!(
        "tls-runtime: {loop_name}: epoch {oldest} has been violated (an earlier epoch \
         changed data it had read) for at least {:.1} s and has reached no tracked \
         access, checkpoint or poll since, so it cannot be rolled back and the loop \
         waits for it. If it runs code that only ends once values it read agree, it will \
         never end: call `tls_runtime::poll()` in that code's loops. (TLS_ZOMBIE_WARN_MS \
         sets how long a loop waits before this message.)",
        waited.as_secs_f64()
    );
}
