//! How an epoch tells the runtime what the loop does next.
//!
//! The `#[tls_loop]` macro turns `continue`, `break`, `return` and `?` in a loop body into
//! these values; `Loop::run_segments` also uses [`Step`] to split a body into sub-thread
//! segments at `checkpoint!()`.

/// What an epoch's body asks of the loop when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control<R> {
    /// The iteration ended normally (or by `continue`): go on with the next one.
    Continue,
    /// `break`: the loop ends after this iteration; later iterations are squashed.
    Break,
    /// `return value` (or `?`): the enclosing function returns `value` after this
    /// iteration; later iterations are squashed.
    Return(R),
}

/// One step of a segmented epoch body: either a sub-thread checkpoint carrying the
/// state that the next segment starts from, or the end of the iteration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<S, R> {
    /// `checkpoint!()`: the body reached a sub-thread boundary. The runtime keeps a clone
    /// of the state so that a violation in a later segment re-runs from here, not from the
    /// start of the iteration.
    Checkpoint(S),
    /// The iteration ended.
    Done(Control<R>),
}

/// How a whole speculative loop ended, as it would have sequentially.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopOutcome<R> {
    /// Every item was processed.
    Completed,
    /// An iteration ended with `break`.
    Broke,
    /// An iteration ended with `return value`.
    Returned(R),
}

/// Runs one iteration in order from its first state, through every checkpoint, to
/// its end (the in-order paths, where checkpoints need no snapshot).
pub(crate) fn run_iteration<S, R>(mut state: S, step: impl Fn(S) -> Step<S, R>) -> Control<R> {
    loop {
        match step(state) {
            Step::Checkpoint(next) => state = next,
            Step::Done(control) => return control,
        }
    }
}

impl<R> LoopOutcome<R> {
    /// The returned value, if an iteration returned.
    pub fn returned(self) -> Option<R> {
        match self {
            LoopOutcome::Returned(r) => Some(r),
            _ => None,
        }
    }
}
