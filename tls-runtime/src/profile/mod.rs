//! Profile mode (`TLS_MODE=profile`): run each loop in order, record what every epoch
//! reads and writes and when, and predict the speedup the loop would get on 1 to 64
//! cores by replaying those epochs through a model of the scheduler.
//!
//! - `recorder.rs`: what one epoch did (`EpochProfile`), recorded by the
//!   `Recorder` in its epoch context; it depends on nothing else in the crate, so
//!   the epoch (which holds it) and profile mode do not import each other.
//! - `profiled_run.rs`: running a loop in order with a recorder in each epoch.
//! - `calibration.rs`: the runtime's costs the model charges, measured once.
//! - `model.rs`: the speedup model, replaying the recorded epochs under the
//!   scheduler's rules (`rules.rs`).
//! - `advise.rs`: the dependences the model predicts, with the fix for each and
//!   the speedup predicted after it.

mod advise;
mod calibration;
mod model;
mod predict;
mod profiled_run;
mod recorder;

pub(crate) use advise::predicted_dependences;
pub(crate) use calibration::costs as calibrate;
pub(crate) use predict::speedups;
pub(crate) use profiled_run::run_profiled;
pub(crate) use recorder::Recorder;

/// A serial number of its own for each in-order run profile mode makes (a profiled
/// loop, a calibration's epochs): counted down from the top, where the serials of
/// speculative loops (counted up from 1, `live_loops`) do not reach, and never
/// registered as running. Reader records a run leaves in slots are then dead to every
/// later one (`memory/slot/state.rs`, `is_live`), and two threads profiling at once
/// never take each other's versions for their own loop's. With one serial for every
/// profiled run, the records of an earlier run's later epochs counted as live in the
/// next run until its epochs passed their index, piled up in slots that many epochs
/// read, and each read went through them: a loop of 100 reads of a 20,000-element
/// vector per 2 us iteration recorded 7 to 17 us an iteration against 2.4 us plain
/// (profile mode's reads then all took the tracked path; they now do only while an
/// epoch holds versions of its own).
pub(crate) fn run_serial() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(u32::MAX);
    NEXT.fetch_sub(1, std::sync::atomic::Ordering::Relaxed)
}

/// The core counts predictions are made for.
pub const PREDICTED_CORES: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
