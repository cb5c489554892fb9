//! Work delayed until an epoch commits: `on_commit` actions and write-only
//! accumulations, applied in epoch order by the committing thread.

use crate::epoch;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, Ordering};

mod append;
pub use append::{
    AppendInPlace, AppendToPart, Appending, Borrowed, CollectIterator, ExtendArg, KeepArg,
    KeepBorrow, KeepCopy, KeptBorrow, Merge,
};

/// Runs `f` when the current epoch commits, after every earlier epoch's actions: the
/// plain-function form of `#[on_commit]`.
///
/// Outside any speculative epoch, and in the homefree epoch, `f` runs at once.
/// Otherwise it runs when the epoch commits, after the writes the iteration made
/// before the call and before those it made after, outside speculation (its own
/// accesses to speculative data are plain ones, and an `on_commit` call inside it runs
/// at once). `f` may read and write speculative data: the epoch's next speculative
/// read after the call (in this iteration or a later one of its chunk) waits until
/// the epoch is homefree and `f` has run, so that it sees what `f` wrote, as the
/// sequential program does. A call made after the iteration's last read of
/// speculative data costs no wait. Actions of an epoch that is
/// rolled back past the call are dropped unrun. An action that panics ends the loop
/// there, as the sequential loop would: the iteration's later writes are discarded.
///
/// ```
/// use std::sync::Mutex;
/// static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// tls_runtime::for_each(0..50u32, |i| {
///     tls_runtime::on_commit(move || LOG.lock().unwrap().push(i));
/// });
/// assert_eq!(*LOG.lock().unwrap(), (0..50).collect::<Vec<_>>());
/// ```
pub fn on_commit(f: impl FnOnce() + Send + 'static) {
    defer(f, true)
}

/// [`on_commit`] for output the body delays (`println!` in a loop body): it touches
/// no speculative data, so the epoch's later reads need not wait for it.
pub(crate) fn on_commit_output(f: impl FnOnce() + Send + 'static) {
    defer(f, false)
}

/// Runs `f` now or at the current epoch's commit (see [`on_commit`]); `touches_data`:
/// a program's own call, which may read or write speculative data (an accumulation or
/// delayed output touches none). Generic, so that an action that runs at once
/// (outside speculation, or in a published epoch: every update of an in-order run)
/// is neither boxed nor called through a pointer: an accumulation in a loop run in
/// order paid an allocation per update.
fn defer<'f>(f: impl FnOnce() + Send + 'f, touches_data: bool) {
    match epoch::current() {
        None => f(),
        Some(cx) if cx.published() => run_published(cx, f),
        Some(cx) => {
            // An epoch, even homefree, can still roll back until it publishes or
            // commits (plain code or another loop may change what it read): the action
            // waits for the commit, where it runs after the epoch's earlier writes.
            let _ = cx.begin_access();
            // The oldest epoch publishes what it did and makes the call where the
            // sequential program makes it, so that its later reads see what the call
            // wrote without waiting for anything.
            if touches_data && crate::memory::publish_if_homefree(cx) {
                return run_published(cx, f);
            }
            // SAFETY: `defer` is reached with a non-'static closure only through
            // `Accumulator::record`, whose contract makes the accumulator (and so what
            // the closure borrows) outlive the loop; the loop runs or drops every
            // action before it returns.
            let f = unsafe { epoch::Action::new_unbounded(f) };
            cx.defer(f, touches_data);
        }
    }
}

/// Runs `f` at once for the published epoch of `cx`, as plain code.
fn run_published(cx: &epoch::EpochCx, f: impl FnOnce()) {
    // In profile mode the action's time is commit work, not the epoch's.
    let t = cx.profiling.get().then(std::time::Instant::now);
    {
        // The epoch runs as plain code now (see `memory::publish_prefix`).
        let _plain = epoch::CurrentGuard::set(None);
        f();
    }
    if let Some(t) = t
        && let Ok(mut p) = cx.profile.try_borrow_mut()
        && let Some(p) = p.as_mut()
    {
        p.deferred(t.elapsed().as_nanos() as f64);
    }
}

