//! Epochs: their numbering, the per-epoch violation signal, and the context of the
//! epoch running on this thread.
//!
//! An epoch is identified by a [`Tag`]: the loop's serial number in the high 32 bits and
//! the epoch's index in loop order in the low 32 bits. Tags of one loop compare in loop
//! order; records carrying another loop's serial are ignored by this loop.
//!
//! Each loop owns an [`EpochRing`] of padded [`ring::EpochSlot`]s, one per epoch that may be in
//! flight. A writer that violates epoch `j` lowers `j`'s `rollback_to` segment; `j` polls
//! its own slot (its own cache line) at every speculative access and checkpoint.
//!
//! `epoch/ring.rs` holds the ring and its slots, `epoch/current.rs` the thread's current
//! epoch (`current`, `CurrentGuard`) and the items iterator's mark (`MarkedItems`),
//! `epoch/signal.rs` the payloads an attempt unwinds to its runner with,
//! `epoch/spare.rs` the buffers recycled between epochs, `epoch/action.rs` the
//! closures an epoch keeps for its commit or its rollback, `epoch/tag.rs` the tags.

use crate::sync::{AtomicU64, Held, Ordering};
use core::cell::{Cell, RefCell};
use core::panic::Location;
use std::time::{Duration, Instant};
mod action;
mod current;
mod logs;
mod ring;
mod signal;
mod spare;
mod tag;
pub(crate) use action::Action;
pub(crate) use current::{CurrentGuard, MarkedItems, current, current_quiet};
pub(crate) use logs::{Deferred, Logs, Undo, WriteRecord};
pub(crate) use ring::{Cause, EpochRing, NOT_VIOLATED};
pub(crate) use signal::{AwaitHomefreeSignal, RollbackSignal};
pub(crate) use spare::{ACTION_LISTS, HELD_LISTS, SLOT_LISTS, SlotPtr, WRITE_LOGS};
pub(crate) use tag::{Tag, index_of, make_tag, serial_of};

/// The epoch doing a speculative access, as the slot needs to see it.
#[derive(Clone, Copy)]
pub(crate) struct Access<'a> {
    /// The accessing epoch.
    pub(crate) tag: Tag,
    /// Its current sub-thread segment.
    pub(crate) segment: u32,
    /// Its commit-time actions so far (see `EpochCx::generation`).
    pub(crate) generation: u32,
    /// The loop's epoch ring, to signal violations.
    pub(crate) ring: &'a EpochRing,
    /// A lower bound of the loop's commit watermark: records of epochs below it are dead.
    pub(crate) watermark: u64,
    /// How many accesses the epoch made before this one (for reports).
    pub(crate) ordinal: u32,
}

