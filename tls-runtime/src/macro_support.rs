//! Helpers used only by the code the `tls-macros` attributes generate (traits whose
//! `#[diagnostic::on_unimplemented]` messages name the user's variable, print capture).
//!
//! Nothing here is a public interface: the items are reached only through
//! `tls_runtime::__private`, and their names are chosen so that when a requirement
//! fails, rustc's "required for ... to implement `Trait`" note reads as advice.

use crate::deferred::on_commit;
use core::convert::Infallible;
use core::ops::ControlFlow;

pub use crate::escape::is_speculative;

// ---------------------------------------------------------------------------------------
// Locals carried across `checkpoint!()`
// ---------------------------------------------------------------------------------------

/// A local carried across a `checkpoint!()`: the value plus the function that clones
/// it, captured where the local is carried so that a missing `Clone` is reported there
/// (naming the local) rather than on the loop's generated state type.
pub struct Carried<T> {
    value: T,
    clone: fn(&T) -> T,
}

impl<T> Clone for Carried<T> {
    fn clone(&self) -> Self {
        Carried {
            value: (self.clone)(&self.value),
            clone: self.clone,
        }
    }
}

/// A local that lives across a `checkpoint!()`: the runtime keeps a copy of it at the
/// checkpoint, so it must be `Clone`.
#[diagnostic::on_unimplemented(
    message = "a local of type `{Self}` lives across `checkpoint!()`, but `{Self}` is not `Clone`",
    label = "this local is carried across the checkpoint, so it must be `Clone`",
    note = "the runtime keeps a copy of every local that is used after a `checkpoint!()`, to re-run the next segment after a violation",
    note = "make the type `Clone`, finish using the local before the checkpoint, or carry something cloneable (an index, an `Arc`) instead"
)]
pub trait LocalCarriedAcrossCheckpointMustBeClone: Sized {
    /// Clones the carried local.
    fn carry_clone(&self) -> Self;
}

impl<T: Clone> LocalCarriedAcrossCheckpointMustBeClone for T {
    fn carry_clone(&self) -> Self {
        self.clone()
    }
}

/// Carries `value` across a checkpoint.
#[inline]
pub fn carry<T: LocalCarriedAcrossCheckpointMustBeClone>(value: T) -> Carried<T> {
    Carried {
        value,
        clone: T::carry_clone,
    }
}

/// Takes a carried local back at the start of the next segment.
#[inline]
pub fn uncarry<T>(carried: Carried<T>) -> T {
    carried.value
}

// ---------------------------------------------------------------------------------------
// `?` inside an epoch body
// ---------------------------------------------------------------------------------------

/// The value types `?` works on in a `#[tls_loop]` body (`Result`, `Option`).
#[diagnostic::on_unimplemented(
    message = "the `?` operator can only be applied to `Result` or `Option` in a `#[tls_loop]` body, not to `{Self}`",
    label = "`?` applied to `{Self}`"
)]
pub trait Branch {
    /// The value `?` evaluates to.
    type Output;
    /// What `?` returns early with.
    type Residual;
    /// Splits the value into "go on" and "return early".
    fn branch(self) -> ControlFlow<Self::Residual, Self::Output>;
}

impl<T, E> Branch for Result<T, E> {
    type Output = T;
    type Residual = Result<Infallible, E>;
    #[inline]
    fn branch(self) -> ControlFlow<Self::Residual, T> {
        match self {
            Ok(v) => ControlFlow::Continue(v),
            Err(e) => ControlFlow::Break(Err(e)),
        }
    }
}

impl<T> Branch for Option<T> {
    type Output = T;
    type Residual = Option<Infallible>;
    #[inline]
    fn branch(self) -> ControlFlow<Self::Residual, T> {
        match self {
            Some(v) => ControlFlow::Continue(v),
            None => ControlFlow::Break(None),
        }
    }
}

/// The function's return type, built from what `?` returns early with.
#[diagnostic::on_unimplemented(
    message = "`?` in a `#[tls_loop]` body cannot return `{Res}` from a function returning `{Self}`",
    label = "this `?` returns early from the function"
)]
pub trait FromResidual<Res> {
    /// Builds the early return value.
    fn from_residual(residual: Res) -> Self;
}

