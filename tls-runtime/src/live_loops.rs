//! The loops running now, so that data shared between loops (and plain threads) stays
//! consistent: a change to a location's committed value made outside a loop violates
//! that loop's epochs that read the location.
//!
//! Each running speculative loop holds one entry of a fixed table, at the index its
//! serial number maps to (the serial is chosen so that the entry is free). A reader
//! record names its loop by serial, so "is that loop still running?" is one load, and
//! a writer from elsewhere reaches the loop's epoch ring through the entry.
//!
//! States of an entry:
//!
//! ```text
//!   FREE --claim: cas(FREE, serial)--> serial --attach(ring)--> serial + ring
//!     ^                                                              |
//!     +----------- retire: store FREE, wait until users == 0 --------+
//! ```
//!
//! Memory ordering: `serial`, `ring` and `users` are `SeqCst`. A writer announces
//! itself in `users`, then checks `serial`; the retiring loop clears `serial`, then
//! waits for `users` to drop to zero before its ring goes away. Either the writer sees
//! the entry cleared and does not touch the ring, or the retiring loop sees the writer
//! and waits for it. A ring reached through a reused entry belongs to a newer loop:
//! `EpochRing::violate` ignores tags that are not its own.

use crate::epoch::{Cause, EpochRing, Tag, serial_of};
use crate::scheduler::Board;
use crate::sync::{AtomicPtr, AtomicU32, Ordering};

/// Loops that can run speculatively at the same time. More wait for an entry.
const ENTRIES: usize = 1024;

const FREE: u32 = 0;

struct Entry {
    serial: AtomicU32,
    ring: AtomicPtr<EpochRing>,
    /// What the zombie watchdog may read of the loop (`scheduler/zombie.rs`).
    board: AtomicPtr<Board>,
    users: AtomicU32,
}

fn table() -> &'static [Entry] {
    #[cfg(not(loom))]
    {
        static TABLE: std::sync::OnceLock<Box<[Entry]>> = std::sync::OnceLock::new();
        TABLE.get_or_init(new_table)
    }
    #[cfg(loom)]
    {
        loom::lazy_static! {
            static ref TABLE: Box<[Entry]> = new_table();
        }
        &TABLE
    }
}

fn new_table() -> Box<[Entry]> {
    (0..ENTRIES)
        .map(|_| Entry {
            serial: AtomicU32::new(FREE),
            ring: AtomicPtr::new(core::ptr::null_mut()),
            board: AtomicPtr::new(core::ptr::null_mut()),
            users: AtomicU32::new(0),
        })
        .collect()
}

fn entry(serial: u32) -> &'static Entry {
    &table()[serial as usize % ENTRIES]
}

/// A running loop's entry; retired on drop.
pub(crate) struct LiveLoop {
    serial: u32,
}

impl LiveLoop {
    /// Claims an entry and the serial number that maps to it.
    pub(crate) fn start() -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let mut tries = 0u32;
        loop {
            let serial = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if serial == FREE {
                continue;
            }
            if entry(serial)
                .serial
                .compare_exchange(FREE, serial, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                return LiveLoop { serial };
            }
            tries += 1;
            if tries.is_multiple_of(ENTRIES as u32) {
                std::thread::yield_now();
            }
        }
    }

    /// The loop's serial number (the high half of its epochs' tags).
    pub(crate) fn serial(&self) -> u32 {
        self.serial
    }

    /// Makes the loop's ring reachable by writers from elsewhere. The ring must stay
    /// where it is until this `LiveLoop` is dropped.
    pub(crate) fn attach(&self, ring: &EpochRing) {
        let ring = ring as *const EpochRing as *mut EpochRing;
        entry(self.serial).ring.store(ring, Ordering::SeqCst);
    }
}

impl LiveLoop {
    /// Shows `board` to the zombie watchdog until the returned guard is dropped (which
    /// waits for a look in progress to end, so the board may go away after it).
    pub(crate) fn watch<'b>(&self, board: &'b Board) -> Watching<'b> {
        let e = entry(self.serial);
        e.board
            .store(board as *const Board as *mut Board, Ordering::SeqCst);
        Watching {
            entry: e,
            _board: core::marker::PhantomData,
        }
    }
}

/// A loop's board shown to the watchdog (see [`LiveLoop::watch`]).
pub(crate) struct Watching<'b> {
    entry: &'static Entry,
    _board: core::marker::PhantomData<&'b Board>,
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        self.entry
            .board
            .store(core::ptr::null_mut(), Ordering::SeqCst);
        wait_for_users(self.entry);
    }
}

impl Drop for LiveLoop {
    fn drop(&mut self) {
        let e = entry(self.serial);
        e.ring.store(core::ptr::null_mut(), Ordering::SeqCst);
        e.board.store(core::ptr::null_mut(), Ordering::SeqCst);
        e.serial.store(FREE, Ordering::SeqCst);
        wait_for_users(e);
    }
}

/// Waits until no writer or watchdog look that announced itself in `users` is left.
fn wait_for_users(e: &Entry) {
    let mut spins = 0u32;
    while e.users.load(Ordering::SeqCst) != 0 {
        spins += 1;
        if spins.is_multiple_of(64) {
            std::thread::yield_now();
        }
        crate::sync::spin_hint();
    }
}

/// Calls `f` with the serial and board of every running loop that shows one, each
/// under the users protocol (the board stays alive during the call).
#[cfg(not(loom))]
pub(crate) fn for_each_board(mut f: impl FnMut(u32, &Board)) {
    for e in table() {
        // Most entries are free: one load each.
        if e.board.load(Ordering::Relaxed).is_null() {
            continue;
        }
        e.users.fetch_add(1, Ordering::SeqCst);
        let serial = e.serial.load(Ordering::SeqCst);
        let board = e.board.load(Ordering::SeqCst);
        if serial != FREE {
            // SAFETY: the board was still shown after we announced ourselves in
            // `users`, so its `Watching` guard (and the `LiveLoop`) wait for us before
            // it can go away.
            if let Some(board) = unsafe { board.as_ref() } {
                f(serial, board);
            }
        }
        e.users.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether the loop with this serial number is still running.
#[inline]
pub(crate) fn is_running(serial: u32) -> bool {
    serial != FREE && entry(serial).serial.load(Ordering::SeqCst) == serial
}

/// Violates epoch `victim` of another loop, if that loop still runs.
pub(crate) fn violate(victim: Tag, segment: u32, cause: Cause) {
    let serial = serial_of(victim);
    let e = entry(serial);
    e.users.fetch_add(1, Ordering::SeqCst);
    if e.serial.load(Ordering::SeqCst) == serial {
        let ring = e.ring.load(Ordering::SeqCst);
        // SAFETY: the entry still belonged to the loop after we announced ourselves in
        // `users`, so its `LiveLoop` waits for us before the ring can go away; a ring
        // of a newer loop in a reused entry is alive for the same reason.
        if let Some(ring) = unsafe { ring.as_ref() } {
            ring.violate(victim, segment, cause);
        }
    }
    e.users.fetch_sub(1, Ordering::SeqCst);
}
