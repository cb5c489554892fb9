//! The persistent worker pool shared by every speculative loop of the process.
//!
//! A loop publishes itself as a [`Job`]; idle workers pick published jobs round-robin
//! (so loops started by several client threads at once share the workers) and run
//! epochs of one job until it has none left to hand out. The calling thread runs
//! epochs too.
//!
//! Waking a parked thread costs tens of microseconds on the 2-core development machine
//! (a park/unpark round trip measured ~57 us there, against ~110 ns to hand work to a
//! spinning thread), more than an epoch, so an idle worker spins (with `spin_loop`,
//! yielding now and then) for `TLS_SPIN_US` after its last job before it parks on a
//! condition variable. A wake-up can take longer: the kernel may queue the worker on
//! the waking thread's core, which that thread keeps busy running epochs, until its
//! balancing moves it (milliseconds). So the thread that starts or wakes workers
//! moves those that have not run yet off its own core at once, and a loop's caller
//! that has run alone for a while moves them all ([`nudge_off_this_cpu`]).
//!
//! The workers start ahead of the first loop, when the program makes its first
//! speculative container ([`prestart`]), or else when a loop needs them
//! ([`ensure_workers`]); the thread that asks starts one, which starts the others
//! (`start.rs`).
//!
//! Sleeping protocol (no lost wake-up; `parking.rs`, checked by `loom_tests.rs`): a
//! worker about to park takes the parked list's lock, counts itself in `sleepers`,
//! re-reads `generation` and parks (joining the list) only if it still is the
//! generation the worker read before it last looked at the jobs (no job was
//! published since); a waker bumps `generation`, then reads `sleepers` and, if any,
//! takes workers off the list under its lock and unparks them. All four accesses to
//! these two words are read-modify-writes, so at least one side sees the other's
//! write (`Parking::park` gives the argument).
//!
//! A waker wakes as many parked workers as the job has seats for, not all of
//! them: on the 2-core development machine, once one 8-thread loop had grown the
//! pool to 7 workers, each later 2-thread loop woke all 7 after a pause; one
//! joined, and six spun beside it for `TLS_SPIN_US` on the two CPUs (the loop at
//! 0.65-0.70 of the plain loop's speed). Workers that are awake look at every
//! generation move anyway.

// The loom models start no workers (they model `start::Starts` alone).
#[cfg_attr(loom, allow(dead_code))]
mod affinity;
#[cfg_attr(loom, allow(dead_code))]
mod parking;
#[cfg_attr(loom, allow(dead_code))]
mod start;

#[cfg_attr(loom, allow(unused_imports))]
pub(crate) use affinity::read_unnudged;
#[cfg(all(loom, test))]
pub(crate) use parking::Parking;
#[cfg(all(loom, test))]
pub(crate) use start::Starts;
#[cfg_attr(loom, allow(unused_imports))]
pub(crate) use start::{ensure_workers, prestart};

use crate::config::env;

/// Starts the pool's worker threads now, rather than with the program's first
/// speculative container or loop; a no-op once they started.
///
/// The first thread a process starts costs its caller 0.1 to 0.2 ms on the 2-core
/// development machine (the kernel's thread creation, and moving the new thread
/// off the caller's CPU), and the new thread joins a loop some 0.05 ms after. A
/// program that makes its data right before its first loop (a batch job that runs
/// its loop once) pays that in the loop: with 1.6 ms of work, its first run took
/// 1.14 times as long as its later runs, as rayon's did with its pool started by
/// its first loop (1.15; `cargo bench -p tls-runtime --bench first_run`). Calling
/// this at the top of `main` overlaps the start with whatever the program does
/// before its first loop (reading its input, say).
///
/// Nothing starts in `TLS_MODE=sequential` or `profile`, with `TLS_THREADS=1`, or on
/// a thread that may run on one CPU only, where no loop would use a worker.
pub fn start_workers() {
    prestart();
}
use crate::sync::{self as model, lock_std};
use affinity::WorkerThread;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// How many workers are inside a job: counted in under the pool's lock, counted out
/// by each worker when it is done, without that lock.
///
/// The count in is a read-modify-write (`fetch_add`), not a check followed by a
/// store: a worker leaving between the two would have its count-out overwritten, the
/// count would stay above zero for ever, and the job's owner, waiting for it to reach
/// zero before the job goes away, would wait for ever (found by the equivalence
/// generator as a loop that never ended, about one run in a few thousand).
///
/// Its atomic is loom's under `--cfg loom` (`loom_tests.rs` models it).
pub(crate) struct Occupancy(model::AtomicUsize);