impl<T, E, F: From<E>> FromResidual<Result<Infallible, E>> for Result<T, F> {
    #[inline]
    fn from_residual(residual: Result<Infallible, E>) -> Self {
        match residual {
            Err(e) => Err(From::from(e)),
            Ok(never) => match never {},
        }
    }
}

impl<T> FromResidual<Option<Infallible>> for Option<T> {
    #[inline]
    fn from_residual(_: Option<Infallible>) -> Self {
        None
    }
}

/// `value?`, first half.
#[inline]
pub fn branch<T: Branch>(value: T) -> ControlFlow<T::Residual, T::Output> {
    value.branch()
}

/// `value?`, second half.
#[inline]
pub fn from_residual<R: FromResidual<Res>, Res>(residual: Res) -> R {
    R::from_residual(residual)
}

// ---------------------------------------------------------------------------------------
// Output inside an epoch body
// ---------------------------------------------------------------------------------------

/// Where delayed output goes.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Prints `text` (already formatted in the epoch, with a newline added when `newline`)
/// when the epoch commits, so output keeps the sequential order.
pub fn print_at_commit(stream: Stream, mut text: String, newline: bool) {
    if newline {
        text.push('\n');
    }
    // Through `print!` so that test harnesses capture the output as they would have.
    crate::deferred::on_commit_output(move || match stream {
        Stream::Stdout => print!("{text}"),
        Stream::Stderr => eprint!("{text}"),
    });
}

/// `write!(stdout(), ...)` in an epoch body: the text is delayed to commit and the
/// write reports success.
pub fn write_at_commit(stream: Stream, text: String, newline: bool) -> std::io::Result<()> {
    print_at_commit(stream, text, newline);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// `#[on_commit]` and `#[on_violation]`
// ---------------------------------------------------------------------------------------

/// An argument of an `#[on_commit]` function, moved into the delayed call.
#[diagnostic::on_unimplemented(
    message = "the arguments of an `#[on_commit]` function must be `Send + 'static`, and `{Self}` is not",
    label = "this argument is moved into a call that runs when the epoch commits",
    note = "pass owned data (`String`, `Vec<T>`, `Arc<T>`) or `&'static` references"
)]
pub trait OnCommitArgumentMustBeSendAndStatic: Send + 'static {}
impl<T: Send + 'static> OnCommitArgumentMustBeSendAndStatic for T {}

/// An argument checked to be `Send + 'static` where the user declared it, so that the
/// delayed call's closure needs no check of its own (which could only point at the
/// attribute).
pub struct CommitArg<T>(T);

// SAFETY: a `CommitArg<T>` is only built by `commit_arg`, which requires `T: Send`.
unsafe impl<T> Send for CommitArg<T> {}

/// Checks an `#[on_commit]` argument.
#[inline]
pub fn commit_arg<T: OnCommitArgumentMustBeSendAndStatic>(arg: T) -> CommitArg<T> {
    CommitArg(arg)
}

/// Takes a checked argument back inside the delayed call.
#[inline]
pub fn commit_arg_value<T>(arg: CommitArg<T>) -> T {
    arg.0
}

/// The delayed body of an `#[on_commit]` function (the receiver, if any, and the
/// arguments it did not bind by name travel in it unchecked by `commit_arg`).
#[diagnostic::on_unimplemented(
    message = "the arguments of an `#[on_commit]` function must be `Send + 'static`",
    label = "the arguments are moved into a call that runs when the epoch commits",
    note = "pass owned data (`String`, `Vec<T>`, `Arc<T>`) or `&'static` references"
)]
pub trait OnCommitArgumentsMustBeSendAndStatic: FnOnce() + Send + 'static {}
impl<F: FnOnce() + Send + 'static> OnCommitArgumentsMustBeSendAndStatic for F {}

/// Runs `call` at commit (at once outside speculation).
#[inline]
pub fn delay_call<F: OnCommitArgumentsMustBeSendAndStatic>(call: F) {
    on_commit(call)
}

