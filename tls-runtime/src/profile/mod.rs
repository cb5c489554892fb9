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

/// The core counts predictions are made for.
pub const PREDICTED_CORES: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
