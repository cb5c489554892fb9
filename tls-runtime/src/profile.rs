//! Profile mode (`TLS_MODE=profile`): run each loop in order, record what every epoch
//! reads and writes and when, and predict the speedup the loop would get on 1 to 64
//! cores by replaying those epochs through a model of the scheduler.
//!
//! # The model
//!
//! `predict` replays the recorded epochs in loop order on `P` simulated threads:
//!
//! - An epoch starts when a thread is free and the window of epochs in flight
//!   (`4 P`, as in the scheduler) has room, and pays the measured per-epoch cost.
//!   It is stretched by the measured extra cost of each tracked read and of each
//!   speculative write (a new version).
//! - A read of a location that an earlier epoch writes *later* (in simulated time)
//!   is a violation: the epoch restarts the segment that read it (or the whole
//!   epoch, without checkpoints) when the write happens. Forwarding is free: a read
//!   after the earlier write sees its value. Restarts repeat until no earlier write
//!   comes after one of the epoch's reads.
//! - A finished epoch frees its thread at once (finished epochs wait to commit
//!   without holding a thread); commits are in loop order, one after another, each
//!   paying the measured serialized cost of a commit hand-off plus the measured cost
//!   of committing each written location.
//! - The predicted time is when the last epoch commits; the speedup is the
//!   sequential time (the sum of the epochs' durations) over it. The runtime falls
//!   back to in-order execution when speculation loses, so a prediction below about
//!   1 is reported as the in-order cost instead.
//!
//! A violation that hits a running epoch also costs the unwinding of its stack.
//!
//! The costs come from a short calibration the first time profile mode runs a loop:
//! a tracked read and a new-version write (and its commit) in a speculative epoch
//! versus plain ones; a speculative loop of 2 us epochs on two threads against the
//! same work run plainly (per-epoch cost = busy time per epoch beyond the work;
//! serialized cost = what the wall time per epoch has beyond half of work plus cost;
//! the fastest of five runs); and the unwinding of a rollback.
//!
//! Epochs are what the runtime would run: unless the loop sets its chunk, iterations
//! are grouped as the runtime's automatic chunking groups them (about 10 us per
//! epoch, at most 256 iterations), and the group is halved while more than a quarter
//! of the simulated epochs lose a quarter of their work or more to a restart (the
//! runtime halves its chunk on the same rule). Item boundaries inside a chunk are
//! not checkpoints, as in the runtime.

use crate::adapt::{MAX_CHUNK, TARGET_EPOCH};
use crate::control::{Control, LoopOutcome, Step};
use crate::epoch::{CurrentGuard, EpochCx, EpochRing, make_tag};
use crate::sync::AtomicU64;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The core counts predictions are made for.
pub const PREDICTED_CORES: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Checkpoint,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    /// Nanoseconds since the epoch started, recording overhead removed.
    at: f64,
    loc: usize,
    kind: Kind,
}

/// What one epoch did, as profile mode saw it.
#[derive(Debug, Clone, Default)]
pub(crate) struct EpochProfile {
    dur: f64,
    events: Vec<Event>,
}

/// This thread's CPU time in nanoseconds, where the platform tells it: an epoch's
/// duration should not include the time the OS ran something else (on a busy
/// machine that is often more than the epoch itself).
fn thread_cpu_ns() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        #[repr(C)]
        struct Timespec {
            sec: i64,
            nsec: i64,
        }
        unsafe extern "C" {
            fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
        }
        const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
        let mut ts = Timespec { sec: 0, nsec: 0 };
        // SAFETY: `ts` is a valid, writable `struct timespec` (two 64-bit fields on
        // 64-bit Linux); the clock id is Linux's per-thread CPU clock.
        let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc == 0 && cfg!(target_pointer_width = "64") {
            return Some(ts.sec as f64 * 1e9 + ts.nsec as f64);
        }
    }
    None
}

/// Records one epoch's accesses (lives in its `EpochCx` in profile mode).
#[derive(Debug)]
pub(crate) struct Recorder {
    start: Instant,
    cpu_start: Option<f64>,
    events: Vec<Event>,
    clock_ns: f64,
}

impl Recorder {
    fn new(clock_ns: f64) -> Self {
        Recorder {
            start: Instant::now(),
            cpu_start: thread_cpu_ns(),
            events: Vec::new(),
            clock_ns,
        }
    }

