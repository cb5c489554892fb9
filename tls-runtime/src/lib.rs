//! Thread-level speculation for Rust.
//!
//! Take a sequential loop whose iterations *probably* do not depend on each other, mark
//! it `#[tls_loop]` (or call [`for_each`] / [`Loop::run`]), and its iterations run as
//! ordered speculative *epochs* on all cores, with exactly the sequential result.
//!
//! # How it works, file by file
//!
//! - [`Spec`], [`SpecVec`], [`SpecMap`], [`SpecMemory`] (`memory/`) are the speculative
//!   data. Each tracked location is a `memory::slot::Slot`: the committed value, the
//!   uncommitted versions written by epochs in flight (lazy versioning: writes are
//!   buffered per epoch and applied at commit), and records of which epochs read it and
//!   which version they saw. A read sees the epoch's own write, else the newest write of
//!   an earlier epoch (forwarding), else the committed value. Reads and writes of a
//!   location are serialized by the slot's spin lock, so a write by an earlier epoch and
//!   a read by a later one can never miss each other: the writer finds the reader's
//!   record and *violates* it. Outside any loop, a write is one uncontended lock, and
//!   a read of a small value without drop glue takes no lock at all: the lock word is
//!   also a sequence count, so the reader copies the value and keeps the copy if no
//!   lock holder came in between (about 1 to 2 ns here).
//! - `epoch.rs` numbers epochs ([`Loop`] serial + index), keeps each in-flight epoch's
//!   padded violation word in the loop's ring, and holds the running epoch's context
//!   (segment, write log, undo log, commit-time log) in a thread-local. A violated epoch
//!   learns of it at its next access or checkpoint and unwinds to the runner.
//! - `scheduler/` schedules: each participating thread commits what it can (the
//!   homefree epoch, and the finished ones after it; `commit.rs`), claims the next
//!   epoch (`claim.rs`; a window of `rules::EPOCHS_PER_THREAD`, four, per thread may be
//!   in flight), runs it (`attempt.rs`), and *publishes* it when its body ends, without
//!   waiting to become homefree (an epoch that is homefree and unviolated when it ends
//!   commits at once on its own thread instead). Whoever holds the commit watermark
//!   commits: versions become committed values and `on_commit` actions run, in epoch
//!   order, interleaved as the iteration made them (`memory/log.rs`). The commit takes
//!   the locks of the epoch's written slots in address order and checks, holding
//!   them, that plain code or another loop did not violate the epoch meanwhile; if one
//!   did, the epoch rolls back and runs again. A violation noticed while an epoch runs
//!   rolls it back at once; one that hits a finished epoch is handled by re-running
//!   it when it becomes homefree.
//!   Rollback (`rollback.rs`) goes back only to the start of the *sub-thread segment*
//!   in which the violated load happened (`checkpoint!()` splits a body into segments;
//!   the runtime keeps a snapshot of the state at each checkpoint), running undo
//!   actions newest first and discarding the segment's writes. A panic in a
//!   speculative epoch waits: if the epoch is violated it was a zombie and re-runs; if
//!   it becomes homefree the panic is real and reaches the caller after later epochs
//!   are squashed. `break` / `return` end the loop the same way.
//! - `loop_builder.rs` holds the [`Loop`] builder; `run.rs` chooses how a loop runs
//!   ([`Loop::run`], [`for_each`]) and holds the in-order path (one thread,
//!   `TLS_MODE=sequential`, loops nested in an epoch or in an iteration run in order);
//!   `parallel.rs` runs it
//!   speculatively: workers, site and trace made ready, the scheduler, the report.
//! - `live_loops.rs` registers every running speculative loop, so that a change of a
//!   committed value made outside a loop (plain code, another loop's commit) can
//!   violate that loop's readers. `memory/consume.rs` handles containers dropped or
//!   consumed while epochs hold versions of them; `memory/nesting.rs` the accesses
//!   made from inside another access's closure.
//! - `escape.rs` runs calls non-speculatively ([`escape()`]) with undo actions
//!   ([`on_violation()`]); `deferred.rs` delays work to commit ([`on_commit()`],
//!   [`Accumulator`]); `homefree.rs` ends speculation for the rest of an iteration
//!   ([`when_homefree`], [`scope`]: threads started by an iteration).
//! - `adapt/` groups very short iterations into one epoch (`chunk.rs`: about 10 us an
//!   epoch, 80 us while the site has never rolled back), and turns
//!   speculation off for a loop site ([`LoopSite`], `site.rs`) when its epochs mostly
//!   roll back or its threads' committed work does not beat in-order execution
//!   (judged per `window.rs` from each thread's `votes.rs`), probing it again later
//!   with exponential backoff (a stretch in order lasts at most 100 ms, so a verdict
//!   taken while the machine was disturbed does not outlive the disturbance for
//!   long), so a loop with a true dependence chain runs at about
//!   the speed of the plain loop; the scheduler then runs the site's in-order
//!   stretches (`scheduler/in_order.rs`). A load that violates most epochs is
//!   *synchronized* (`synced.rs`): epochs wait there until the epoch its violating
//!   stores came from has committed (for a chain, the one before: until homefree)
//!   instead of reading early and rolling back ([`LoopReport::synchronized`]).
//! - `workers.rs` is the persistent pool: workers spin while loops run and for a short
//!   while after, then park; a caller no worker has joined after 100 us moves them off
//!   its CPU, where the kernel may have queued them behind it. `report.rs` collects what each loop did
//!   ([`last_report`]); `sink.rs` and `trace.rs` write `TLS_REPORT` JSON and the
//!   `TLS_TRACE` timeline at exit (`json.rs` quotes their strings); `advice.rs` names
//!   the fix for each dependence of a report; `profile/` is `TLS_MODE=profile`, its
//!   speedup model and the gain it predicts for each fix (`profile/advise.rs`). `rules.rs` holds the scheduling rules
//!   the model mirrors (window per thread, chunking, the "a quarter" rollback rule).
//! - `inject.rs` violates speculative epochs on purpose ([`inject_violations`]), so
//!   tests can check a loop body against conflicts that real runs make rare.
//! - `config.rs` reads the environment, `control.rs` has [`Control`] and [`Step`],
//!   `sync.rs` the primitives the protocol is written against (loom's under
//!   `--cfg loom`; see `loom_tests.rs`).