impl Occupancy {
    pub(crate) fn new() -> Self {
        Occupancy(model::AtomicUsize::new(0))
    }

    /// Counts one worker in if fewer than `limit` are inside. Only one thread at a
    /// time may call this (the pool's lock); `leave` may run at any time.
    pub(crate) fn try_enter(&self, limit: usize) -> bool {
        if self.0.load(model::Ordering::Relaxed) >= limit {
            return false;
        }
        self.0.fetch_add(1, model::Ordering::Relaxed);
        true
    }

    /// Counts one worker out; its work on the job happens before the owner sees the
    /// count drop (Release, paired with `inside`'s Acquire).
    pub(crate) fn leave(&self) {
        self.0.fetch_sub(1, model::Ordering::Release);
    }

    /// Workers inside now.
    pub(crate) fn inside(&self) -> usize {
        self.0.load(model::Ordering::Acquire)
    }
}

/// Work a loop offers to the pool.
pub(crate) trait Job: Sync {
    /// Whether another worker should join now. Called under the pool's lock; on `true`
    /// the job has counted the worker in (`leave` must follow).
    fn enter(&self) -> bool;
    /// Runs epochs until the job has none to hand out.
    fn work(&self);
    /// The worker is done with the job.
    fn leave(&self);
    /// Workers currently inside.
    fn inside(&self) -> usize;
    /// How many more workers it would take now (how many parked ones a
    /// publication wakes).
    fn seats(&self) -> usize;
}

#[derive(Clone, Copy)]
struct JobRef(*const (dyn Job + 'static));
// SAFETY: a `JobRef` is only dereferenced while the job is published or counted in
// (see `Published::retire`), and `Job: Sync`.
unsafe impl Send for JobRef {}

struct Pool {
    jobs: Mutex<Vec<JobRef>>,
    published: AtomicUsize,
    next_pick: AtomicUsize,
    generation: model::AtomicU64,
    parking: parking::Parking,
    /// Workers asked for, started, and whether a thread has the turn to start
    /// them (`start.rs`).
    starts: start::Starts,
    /// The workers' threads, for [`nudge_off_this_cpu`]: recorded by the thread
    /// that starts each, so that a worker not yet running can be moved too.
    threads: Mutex<Vec<WorkerThread>>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        jobs: Mutex::new(Vec::new()),
        published: AtomicUsize::new(0),
        next_pick: AtomicUsize::new(0),
        generation: model::AtomicU64::new(0),
        parking: parking::Parking::new(),
        starts: start::Starts::new(),
        threads: Mutex::new(Vec::new()),
    })
}

/// A job published to the pool; it must be retired before the job goes away.
pub(crate) struct Published<'a> {
    job: &'a dyn Job,
}

/// Offers `job` to the workers.
pub(crate) fn publish(job: &dyn Job) -> Published<'_> {
    let p = pool();
    let r: *const (dyn Job + '_) = job;
    // SAFETY: only the lifetime bound is erased; `Published::retire` (also run on drop)
    // removes the job and waits until no worker is inside before `job` can go away.
    let r = JobRef(unsafe {
        core::mem::transmute::<*const (dyn Job + '_), *const (dyn Job + 'static)>(r)
    });
    {
        let mut jobs = lock_std(&p.jobs);
        jobs.push(r);
        p.published.store(jobs.len(), Ordering::SeqCst);
    }
    wake(job.seats());
    Published { job }
}