    fn now(&self) -> f64 {
        // Each event costs one clock read: take the reads so far out of the time.
        let raw = self.start.elapsed().as_nanos() as f64;
        (raw - self.events.len() as f64 * self.clock_ns).max(0.0)
    }

    pub(crate) fn access(&mut self, loc: usize, write: bool) {
        let at = self.now();
        let kind = if write { Kind::Write } else { Kind::Read };
        self.events.push(Event { at, loc, kind });
    }

    fn checkpoint(&mut self) {
        let at = self.now();
        self.events.push(Event {
            at,
            loc: 0,
            kind: Kind::Checkpoint,
        });
    }

    fn finish(mut self) -> EpochProfile {
        let wall = self.now();
        // Prefer CPU time, and place the events proportionally within it.
        let cpu = match (self.cpu_start, thread_cpu_ns()) {
            (Some(a), Some(b)) if b > a => {
                (b - a - self.events.len() as f64 * self.clock_ns).max(0.0)
            }
            _ => wall,
        };
        if wall > 0.0 && cpu < wall {
            let k = cpu / wall;
            for e in &mut self.events {
                e.at *= k;
            }
        }
        EpochProfile {
            dur: cpu.min(wall),
            events: self.events,
        }
    }
}

/// The runtime's costs, as the model uses them (nanoseconds).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Costs {
    /// Work per epoch on its own thread: claim, start, publish, commit.
    pub(crate) epoch: f64,
    /// Serialized per epoch: the commit hand-off that no thread count overlaps.
    pub(crate) serial: f64,
    /// Extra cost of a tracked access over a plain one.
    pub(crate) access: f64,
    /// One clock read (removed from recorded times).
    pub(crate) clock: f64,
    /// Unwinding a running epoch to its runner after a violation.
    pub(crate) rollback: f64,
    /// Extra cost of a speculative write over a plain one (a new version).
    pub(crate) write: f64,
    /// Committing one written location (part of the serialized commit).
    pub(crate) commit_write: f64,
}

/// Measures the costs once per process.
pub(crate) fn costs() -> Costs {
    static COSTS: OnceLock<Costs> = OnceLock::new();
    *COSTS.get_or_init(calibrate)
}