//! # The contract
//!
//! The final state of speculative data, the loop's outcome (`break`, `return`, panic)
//! and the order of commit-time actions equal those of the sequential loop, whatever
//! the thread count. Code that is not speculative (plain statics, I/O, atomics) must go
//! through [`escape()`] or [`on_commit()`]; data read by one iteration and written by
//! another must live in speculative containers.
//!
//! Items must be `Clone` and the state carried across a checkpoint `Clone + Send`: an
//! epoch re-runs from a copy, possibly on another thread. Rollback unwinds the epoch's
//! stack, so the crate needs `panic = "unwind"` (the default). A body that catches
//! panics with `catch_unwind` and so stops a rollback's unwinding gets its attempt
//! re-run once every earlier iteration has committed (see the book's guarantees
//! chapter).
//!
//! **Containers made inside an iteration** behave as in the sequential loop: an epoch
//! may create a `Spec` or `SpecVec`, write it, run a loop over it, consume it with
//! `into_inner` / `into_vec` (getting the values it wrote) or drop it. Until its next
//! checkpoint such a container is private to the epoch and its accesses cost no
//! tracking. Containers may hold containers (`SpecVec<Option<Arc<Spec<T>>>>`): a
//! container that goes away while other epochs hold versions of it violates them, and
//! its memory is kept until their loops end, so nothing dangles.
//!
//! **Data shared with other threads.** Outside any loop a speculative container
//! behaves like a value behind a lock: each access (`get`, `set`, one `update`) is
//! atomic. That stays true when loops run at the same time on the same data, or a loop
//! and plain threads: each epoch's writes become visible when it commits, and a commit
//! elsewhere (or a plain write) that changes a value an epoch read violates that epoch,
//! so no update is lost. An epoch's reads of locations it did not write are validated
//! until its commit starts, or, for the oldest (homefree) epoch, until its first write:
//! there it commits what it did so far and from then on runs as plain code does. A
//! change after that orders after the epoch, as it would for plain code. So an
//! iteration is not a transaction against other threads: only each access is atomic
//! against them, and a read-modify-write written as two accesses (`let x = s.get();
//! s.set(x + 1)`) races with another loop's as it does between plain threads,
//! whether or not speculation happened to isolate it in a given run. Use one
//! `update` for a change that must be atomic.
//!
//! **Nested accesses.** An `update` or `with` closure may access other speculative
//! locations. A speculative epoch that would wait for a location while its closure
//! holds another gives way (rolls back and runs again; the second time, it re-runs
//! once it is the oldest, homefree, epoch); plain code and the homefree
//! epoch wait, as they would on two `Mutex`es. Accessing a location from inside its
//! own closure (`v.update(i, |x| *x += v.get(i))`) panics, in every mode, with a
//! message saying what to write instead.
//!
//! **Escapes** are re-entrant on their own thread: an escaped function may call itself
//! or run a speculative loop whose body calls it (that loop runs in order).
//!
//! **Panics** end the loop exactly where the sequential loop ends. A panicking
//! iteration keeps the speculative writes it made before the panic, including what an
//! `update` closure changed before it panicked. A commit-time action runs after the
//! iteration's writes that came before it and before those that came after; if it
//! panics (an `on_commit` action, or an accumulation such as `total += x` that
//! overflows), the iteration's later writes are discarded and that panic reaches the
//! caller.
//!
//! **Zombies** (epochs running on stale data) are rolled back at their next tracked
//! access, checkpoint or poll (the macro makes loops in the body poll). A zombie that
//! reaches none of these (pure computation that never ends, in a function the macro
//! does not see) is not contained: the loop cannot end before it does, since the body
//! borrows the caller's data (the loop cannot return while the epoch still runs) and
//! safe code cannot stop a thread. The wait is loud: after `TLS_ZOMBIE_WARN_MS` (2 s)
//! a watchdog thread names the epoch on stderr, whichever thread the zombie holds
//! (the caller's included), and the loop counts it in
//! [`LoopReport::stuck_zombies`]. The remedy is a [`poll`] in such loops. A stack overflow
//! caused by stale data aborts the process like any stack overflow; keep recursion
//! that depends on speculative data bounded, or give it a `poll`.
//!
//! **A loop's items iterator** must not touch speculative data: items are taken ahead
//! of the iterations that would change what it reads (`(0..n).take_while(|&i|
//! !stop.get(i))` with the body setting `stop`). Such an access panics, with a message
//! saying so, in every mode and before any item runs; compute the condition in the
//! body and `break`, or collect the items before the loop. (A nested loop inside an
//! epoch, or inside an iteration run in order, runs in order as part of that
//! iteration, with no report of its own: its iterator may read what it likes.)
//!
//! **Threads started by an iteration** go through [`scope`] ([`std::thread::scope`]
//! once every earlier iteration has committed) or [`when_homefree`] (any call, such as
//! a library with threads of its own): the iteration commits what it did so far and
//! runs the rest as plain code, so its threads read and write speculative data as the
//! sequential loop's would, once. Threads started any other way and writing
//! speculative data are **not supported, and detected only in part**: their writes
//! are not the epoch's, so they are not held back until it commits and a rollback does
//! not undo them. `#[tls_loop]` refuses a body that calls `thread::spawn`,
//! `thread::scope`, `thread::Builder::new().spawn(..)` or `rayon::spawn`,
//! `rayon::scope`, `rayon::join`, written with their module path (also where the
//! threads would only read); it reads syntax, so a bare name brought in by `use`, a
//! call inside another macro's arguments, a thread started in a function the body
//! calls, or in a closure given to [`Loop::run`] or [`for_each`], is not detected.
//! (The check skips the closures given to `on_commit`, `escape`, `on_violation`,
//! `when_homefree` and `tls_runtime::scope`.)