/// A slot as the write log sees it: whatever its value type, an epoch's logged
/// versions can be committed and discarded through it.
pub(crate) trait LoggedSlot {
    /// Takes the lock for a commit.
    fn lock(&self) -> Held;
    /// Takes the lock if it is free.
    fn try_lock(&self) -> Option<Held>;
    /// Releases the lock.
    fn unlock(&self, held: Held);
    /// Under the lock: applies the version `key` of `a`; the replaced value goes to
    /// `drops`.
    ///
    /// # Safety
    /// The caller holds the lock (`held`).
    unsafe fn apply(&self, held: Held, a: &Access<'_>, key: (Tag, u32, u32), drops: &mut Drops);
    /// Discards `a`'s versions from `from_segment` on (takes the lock itself); the
    /// discarded values go to `drops`.
    fn discard(&self, a: &Access<'_>, from_segment: u32, drops: &mut Drops);
}

/// Values replaced by a commit, dropped once the whole commit is done: dropping one
/// may drop a container, which must not happen under a lock, nor while a later record
/// of the same commit still points into it.
pub(crate) type Drops = Vec<Box<dyn Dropped>>;

/// Anything, as a boxed value to drop later.
pub(crate) trait Dropped {}
impl<T: ?Sized> Dropped for T {}

/// The context of the epoch attempt running on this thread. Lives on the running
/// thread's stack; only that thread touches it.
pub(crate) struct EpochCx {
    pub(crate) tag: Tag,
    pub(crate) index: u64,
    pub(crate) segment: Cell<u32>,
    homefree: Cell<bool>,
    /// [`PUBLISHED`] (homefree, and everything it did so far is committed,
    /// `memory::publish_prefix`: from here on it runs as plain code does and never
    /// rolls back) and [`SYNCED`]: one byte, so that a speculative read, which must
    /// look at both, pays one test for them.
    flags: Cell<u8>,
    watermark_cache: Cell<u64>,
    /// A rollback signal is unwinding: accesses made by destructors must not raise again.
    pub(crate) raising: Cell<bool>,
    /// When the signal now unwinding was raised: unwinding costs microseconds (see
    /// [`EpochCx::take_unwinding`]).
    raised_at: Cell<Option<Instant>>,
    /// Time the epoch's rollback signals spent unwinding, not yet counted.
    unwinding: Cell<Duration>,
    ordinal: Cell<u32>,
    /// Commit-time actions registered so far: a write after one creates a new version,
    /// so that the action sees at commit exactly the writes made before it.
    generation: Cell<u32>,
    ring: *const EpochRing,
    watermark: *const AtomicU64,
    pub(crate) writes: RefCell<Vec<WriteRecord>>,
    pub(crate) undo: RefCell<Vec<Undo>>,
    pub(crate) commits: RefCell<Vec<Deferred>>,
    /// A panic message held back because the epoch was speculative when it panicked.
    pub(crate) held_panic: RefCell<Option<String>>,
    /// A speculative load made while the attempt unwound from a panic, after an
    /// `on_commit` call the epoch had not run (a `Drop` reading speculative data):
    /// it could not wait for the call, so it may have read the value from before it,
    /// and the attempt counts for nothing (`memory::await_delayed_calls`).
    pub(crate) unwound_past_call: Cell<Option<&'static Location<'static>>>,
    /// The segment of each panic of the epoch reported to the program's hook, in
    /// order (a report is only made while the epoch is homefree and unviolated).
    pub(crate) reported: RefCell<Vec<u32>>,
    /// Panics the running attempt replays from an attempt that reported them and was
    /// then re-run homefree (see [`EpochCx::replay_reports_from`]): the hook skips
    /// them, so that the program's hook hears of each once.
    pub(crate) replayed_reports: Cell<u32>,
    /// The last escaped call's argument check refused it in a destructor during an
    /// unwinding (`escape::check_arguments`): the `on_violation` that follows has no
    /// call to undo.
    pub(crate) skipped_escape: Cell<bool>,
    /// In profile mode: what the epoch reads and writes, and when.
    pub(crate) profile: RefCell<Option<crate::profile::Recorder>>,
    pub(crate) profiling: Cell<bool>,
    /// Times this epoch gave way on a busy lock inside another access's closure
    /// (see `memory::nesting`).
    pub(crate) gave_way: Cell<u32>,
    /// The site's synchronized loads (looked at when [`SYNCED`] is set).
    pub(crate) synced: Option<&'static crate::adapt::SyncedLoads>,
    /// Waits at a load until an earlier epoch committed (`adapt::synced`), for the
    /// report.
    pub(crate) synced_waits: RefCell<Vec<LoadWait>>,
}

/// A wait at a load until an earlier epoch committed, as the report counts it.
#[derive(Clone, Copy)]
pub(crate) struct LoadWait {
    pub(crate) load: &'static Location<'static>,
    pub(crate) waited: Duration,
    /// How many epochs back the epoch waited for was (1: the one before, so until
    /// homefree).
    pub(crate) behind: u64,
    /// The wait took too long and the epoch re-runs once homefree.
    pub(crate) gave_up: bool,
    /// At a load after an `on_commit` call of the same epoch (else at a
    /// synchronized load).
    pub(crate) after_call: bool,
}

/// [`EpochCx`] flag: the epoch has published what it did and runs as plain code.
const PUBLISHED: u8 = 1;
/// [`EpochCx`] flag: the loop's site had synchronized loads when the epoch began (one
/// learned meanwhile applies from the next epoch on).
const SYNCED: u8 = 2;
/// [`EpochCx`] flag: the epoch holds a delayed call of the program's (`on_commit`)
/// that has not run yet. The call may write speculative data, and the sequential
/// program's later reads see what it wrote: the epoch's next speculative read waits
/// until it can run the call first (`memory::await_delayed_calls`).
const DELAYED: u8 = 4;

impl EpochCx {
    /// A fresh context for epoch `index` of a loop.
    pub(crate) fn new(tag: Tag, ring: &EpochRing, watermark: &AtomicU64) -> Self {
        EpochCx {
            tag,
            index: index_of(tag),
            segment: Cell::new(0),
            homefree: Cell::new(false),
            flags: Cell::new(if ring.synced().is_some_and(|s| s.active()) {
                SYNCED
            } else {
                0
            }),
            watermark_cache: Cell::new(0),
            raising: Cell::new(false),
            raised_at: Cell::new(None),
            unwinding: Cell::new(Duration::ZERO),
            ordinal: Cell::new(0),
            generation: Cell::new(0),
            ring,
            watermark,
            writes: RefCell::new(Vec::new()),
            undo: RefCell::new(Vec::new()),
            commits: RefCell::new(Vec::new()),
            held_panic: RefCell::new(None),
            unwound_past_call: Cell::new(None),
            skipped_escape: Cell::new(false),
            reported: RefCell::new(Vec::new()),
            replayed_reports: Cell::new(0),
            profile: RefCell::new(None),
            profiling: Cell::new(false),
            gave_way: Cell::new(0),
            synced: ring.synced(),
            synced_waits: RefCell::new(Vec::new()),
        }
    }

    pub(crate) fn ring(&self) -> &EpochRing {
        // SAFETY: the loop that owns the ring outlives every epoch context it creates.
        unsafe { &*self.ring }
    }

    fn watermark(&self) -> &AtomicU64 {
        // SAFETY: as for `ring`.
        unsafe { &*self.watermark }
    }

    /// Whether the epoch is known to be homefree (all earlier epochs committed).
    #[inline]
    pub(crate) fn homefree(&self) -> bool {
        self.homefree.get()
    }

    /// Whether every epoch `behind` or more before this one had committed at the last
    /// refresh of the watermark (`behind` 1: homefree).
    #[inline]
    pub(crate) fn committed_behind(&self, behind: u64) -> bool {
        self.homefree() || self.watermark_cache.get().saturating_add(behind) > self.index
    }

    /// Refreshes the cached watermark and raises a pending violation; notices when the
    /// epoch becomes homefree.
    ///
    /// The violation check comes after the `Acquire` load of the watermark, so an epoch
    /// that finds itself homefree has seen every violation its predecessors raised: it
    /// never acts as homefree (running commit-time actions at once, skipping undo) on
    /// stale reads.
    #[inline]
    fn refresh(&self) {
        let w = self.watermark().load(Ordering::Acquire);
        self.watermark_cache.set(w);
        if self.ring().slot(self.index).pending(Ordering::Acquire) != NOT_VIOLATED {
            self.raise_violation();
            return;
        }
        if w == self.index {
            self.homefree.set(true);
        }
    }

    /// Moves the epoch's logs out (it finished; another thread may commit it).
    pub(crate) fn take_logs(&self) -> Logs {
        let logs = Logs {
            writes: self.writes.take(),
            undo: self.undo.take(),
            commits: self.commits.take(),
            held_panic: self.held_panic.take(),
            reported: self.reported.take(),
            published: self.published(),
        };
        self.recount_delayed_calls();
        logs
    }

    /// Moves logs taken by `take_logs` back in.
    pub(crate) fn put_logs(&self, logs: Logs) {
        *self.writes.borrow_mut() = logs.writes;
        *self.undo.borrow_mut() = logs.undo;
        *self.commits.borrow_mut() = logs.commits;
        *self.held_panic.borrow_mut() = logs.held_panic;
        *self.reported.borrow_mut() = logs.reported;
        let f = self.flags.get();
        self.flags.set(if logs.published {
            f | PUBLISHED
        } else {
            f & !PUBLISHED
        });
        self.recount_delayed_calls();
    }

    /// How many epochs are still to commit before this one, as last seen.
    #[inline]
    pub(crate) fn distance_from_homefree(&self) -> u64 {
        self.index.saturating_sub(self.watermark_cache.get())
    }

    /// Whether the epoch has published what it did (and runs as plain code), or its
    /// loads may have to wait ([`EpochCx::synced`]): the one test a speculative read
    /// makes for both.
    #[inline]
    pub(crate) fn loads_need_care(&self) -> bool {
        self.flags.get() != 0
    }

    /// Whether the epoch holds a delayed call of the program's that has not run yet
    /// (see [`DELAYED`]).
    #[inline]
    pub(crate) fn delayed_call_pending(&self) -> bool {
        self.flags.get() & DELAYED != 0
    }

    /// Sets [`DELAYED`] from the commit-time actions the epoch holds now (after they
    /// changed: taken by a commit, cut by a rollback, moved in or out).
    pub(crate) fn recount_delayed_calls(&self) {
        let pending = self
            .commits
            .try_borrow()
            .is_ok_and(|c| c.iter().any(|d| d.touches_data));
        let f = self.flags.get() & !DELAYED;
        self.flags.set(if pending { f | DELAYED } else { f });
    }

    /// Whether the epoch has published what it did and now runs as plain code.
    #[inline]
    pub(crate) fn published(&self) -> bool {
        self.flags.get() & PUBLISHED != 0
    }

    /// Notes that everything the epoch did so far is committed.
    pub(crate) fn set_published(&self) {
        self.flags.set(self.flags.get() | PUBLISHED);
    }

    /// Marks the epoch homefree (the runner saw the watermark reach it).
    pub(crate) fn set_homefree(&self) {
        self.homefree.set(true);
        self.watermark_cache.set(self.index);
    }

    /// The start of every speculative access: raises a pending violation (unwinding to
    /// the epoch runner) and describes the epoch to the location.
    #[inline]
    pub(crate) fn begin_access(&self) -> Access<'_> {
        self.check_violation();
        let ordinal = self.ordinal.get();
        self.ordinal.set(ordinal.wrapping_add(1));
        // The accesses made before this one: the epoch's first access is access 0,
        // as profile mode counts it (it was 1 here, 0 there, for the same load).
        Access {
            ordinal,
            ..self.access()
        }
    }

    /// Speculative accesses the epoch made so far (its attempts together).
    pub(crate) fn accesses(&self) -> u32 {
        self.ordinal.get()
    }

    /// The epoch as a location sees it, without any check.
    #[inline]
    pub(crate) fn access(&self) -> Access<'_> {
        Access {
            tag: self.tag,
            segment: self.segment.get(),
            generation: self.generation.get(),
            ring: self.ring(),
            watermark: self.watermark_cache.get(),
            ordinal: self.ordinal.get(),
        }
    }

