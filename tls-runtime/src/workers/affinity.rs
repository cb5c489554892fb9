//! Keeping a worker that has just been started or woken from waiting behind the
//! thread that started or woke it (see [`super::nudge_off_this_cpu`]): narrowing
//! the worker's CPU set to exclude that thread's CPU moves it at once; the set is
//! then given back (which does not move it back).
//!
//! The program's own CPU sets are respected: a set is given back only if it is
//! still the narrowed one (a program that pins its threads meanwhile keeps its
//! pin), nudges never interleave (the caller holds the workers' list), and a
//! worker takes its starter's set when it starts, whatever set it inherited.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Nudges begun and ended: odd while a nudge may have a worker's CPU set narrowed
/// (nudges never interleave: each holds the workers' list).
///
/// Why a worker that read a narrowed set sees the count move: the nudge's first
/// increment comes before its `sched_setaffinity`, and the worker's second load after
/// its `sched_getaffinity`; the kernel takes the target thread's lock (`pi_lock`) in
/// both calls, so a read that saw the narrowed set happens after the increment.
static NUDGES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread is one of the pool's workers, the only threads a nudge
    /// narrows.
    static WORKER: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Marks the calling thread as a worker (see [`read_unnudged`]).
pub(super) fn mark_worker() {
    WORKER.with(|w| w.set(true));
}

/// Marks a nudge as in progress for its lifetime (see [`NUDGES`]).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct Nudging;

impl Nudging {
    fn begin() -> Self {
        NUDGES.fetch_add(1, Ordering::SeqCst);
        Nudging
    }
}

impl Drop for Nudging {
    fn drop(&mut self) {
        NUDGES.fetch_add(1, Ordering::SeqCst);
    }
}

/// How long [`read_unnudged`] waits for a nudge to end (one takes microseconds; one
/// whose thread the OS descheduled meanwhile, a scheduler tick).
const NUDGE_WAIT: Duration = Duration::from_millis(10);

/// Runs `read`, which depends on the calling thread's CPU set (the core count,
/// `std::thread::available_parallelism`), where no nudge ran meanwhile; whether it
/// could (else the value of a read during one). A worker's set is one CPU short
/// while a nudge moves it: an outside probe's `TLS_THREADS=8` on 2 cores was warned
/// "on 1 cores" in 9 processes of 540 (the count read on a worker being nudged),
/// and a default thread count read so would have been kept one short for good.
///
/// A program's thread is never nudged: it reads once (a child forked while a nudge
/// ran would otherwise find the count odd for good).
pub(crate) fn read_unnudged<T>(read: impl Fn() -> T) -> (T, bool) {
    if !WORKER.with(core::cell::Cell::get) {
        return (read(), true);
    }
    let started = Instant::now();
    loop {
        let before = NUDGES.load(Ordering::SeqCst);
        if before.is_multiple_of(2) {
            let value = read();
            if NUDGES.load(Ordering::SeqCst) == before {
                return (value, true);
            }
        }
        if started.elapsed() > NUDGE_WAIT {
            return (read(), false);
        }
        std::thread::yield_now();
    }
}

/// A worker's thread, as the nudges see it.
pub(super) struct WorkerThread {
    #[cfg(target_os = "linux")]
    pub(super) thread: libc::pthread_t,
    /// The set it started with.
    pub(super) home: HomeSet,
    /// Whether the worker has not run since it was started or last parked (set by
    /// its starter and before it parks, cleared when it runs): the workers that a
    /// start or a wake-up may have queued behind a busy thread.
    pub(super) waiting: super::parking::Flag,
    /// Whether the worker has not yet begun to take its home set as it starts
    /// (cleared by the worker before it does): a nudge narrows such a worker's set
    /// and leaves the giving back to it.
    pub(super) fresh: Arc<AtomicBool>,
}

/// The CPU set a worker runs with: that of the program's thread that asked for
/// the workers (a loop's caller, or the thread that made the first speculative
/// container).
#[derive(Clone, Copy)]
pub(super) struct HomeSet {
    #[cfg(target_os = "linux")]
    set: Option<libc::cpu_set_t>,
}