/// Writes the runtime's own message to standard error, dropping it when standard
/// error cannot be written (a closed pipe: `prog 2>&1 | head` after `head` ended).
/// `eprintln!` panics there, and a panic in a worker, a watchdog or a commit would
/// leave the loop waiting for a thread that is gone.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// [`say!`] without the line end (a report or summary that ends its own lines).
macro_rules! say_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod adapt;
mod advice;
mod config;
mod control;
mod cpu_clock;
mod deferred;
mod epoch;
mod escape;
mod homefree;
mod inject;
mod json;
mod live_loops;
mod loop_builder;
mod macro_support;
mod memory;
mod panic_hook;
mod parallel;
mod profile;
mod report;
mod rules;
mod run;
mod scheduler;
mod sink;
mod sync;
mod trace;
mod workers;

#[cfg(all(test, loom))]
mod loom_tests;

pub use adapt::LoopSite;
pub use advice::{Advice, AdviceKind};
pub use config::{MAX_THREADS, Mode, default_threads, mode};
pub use control::{Control, LoopOutcome, Step};
pub use deferred::{Accumulator, on_commit};
pub use escape::{EscapeLock, escape, escape_checked, is_speculative, on_violation};
pub use homefree::{scope, when_homefree};
pub use inject::inject_violations;
pub use loop_builder::Loop;
pub use memory::{LINE_SIZE, Spec, SpecMap, SpecMemory, SpecVec};
pub use profile::PREDICTED_CORES;
pub use report::{Dependence, LoopReport, RunMode, SourceLocation, SyncedLoad, last_report};
pub use run::{for_each, poll};
/// Runs a function's loop as ordered speculative epochs, with the sequential result.
///
/// Put it on a function or method. Its one outermost `for` loop runs as epochs, one
/// iteration each (or a few very short ones grouped into one); with several `for`
/// loops, mark the ones to run so with an inner `#[tls_loop]` and the outer attribute
/// consumes it. The body stays the sequential code:
///
/// - it reads and writes speculative containers ([`Spec`], [`SpecVec`], [`SpecMap`],
///   [`SpecMemory`]), which the runtime tracks; a later iteration that read something
///   an earlier one then wrote is rolled back and re-run;
/// - it reads the function's parameters and locals freely (shared between epochs, so
///   they must be `Sync`); `x += e` (and `-=`, `*=`, `|=`, ...) on an outer local is an
///   *accumulation*, applied at each epoch's commit, in loop order;
/// - `break`, `continue`, `return` and `?` mean what they mean in the sequential loop:
///   the loop ends where the sequential one would, later epochs are squashed;
/// - [`checkpoint!()`](checkpoint) statements at the top level of the body split it
///   into segments, so that a violation re-runs only from the segment of the load;
/// - calls that change state the runtime does not track go through [`escape`](macro@escape) (with
///   an undo) or [`on_commit`](macro@on_commit); threads only inside [`when_homefree`] or [`scope`].
///
/// The build refuses, with an error at the offending expression, what would break the
/// sequential result: assigning an outer variable other than by accumulation, a
/// `&mut` borrow of one (the loop body cannot hold a `&mut` the other epochs also
/// need), an accumulated variable read inside the loop, a thread started in the body,
/// a checkpoint inside a nested block, a carried local that is not `Clone`.
///
/// Options: `name = "..."` (the loop's name in reports), `threads = <usize expr>` (the
/// caller included; `1` runs it in order), `chunk = <int>` (iterations per epoch;
/// chosen by the runtime when absent), `site = <&'static LoopSite expr>` (where the
/// loop keeps what it learns about itself: by default one `static` per loop; a
/// function whose loop behaves differently for different callers can take one per
/// caller). `site` is evaluated each time the loop starts, where the loop is, after
/// its items: it may use the function's parameters, not a variable the loop consumes
/// or accumulates into. On a function with several marked loops it is refused (they
/// would share one site); put it on each loop's own attribute. The other options of
/// the function's attribute are the defaults of its marked loops, except that its
/// `name` is numbered for each of several marked loops without a name of its own, by
/// the loop's position among the marked loops (`"passes #1"`, `"passes #3"` when the
/// second has its own name), so that each has its own entry in the reports.
///
/// A `#[tls_loop]` function called from inside another loop's iteration runs its
/// loop in order, as part of that iteration's epoch (its accumulations update its
/// own locals at once).
///
/// ```
/// use tls_runtime::{SpecVec, tls_loop};
///
/// /// Ships each order from stock, restocking an item that runs short.
/// #[tls_loop(name = "ship", threads = 2)]
/// fn ship(stock: &SpecVec<u32>, orders: &[(usize, u32)]) -> u64 {
///     let mut shipped = 0u64;
///     for &(item, qty) in orders {
///         let mut have = stock.get(item);
///         if have < qty {
///             have += 100;
///         }
///         stock.set(item, have - qty);
///         shipped += u64::from(qty); // an accumulation
///     }
///     shipped
/// }
///
/// let stock = SpecVec::from(vec![50u32; 4]);
/// assert_eq!(ship(&stock, &[(1, 30), (1, 30), (2, 10)]), 70);
/// assert_eq!((stock.get(1), stock.get(2)), (90, 40));
/// ```
///
/// The book's chapters "Annotating a loop" and "Reading the report" go further; the
/// function form of the same thing is [`for_each`] and [`Loop::run`].
#[doc(inline)]
pub use tls_macros::tls_loop;
pub use workers::start_workers;