    /// Whether the epoch is violated (`Some(false)`), or homefree and not violated
    /// (`Some(true)`), or neither yet; never unwinds (for code that runs while the
    /// thread unwinds already).
    pub(crate) fn settled(&self) -> Option<bool> {
        if self.ring().slot(self.index).pending(Ordering::Acquire) != NOT_VIOLATED {
            return Some(false);
        }
        if self.homefree.get() {
            return Some(true);
        }
        let w = self.watermark().load(Ordering::Acquire);
        self.watermark_cache.set(w);
        if w == self.index {
            self.homefree.set(true);
            // A violation raised before the last commit is visible after the
            // `Acquire` load of the watermark.
            return Some(self.ring().slot(self.index).pending(Ordering::Acquire) == NOT_VIOLATED);
        }
        None
    }

    /// Unwinds to the epoch runner if a violation is pending (at every access,
    /// checkpoint and poll).
    ///
    /// A homefree epoch no longer reads the watermark, but it still looks at its own
    /// violation word: plain code or another loop may change data it read (see
    /// `live_loops`), and until its commit it can still roll back.
    #[inline]
    pub(crate) fn check_violation(&self) {
        if self.raising.get() || self.published() {
            return;
        }
        if !self.homefree.get() {
            crate::inject::maybe_violate(self);
            self.refresh();
        } else if self.ring().slot(self.index).pending(Ordering::Relaxed) != NOT_VIOLATED {
            self.raise_violation();
        }
    }