fn calibrate() -> Costs {
    const N: usize = 20_000;
    let t = Instant::now();
    for _ in 0..N {
        std::hint::black_box(Instant::now());
    }
    let clock = t.elapsed().as_nanos() as f64 / N as f64;

    // A tracked read in a speculative (not homefree) epoch against a plain read.
    let v = crate::SpecVec::from(vec![0u64; N]);
    let t = Instant::now();
    for i in 0..N {
        std::hint::black_box(v.get(i));
    }
    let plain = t.elapsed().as_nanos() as f64 / N as f64;
    let ring = EpochRing::new(2);
    let tag = make_tag(u32::MAX, 1);
    ring.slot(1).reset(tag);
    let watermark = AtomicU64::new(0);
    let cx = EpochCx::new(tag, &ring, &watermark);
    let tracked = {
        let _current = CurrentGuard::set(Some(&cx));
        let t = Instant::now();
        for i in 0..N {
            std::hint::black_box(v.get(i));
        }
        t.elapsed().as_nanos() as f64 / N as f64
    };
    // A speculative write creating a new version, and its commit, against a plain
    // write, on locations no epoch wrote before.
    let fresh = crate::SpecVec::from(vec![0u64; N]);
    let t = Instant::now();
    for i in 0..N {
        fresh.set(i, i as u64);
    }
    let plain_write = t.elapsed().as_nanos() as f64 / N as f64;
    let fresh = crate::SpecVec::from(vec![0u64; N]);
    let (write, commit_write) = {
        let _current = CurrentGuard::set(Some(&cx));
        let t = Instant::now();
        for i in 0..N {
            fresh.set(i, i as u64);
        }
        let write = t.elapsed().as_nanos() as f64 / N as f64;
        let t = Instant::now();
        let _ = crate::memory::commit_epoch(&cx);
        (write, t.elapsed().as_nanos() as f64 / N as f64)
    };
    drop(cx);
    drop(v);
    drop(fresh);

    // Epochs of about 2 us of work on two threads, one iteration each: what an epoch
    // costs beyond its work (claiming, starting, publishing and committing it: mostly
    // cache lines the threads hand each other) and the part of it that is serialized.
    // Real work, not empty epochs: an empty loop gains nothing from speculation, and
    // the adaptive policy would soon run it in order. The fastest of a few runs: a run
    // the scheduler of a busy machine interrupted measures the machine, not the
    // runtime.
    #[inline(never)]
    fn spin(iters: u64) -> u64 {
        let mut x = 1u64;
        for i in 0..iters {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x)
    }
    let probe = 20_000u64;
    let t = Instant::now();
    spin(probe);
    let iters = (probe as f64 * 2_000.0 / (t.elapsed().as_nanos() as f64).max(1.0)).max(1.0) as u64;
    let epochs = 400u64;
    let mut work = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..epochs {
            spin(iters);
        }
        work = work.min(t.elapsed().as_nanos() as f64 / epochs as f64);
    }
    let site: &'static crate::LoopSite = Box::leak(Box::new(crate::LoopSite::new()));
    let body = move |_: u64| {
        spin(iters);
    };
    let lp = crate::Loop::new()
        .name("tls-runtime calibration")
        .threads(2)
        .chunk(1)
        .site(site);
    lp.run_uncalibrated(0..epochs, &body); // wakes the workers
    let (mut wall, mut busy) = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        let t = Instant::now();
        lp.run_uncalibrated(0..epochs, &body);
        let w = t.elapsed().as_nanos() as f64;
        let b = crate::report::take_last().map_or(w, |r| r.busy.as_nanos() as f64);
        if w < wall {
            (wall, busy) = (w, b);
        }
    }
    crate::report::take_last();
    // Busy time per epoch is its work plus its cost; what the wall time per epoch has
    // beyond half of that (two threads share the epochs) does not overlap.
    let per_epoch = (busy / epochs as f64 - work).max(0.0);
    let serial = (wall / epochs as f64 - (work + per_epoch) / 2.0).max(per_epoch / 4.0);
    // Unwinding a few frames of a violated epoch back to its runner.
    #[inline(never)]
    fn unwind_from(depth: u32) -> u32 {
        if depth == 0 {
            std::panic::resume_unwind(Box::new(crate::epoch::RollbackSignal));
        }
        unwind_from(depth - 1) + 1
    }
    let t = Instant::now();
    for _ in 0..200 {
        let _ = std::panic::catch_unwind(|| unwind_from(8));
    }
    let rollback = t.elapsed().as_nanos() as f64 / 200.0;
    Costs {
        write: (write - plain_write).max(0.0),
        commit_write,
        rollback,
        epoch: per_epoch,
        serial,
        access: (tracked - plain).max(0.0),
        clock,
    }
}

/// Runs a loop in order on this thread, recording every epoch.
pub(crate) fn run_profiled<I, S, R, St, Sp>(
    items: I,
    start: &St,
    step: &Sp,
) -> (LoopOutcome<R>, Vec<EpochProfile>)
where
    I: IntoIterator,
    St: Fn(I::Item) -> S,
    Sp: Fn(S) -> Step<S, R>,
{
    let clock = costs().clock;
    let ring = EpochRing::new(1);
    let watermark = AtomicU64::new(0);
    let mut profiles = Vec::new();
    let serial = u32::MAX - 1;
    for (index, item) in items.into_iter().enumerate() {
        let index = index as u64;
        watermark.store(index, crate::sync::Ordering::Relaxed);
        let tag = make_tag(serial, index);
        ring.slot(index).reset(tag);
        let cx = EpochCx::new(tag, &ring, &watermark);
        cx.set_homefree();
        *cx.profile.borrow_mut() = Some(Recorder::new(clock));
        cx.profiling.set(true);
        let control = {
            let _current = CurrentGuard::set(Some(&cx));
            let mut state = start(item);
            loop {
                match step(state) {
                    Step::Checkpoint(next) => {
                        if let Some(p) = cx.profile.borrow_mut().as_mut() {
                            p.checkpoint();
                        }
                        state = next;
                    }
                    Step::Done(control) => break control,
                }
            }
        };
        cx.profiling.set(false);
        if let Some(p) = cx.profile.borrow_mut().take() {
            profiles.push(p.finish());
        }
        // Homefree epochs write committed data directly; commit-time actions ran.
        match control {
            Control::Continue => {}
            Control::Break => return (LoopOutcome::Broke, profiles),
            Control::Return(r) => return (LoopOutcome::Returned(r), profiles),
        }
    }
    (LoopOutcome::Completed, profiles)
}