/// A sub-thread checkpoint: `checkpoint!();` as a statement at the top level of a
/// [`tls_loop`] body.
///
/// The body is split there into segments. A violation rolls the epoch back only to
/// the start of the segment in which the violated load ran, so put a checkpoint before
/// a conflicting access that comes late in a long iteration. Locals used after the
/// checkpoint are carried across it (the runtime keeps a clone to restart from), so
/// they must be `Clone`. Anywhere else (a nested block, a function without
/// `#[tls_loop]`) it is a compile error.
///
/// ```
/// use tls_runtime::{Spec, checkpoint, tls_loop};
///
/// fn long_private_work(x: u64) -> u64 {
///     (0..1000).fold(x, |h, i| h.wrapping_mul(31).wrapping_add(i))
/// }
///
/// #[tls_loop(threads = 2)]
/// fn total(xs: &[u64], sum: &Spec<u64>) {
///     for &x in xs {
///         let v = long_private_work(x); // re-run only if a load before here violates
///         checkpoint!();
///         sum.set(sum.get().wrapping_add(v)); // every epoch conflicts here, late
///     }
/// }
///
/// let sum = Spec::new(0);
/// total(&[1, 2, 3, 4], &sum);
/// let want = [1, 2, 3, 4].iter().fold(0u64, |s, &x| s.wrapping_add(long_private_work(x)));
/// assert_eq!(sum.get(), want);
/// ```
#[doc(inline)]
pub use tls_macros::checkpoint;