/// The undo action of `#[on_violation(undo)]`: called with a reference to the escaped
/// call's return value if the epoch is rolled back past the call.
#[diagnostic::on_unimplemented(
    message = "the undo action of `#[on_violation]` must be callable as `FnOnce(&{R})` and be `Send + 'static`",
    label = "expected a function or closure taking `&{R}`",
    note = "`{R}` is the return type of the escaped function; the undo action runs on whichever thread rolls the epoch back, possibly after the call's borrows ended"
)]
pub trait UndoActionMustBeSendAndStatic<R>: FnOnce(&R) + Send + 'static {}
impl<R, F: FnOnce(&R) + Send + 'static> UndoActionMustBeSendAndStatic<R> for F {}

/// The return value of an escaped function with an undo action: kept (cloned) for the
/// undo action.
#[diagnostic::on_unimplemented(
    message = "an `#[on_violation]` function must return a `Clone + Send + 'static` value, and `{Self}` is not",
    label = "the undo action receives a copy of this return value",
    note = "return an owned handle (an id, an `Arc`) that the undo action can use later"
)]
pub trait EscapedReturnMustBeCloneSendStatic: Clone + Send + 'static {}
impl<T: Clone + Send + 'static> EscapedReturnMustBeCloneSendStatic for T {}

/// An undo action, checked where the user wrote it (unboxed: registered with its
/// kept value as one commit-time closure, it needs no allocation of its own).
pub struct Undo<F>(F);

/// Checks the undo action's type where the user wrote it.
#[inline]
pub fn undo_action<R, F>(_ret: &R, undo: F) -> Undo<F>
where
    F: FnOnce(&R) + UndoActionMustBeSendAndStatic<R>,
{
    Undo(undo)
}

/// A copy of the escaped call's return value, checked where the user wrote the return
/// type.
pub struct Kept<R>(R);

/// Keeps a copy of the return value for the undo action.
#[inline]
pub fn keep_for_undo<R: EscapedReturnMustBeCloneSendStatic>(ret: &R) -> Kept<R> {
    Kept(ret.clone())
}

/// Registers `undo` to run with the kept copy if the epoch is rolled back past the
/// escaped call.
#[inline]
pub fn undo_with<R: 'static, F: FnOnce(&R) + Send + 'static>(kept: Kept<R>, undo: Undo<F>) {
    let (Kept(kept), Undo(undo)) = (kept, undo);
    let kept = CommitArg(kept);
    // `kept` is `Send`: `Kept` is only built by `keep_for_undo`, which requires it.
    crate::escape::on_violation(move || {
        let kept = kept;
        undo(&kept.0)
    });
}

// ---------------------------------------------------------------------------------------
// Loop items
// ---------------------------------------------------------------------------------------

/// An item of a `#[tls_loop]` loop.
#[diagnostic::on_unimplemented(
    message = "the items of a `#[tls_loop]` loop must be `Clone + Send`, and `{Self}` is not",
    label = "an epoch rolled back to its start re-runs with a copy of its item, possibly on another thread",
    note = "iterate over indices or shared references (`0..v.len()`, `v.iter()`) and write through `Spec`, `SpecVec` or `SpecMap`"
)]
pub trait LoopItemMustBeCloneAndSend: Clone + Send {}
impl<T: Clone + Send> LoopItemMustBeCloneAndSend for T {}

/// The iterator of a `#[tls_loop]` loop.
#[diagnostic::on_unimplemented(
    message = "the iterator of a `#[tls_loop]` loop must be `Send`, and `{Self}` is not",
    label = "the threads that run epochs take items from this iterator",
    note = "collect the items into a `Vec` before the loop"
)]
pub trait LoopIteratorMustBeSend: Send {}
impl<T: Send> LoopIteratorMustBeSend for T {}

/// The items of a `#[tls_loop]` loop, checked where the user wrote the source: the
/// runtime's own `Clone + Send` requirements are met by construction, so a failure is
/// reported once, on the user's tokens.
pub struct EpochItems<It: Iterator> {
    iter: It,
    clone: fn(&It::Item) -> It::Item,
}

// SAFETY: an `EpochItems` is only built by `epoch_items`, which requires the iterator to
// be `Send`; the other field is a function pointer.
unsafe impl<It: Iterator> Send for EpochItems<It> {}

