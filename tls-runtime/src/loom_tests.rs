//! Loom models of the violation-detection race, of the commit hand-off, and of the
//! turn protocol by which the workers are started.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p tls-runtime --lib --release loom`.
//! Each model runs the real `Slot` and `EpochRing` code (their atomics, lock and cells
//! are loom's under this cfg) and checks, over every interleaving, that a later epoch
//! never keeps a value an earlier epoch made stale.

use crate::epoch::{Access, Drops, LoggedSlot};
use crate::epoch::{EpochRing, NOT_VIOLATED, make_tag};
use crate::memory::slot::Slot;
use crate::sync::{AtomicU64, Ordering};
use core::panic::Location;
use loom::sync::Arc;

const SERIAL: u32 = 1;

fn access(ring: &EpochRing, index: u64, watermark: u64) -> Access<'_> {
    Access {
        tag: make_tag(SERIAL, index),
        segment: 0,
        generation: 0,
        ring,
        watermark,
        ordinal: 0,
    }
}

/// Applies `a`'s version of segment 0, as a commit does.
fn commit(slot: &Slot<u64>, a: &Access<'_>) {
    let mut drops = Drops::new();
    let held = LoggedSlot::lock(slot);
    // SAFETY: we hold the lock.
    unsafe { LoggedSlot::apply(slot, held, a, (a.tag, 0, 0), &mut drops) };
    LoggedSlot::unlock(slot, held);
}

struct World {
    ring: EpochRing,
    slot: Slot<u64>,
    watermark: AtomicU64,
}

fn world() -> Arc<World> {
    let w = World {
        ring: EpochRing::new(2),
        slot: Slot::new(0),
        watermark: AtomicU64::new(0),
    };
    w.ring.slot(0).reset(make_tag(SERIAL, 0));
    w.ring.slot(1).reset(make_tag(SERIAL, 1));
    Arc::new(w)
}

/// Epoch 0 writes the location while epoch 1 reads it: either epoch 1 sees the new
/// value (forwarding) or it is violated. Never both missed.
#[test]
fn loom_read_racing_an_earlier_write_is_never_missed() {
    loom::model(|| {
        let w = world();
        let writer = {
            let w = w.clone();
            loom::thread::spawn(move || {
                let a = access(&w.ring, 0, 0);
                let _ = w.slot.write_spec(&a, Location::caller(), 42, || ());
            })
        };
        let a = access(&w.ring, 1, 0);
        let seen = w.slot.read_spec(&a, Location::caller(), |v| *v);
        writer.join().unwrap();
        let violated = w.ring.slot(1).pending(Ordering::Acquire) != NOT_VIOLATED;
        assert!(seen == 42 || violated, "stale read {seen} went unnoticed");
        assert!(!(seen == 42 && violated), "a forwarded read was violated");
    });
}

/// Epoch 0 writes, commits and hands homefree to epoch 1, which read the location
/// concurrently and waits to commit: when epoch 1 finds itself homefree, it either read
/// the committed value or finds its violation.
#[test]
fn loom_commit_hand_off_publishes_values_and_violations() {
    loom::model(|| {
        let w = world();
        let earlier = {
            let w = w.clone();
            loom::thread::spawn(move || {
                let a = access(&w.ring, 0, 0);
                let _ = w.slot.write_spec(&a, Location::caller(), 7, || ());
                commit(&w.slot, &a);
                w.watermark.store(1, Ordering::Release);
            })
        };
        let a = access(&w.ring, 1, 0);
        let seen = w.slot.read_spec(&a, Location::caller(), |v| *v);
        // Wait to become homefree, as the runner does: watermark first, then the
        // violation word.
        let violated = loop {
            let wm = w.watermark.load(Ordering::Acquire);
            if w.ring.slot(1).pending(Ordering::Acquire) != NOT_VIOLATED {
                break true;
            }
            if wm == 1 {
                break false;
            }
            loom::thread::yield_now();
        };
        earlier.join().unwrap();
        assert!(violated || seen == 7, "epoch 1 would commit a stale read");
        let committed = w.slot.read_committed(|v| *v);
        assert_eq!(committed, 7);
    });
}