impl HomeSet {
    /// The calling thread's CPU set.
    pub(super) fn of_this_thread() -> Self {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: a zeroed cpu_set_t is the empty set; the call fills a set of
            // its size for the calling thread.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                let size = std::mem::size_of::<libc::cpu_set_t>();
                let ok = libc::pthread_getaffinity_np(libc::pthread_self(), size, &mut set) == 0;
                HomeSet {
                    set: ok.then_some(set),
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        HomeSet {}
    }

    /// How many CPUs the set holds (`None`: unknown).
    pub(super) fn cpus(&self) -> Option<usize> {
        #[cfg(target_os = "linux")]
        // SAFETY: counts the bits of a valid cpu_set_t.
        return self
            .set
            .as_ref()
            .map(|s| unsafe { libc::CPU_COUNT(s) } as usize);
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Gives the calling thread (a worker starting) this set. First, if the thread
    /// runs on `starter_cpu`, the CPU of the thread that started it, it moves off
    /// that CPU: a new thread that runs at once on its parent's CPU keeps the
    /// parent waiting there (a program making its data, a loop's caller about to
    /// run epochs) until the kernel's balancing moves one of them, milliseconds on
    /// (seen on the 2-core development machine: a first container that started
    /// the workers took 1.9 ms instead of 0.4 ms).
    pub(super) fn apply_to_this_thread(&self, starter_cpu: Option<usize>) {
        #[cfg(target_os = "linux")]
        if let Some(set) = &self.set {
            let size = std::mem::size_of::<libc::cpu_set_t>();
            // SAFETY: `set` and `elsewhere` are valid cpu_set_ts of the size given,
            // `cpu` is below CPU_SETSIZE (`this_cpu`); a failed call leaves the
            // thread's set as it was.
            unsafe {
                if let Some(cpu) = starter_cpu
                    && this_cpu() == Some(cpu)
                    && crate::config::env().move_workers
                    && libc::CPU_ISSET(cpu, set)
                {
                    let mut elsewhere = *set;
                    libc::CPU_CLR(cpu, &mut elsewhere);
                    if libc::CPU_COUNT(&elsewhere) > 0 {
                        libc::pthread_setaffinity_np(libc::pthread_self(), size, &elsewhere);
                    }
                }
                libc::pthread_setaffinity_np(libc::pthread_self(), size, set);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = starter_cpu;
    }
}

/// The CPU the calling thread runs on (`None` where unknown).
pub(super) fn this_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu >= 0 && (cpu as usize) < libc::CPU_SETSIZE as usize {
            return Some(cpu as usize);
        }
    }
    None
}

/// Moves the workers of `workers` (`only_waiting`: those that have not run since
/// they were started or woken) queued on this thread's CPU to another CPU. The
/// caller holds the workers' list throughout, so that two threads nudging at once
/// (loops started by several client threads) never interleave: one could read a
/// set the other had narrowed and give that back for good.
#[cfg(target_os = "linux")]
pub(super) fn nudge(workers: &[WorkerThread], only_waiting: bool) {
    if !crate::config::env().move_workers {
        return;
    }
    let Some(cpu) = this_cpu() else {
        return;
    };
    let _nudging = Nudging::begin();
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    for w in workers {
        if only_waiting && !w.waiting.load(Ordering::Relaxed) {
            continue;
        }
        // A worker starting or waking others does not move itself.
        // SAFETY: pthread_equal compares two thread ids.
        if unsafe { libc::pthread_equal(w.thread, me) } != 0 {
            continue;
        }
        // SAFETY: a cpu_set_t is plain bits (all zeros is the empty set); the calls
        // get and set valid sets of `size` bytes, `cpu` is below CPU_SETSIZE, and
        // `w.thread` is a worker's, valid while the process runs (workers never
        // exit).
        unsafe {
            // A worker that has not yet run has its home set to come (it takes it
            // as it starts), so its set need not be read, nor given back while it
            // is still fresh after the narrowing: its own call comes after this
            // one (it clears `fresh` before it). One call instead of four: they
            // held up a program about to run its first loop 0.03 ms on the 2-core
            // development machine.
            let fresh = w.fresh.load(Ordering::SeqCst);
            let set = match w.home.set {
                Some(home) if fresh => home,
                _ => {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    if libc::pthread_getaffinity_np(w.thread, size, &mut set) != 0 {
                        continue;
                    }
                    // A set that is not the worker's starting one is the
                    // program's own (it pins its threads): leave it be.
                    if w.home.set.is_some_and(|home| !libc::CPU_EQUAL(&home, &set)) {
                        continue;
                    }
                    set
                }
            };
            if !libc::CPU_ISSET(cpu, &set) {
                continue;
            }
            let mut elsewhere = set;
            libc::CPU_CLR(cpu, &mut elsewhere);
            if libc::CPU_COUNT(&elsewhere) == 0
                || libc::pthread_setaffinity_np(w.thread, size, &elsewhere) != 0
                || (fresh && w.fresh.load(Ordering::SeqCst))
            {
                continue;
            }
            // Given back only if nobody set it meanwhile: the program pinning its
            // threads, or the worker taking its home set as it starts.
            let mut now: libc::cpu_set_t = std::mem::zeroed();
            if libc::pthread_getaffinity_np(w.thread, size, &mut now) == 0
                && libc::CPU_EQUAL(&now, &elsewhere)
            {
                libc::pthread_setaffinity_np(w.thread, size, &set);
            }
        }
    }
}

/// Elsewhere than Linux: nothing (see the Linux version).
#[cfg(not(target_os = "linux"))]
pub(super) fn nudge(_workers: &[WorkerThread], _only_waiting: bool) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn set_of_this_thread() -> Vec<bool> {
        // SAFETY: a valid, zeroed cpu_set_t of its size, for the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            assert_eq!(
                libc::pthread_getaffinity_np(libc::pthread_self(), size, &mut set),
                0
            );
            (0..libc::CPU_SETSIZE as usize)
                .map(|c| libc::CPU_ISSET(c, &set))
                .collect()
        }
    }

    /// A read that a nudge may have met is read again; one that cannot get past a
    /// nudge in progress says so.
    #[test]
    fn a_read_of_the_core_count_during_a_nudge_is_read_again() {
        // No real nudge meanwhile (each holds the list), and read as a worker does.
        let _list = crate::sync::lock_std(&super::super::pool().threads);
        let calls = std::cell::Cell::new(0);
        assert_eq!(
            read_unnudged(|| 7),
            (7, true),
            "a program's thread reads once"
        );
        mark_worker();
        // A nudge begins and ends during the first read, which sees a narrowed set.
        let (cores, stable) = read_unnudged(|| {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                drop(Nudging::begin());
                1
            } else {
                2
            }
        });
        assert_eq!((cores, stable, calls.get()), (2, true, 2));
        // A nudge that does not end within the wait: the value is not to be kept.
        let held = Nudging::begin();
        let (_, stable) = read_unnudged(|| 1);
        drop(held);
        assert!(!stable);
    }

    /// A thread started by a thread whose set a nudge had narrowed inherits the
    /// narrowed set; taking its home set as it starts gives it the program's.
    #[test]
    fn a_worker_started_by_a_narrowed_one_takes_its_home_set() {
        let home = HomeSet::of_this_thread();
        let mine = set_of_this_thread();
        let cpus: Vec<usize> = (0..mine.len()).filter(|&c| mine[c]).collect();
        if cpus.len() < 2 {
            return; // nothing to narrow to
        }
        let child = std::thread::spawn(move || {
            // SAFETY: a set holding one CPU this thread may use.
            unsafe {
                let mut one: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpus[0], &mut one);
                let size = std::mem::size_of::<libc::cpu_set_t>();
                assert_eq!(
                    libc::pthread_setaffinity_np(libc::pthread_self(), size, &one),
                    0
                );
            }
            std::thread::spawn(move || {
                let inherited = set_of_this_thread();
                home.apply_to_this_thread(None);
                (inherited, set_of_this_thread())
            })
            .join()
            .unwrap()
        });
        let (inherited, after) = child.join().unwrap();
        assert_ne!(inherited, mine, "the grandchild inherits the narrowed set");
        assert_eq!(after, mine);
    }
}