/// Runs a function for real, outside speculation, even when a speculative epoch
/// calls it: for calls that change state the runtime does not track (a buffer pool's
/// pin counts, an allocator, a lock table).
///
/// Calls of one escaped function are serialized with each other. An escaped call
/// reads speculative containers' committed values (not the calling iteration's own
/// writes so far) and writes them at once, like plain code; pass it what it needs
/// from the iteration as arguments. Pair it with [`on_violation`](macro@on_violation) to say how to take
/// the call back if the epoch is rolled back past it. `#[escape(check = f)]` first
/// calls `f` with the arguments by reference: an argument computed from stale data
/// that fails the check makes the epoch wait for its rollback instead of calling
/// with garbage. The return value must be `Clone + Send + 'static` (the undo gets a
/// copy). Outside a loop, or in an epoch that is already homefree, the function just
/// runs.
///
/// ```
/// use std::sync::Mutex;
/// use tls_runtime::{SpecVec, escape, on_violation, tls_loop};
///
/// /// Free slots of a pool: ordinary state, not speculative.
/// static FREE: Mutex<Vec<u32>> = Mutex::new(Vec::new());
///
/// fn give_back(slot: &u32) {
///     FREE.lock().unwrap().push(*slot);
/// }
///
/// #[escape]
/// #[on_violation(give_back)]
/// fn take_slot() -> u32 {
///     FREE.lock().unwrap().pop().expect("a free slot")
/// }
///
/// #[tls_loop(threads = 2)]
/// fn assign(owner: &SpecVec<u32>, n: usize) {
///     for i in 0..n {
///         owner.set(i, take_slot());
///     }
/// }
///
/// FREE.lock().unwrap().extend(0..10);
/// let owner = SpecVec::from(vec![u32::MAX; 4]);
/// assign(&owner, 4);
/// let mut taken: Vec<u32> = (0..4).map(|i| owner.get(i)).collect();
/// taken.sort();
/// taken.dedup();
/// assert_eq!(taken.len(), 4); // each slot taken once, none lost to a rollback
/// assert_eq!(FREE.lock().unwrap().len(), 6);
/// ```
///
/// The book's chapter "Calls that must run for real" has the buffer pool's case.
#[doc(inline)]
pub use tls_macros::escape;

