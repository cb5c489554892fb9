//! Starting the pool's workers so that the thread that asks for them pays for one
//! thread start, not one per worker, and never waits for starts made elsewhere.
//!
//! The thread that asks is a program's: the one that makes the first speculative
//! container (right before its first loop, often) or a loop's caller. On the 2-core
//! development machine, in a fresh process, starting a thread cost its caller 0.05 to
//! 0.15 ms, and moving it off the caller's CPU another 0.05 ms; a loop of a few
//! milliseconds that paid for several starts, or waited while another thread made
//! them, ran its first time 20-30% slower than later.
//!
//! Whoever asks raises `wanted`. The thread holding the *turn* starts workers until
//! `started` reaches `wanted`: a program's thread starts one and hands the turn to
//! it; a worker starts all that are missing, gives the turn back, and looks again,
//! since a thread that asked for more meanwhile found the turn taken and left the
//! starting to its holder (`Starts::run_turn` says why neither can miss the other;
//! `loom_tests.rs` checks it). A loop does not wait for the workers it asked for: it runs
//! epochs on its own thread and on the workers that are there, and the others join
//! as they arrive.

use super::affinity::{HomeSet, WorkerThread};
use super::{Pool, nudge_waiting_off_this_cpu, pool, worker_main};
use crate::config::{Mode, env};
use crate::sync::{self as model, lock_std};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed, Ordering::SeqCst};

/// The pool's record of its workers' starts: the protocol of the module's docs,
/// apart from how a worker is started (so that `loom_tests.rs` can model it).
pub(crate) struct Starts {
    /// Workers asked for (the most any caller asked).
    wanted: model::AtomicUsize,
    /// Workers started (only the turn's holder changes it).
    started: model::AtomicUsize,
    /// Whether a thread holds the turn to start workers.
    turn: model::AtomicBool,
}

impl Starts {
    pub(crate) fn new() -> Self {
        Starts {
            wanted: model::AtomicUsize::new(0),
            started: model::AtomicUsize::new(0),
            turn: model::AtomicBool::new(false),
        }
    }

    /// Workers started so far (some may not run yet).
    #[cfg(any(test, loom))]
    pub(crate) fn started(&self) -> usize {
        self.started.load(SeqCst)
    }

    /// [`Starts::started`], read relaxed: a hint for spinning threads.
    pub(crate) fn started_hint(&self) -> usize {
        self.started.load(Relaxed)
    }

    /// Asks for `n` workers; whether this thread took the turn to start them
    /// (then it must call [`Starts::run_turn`]). Every loop asks: a plain read
    /// first, so that the usual case writes nothing.
    pub(crate) fn ask(&self, n: usize) -> bool {
        if self.wanted.load(SeqCst) >= n || self.wanted.fetch_max(n, SeqCst) >= n {
            return false;
        }
        self.take_turn()
    }

    /// Takes the turn if nobody holds it.
    fn take_turn(&self) -> bool {
        !self.turn.swap(true, SeqCst)
    }

    fn missing(&self) -> bool {
        self.started.load(SeqCst) < self.wanted.load(SeqCst)
    }

    /// Run by the turn's holder: starts workers, `start(id, hand_over)` each,
    /// until as many as wanted have started. A program's thread (`program`)
    /// starts one with `hand_over` set, which takes over the turn; a worker starts
    /// all that are missing, gives the turn back, and looks again. `start` says
    /// whether the worker started: if not, the turn is given back with `wanted`
    /// lowered to the workers started, so that the next ask tries again. Returns
    /// how many this call started.
    pub(crate) fn run_turn(
        &self,
        program: bool,
        start: &mut dyn FnMut(usize, bool) -> bool,
    ) -> usize {
        let mut count = 0;
        loop {
            while self.missing() {
                let id = self.started.load(SeqCst);
                // Counted before the start: a worker handed the turn may go on
                // before this thread does.
                self.started.store(id + 1, SeqCst);
                if !start(id, program) {
                    self.started.store(id, SeqCst);
                    self.wanted.fetch_min(id, SeqCst);
                    self.turn.store(false, SeqCst);
                    return count;
                }
                count += 1;
                if program {
                    return count;
                }
            }
            // Given back, then `wanted` read, both as read-modify-writes (as the
            // asker's raise and take are): if this read comes before the asker's
            // raise on `wanted`, the raise synchronizes with it, so the asker's
            // take comes after the give-back and finds the turn free; if after,
            // it sees the raise. (With a plain store and load here, each side
            // could miss the other's write but for SeqCst's total order, which
            // the loom model cannot check.)
            self.turn.swap(false, SeqCst);
            let wanted = self.wanted.fetch_add(0, SeqCst);
            if self.started.load(SeqCst) >= wanted || !self.take_turn() {
                return count;
            }
        }
    }
}

/// Makes sure that `n` workers exist or are being started; returns at once when `n`
/// or more were asked for before.
pub(crate) fn ensure_workers(n: usize) {
    let p = pool();
    if p.starts.ask(n) {
        start_workers(p, HomeSet::of_this_thread(), true, false);
    }
}