impl<It: Iterator> Iterator for EpochItems<It> {
    type Item = EpochItem<It::Item>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let clone = self.clone;
        self.iter.next().map(|value| EpochItem { value, clone })
    }

    /// The loop's own bound: automatic chunking evens its epochs out over a run of
    /// known length.
    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

/// One item of a `#[tls_loop]` loop (see [`EpochItems`]).
pub struct EpochItem<T> {
    value: T,
    clone: fn(&T) -> T,
}

impl<T> Clone for EpochItem<T> {
    fn clone(&self) -> Self {
        EpochItem {
            value: (self.clone)(&self.value),
            clone: self.clone,
        }
    }
}

// SAFETY: an `EpochItem` is only built by `EpochItems`, which only `epoch_items` builds,
// requiring the items to be `Send`.
unsafe impl<T> Send for EpochItem<T> {}

/// Checks the source of a `#[tls_loop]` loop where the user wrote it, and starts
/// iterating it (as the sequential `for` does, before the body runs).
#[inline]
pub fn epoch_items<I>(items: I) -> EpochItems<I::IntoIter>
where
    I: IntoIterator,
    I::Item: LoopItemMustBeCloneAndSend,
    I::IntoIter: LoopIteratorMustBeSend,
{
    EpochItems {
        iter: items.into_iter(),
        clone: <I::Item as Clone>::clone,
    }
}

/// The item an epoch runs with.
#[inline]
pub fn epoch_item<T>(item: EpochItem<T>) -> T {
    item.value
}

// ---------------------------------------------------------------------------------------
// Variables the loop body reads
// ---------------------------------------------------------------------------------------

/// A variable declared outside a `#[tls_loop]` loop and read by its body: epochs on
/// several threads read it at once.
#[diagnostic::on_unimplemented(
    message = "a variable read by a `#[tls_loop]` loop body must be `Sync`, and `{Self}` is not",
    label = "epochs on several threads read this variable at once",
    note = "keep data that iterations share in `Spec<T>`, `SpecVec<T>` or `SpecMap<K, V>`, or use a `Sync` type (an atomic, a `Mutex`) through `#[escape]`"
)]
pub trait VariableReadByEpochsMustBeSync: Sync {}
impl<T: Sync + ?Sized> VariableReadByEpochsMustBeSync for T {}

/// Checks a variable the loop body reads.
#[inline]
pub fn shared_with_epochs<T: VariableReadByEpochsMustBeSync + ?Sized>(_: &T) {}

// ---------------------------------------------------------------------------------------
// `#[escape(check = f)]`
// ---------------------------------------------------------------------------------------

/// What an `#[escape(check = f)]` function returns.
#[diagnostic::on_unimplemented(
    message = "the check of `#[escape(check = ...)]` must return `bool`, not `{Self}`",
    label = "`true` when the arguments are consistent and the call may be made"
)]
pub trait EscapeCheckMustReturnBool {
    /// The verdict.
    fn verdict(self) -> bool;
}

impl EscapeCheckMustReturnBool for bool {
    #[inline]
    fn verdict(self) -> bool {
        self
    }
}

/// The check's verdict.
#[inline]
pub fn verdict<T: EscapeCheckMustReturnBool>(value: T) -> bool {
    value.verdict()
}

/// The check of `#[escape(check = f)]` before the escaped call: whether the call may
/// be made (see `escape::check_arguments`). When not, the function returns
/// [`escape_skipped`] instead of making it.
#[inline]
pub fn escape_check(args_ok: impl FnOnce() -> bool) -> bool {
    crate::escape::check_arguments(args_ok)
}

/// What an `#[escape(check = f)]` function returns when its check refused the call in
/// a destructor whose attempt is being thrown away: nothing, for `()`; a function
/// that returns a value has none to give, and the process stops with a message.
#[cold]
pub fn escape_skipped<R>() -> R {
    crate::homefree::skipped("an `#[escape(check = ...)]` function")
}

/// The site a `#[tls_loop(site = ...)]` names, checked to be a `&'static LoopSite` at
/// the expression the user wrote.
#[inline]
pub fn site_ref(site: &'static crate::LoopSite) -> &'static crate::LoopSite {
    site
}