/// Epoch 1 writes, epoch 2 reads the forwarded value, then epoch 1 rolls back and
/// discards its write: epoch 2 must be violated if it saw the discarded value.
#[test]
fn loom_discarded_forwarded_value_violates_its_readers() {
    loom::model(|| {
        let w = Arc::new({
            let w = World {
                ring: EpochRing::new(4),
                slot: Slot::new(0),
                watermark: AtomicU64::new(0),
            };
            w.ring.slot(1).reset(make_tag(SERIAL, 1));
            w.ring.slot(2).reset(make_tag(SERIAL, 2));
            w
        });
        let earlier = {
            let w = w.clone();
            loom::thread::spawn(move || {
                let a = access(&w.ring, 1, 0);
                let _ = w.slot.write_spec(&a, Location::caller(), 99, || ());
                drop(w.slot.discard(&a, 0));
            })
        };
        let a = access(&w.ring, 2, 0);
        let seen = w.slot.read_spec(&a, Location::caller(), |v| *v);
        earlier.join().unwrap();
        let violated = w.ring.slot(2).pending(Ordering::Acquire) != NOT_VIOLATED;
        assert!(
            seen != 99 || violated,
            "epoch 2 kept a value that never was"
        );
    });
}

/// A plain thread increments the location while an epoch of a running loop increments
/// it and commits, as the committer does: lock, check the violation word, apply; if
/// violated, discard and do the update again (the re-run). No increment is lost.
#[test]
fn loom_plain_update_racing_a_commit_is_never_lost() {
    loom::model(|| {
        let live = crate::live_loops::LiveLoop::start();
        let serial = live.serial();
        let w = Arc::new({
            let w = World {
                ring: EpochRing::new(2),
                slot: Slot::new(0),
                watermark: AtomicU64::new(0),
            };
            w.ring.slot(0).reset(make_tag(serial, 0));
            w
        });
        live.attach(&w.ring);
        let plain = {
            let w = w.clone();
            loom::thread::spawn(move || {
                w.slot
                    .update_committed(None, Location::caller(), |v| *v += 1);
            })
        };
        let mut a = access(&w.ring, 0, 0);
        a.tag = make_tag(serial, 0);
        loop {
            w.slot
                .update_spec(&a, Location::caller(), |v| *v += 1, || ());
            let held = LoggedSlot::lock(&w.slot);
            if w.ring.slot(0).pending(Ordering::Acquire) == NOT_VIOLATED {
                let mut drops = Drops::new();
                // SAFETY: we hold the lock.
                unsafe { LoggedSlot::apply(&w.slot, held, &a, (a.tag, 0, 0), &mut drops) };
                LoggedSlot::unlock(&w.slot, held);
                break;
            }
            LoggedSlot::unlock(&w.slot, held);
            let _ = w.ring.slot(0).take_violation();
            drop(w.slot.discard(&a, 0));
        }
        plain.join().unwrap();
        assert_eq!(w.slot.read_committed(|v| *v), 2, "an increment was lost");
        drop(live);
    });
}

/// A worker counted in (under the pool's lock) while another counts itself out
/// (without it): no count is lost, so the job's owner sees zero exactly when no worker
/// is inside.
#[test]
fn loom_a_worker_leaving_while_another_enters_is_counted() {
    use crate::workers::Occupancy;
    loom::model(|| {
        let o = Arc::new(Occupancy::new());
        assert!(o.try_enter(2));
        let leaver = {
            let o = o.clone();
            loom::thread::spawn(move || o.leave())
        };
        let entered = o.try_enter(2);
        leaver.join().unwrap();
        assert!(entered, "one of two places was free throughout");
        assert_eq!(o.inside(), 1);
        o.leave();
        assert_eq!(o.inside(), 0);
    });
}

/// The turn protocol of the workers' starts (`workers/start.rs`), with a worker
/// start that records the worker and, when it hands the turn over, runs the turn
/// on a new thread as a started worker does.
mod worker_starts {
    use crate::workers::Starts;
    use loom::sync::{Arc, Mutex};
    use loom::thread::JoinHandle;