    /// Rolls the epoch back for the violation recorded in its slot, unless a panic
    /// unwinds this thread: a `Drop` of the body's that touches speculative data
    /// while the iteration's own panic unwinds (one the stale data caused, or a real
    /// one) would abort the process by unwinding again. Then the access goes on, and
    /// the violation stays recorded: the attempt is thrown away and re-run when its
    /// runner has caught the panic (`Shared::settle`).
    #[cold]
    fn raise_violation(&self) {
        if !std::thread::panicking() {
            self.raise(RollbackSignal);
        }
    }

    /// Violates this epoch at its current segment, as a write by an earlier epoch
    /// would (violation injection, `inject.rs`).
    pub(crate) fn violate_self(&self, cause: Cause) {
        self.ring().violate(self.tag, self.segment.get(), cause);
    }

    /// Forgets the reports of panics made in segment `from` or later, which a
    /// rollback to `from` undoes; `replay`: the re-run replays them (a re-run once
    /// homefree of an attempt that read nothing stale before them: the same code runs
    /// on the same data up to each), so its hook skips that many. After a violation
    /// (by plain code or another loop, the only one a homefree epoch can meet) the
    /// re-run's panics are new and are reported.
    pub(crate) fn replay_reports_from(&self, from: u32, replay: bool) {
        let mut reported = self.reported.borrow_mut();
        let kept = reported.iter().filter(|&&s| s < from).count();
        let undone = (reported.len() - kept) as u32;
        reported.truncate(kept);
        self.replayed_reports.set(if replay { undone } else { 0 });
    }

