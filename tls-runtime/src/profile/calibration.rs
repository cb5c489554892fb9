//! The runtime's costs the speedup model charges, measured by a short calibration the
//! first time profile mode runs a loop: a tracked read and a new-version write (and its
//! commit) in a speculative epoch versus plain ones; what recording a read or a write
//! adds in profile mode's own epochs (taken out of the recorded times); a speculative loop of 2 us epochs
//! on two threads against the same work run plainly (per-epoch cost = busy time per
//! epoch beyond the work; serialized cost = what the wall time per epoch has beyond
//! half of work plus cost; the medians of fifteen runs that ran speculatively); and the
//! unwinding of a rollback, measured in real rollbacks of a speculative loop.

use super::recorder::{EventCosts, Recorder};
use crate::epoch::{CurrentGuard, EpochCx, EpochRing, make_tag};
use crate::loop_builder::Loop;
use crate::sync::AtomicU64;
use std::sync::OnceLock;
use std::time::Instant;

/// The runtime's costs, as the model uses them (nanoseconds).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Costs {
    /// Work per epoch on its own thread: claim, start, publish, commit.
    pub(crate) epoch: f64,
    /// Serialized per epoch: the commit hand-off that no thread count overlaps.
    pub(crate) serial: f64,
    /// Extra cost of a tracked access over a plain one.
    pub(crate) access: f64,
    /// What recording an access or a checkpoint adds to a profiled epoch (removed
    /// from recorded times).
    pub(crate) recording: EventCosts,
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
    // Its epochs are the runtime's, not the user's to test: a violation injected into
    // the fake epoch below would unwind out of the calibration.
    let _no_injection = crate::inject::Off::new();
    const N: usize = 20_000;
    let t = Instant::now();
    for _ in 0..N {
        std::hint::black_box(Instant::now());
    }
    let clock = t.elapsed().as_nanos() as f64 / N as f64;

    // A tracked read in a speculative (not homefree) epoch against a plain read, in
    // no order over more slots than a core's caches hold (see `READS`).
    let v = crate::SpecVec::from(vec![0u64; READS]);
    let plain = timed_reads(&v);
    let ring = EpochRing::new(2);
    let tag = make_tag(super::run_serial(), 1);
    ring.slot(1).reset(tag);
    let watermark = AtomicU64::new(0);
    let cx = EpochCx::new(tag, &ring, &watermark);
    let tracked = {
        let _current = CurrentGuard::set(Some(&cx));
        timed_reads(&v)
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
    let recording = recording_costs(clock);

    // Epochs of about 2 us of work on two threads, one iteration each: what an epoch
    // costs beyond its work (claiming, starting, publishing and committing it: mostly
    // cache lines the threads hand each other) and the part of it that is serialized.
    // Real work, not empty epochs: an empty loop gains nothing from speculation, and
    // the adaptive policy would soon run it in order. The fastest of a few runs: a run
    // the scheduler of a busy machine interrupted measures the machine, not the
    // runtime.
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
    let body = move |_: u64| {
        spin(iters);
    };
    let lp = calibration_loop();
    // Wakes the workers, and gives the kernel time to put them on cores of their own:
    // a worker just started or woken is often queued on the caller's core at first,
    // for a few milliseconds, and costs measured then are the machine's placement,
    // not the runtime's (one process in eight measured half the 16-core speedup of
    // the others without this).
    let warm = Instant::now();
    while warm.elapsed() < std::time::Duration::from_millis(30) {
        lp.run_uncalibrated(0..epochs, &body);
    }
    crate::report::take_last();
    // Busy time per epoch is its work plus its cost; what the wall time per epoch has
    // beyond half of that (two threads share the epochs) does not overlap. Each run
    // gives both; the medians of many short runs, not the fastest run: the serialized
    // cost bounds every prediction for many cores, and one lucky or unlucky run
    // (a worker that started late, a scheduler tick) moved the 16-core prediction of
    // the same loop by half between processes.
    let (mut per_epochs, mut serials) = (Vec::new(), Vec::new());
    // Only runs in which every epoch ran speculatively count: a run the adaptive
    // policy held back in order (no worker free in time, on a busy machine) measures
    // in-order execution, and taken as the speculative cost it made the 16-core
    // prediction of an independent loop about 2x. At most 60 tries.
    for _ in 0..60 {
        let t = Instant::now();
        lp.run_uncalibrated(0..epochs, &body);
        let wall = t.elapsed().as_nanos() as f64;
        let Some(r) = crate::report::take_last() else {
            continue;
        };
        if r.in_order_epochs > 0 {
            continue;
        }
        let busy = r.busy.as_nanos() as f64;
        let per_epoch = (busy / epochs as f64 - work).max(0.0);
        per_epochs.push(per_epoch);
        serials.push((wall / epochs as f64 - (work + per_epoch) / 2.0).max(per_epoch / 4.0));
        if per_epochs.len() == 15 {
            break;
        }
    }
    if per_epochs.is_empty() {
        // Never speculative: the loop ran in order every time, which is also what a
        // prediction should expect of this machine's many-core runs.
        per_epochs.push(work);
        serials.push(work);
    }
    let per_epoch = median(&mut per_epochs);
    let serial = median(&mut serials);
    let rollback = rollback_cost(iters);
    Costs {
        write: (write - plain_write).max(0.0),
        commit_write,
        rollback,
        epoch: per_epoch,
        serial,
        access: (tracked - plain).max(0.0),
        recording,
    }
}