    struct Model {
        starts: Starts,
        /// The ids of the workers started, in order.
        ids: Mutex<Vec<usize>>,
        /// Threads that took the turn over.
        taken_over: Mutex<Vec<JoinHandle<()>>>,
    }

    fn start(m: &Arc<Model>, id: usize, hand_over: bool) -> bool {
        m.ids.lock().unwrap().push(id);
        if hand_over {
            let m2 = Arc::clone(m);
            let h = loom::thread::spawn(move || {
                m2.starts.run_turn(false, &mut |id, h| start(&m2, id, h));
            });
            m.taken_over.lock().unwrap().push(h);
        }
        true
    }

    fn ask(m: &Arc<Model>, n: usize) {
        if m.starts.ask(n) {
            m.starts.run_turn(true, &mut |id, h| start(m, id, h));
        }
    }

    /// Two program threads ask at once (for 1 and 2 workers): every ask is met
    /// (once the threads that took the turn over are done, the most asked for have
    /// started), no worker is started twice, and the turn is free again.
    #[test]
    fn loom_every_ask_for_workers_is_met_once() {
        loom::model(|| {
            let m = Arc::new(Model {
                starts: Starts::new(),
                ids: Mutex::new(Vec::new()),
                taken_over: Mutex::new(Vec::new()),
            });
            let other = {
                let m = Arc::clone(&m);
                loom::thread::spawn(move || ask(&m, 1))
            };
            ask(&m, 2);
            other.join().unwrap();
            loop {
                let Some(h) = m.taken_over.lock().unwrap().pop() else {
                    break;
                };
                h.join().unwrap();
            }
            assert_eq!(*m.ids.lock().unwrap(), [0, 1]);
            assert_eq!(m.starts.started(), 2);
            // A later ask for no more starts nothing and takes no turn.
            assert!(!m.starts.ask(2));
        });
    }
}

/// The parking protocol of idle workers (`workers/parking.rs`): a worker looks for
/// work, and parks on the generation it read before it looked; a waker makes work,
/// moves the generation, and wakes as many parked workers as it made work for. No
/// wake-up is lost: every worker gets its work (a worker left parked for ever shows
/// as a deadlock; loom's parks have no timeout).
mod worker_parking {
    use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use crate::workers::Parking;
    use loom::sync::Arc;

    struct Model {
        parking: Parking,
        generation: AtomicU64,
        /// Work not yet taken.
        work: AtomicUsize,
    }

    /// A worker's life until it has taken one piece of work.
    fn worker(m: &Model) {
        let woken = Arc::new(AtomicBool::new(false));
        let waiting = Arc::new(AtomicBool::new(false));
        loop {
            let seen = m.generation.load(Ordering::SeqCst);
            // Takes a piece if there is one left (as a worker enters a job with a
            // free seat), else parks.
            let took = m
                .work
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                    left.checked_sub(1)
                });
            if took.is_ok() {
                return;
            }
            m.parking.park(&m.generation, seen, &woken, &waiting);
        }
    }

    /// `preemptions`: the bound on the interleavings explored (loom's default
    /// explores all of them, hours for three threads with a mutex).
    fn run(workers: usize, preemptions: Option<usize>) {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = preemptions;
        model.check(move || {
            let m = Arc::new(Model {
                parking: Parking::new(),
                generation: AtomicU64::new(0),
                work: AtomicUsize::new(0),
            });
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    let m = Arc::clone(&m);
                    loom::thread::spawn(move || worker(&m))
                })
                .collect();
            m.work.fetch_add(workers, Ordering::SeqCst);
            m.generation.fetch_add(1, Ordering::SeqCst);
            m.parking.wake(workers);
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(m.work.load(Ordering::SeqCst), 0);
            assert_eq!(m.parking.sleepers(), 0, "a worker is still counted parked");
        });
    }

    #[test]
    fn loom_a_parking_worker_is_woken_for_its_work() {
        run(1, None);
    }

    #[test]
    fn loom_two_parking_workers_are_both_woken_for_two_pieces_of_work() {
        run(2, Some(4));
    }
}