    /// Unwinds to the epoch runner with `signal`.
    pub(crate) fn raise<S: Send + 'static>(&self, signal: S) -> ! {
        self.raising.set(true);
        self.raised_at.set(Some(Instant::now()));
        std::panic::resume_unwind(Box::new(signal))
    }

    /// The runner caught the signal [`EpochCx::raise`] unwound (or a panic): ends the
    /// unwinding's clock, if one was raised. One clock read per rollback, none per
    /// access.
    pub(crate) fn caught(&self) {
        self.raising.set(false);
        if let Some(at) = self.raised_at.take() {
            self.unwinding.set(self.unwinding.get() + at.elapsed());
        }
    }

    /// Time rollback signals spent unwinding from the access that raised them to the
    /// epoch's runner since the last call: the fixed cost of each rollback, several
    /// microseconds on some machines, measured for the report and the speedup model.
    pub(crate) fn take_unwinding(&self) -> Duration {
        self.unwinding.replace(Duration::ZERO)
    }

    /// In profile mode, notes an access to the location at `addr`, made at `site`.
    #[inline]
    pub(crate) fn note(&self, addr: usize, write: bool, site: &'static Location<'static>) {
        if self.profiling.get()
            && let Ok(mut p) = self.profile.try_borrow_mut()
            && let Some(p) = p.as_mut()
        {
            p.access(addr, write, site);
        }
    }

    /// Whether the epoch has written no version of its own (its writes so far, if
    /// any, were made in place).
    #[inline]
    pub(crate) fn holds_no_versions(&self) -> bool {
        self.writes.try_borrow().is_ok_and(|w| w.is_empty())
    }

    /// Logs a new version of `slot` written by the access `a`.
    #[inline]
    pub(crate) fn log_write(&self, slot: *const dyn LoggedSlot, a: &Access<'_>) {
        let mut writes = self.writes.borrow_mut();
        if writes.capacity() == 0 {
            *writes = WRITE_LOGS.take();
        }
        writes.push(WriteRecord {
            slot,
            segment: a.segment,
            generation: a.generation,
        });
    }

    /// Removes the records of the slots at addresses `start..end` from the write log
    /// (a container the epoch wrote is going away), keeping each commit-time action
    /// between the same writes: its `writes_before` counts records, so it drops by the
    /// number of removed records that came before it. Without that, the action would
    /// run after writes the iteration made after it (or past the end of the log).
    pub(crate) fn forget_writes_in(&self, start: usize, end: usize) {
        let mut writes = self.writes.borrow_mut();
        let mut commits = self.commits.borrow_mut();
        // Actions are in registration order, so their `writes_before` never decrease.
        let mut next = 0;
        let mut removed = 0;
        let mut index = 0;
        writes.retain(|w| {
            while next < commits.len() && commits[next].writes_before <= index {
                commits[next].writes_before -= removed;
                next += 1;
            }
            index += 1;
            let a = w.slot.cast::<()>() as usize;
            let gone = start <= a && a < end;
            removed += usize::from(gone);
            !gone
        });
        for d in &mut commits[next..] {
            d.writes_before -= removed;
        }
    }

    /// Registers `run` to undo something the epoch did (see [`Undo`]).
    pub(crate) fn register_undo(&self, run: Action) {
        let after_actions = self.commits.borrow().len();
        self.undo.borrow_mut().push(Undo {
            segment: self.segment.get(),
            after_actions,
            run,
        });
    }

    /// Commit-time actions registered so far (see the field).
    #[inline]
    pub(crate) fn generation(&self) -> u32 {
        self.generation.get()
    }

    /// Registers `run` to run when the epoch commits, after the writes made so far;
    /// `touches_data`: a program's delayed call (see [`Deferred::touches_data`]).
    pub(crate) fn defer(&self, run: Action, touches_data: bool) {
        let writes_before = self.writes.borrow().len();
        let mut commits = self.commits.borrow_mut();
        if commits.capacity() == 0 {
            *commits = ACTION_LISTS.take();
        }
        commits.push(Deferred {
            segment: self.segment.get(),
            writes_before,
            touches_data,
            run,
        });
        self.generation.set(self.generation.get() + 1);
        if touches_data {
            self.flags.set(self.flags.get() | DELAYED);
        }
    }
}