/// Starts the workers that a loop with the default thread count wants, ahead of the
/// first loop: called when the program makes a speculative container outside any
/// loop, which it does before it runs a loop over it.
///
/// Started by the first loop instead, a worker arrives late: the start costs the
/// loop's caller, and the new thread first runs 0.05 to 0.2 ms after it (with data
/// made right before a loop of 1.7 ms, its first run took 1.9 ms at the median of
/// 15 processes). Started here, a worker spins for `TLS_SPIN_US` like one that has
/// just left a loop, so that a loop that follows at once finds it awake, then parks
/// like one between loops. With the default thread count and more than two CPUs the
/// first worker reads the core count ([`crate::config::cores`], slow) and starts the
/// others, unless a loop has already asked for its own workers. Nothing starts
/// in `TLS_MODE=sequential` or `profile`, with `TLS_THREADS=1`, or on a thread that
/// may run on one CPU only, where no loop would use a worker.
pub(crate) fn prestart() {
    static ASKED: AtomicBool = AtomicBool::new(false);
    if ASKED.load(SeqCst) || ASKED.swap(true, SeqCst) {
        return;
    }
    let e = env();
    if e.mode != Mode::Parallel {
        return;
    }
    match e.threads {
        Some(threads) => {
            if threads > 1 {
                ensure_workers(threads - 1);
            }
        }
        None => {
            let home = HomeSet::of_this_thread();
            if home.cpus().is_some_and(|n| n < 2) {
                return;
            }
            // With two CPUs or fewer the default thread count needs no other
            // worker, whatever the core count, so the first worker goes to work
            // without reading it (a loop that needs it reads it).
            let size_by_cores = home.cpus().is_none_or(|n| n > 2);
            let p = pool();
            if p.starts.ask(1) {
                start_workers(p, home, true, size_by_cores);
            }
        }
    }
}

/// Warns, once, when `TLS_THREADS` asks for many times more threads than the
/// process has cores: they time-share the cores, and a report's busy time counts
/// the time an epoch's thread waited for one (an outside probe's
/// `TLS_THREADS=100000`, cut to 1024 on 2 cores, ran 18 times slower with no word
/// but the cut). Run on a worker: reading the core count is slow.
fn warn_if_oversubscribed() {
    static WARNED: AtomicBool = AtomicBool::new(false);
    // At most `OVERSUBSCRIBED` threads are never too many, and the core count is
    // not read: this runs on the first worker's way to its first loop, and the
    // read (40-75 us on the development machine) made that worker join a loop
    // published meanwhile that much later.
    let Some(threads) = env().threads.filter(|&t| t > OVERSUBSCRIBED) else {
        return;
    };
    let cores = crate::config::cores();
    if threads > OVERSUBSCRIBED * cores && !WARNED.swap(true, SeqCst) {
        say!(
            "tls-runtime: TLS_THREADS={threads} on {cores} cores: the threads time-share \
             the cores, and each loop's report counts the time they wait for one as busy"
        );
    }
}

/// How many threads per core `TLS_THREADS` may ask for before [`warn_if_oversubscribed`]
/// warns (a few more threads than cores is a fair experiment).
const OVERSUBSCRIBED: usize = 4;

/// Starts workers while this thread holds the turn ([`Starts::run_turn`];
/// `program`: this is a program's thread, which starts one). Each takes the CPU set
/// `home` (that of the program's thread that asked) as it starts: one started by a
/// worker while a nudge had that worker narrowed would otherwise keep the narrowed
/// set for good. `size_by_cores`: the first worker raises `wanted` to the default
/// thread count (less the caller) before it goes on.
fn start_workers(p: &'static Pool, home: HomeSet, program: bool, size_by_cores: bool) {
    let started = p.starts.run_turn(program, &mut |id, hand_over| {
        start_one(p, id, home, hand_over, size_by_cores)
    });
    if started > 0 {
        // A new thread is queued on its parent's CPU, and when the parent keeps
        // that CPU busy (a loop's caller running epochs, a program making its
        // data) it waits there until the kernel's balancing moves it,
        // milliseconds on. On the 2-core development machine a worker started
        // right before a loop joined it 0.5-1 ms late about one time in three.
        nudge_waiting_off_this_cpu();
    }
}

/// Starts worker `id`; `hand_over`: it takes over the turn (this thread holds it),
/// and, with `size_by_cores`, first asks for the default thread count's workers.
/// Whether the thread started.
fn start_one(
    p: &'static Pool,
    id: usize,
    home: HomeSet,
    hand_over: bool,
    size_by_cores: bool,
) -> bool {
    let waiting = super::parking::flag(true);
    let running = waiting.clone();
    let fresh = Arc::new(AtomicBool::new(true));
    let starting = Arc::clone(&fresh);
    let starter_cpu = super::affinity::this_cpu();
    let spawned = std::thread::Builder::new()
        .name(format!("tls-worker-{id}"))
        .spawn(move || {
            // Cleared before the set is taken (`WorkerThread::fresh`).
            starting.store(false, SeqCst);
            super::affinity::mark_worker();
            home.apply_to_this_thread(starter_cpu);
            running.store(false, SeqCst);
            if hand_over {
                let p = pool();
                // Unless a loop already runs (it asked for its own workers, and
                // wants this one at work rather than reading cgroup files).
                if size_by_cores && p.published.load(SeqCst) == 0 {
                    let n = crate::config::default_threads().saturating_sub(1);
                    p.starts.wanted.fetch_max(n, SeqCst);
                }
                warn_if_oversubscribed();
                start_workers(p, home, false, false);
            }
            worker_main(pool(), &running)
        });
    let Ok(handle) = spawned else {
        return false;
    };
    // The handle is dropped (the worker is detached); its pthread_t stays valid
    // while the thread runs, and a worker runs until the process ends.
    lock_std(&p.threads).push(WorkerThread {
        home,
        #[cfg(target_os = "linux")]
        thread: std::os::unix::thread::JoinHandleExt::as_pthread_t(&handle),
        waiting,
        fresh,
    });
    true
}
