//! Claiming epochs: pulling the next epoch's items from the loop's iterator, within the
//! window of epochs in flight.

use super::work::{Done, EpochEnd, Work};
use super::{NO_STOP, Payload, Shared};
use crate::control::Step;
use crate::epoch::{Logs, make_tag};
use crate::report::ThreadStats;
use crate::rules::planned_chunk;
use crate::sync::lock;
use std::sync::atomic::Ordering;

/// The loop's iterator and how far it has been claimed (behind the claim lock).
pub(super) struct Claim<It> {
    pub(super) iter: It,
    pub(super) next: u64,
    pub(super) done: bool,
    /// The iterator panicked producing the item of epoch `next`: the payload, and
    /// the message held back from the program's hook (see `panic_hook::claim_item`).
    pub(super) iter_panic: Option<(Payload, Option<String>)>,
}

/// What a thread's attempt to claim an epoch came to.
pub(super) enum Claimed<T, S> {
    Epoch(Work<T, S>),
    /// Epochs ran in order on this thread (adaptive fallback).
    RanInOrder,
    /// The window of epochs in flight is full.
    WindowFull,
    /// In-order mode and another thread's epoch is still in flight.
    NotMyTurn,
    Finished,
}

impl<It, S, R, St, Sp> Shared<'_, It, S, R, St, Sp>
where
    It: Iterator + Send,
    It::Item: Clone + Send,
    S: Clone + Send,
    R: Send,
    St: Fn(It::Item) -> S + Sync,
    Sp: Fn(S) -> Step<S, R> + Sync,
{
    pub(super) fn claim(&self, ts: &mut ThreadStats) -> Claimed<It::Item, S> {
        if self.stop.load(Ordering::Acquire) != NO_STOP {
            return Claimed::Finished;
        }
        let mut c = lock(&self.claim);
        let w = self.watermark.load(Ordering::Acquire);
        if c.next >= w + self.ring.len() {
            return Claimed::WindowFull;
        }
        if let Some((p, message)) = c.iter_panic.take() {
            // Sequentially the iterator's panic comes once every earlier iteration is
            // done: publish it as an epoch that ends the loop with it.
            let index = c.next;
            c.next += 1;
            drop(c);
            self.ring.slot(index).reset(make_tag(self.serial, index));
            let done = Done {
                work: Work::new(index, Vec::new()),
                segment: 0,
                // Printed if the loop ends with the panic (`Shared::settle`).
                logs: Logs {
                    held_panic: message,
                    ..Logs::default()
                },
                end: EpochEnd::IterPanic(p),
            };
            self.publish(Box::new(done), ts);
            return Claimed::NotMyTurn;
        }
        if c.done {
            return Claimed::Finished;
        }
        if self.site.in_order() {
            if c.next != w {
                return Claimed::NotMyTurn;
            }
            self.run_stretch_in_order(&mut c, ts);
            return Claimed::RanInOrder;
        }
        // A chunk the loop set is kept as set; an automatic one is evened out over
        // a run of known length.
        let chunk = self.chunk.unwrap_or_else(|| {
            let threads = self.workers_wanted + 1;
            let chunk = self.site.chunk_for_run(self.run_items, threads);
            planned_chunk(chunk, self.sized_items, threads, c.next)
        });
        let mut items = Vec::with_capacity(chunk);
        while items.len() < chunk {
            match crate::panic_hook::claim_item(|| c.iter.next()) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => {
                    c.done = true;
                    self.claimable.store(false, Ordering::Relaxed);
                    break;
                }
                Err((p, message)) => {
                    c.done = true;
                    self.claimable.store(false, Ordering::Relaxed);
                    c.iter_panic = Some((p, message));
                    break;
                }
            }
        }
        if items.is_empty() {
            return Claimed::NotMyTurn;
        }
        let index = c.next;
        assert!(
            index < u64::from(u32::MAX),
            "a loop ran more than 2^32 epochs"
        );
        c.next += 1;
        if items.len() > 1 {
            // Claimed in order under the claim's lock: only ever raised.
            self.chunked_through.store(index + 1, Ordering::Relaxed);
        }
        Claimed::Epoch(Work::new(index, items))
    }
}