/// The predicted wall time (ns) of the recorded epochs on `threads` threads.
#[cfg(test)]
pub(crate) fn predict(epochs: &[EpochProfile], threads: usize, costs: &Costs) -> f64 {
    simulate(epochs, threads, costs).0
}

/// The predicted wall time (ns) of the recorded epochs on `threads` threads, and how
/// many epochs a restart cost a quarter or more of their work so far (the runtime's
/// measure for halving its chunk).
fn simulate(epochs: &[EpochProfile], threads: usize, costs: &Costs) -> (f64, usize) {
    if epochs.is_empty() {
        return (0.0, 0);
    }
    let mut rolled_back = 0;
    let window = threads * 4;
    let mut free = vec![0.0f64; threads];
    let mut commit = Vec::with_capacity(epochs.len());
    // Final write times of finished epochs, per location: (epoch, time).
    let mut writes: HashMap<usize, Vec<(usize, f64)>> = HashMap::new();
    let mut last_commit = 0.0f64;
    for (j, e) in epochs.iter().enumerate() {
        let (slot, &thread_free) = free
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .expect("at least one thread");
        let window_free = if j >= window { commit[j - window] } else { 0.0 };
        let start = thread_free.max(window_free) + costs.epoch;
        let reads = e.events.iter().filter(|ev| ev.kind == Kind::Read).count() as f64;
        let written = e.events.iter().filter(|ev| ev.kind == Kind::Write).count() as f64;
        let dur = e.dur + reads * costs.access + written * costs.write;
        let scale = if e.dur > 0.0 { dur / e.dur } else { 1.0 };
        // Segment start offsets.
        let mut seg_starts = vec![0.0];
        for ev in &e.events {
            if ev.kind == Kind::Checkpoint {
                seg_starts.push(ev.at * scale);
            }
        }
        // `t0` is when the epoch's offset 0 would have been, after restarts.
        let mut t0 = start;
        let mut counted = false;
        loop {
            let mut first: Option<(f64, f64)> = None; // (violation time, new t0)
            let mut seg = 0usize;
            for ev in &e.events {
                match ev.kind {
                    Kind::Checkpoint => seg += 1,
                    Kind::Write => {}
                    Kind::Read => {
                        let read_at = t0 + ev.at * scale;
                        let Some(ws) = writes.get(&ev.loc) else {
                            continue;
                        };
                        for &(i, w) in ws.iter().rev() {
                            if commit[i] <= start - costs.epoch {
                                break;
                            }
                            if i < j && w > read_at && first.is_none_or(|(f, _)| w < f) {
                                first = Some((w, w - seg_starts[seg]));
                            }
                        }
                    }
                }
            }
            match first {
                Some((w, new_t0)) if new_t0 > t0 => {
                    if !counted {
                        let end = w.min(t0 + dur);
                        let segment_start = w - (new_t0 - t0);
                        let lost = (end - segment_start).max(0.0);
                        if lost * 4.0 >= end - t0 {
                            rolled_back += 1;
                            counted = true;
                        }
                    }
                    // A violation while the epoch runs unwinds it; one that comes after
                    // it finished is handled by re-running it at commit.
                    let unwind = if w < t0 + dur { costs.rollback } else { 0.0 };
                    t0 = new_t0 + unwind;
                }
                _ => break,
            }
        }
        let finish = t0 + dur;
        free[slot] = finish;
        last_commit = finish.max(last_commit) + costs.serial + written * costs.commit_write;
        commit.push(last_commit);
        for ev in &e.events {
            if ev.kind == Kind::Write {
                writes
                    .entry(ev.loc)
                    .or_default()
                    .push((j, t0 + ev.at * scale));
            }
        }
    }
    (last_commit, rolled_back)
}

/// The epochs the runtime would run for `items` grouped `chunk` at a time: durations
/// add up, events keep their order and move by the time of the items before them.
fn chunked(items: &[EpochProfile], chunk: usize) -> Cow<'_, [EpochProfile]> {
    if chunk <= 1 {
        // One iteration per epoch: the recorded epochs as they are, not a copy of
        // every event for each core count predicted.
        return Cow::Borrowed(items);
    }
    let epochs: Vec<EpochProfile> = items
        .chunks(chunk)
        .map(|group| {
            let mut epoch = EpochProfile::default();
            for item in group {
                let offset = epoch.dur;
                epoch.events.extend(item.events.iter().map(|ev| Event {
                    at: ev.at + offset,
                    ..*ev
                }));
                epoch.dur += item.dur;
            }
            epoch
        })
        .collect();
    Cow::Owned(epochs)
}