/// What profile mode's recording adds per event: the noting of `N` reads (a clock
/// read and an entry; the read itself is a plain one), and `N` writes in a profiled
/// epoch as `run_profiled` makes them (homefree, in place, each noted) against the
/// same writes made plainly; a checkpoint's clock read (`clock`). Each the fastest
/// of a few passes.
/// The recorder's list is cleared every [`EPOCH_EVENTS`] events, so that it stays in
/// the cache as an epoch's does. All of it was in the recorded lengths before, where
/// only the clock reads were taken out.
fn recording_costs(clock: f64) -> EventCosts {
    const N: usize = 4_000;
    const PASSES: usize = 5;
    const EPOCH_EVENTS: usize = 128;
    let v = crate::SpecVec::from(vec![0u64; N]);
    // The fastest of a few passes: one preempted pass would overstate the cost, and
    // recorded times with too much taken out collapse to nothing.
    let fastest = |pass: &dyn Fn()| {
        (0..PASSES)
            .map(|_| {
                let t = Instant::now();
                pass();
                t.elapsed().as_nanos() as f64 / N as f64
            })
            .fold(f64::MAX, f64::min)
    };
    let plain_write = fastest(&|| {
        for i in 0..N {
            v.set(i, i as u64);
        }
    });
    let ring = EpochRing::new(1);
    let tag = make_tag(super::run_serial(), 0);
    ring.slot(0).reset(tag);
    let watermark = AtomicU64::new(0);
    let cx = EpochCx::new(tag, &ring, &watermark);
    cx.set_homefree();
    // A recorder that takes nothing out: this measures what it should.
    *cx.profile.borrow_mut() = Some(Recorder::new(EventCosts::default(), EPOCH_EVENTS));
    cx.profiling.set(true);
    let clear = || {
        if let Some(r) = cx.profile.borrow_mut().as_mut() {
            r.clear();
        }
    };
    let site = std::panic::Location::caller();
    let (read, write) = {
        let _current = CurrentGuard::set(Some(&cx));
        let read = fastest(&|| {
            for i in 0..N {
                if i % EPOCH_EVENTS == 0 {
                    clear();
                }
                cx.note(i, false, site);
            }
        });
        let write = fastest(&|| {
            for i in 0..N {
                if i % EPOCH_EVENTS == 0 {
                    clear();
                }
                v.set(i, i as u64);
            }
        });
        cx.profiling.set(false);
        drop(cx.profile.borrow_mut().take());
        let _ = crate::memory::commit_epoch(&cx);
        (read, write)
    };
    EventCosts {
        read: read.max(clock),
        write: (write - plain_write).max(clock),
        checkpoint: clock,
    }
}

/// Slots the calibration's reads go to, in no order (`timed_reads`): 8 MB of them.
/// A tracked read takes its slot's lock, a locked instruction that waits for a cache
/// miss where plain reads' misses overlap; calibrated on 20,000 slots read in order
/// (every line prefetched), a tracked read cost 3-9 ns more than a plain one, where
/// an outside probe's loops of many reads, each to a slot of its own, paid 10-20 ns
/// (and the model predicted 1.6-1.9x on 2 cores for loops that ran at 1.1-1.7x).
const READS: usize = 1 << 16;

/// The time of one read of `v` (of [`READS`] slots), as the mean over a pass in a
/// fixed order that no prefetcher follows, after a pass that brings in what fits.
fn timed_reads(v: &crate::SpecVec<u64>) -> f64 {
    // An odd step, so that the pass visits every slot once.
    let at = |i: usize| (i * 40_503) % READS;
    for i in 0..READS {
        std::hint::black_box(v.get(at(i)));
    }
    let t = Instant::now();
    for i in 0..READS {
        std::hint::black_box(v.get(at(i)));
    }
    t.elapsed().as_nanos() as f64 / READS as f64
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A calibration loop: two threads, one iteration per epoch, a site of its own (a
/// leaked few words, once per run of the calibration), kept out of the reports.
fn calibration_loop() -> Loop {
    let site: &'static crate::LoopSite = Box::leak(Box::new(crate::LoopSite::new()));
    let mut lp = Loop::new()
        .name("tls-runtime calibration")
        .threads(2)
        .chunk(1)
        .site(site);
    lp.internal = true;
    lp
}

/// About `iters` steps of work that the optimizer cannot remove.
#[inline(never)]
fn spin(iters: u64) -> u64 {
    let mut x = 1u64;
    for i in 0..iters {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// What a rollback costs beyond the work it discards: the unwinding of the violated
/// epoch's stack from the access that found the violation back to the runtime,
/// measured where it happens, in a speculative loop on two threads in which each
/// epoch reads early what the one before writes at its end (so most epochs find the
/// violation at their last access and unwind from there). Unwinding costs
/// microseconds on some machines, more than a copy of its frames shows: a synthetic
/// unwind of as many frames measured two thirds of the real one on the development
/// VM. The median of a few runs; the synthetic unwind when no run rolled back.
fn rollback_cost(iters: u64) -> f64 {
    let shared = crate::Spec::new(0u64);
    let out = crate::SpecVec::from(vec![0u64; 64]);
    let body = |i: u64| {
        let seen = shared.get();
        let x = spin(iters) ^ seen;
        shared.set(x);
        out.set(i as usize, spin(iters / 4));
    };
    let mut per_rollback = Vec::new();
    // The first run is not counted: a process's first unwinding costs several times
    // the later ones (the unwinder loads and indexes the unwind tables).
    for run in 0..9 {
        // A fresh site each run: a loop that rolls back this much soon runs in order.
        calibration_loop().run_uncalibrated(0..64, &body);
        if let Some(r) = crate::report::take_last()
            && r.unwinds > 0
            && run > 0
        {
            per_rollback.push(r.unwinding.as_nanos() as f64 / r.unwinds as f64);
        }
    }
    if !per_rollback.is_empty() {
        return median(&mut per_rollback);
    }
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
    t.elapsed().as_nanos() as f64 / 200.0
}