/// Tells idle workers that a published job may want them again: the awake ones
/// see the generation move; up to `seats` parked ones are woken.
pub(crate) fn wake(seats: usize) {
    let p = pool();
    p.generation.fetch_add(1, model::Ordering::SeqCst);
    if !p.parking.wake(seats) {
        return;
    }
    // The kernel queues a woken worker on its waker's CPU when the worker's own
    // CPU does not look idle (on a virtual machine, an idle virtual CPU its host
    // has descheduled does not), where it waits behind this thread: move those
    // just woken at once.
    nudge_waiting_off_this_cpu();
}

impl Published<'_> {
    fn retire_now(&self) {
        let p = pool();
        {
            let mut jobs = lock_std(&p.jobs);
            let me = self.job as *const dyn Job as *const ();
            jobs.retain(|j| j.0 as *const () != me);
            p.published.store(jobs.len(), Ordering::SeqCst);
        }
        // Workers count themselves in under the pool lock, so none can enter now.
        let mut spins = 0u32;
        while self.job.inside() > 0 {
            backoff(&mut spins);
        }
    }
}

impl Drop for Published<'_> {
    fn drop(&mut self) {
        self.retire_now();
    }
}

/// Moves every worker queued on the calling thread's CPU to another CPU it may run
/// on, and returns once they are moved; called by a loop's caller that has waited
/// `adapt::window::NUDGE_AFTER` for any worker to join. (Workers just started or
/// woken are moved by the thread that started or woke them, right away.)
///
/// A woken worker is often queued on the CPU of the thread that woke it (the kernel
/// pulls a wakee to its waker's CPU when the wakee's own CPU does not look idle,
/// which on a virtual machine includes a virtual CPU its host has descheduled).
/// There it waits for the caller, which keeps that CPU busy running epochs, until
/// the kernel's balancing moves it, milliseconds later: on the 2-core development
/// machine, the runs a worker joined too late to help were those that ended with
/// the worker on the caller's CPU. Narrowing the worker's CPU set to exclude this
/// CPU moves it at once; its set is then given back as it was (which does not move
/// it back). Nothing happens where the set has no other CPU (a process pinned to
/// one CPU) or where the calls fail.
pub(crate) fn nudge_off_this_cpu() {
    affinity::nudge(&lock_std(&pool().threads), false);
}

/// [`nudge_off_this_cpu`] for the workers that have not run since they were
/// started or woken (called right after starting or waking them; none when the
/// workers were spinning, so that a loop started while they are awake makes no
/// system call).
fn nudge_waiting_off_this_cpu() {
    affinity::nudge(&lock_std(&pool().threads), true);
}

/// Spins of an idle worker (see [`backoff`]) between two looks at jobs it has
/// already found full (see `worker_main`).
const RELOOK_SPINS: u32 = 256;

/// Whether the pool has more threads awake (its workers not parked, and a loop's
/// caller) than the process has cores, as far as known (the core count read). The
/// workers parked do not count: a pool grown by one large loop does not make every
/// later small one yield early.
#[inline]
fn oversubscribed() -> bool {
    let cores = crate::config::cores_if_read();
    if cores == 0 {
        return false;
    }
    let p = pool();
    p.starts
        .started_hint()
        .saturating_sub(p.parking.sleepers_hint())
        >= cores
}

/// Spins a little, then yields: for short waits on other threads.
#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    *spins = spins.wrapping_add(1);
    // Spin for a while before yielding: on a busy machine a yield can hand the core
    // to another process for a whole time slice (milliseconds), far longer than the
    // epoch being waited for. Not with more threads than cores: then the thread
    // waited for may be queued behind this one, and an outside probe's short runs
    // on 4 threads of 2 cores took 35-40 times as long as the plain loop while
    // idle threads spun (`cargo bench -p tls-runtime --bench speedup -- "short
    // chains"` with `BENCH_THREADS=4`: 0.03x before, 0.38x after).
    if *spins < 4096 && !oversubscribed() {
        for _ in 0..(1 << (*spins / 1024)) {
            core::hint::spin_loop();
        }
    } else if spins.is_multiple_of(64) {
        std::thread::yield_now();
    } else {
        for _ in 0..8 {
            core::hint::spin_loop();
        }
    }
}

