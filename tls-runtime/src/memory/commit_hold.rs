//! A commit that keeps its write set locked while its commit-time actions run.
//!
//! When writes follow a commit-time action, the committer holds the locks of every
//! slot its epoch wrote while the actions run (see `memory::log`). Two things may
//! then happen on this thread under that hold:
//!
//! - an action reads or writes one of those slots: the access goes ahead under the
//!   commit's hold instead of waiting for a lock its own thread holds
//!   ([`commit_holds`]);
//! - an action drops or consumes a container with such a slot (the iteration filled
//!   a buffer and handed it to the action, which flushes it): the commit still has
//!   records of the slot, and will unlock it. The container's values go at once, as
//!   they would in the sequential program, but its memory is handed to the commit
//!   ([`retire_under_commit`]), which skips the container's remaining records and
//!   frees the memory only after it has unlocked everything. Freeing it at the drop
//!   let the commit write to freed memory.
//!
//! The holds of a thread form a chain, innermost first, like the frames of `nesting`.
//! Today it is one deep (an action runs as plain code, and a loop it starts runs in
//! order, without commits of its own); a chain keeps this right if that changes.

use crate::epoch::Tag;
use core::cell::{Cell, RefCell};

/// Memory of a container dropped under a commit's hold, to be released (freed, or
/// kept for the loops whose logs may still point into it) once the commit is done.
/// Dropped without running `release` (a commit that unwound), the memory leaks: never
/// freed while a lock in it may still be taken.
pub(crate) struct Retired {
    start: usize,
    end: usize,
    release: Box<dyn FnOnce()>,
}

/// One commit in progress on this thread, holding the locks of `held`.
pub(crate) struct CommitHold<'a> {
    /// The addresses of the slots whose locks the commit holds, sorted.
    held: &'a [usize],
    /// The committing epoch: its versions of a retired container are its own, not an
    /// intruder's (they are dropped with the container, never violated).
    tag: Tag,
    retired: RefCell<Vec<Retired>>,
    outer: Cell<*const CommitHold<'static>>,
}

thread_local! {
    static INNERMOST: Cell<*const CommitHold<'static>> = const { Cell::new(core::ptr::null()) };
}

impl<'a> CommitHold<'a> {
    /// The hold of the commit of `tag`, whose locks of the slots at `held` (sorted
    /// addresses) are taken.
    pub(crate) fn new(held: &'a [usize], tag: Tag) -> Self {
        CommitHold {
            held,
            tag,
            retired: RefCell::new(Vec::new()),
            outer: Cell::new(core::ptr::null()),
        }
    }

    /// Runs `f` with this hold noted on this thread.
    pub(crate) fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Pop(*const CommitHold<'static>);
        impl Drop for Pop {
            fn drop(&mut self) {
                INNERMOST.with(|c| c.set(self.0));
            }
        }
        let outer = INNERMOST.with(Cell::get);
        self.outer.set(outer);
        let me = (self as *const CommitHold<'a>).cast::<CommitHold<'static>>();
        INNERMOST.with(|c| c.set(me));
        let _pop = Pop(outer);
        f()
    }

    /// Whether the slot at `addr` belongs to a container an action dropped under this
    /// hold (the commit must not touch it again: its values are gone).
    pub(crate) fn is_retired(&self, addr: usize) -> bool {
        self.retired
            .borrow()
            .iter()
            .any(|r| r.start <= addr && addr < r.end)
    }

    /// Releases the memory of the containers retired under this hold. Called once the
    /// commit has unlocked every slot.
    pub(crate) fn release_retired(&self) {
        for r in self.retired.take() {
            (r.release)();
        }
    }

    fn holds_any(&self, start: usize, end: usize) -> bool {
        let i = self.held.partition_point(|&a| a < start);
        i < self.held.len() && self.held[i] < end
    }
}

/// Walks the holds of this thread, innermost first, until `f` returns `Some`.
fn find<R>(mut f: impl FnMut(&CommitHold<'static>) -> Option<R>) -> Option<R> {
    let mut p = INNERMOST.with(Cell::get);
    while !p.is_null() {
        // SAFETY: holds live on the stack of `CommitHold::run` calls still running on
        // this thread (each unlinks itself before returning or unwinding past it).
        let hold = unsafe { &*p };
        if let Some(r) = f(hold) {
            return Some(r);
        }
        p = hold.outer.get();
    }
    None
}

/// Whether a commit on this thread holds the lock of the slot at `addr`.
pub(crate) fn commit_holds(addr: usize) -> bool {
    find(|h| h.held.binary_search(&addr).is_ok().then_some(())).is_some()
}

/// The tag of the commit on this thread that holds a slot in `start..end`, if any.
pub(crate) fn committer_of(start: usize, end: usize) -> Option<Tag> {
    find(|h| h.holds_any(start, end).then_some(h.tag))
}

/// Hands the memory `start..end` of a container, dropped under the hold of a commit
/// that holds some of its slots, to that commit: it skips the container's records from
/// now on, and runs `release` once it has unlocked everything.
pub(crate) fn retire_under_commit(start: usize, end: usize, release: Box<dyn FnOnce()>) {
    let hold = find(|h| {
        h.holds_any(start, end)
            .then_some(h as *const CommitHold<'static>)
    })
    .expect("a container is retired only under a commit that holds it");
    // SAFETY: `find` returned a hold that is still running on this thread.
    unsafe { &*hold }.retired.borrow_mut().push(Retired {
        start,
        end,
        release,
    });
}