/// The undo of an [`escape`](macro@escape)d function: `#[on_violation(undo)]`, where `undo` is a
/// path or a closure called with a reference to the escaped call's return value if
/// the calling epoch is rolled back past the call.
///
/// Undo actions run newest first, outside speculation, before the epoch re-runs; an
/// epoch that commits drops them. Put it under `#[escape]` (see the example there).
/// Without `#[escape]` it is a compile error: a speculative call has nothing to undo.
#[doc(inline)]
pub use tls_macros::on_violation;

/// Delays a call made from a speculative epoch until the epoch commits: for work
/// that cannot be undone but need not happen at once (releasing a latch, unpinning a
/// page, assigning a log sequence number, printing).
///
/// Epochs commit in loop order, so the delayed calls run in the order the sequential
/// loop made them; within an iteration, a delayed call runs after the writes that
/// came before it and before those after it. Its arguments must be `Send + 'static`
/// (they wait in the epoch's commit log); a rolled-back epoch's calls never run. If
/// one panics, the loop ends there, as the sequential loop would. Called outside any
/// loop, the function runs at once.
///
/// ```
/// use std::sync::Mutex;
/// use tls_runtime::{SpecVec, on_commit, tls_loop};
///
/// static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
///
/// #[on_commit]
/// fn log(line: String) {
///     LOG.lock().unwrap().push(line);
/// }
///
/// #[tls_loop(threads = 2)]
/// fn bump(counts: &SpecVec<u32>, items: &[usize]) {
///     for &i in items {
///         counts.set(i, counts.get(i) + 1);
///         log(format!("item {i}"));
///     }
/// }
///
/// let counts = SpecVec::from(vec![0u32; 3]);
/// bump(&counts, &[2, 0, 2]);
/// assert_eq!(*LOG.lock().unwrap(), ["item 2", "item 0", "item 2"]);
/// ```
#[doc(inline)]
pub use tls_macros::on_commit;

/// Support for the code the macros generate. Not a public interface.
#[doc(hidden)]
pub mod __private {
    pub use crate::deferred::{
        Accumulator, AppendInPlace, AppendToPart, Appending, Borrowed, CollectIterator, ExtendArg,
        KeepArg, KeepBorrow, KeepCopy, KeptBorrow, Merge,
    };
    pub use crate::escape::{EscapeLock, escape, escape_checked, on_violation};
    #[allow(unused_imports)]
    pub use crate::macro_support::*;
    pub use crate::run::poll;
    pub use crate::{Control, Loop, LoopOutcome, LoopSite, Step, on_commit};
}