fn pick(p: &Pool) -> Option<JobRef> {
    if p.published.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let jobs = lock_std(&p.jobs);
    let n = jobs.len();
    let start = p.next_pick.fetch_add(1, Ordering::Relaxed);
    for k in 0..n {
        let j = jobs[(start + k) % n];
        // SAFETY: the job is published (we hold the pool lock), so it is alive.
        if unsafe { &*j.0 }.enter() {
            return Some(j);
        }
    }
    None
}

/// A worker's life: runs published jobs, spins a while when there is none, then
/// parks until one is published. `waiting` is its flag for the nudges.
fn worker_main(p: &'static Pool, waiting: &parking::Flag) {
    let woken = parking::flag(false);
    let mut idle_since = Instant::now();
    let mut spins = 0u32;
    // The generation at which this worker last looked at the published jobs and
    // found none that wanted it. Until the generation moves (a job published, an
    // in-order stretch over, a violation), looking again finds the same: a job
    // full of workers stays full until it is retired. So a spinning worker does not
    // look, except every `RELOOK_SPINS` spins in case a seat came free some other
    // way. (Looking takes the pool's lock and reads each job's state: a pool of 15
    // idle workers beside a loop run on 2 threads kept those lines moving between
    // the CPUs all through the loop, and 10-iteration runs of 2.5 us ran at 0.64-0.81
    // of the plain loop's speed on a 16-core machine, against 1.31 with one worker.)
    let mut found_nothing_at = None;
    loop {
        let generation = p.generation.load(Ordering::SeqCst);
        let look = found_nothing_at != Some(generation) || spins.is_multiple_of(RELOOK_SPINS);
        let picked = if look { pick(p) } else { None };
        if look && picked.is_none() {
            found_nothing_at = Some(generation);
        }
        if let Some(j) = picked {
            found_nothing_at = None;
            // SAFETY: we were counted in by `enter`, so the job stays alive until
            // `leave` (its owner waits for `inside() == 0` after unpublishing it).
            let job = unsafe { &*j.0 };
            // Epochs catch their own panics; one that gets here is a bug in the
            // runtime. Say so, and still leave, so that the loop's owner is not left
            // waiting for this worker.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.work())).is_err() {
                say!("tls-runtime: internal error: a worker's loop panicked");
            }
            job.leave();
            idle_since = Instant::now();
            spins = 0;
            continue;
        }
        // An idle worker starts the zombie watchdog if a loop may need it: one
        // whose caller holds the zombie has no other thread committing.
        crate::scheduler::watch_if_violated();
        if idle_since.elapsed() < env().spin_after {
            backoff(&mut spins);
            continue;
        }
        // Park on the generation read before this worker's last look (here it
        // has looked at `generation` and found nothing), not on a fresh read: a
        // job published after the look would be counted in a fresh read while its
        // wake-up found no sleeper, and the worker would sleep through it (up to
        // the timeout) while the loop's caller ran alone.
        debug_assert_eq!(found_nothing_at, Some(generation));
        // Read (and kept) here, where nothing waits for this worker, so that a
        // loop run with the default thread count does not read it on its caller:
        // cgroup files, 0.04-0.08 ms. The first worker no longer reads it as it
        // starts where no other worker can be wanted (`start::prestart`); a loop
        // published meanwhile waited for it that long.
        crate::config::cores();
        if p.parking.park(&p.generation, generation, &woken, waiting) {
            waiting.store(false, Ordering::Relaxed);
        }
        idle_since = Instant::now();
        spins = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Moving the workers off this thread's CPU gives each its CPU set back as it
    /// was: a worker left narrowed would never again run on that CPU. Each worker
    /// has the set it was started with (this thread's), after the moves of its
    /// start, of wake-ups and of a caller running alone.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_nudge_leaves_every_worker_its_cpu_set() {
        ensure_workers(2);
        let set_of = |thread: libc::pthread_t| -> Vec<bool> {
            let size = std::mem::size_of::<libc::cpu_set_t>();
            // SAFETY: a valid, zeroed cpu_set_t of `size` bytes; `thread` is this
            // thread or a worker of this process, which runs until the process ends.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                assert_eq!(libc::pthread_getaffinity_np(thread, size, &mut set), 0);
                (0..libc::CPU_SETSIZE as usize)
                    .map(|c| libc::CPU_ISSET(c, &set))
                    .collect()
            }
        };
        let sets = || -> Vec<Vec<bool>> {
            lock_std(&pool().threads)
                .iter()
                .map(|w| set_of(w.thread))
                .collect()
        };
        // SAFETY: pthread_self has no preconditions.
        let mine = set_of(unsafe { libc::pthread_self() });
        // Whether every worker has this thread's set, once the starts in flight are
        // over: a worker starting (for this test or another test's loop) narrows its
        // own set for a moment as it moves off its starter's CPU, so a set read
        // right then is not the one it keeps. Waits a bounded time for that.
        let settled = || {
            let t = Instant::now();
            loop {
                let now = sets();
                if !now.is_empty() && now.iter().all(|s| *s == mine) {
                    return true;
                }
                if t.elapsed() > Duration::from_secs(10) {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        assert!(settled(), "a worker's start moved it for good");
        // From several threads at once, as loops started by several client
        // threads do.
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        nudge_off_this_cpu();
                        for w in lock_std(&pool().threads).iter() {
                            w.waiting.store(true, Ordering::Relaxed);
                        }
                        wake(usize::MAX);
                        nudge_waiting_off_this_cpu();
                    }
                });
            }
        });
        assert!(settled(), "a nudge left a worker's set narrowed");
    }

    /// A job that never wants a worker, counting how often one asked.
    struct Full(AtomicUsize);

    impl Job for Full {
        fn enter(&self) -> bool {
            self.0.fetch_add(1, Ordering::Relaxed);
            false
        }
        fn work(&self) {}
        fn leave(&self) {}
        fn inside(&self) -> usize {
            0
        }
        fn seats(&self) -> usize {
            0
        }
    }

    /// An idle worker looks at a job it found full again only when the generation
    /// moves (or after `RELOOK_SPINS` spins), not on every spin: a job beside
    /// spinning workers it has no seat for is asked about a few hundred times a
    /// millisecond at most, not tens of thousands.
    #[test]
    fn idle_workers_do_not_keep_asking_a_full_job() {
        ensure_workers(2);
        let full = Full(AtomicUsize::new(0));
        let generation = || pool().generation.load(Ordering::SeqCst);
        let (g0, t0) = (generation(), Instant::now());
        let published = publish(&full);
        // Spinning workers give up spinning after `TLS_SPIN_US` (1 ms by default)
        // and park; other tests' loops in this process keep them spinning longer,
        // and each of their publications moves the generation.
        std::thread::sleep(Duration::from_millis(2));
        drop(published);
        let (moves, spun_us) = (generation() - g0, t0.elapsed().as_micros() as u64);
        let workers = pool().starts.started().max(1) as u64;
        let asked = full.0.load(Ordering::Relaxed) as u64;
        // Spinning takes tens of nanoseconds a spin (a `spin_loop` hint or more, a
        // yield later): at most one look per 4 us of spinning per worker, one per
        // generation moved and per job a worker left (twice the moves), and a few
        // more. Asking on every spin came to thousands a millisecond.
        let bound = workers * (10 + 2 * moves + spun_us / 4);
        assert!(
            asked <= bound,
            "{asked} asks from {workers} workers in {spun_us} us, {moves} generations (bound {bound})"
        );
    }

    #[test]
    fn a_container_made_outside_a_loop_starts_the_workers() {
        let _data = crate::Spec::new(0u8);
        let e = env();
        if e.mode != crate::config::Mode::Parallel || crate::config::default_threads() < 2 {
            return; // no loop would use a worker: none is started
        }
        // The first worker starts the others, in the background.
        let t = Instant::now();
        while pool().starts.started() < crate::config::default_threads() - 1 {
            assert!(t.elapsed() < Duration::from_secs(30), "workers not started");
            std::thread::yield_now();
        }
    }
}