/// The predicted wall time of `items` on `threads` threads with the runtime's
/// chunking: `chunk` iterations per epoch if the loop sets it, else the automatic
/// choice (about [`TARGET_EPOCH`] per epoch), halved while more than a quarter of the
/// epochs roll back.
fn predict_chunked(
    items: &[EpochProfile],
    threads: usize,
    costs: &Costs,
    chunk: Option<usize>,
) -> f64 {
    let mut c = chunk.unwrap_or_else(|| {
        // The runtime sizes chunks from the busy time per iteration, which includes
        // the per-epoch cost spread over the chunk: it settles where
        // `chunk * mean + epoch cost = TARGET_EPOCH`.
        let mean = items.iter().map(|e| e.dur).sum::<f64>() / items.len().max(1) as f64;
        let ideal = (TARGET_EPOCH.as_nanos() as f64 - costs.epoch) / mean.max(1.0);
        ideal.clamp(1.0, f64::from(MAX_CHUNK)) as usize
    });
    loop {
        let epochs = chunked(items, c);
        let (t, rolled_back) = simulate(&epochs, threads, costs);
        if chunk.is_none() && c > 1 && rolled_back * 4 > epochs.len() {
            c /= 2;
            continue;
        }
        return t;
    }
}

/// Predicted speedups for [`PREDICTED_CORES`], with the sequential time they are
/// relative to.
pub(crate) fn speedups(
    epochs: &[EpochProfile],
    chunk: Option<usize>,
) -> (Duration, Vec<(usize, f64)>) {
    let costs = costs();
    let sequential: f64 = epochs.iter().map(|e| e.dur).sum();
    let out = PREDICTED_CORES
        .iter()
        .map(|&p| {
            let t = if p == 1 {
                sequential
            } else {
                predict_chunked(epochs, p, &costs, chunk)
            };
            let s = if t > 0.0 { sequential / t } else { 1.0 };
            // The adaptive fallback runs the loop in order rather than lose.
            (p, s.max(IN_ORDER_RATIO))
        })
        .collect();
    (Duration::from_nanos(sequential as u64), out)
}

