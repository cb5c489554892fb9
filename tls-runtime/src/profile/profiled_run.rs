//! Profile mode's run of a loop: in order on the calling thread, each iteration a
//! homefree epoch with a [`Recorder`] noting its accesses.

use super::calibration::costs;
use super::recorder::{EpochProfile, Recorder};
use crate::control::{Control, LoopOutcome, Step};
use crate::epoch::{CurrentGuard, EpochCx, EpochRing, make_tag};
use crate::memory::{CommitOutcome, commit_epoch};
use crate::sync::AtomicU64;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// How a profiled loop ended: its outcome, or the panic of its last iteration (the
/// caller resumes it once it has reported the iterations that ran).
pub(crate) type Ended<R> = Result<LoopOutcome<R>, Box<dyn std::any::Any + Send>>;

/// Runs a loop in order on this thread, recording every epoch.
pub(crate) fn run_profiled<I, S, R, St, Sp>(
    items: I,
    start: &St,
    step: &Sp,
) -> (Ended<R>, Vec<EpochProfile>)
where
    I: IntoIterator,
    St: Fn(I::Item) -> S,
    Sp: Fn(S) -> Step<S, R>,
{
    let recording = costs().recording;
    let ring = EpochRing::new(1);
    let watermark = AtomicU64::new(0);
    let mut profiles = Vec::new();
    let serial = super::run_serial();
    for (index, item) in items.into_iter().enumerate() {
        let index = index as u64;
        watermark.store(index, crate::sync::Ordering::Relaxed);
        let tag = make_tag(serial, index);
        ring.slot(index).reset(tag);
        let cx = EpochCx::new(tag, &ring, &watermark);
        cx.set_homefree();
        // Room for as many events as the epoch before had, and a quarter more.
        let expected = profiles.last().map_or(0, |p: &EpochProfile| p.events.len());
        *cx.profile.borrow_mut() = Some(Recorder::new(recording, expected + expected / 4));
        cx.profiling.set(true);
        let _current = CurrentGuard::set(Some(&cx));
        let run = catch_unwind(AssertUnwindSafe(|| {
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
        }));
        cx.profiling.set(false);
        if let Some(p) = cx.profile.borrow_mut().take() {
            profiles.push(p.finish());
        }
        // The iteration's writes and commit-time actions take effect now, in the order
        // it made them (nothing else runs this loop, so nothing can violate it), also
        // when it panicked: the sequential loop keeps what it did before the panic.
        // Commit-time actions registered before the epoch published run here: they
        // are commit work too.
        let t = std::time::Instant::now();
        let committed = commit_epoch(&cx);
        if let Some(p) = profiles.last_mut() {
            p.add_commit_work(t.elapsed().as_nanos() as f64);
        }
        drop(_current);
        let control = match (run, committed) {
            (_, CommitOutcome::ActionPanicked(p)) | (Err(p), _) => return (Err(p), profiles),
            (Ok(control), _) => control,
        };
        match control {
            Control::Continue => {}
            Control::Break => return (Ok(LoopOutcome::Broke), profiles),
            Control::Return(r) => return (Ok(LoopOutcome::Returned(r)), profiles),
        }
    }
    (Ok(LoopOutcome::Completed), profiles)
}