/// A variable declared outside a speculative loop that the loop only accumulates into
/// (`total += x`, `out.push(y)`): each epoch records its updates, and they are applied
/// to the variable at commit, in epoch order, so the result is exactly the sequential
/// one (floating point included) and the updates create no dependence between epochs.
///
/// The `#[tls_loop]` macro creates these; code without the macro can too.
///
/// ```
/// use tls_runtime::Accumulator;
/// let mut total = 0.0f64;
/// {
///     // SAFETY: `acc` outlives the loop below.
///     let acc = unsafe { Accumulator::new(&mut total) };
///     tls_runtime::for_each(1..=10, |i| acc.record(move |t| *t += 1.0 / f64::from(i)));
/// }
/// assert_eq!(total, (1..=10).fold(0.0, |t, i| t + 1.0 / f64::from(i)));
/// ```
pub struct Accumulator<'a, T> {
    target: *mut T,
    busy: AtomicBool,
    /// Made inside a speculative epoch: its loop is nested in that epoch and runs in
    /// order as part of it (`Loop::run`), and its variable is a local of the epoch's
    /// own execution, so updates apply at once (see [`Accumulator::record`]).
    nested: bool,
    /// Invariant in `'a`: `record` takes updates that live for `'a`, the borrow of the
    /// variable, which must outlast the loop. Were `'a` covariant (as a plain
    /// `&'a mut T` makes it), `&Accumulator<'a, T>` could be used as an
    /// `&Accumulator<'short, T>` inside an iteration, and an update borrowing the
    /// iteration's own data (`out.push_str(&s)` with a local `s`) would compile and
    /// run at commit, after that data was gone.
    _borrow: PhantomData<fn(&'a mut T) -> &'a mut T>,
}

// SAFETY: the accumulator only hands `&mut T` to one update at a time (under `busy`),
// on whichever thread commits, so it moves `T` access between threads like a
// `Mutex<T>`: sound when `T: Send`.
unsafe impl<T: Send> Sync for Accumulator<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Accumulator<'_, T> {}

impl<'a, T: Send> Accumulator<'a, T> {
    /// Accumulates into `target`.
    ///
    /// # Safety
    /// The accumulator must outlive every speculative loop whose epochs call `record`
    /// on it (create it before the loop, drop it after): updates recorded by an epoch
    /// are kept until the epoch commits and borrow what `target` borrows.
    pub unsafe fn new(target: &'a mut T) -> Self {
        Accumulator {
            target,
            busy: AtomicBool::new(false),
            nested: epoch::current().is_some(),
            _borrow: PhantomData,
        }
    }

    /// Records `op` to be applied to the variable when the current epoch commits (at
    /// once outside speculation).
    ///
    /// `op` runs after the iteration that records it, so it must live as long as the
    /// accumulator's borrow of the variable: it may own what it needs, or borrow what
    /// outlives the loop, never the iteration's own data (a compile error):
    ///
    /// ```compile_fail,E0597
    /// let mut out = String::new();
    /// // SAFETY: `acc` outlives the loop below.
    /// let acc = unsafe { tls_runtime::Accumulator::new(&mut out) };
    /// tls_runtime::for_each(0..10, |i| {
    ///     let piece = format!("{i},");
    ///     let piece = &piece; // borrowed from this iteration
    ///     acc.record(move |t| t.push_str(piece));
    /// });
    /// ```
    ///
    /// Moving `piece` itself into the update (`move |t| t.push_str(&piece)`) is right.
    ///
    /// An accumulator made inside an epoch belongs to a loop nested in it, which runs
    /// in order as part of that epoch: its variable lives in the epoch's own
    /// execution (a rollback re-runs the code that made it), so `op` applies at once.
    /// Deferred to the enclosing epoch's commit, it would run after the function
    /// owning the variable had returned.
    pub fn record(&self, op: impl FnOnce(&mut T) + Send + 'a) {
        let target = SendPtr(self.target);
        let busy = &self.busy;
        let apply = move || {
            let target = target;
            // SAFETY: `target` is valid for 'a (the `new` contract), and 'a outlives
            // this action.
            unsafe { apply_locked(busy, target.0, op) }
        };
        if self.nested {
            apply();
        } else {
            defer(apply, false);
        }
    }

    /// Applies `update` now if `record` would (outside speculation, or in a loop
    /// nested in an epoch), and returns `None`; else gives it back. Unlike `record`,
    /// `update` may borrow anything alive now: it runs before this returns.
    pub(crate) fn apply_now<F: FnOnce(&mut T)>(&self, update: F) -> Option<F> {
        if !self.nested && epoch::current().is_some() {
            return Some(update);
        }
        // SAFETY: `target` is valid for 'a (the `new` contract), and the accumulator
        // is alive.
        unsafe { apply_locked(&self.busy, self.target, update) };
        None
    }
}

/// Applies `update` to `*target` under the accumulator's `busy` flag.
///
/// # Safety
/// `target` must be valid for the call.
unsafe fn apply_locked<T>(busy: &AtomicBool, target: *mut T, update: impl FnOnce(&mut T)) {
    while busy
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
    /// Clears `busy` when the update returns or unwinds (an element's `clone` may
    /// panic, and a body may catch that and go on accumulating).
    struct Free<'b>(&'b AtomicBool);
    impl Drop for Free<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Release);
        }
    }
    let _free = Free(busy);
    // SAFETY: `busy` gives this update exclusive access; the caller's contract makes
    // `target` valid.
    update(unsafe { &mut *target });
}

struct SendPtr<T>(*mut T);
// SAFETY: the pointer is only dereferenced under the accumulator's `busy` flag.
unsafe impl<T: Send> Send for SendPtr<T> {}