/// What a loop running in order under the adaptive fallback keeps of the plain
/// loop's speed.
const IN_ORDER_RATIO: f64 = 0.97;

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: Costs = Costs {
        epoch: 0.0,
        serial: 0.0,
        access: 0.0,
        clock: 0.0,
        rollback: 0.0,
        write: 0.0,
        commit_write: 0.0,
    };

    fn epoch(dur: f64, events: &[(f64, usize, Kind)]) -> EpochProfile {
        EpochProfile {
            dur,
            events: events
                .iter()
                .map(|&(at, loc, kind)| Event { at, loc, kind })
                .collect(),
        }
    }

    #[test]
    fn independent_epochs_scale_with_threads() {
        let e: Vec<_> = (0..64)
            .map(|i| epoch(1000.0, &[(10.0, i, Kind::Read), (900.0, i, Kind::Write)]))
            .collect();
        assert_eq!(predict(&e, 1, &FREE), 64_000.0);
        assert_eq!(predict(&e, 4, &FREE), 16_000.0);
        assert_eq!(predict(&e, 64, &FREE), 1000.0);
    }

    #[test]
    fn a_full_chain_does_not_speed_up() {
        // Each epoch reads at its start what the previous one writes at its end.
        let e: Vec<_> = (0..32)
            .map(|_| epoch(1000.0, &[(0.0, 7, Kind::Read), (1000.0, 7, Kind::Write)]))
            .collect();
        let t = predict(&e, 8, &FREE);
        assert!((t - 32_000.0).abs() < 1e-6, "{t}");
    }

    #[test]
    fn a_checkpoint_before_the_conflicting_tail_saves_the_head() {
        // 900 ns private head, then a 100 ns tail that reads and writes one counter.
        let plain: Vec<_> = (0..16)
            .map(|_| epoch(1000.0, &[(900.0, 1, Kind::Read), (1000.0, 1, Kind::Write)]))
            .collect();
        let split: Vec<_> = (0..16)
            .map(|_| {
                epoch(
                    1000.0,
                    &[
                        (900.0, 0, Kind::Checkpoint),
                        (900.0, 1, Kind::Read),
                        (1000.0, 1, Kind::Write),
                    ],
                )
            })
            .collect();
        let without = predict(&plain, 2, &FREE);
        let with = predict(&split, 2, &FREE);
        // Without the checkpoint a violated epoch redoes its head too.
        assert!(with < without, "with {with} without {without}");
        // Two threads, 16 epochs: heads overlap, tails are serialized (16 x 100 ns).
        assert!(with <= 16.0 * 1000.0 / 2.0 + 16.0 * 100.0, "{with}");
    }

    #[test]
    fn a_dependence_every_fourth_epoch() {
        let e: Vec<_> = (0..40)
            .map(|i| {
                if i % 4 == 0 {
                    epoch(1000.0, &[(0.0, 5, Kind::Read), (1000.0, 5, Kind::Write)])
                } else {
                    epoch(1000.0, &[(500.0, 100 + i, Kind::Write)])
                }
            })
            .collect();
        let t2 = predict(&e, 2, &FREE);
        // The dependent epochs are four apart: with two threads they never overlap,
        // so the loop runs at full speed.
        assert_eq!(t2, 20_000.0);
        // With eight threads each dependent epoch waits for the previous one.
        let t8 = predict(&e, 8, &FREE);
        assert!(t8 > 40_000.0 / 8.0, "{t8}");
    }

    #[test]
    fn serialized_commit_cost_bounds_the_speedup() {
        let costs = Costs {
            serial: 100.0,
            ..FREE
        };
        let e: Vec<_> = (0..1000).map(|_| epoch(1000.0, &[])).collect();
        let t = predict(&e, 64, &costs);
        // Commits cannot go faster than one per 100 ns.
        assert!(t >= 1000.0 * 100.0, "{t}");
    }

    #[test]
    fn chunks_add_up_durations_and_shift_events() {
        let items: Vec<_> = (0..5)
            .map(|i| epoch(100.0, &[(10.0, i, Kind::Read), (90.0, i, Kind::Write)]))
            .collect();
        let c = chunked(&items, 2);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].dur, 200.0);
        assert_eq!(c[2].dur, 100.0);
        let at: Vec<_> = c[0].events.iter().map(|e| (e.at, e.loc)).collect();
        assert_eq!(at, [(10.0, 0), (90.0, 0), (110.0, 1), (190.0, 1)]);
    }

    #[test]
    fn short_independent_iterations_are_predicted_in_chunks() {
        // 1 us iterations with 1 us of cost per epoch: one per epoch would gain
        // nothing on 2 threads; grouped ten at a time the cost nearly vanishes.
        let costs = Costs {
            epoch: 1000.0,
            ..FREE
        };
        let items: Vec<_> = (0..2000)
            .map(|i| epoch(1000.0, &[(900.0, i, Kind::Write)]))
            .collect();
        let sequential = 2000.0 * 1000.0;
        let one = sequential / predict_chunked(&items, 2, &costs, Some(1));
        let auto = sequential / predict_chunked(&items, 2, &costs, None);
        assert!(one < 1.05, "one per epoch: {one}");
        assert!(auto > 1.7, "chunked: {auto}");
    }

    #[test]
    fn chunks_that_roll_back_are_halved_down_to_what_pays() {
        // Each iteration reads and then writes one shared location at its very end:
        // in a chunk of several, the first read of the next epoch is violated by the
        // last write of the one before and the whole chunk re-runs; one iteration per
        // epoch loses only its tail.
        let items: Vec<_> = (0..400)
            .map(|_| {
                epoch(
                    1000.0,
                    &[
                        (0.0, 0, Kind::Checkpoint),
                        (950.0, 7, Kind::Read),
                        (990.0, 7, Kind::Write),
                    ],
                )
            })
            .collect();
        let sequential = 400.0 * 1000.0;
        let auto = sequential / predict_chunked(&items, 2, &FREE, None);
        let eight = sequential / predict_chunked(&items, 2, &FREE, Some(8));
        let one = sequential / predict_chunked(&items, 2, &FREE, Some(1));
        assert!(auto >= eight, "auto {auto} vs chunk 8 {eight}");
        assert!(
            (auto - one).abs() < 0.05 * one,
            "auto {auto} vs chunk 1 {one}"
        );
    }
}
