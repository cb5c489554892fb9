//! An inventory: products are `Arc<Spec<u32>>` nodes held in a `SpecMap` by name;
//! orders reserve a ticket through an `#[escape]` with an undo, restocks put new
//! product nodes in mid-loop (replacing old ones that later orders were writing), each
//! order picks units in a local `SpecVec`, commit-time closures log, and the loop
//! stops with `Control::Break` on a "close shop" order, or panics on a poisoned one.

use crate::common::{ROUNDS, THREADS, assert_same, panic_text, spin};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use tls_runtime::{
    Control, Loop, LoopOutcome, Spec, SpecMap, SpecVec, escape, on_commit, on_violation,
};

/// Last ticket number and the outstanding tickets. A plain static, reached only
/// through the escape, its undo and commit-time actions; only this file's test uses
/// it, and it resets it before each round.
static TICKETS: Mutex<(u64, BTreeSet<u64>)> = Mutex::new((0, BTreeSet::new()));

fn cancel_ticket(t: &u64) {
    TICKETS.lock().unwrap().1.remove(t);
}

#[escape]
#[on_violation(cancel_ticket)]
fn reserve_ticket() -> u64 {
    let mut g = TICKETS.lock().unwrap();
    g.0 += 1;
    let id = g.0;
    g.1.insert(id);
    id
}

fn outstanding() -> usize {
    TICKETS.lock().unwrap().1.len()
}

fn reset_tickets() {
    *TICKETS.lock().unwrap() = (0, BTreeSet::new());
}

#[derive(Clone, Debug)]
enum Order {
    Buy { product: usize, qty: u32 },
    Restock { product: usize, qty: u32 },
    Poison,
    Close,
}

const PRODUCTS: [&str; 5] = ["apple", "pear", "plum", "fig", "kiwi"];

struct Shop {
    stock: SpecMap<&'static str, Arc<Spec<u32>>>,
    sold: SpecVec<u64>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Shop {
    fn new() -> Self {
        let stock = SpecMap::new();
        for p in PRODUCTS {
            stock.insert(p, Arc::new(Spec::new(20)));
        }
        Shop {
            stock,
            sold: SpecVec::from(vec![0; PRODUCTS.len()]),
            log: Arc::default(),
        }
    }

    fn buy(&self, k: usize, product: usize, qty: u32) -> Option<u32> {
        let node = self.stock.get(&PRODUCTS[product])?;
        // A local container: which units to take, consumed right away.
        let picks = SpecVec::from(vec![0u32; qty as usize]);
        for u in 0..qty as usize {
            picks.set(u, 1 + (u as u32 % 2));
        }
        let want: u32 = picks.into_vec().iter().sum::<u32>().min(qty + 1);
        let got = node.update(|s| {
            let take = want.min(*s);
            *s -= take;
            take
        });
        self.sold.update(product, |x| *x += got as u64);
        let log = self.log.clone();
        on_commit(move || {
            log.lock()
                .unwrap()
                .push(format!("{k}: buy {product} got {got}"))
        });
        Some(got)
    }

    fn run(&self, orders: &[Order], threads: usize) -> LoopOutcome<()> {
        Loop::new().name("shop").threads(threads).run(
            orders.iter().cloned().enumerate(),
            |(k, o)| {
                spin((k % 4) as u64);
                match o {
                    Order::Buy { product, qty } => {
                        let t = reserve_ticket();
                        if self.buy(k, product, qty).is_some() {
                            let log = self.log.clone();
                            on_commit(move || {
                                cancel_ticket(&t);
                                log.lock().unwrap().push(format!("{k}: ticket done"));
                            });
                        }
                    }
                    Order::Restock { product, qty } => {
                        let old = self.stock.get(&PRODUCTS[product]).map_or(0, |n| n.get());
                        // A new node replaces the old one that later orders may be writing.
                        let node = Arc::new(Spec::new(old));
                        node.update(|s| *s += qty);
                        self.stock.insert(PRODUCTS[product], node);
                    }
                    Order::Poison => panic!("poisoned order {k}"),
                    Order::Close => return Control::Break,
                }
                Control::Continue
            },
        )
    }
}

/// What a run ends with: `Ok(true)` closed, `Ok(false)` completed, `Err` a panic's text.
type Ending = Result<bool, String>;

/// The sequential twin.
fn run_plain(orders: &[Order]) -> (Ending, BTreeMap<&'static str, u32>, Vec<u64>, Vec<String>) {
    let mut stock: BTreeMap<&'static str, u32> = PRODUCTS.iter().map(|&p| (p, 20)).collect();
    let mut sold = vec![0u64; PRODUCTS.len()];
    let mut log = vec![];
    for (k, o) in orders.iter().enumerate() {
        match *o {
            Order::Buy { product, qty } => {
                let want: u32 = (0..qty).map(|u| 1 + u % 2).sum::<u32>().min(qty + 1);
                let s = stock.get_mut(PRODUCTS[product]).unwrap();
                let got = want.min(*s);
                *s -= got;
                sold[product] += got as u64;
                log.push(format!("{k}: buy {product} got {got}"));
                log.push(format!("{k}: ticket done"));
            }
            Order::Restock { product, qty } => *stock.get_mut(PRODUCTS[product]).unwrap() += qty,
            Order::Poison => return (Err(format!("poisoned order {k}")), stock, sold, log),
            Order::Close => return (Ok(true), stock, sold, log),
        }
    }
    (Ok(false), stock, sold, log)
}

/// `n` orders; ending 1 closes the shop three quarters in, ending 2 has a poisoned
/// order two thirds in.
fn orders(n: usize, ending: usize) -> Vec<Order> {
    let mut v: Vec<Order> = (0..n)
        .map(|i| {
            if i % 9 == 4 {
                Order::Restock {
                    product: (i / 9) % 5,
                    qty: 7,
                }
            } else {
                Order::Buy {
                    product: (i * 3) % 5,
                    qty: 1 + (i % 4) as u32,
                }
            }
        })
        .collect();
    match ending {
        1 => v[n * 3 / 4] = Order::Close,
        2 => v[n * 2 / 3] = Order::Poison,
        _ => {}
    }
    v
}

fn run_once(threads: usize, round: usize, ending: usize, n: usize) {
    let what = format!("inventory, threads = {threads}, round {round}, ending {ending}");
    let os = orders(n, ending);
    reset_tickets();
    let shop = Shop::new();
    let r = catch_unwind(AssertUnwindSafe(|| shop.run(&os, threads)));
    let got_outcome: Ending = match r {
        Ok(LoopOutcome::Broke) => Ok(true),
        Ok(LoopOutcome::Completed) => Ok(false),
        Ok(other) => Err(format!("unexpected outcome {other:?}")),
        Err(p) => Err(panic_text(&*p)),
    };
    let (want_outcome, want_stock, want_sold, want_log) = run_plain(&os);
    // The twin itself ends as each ending means it to.
    let intended: Ending = match ending {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(format!("poisoned order {}", n * 2 / 3)),
    };
    assert_eq!(want_outcome, intended, "{what}: twin");
    assert_eq!(got_outcome, want_outcome, "{what}: outcome");
    assert_same(
        &shop.log.lock().unwrap(),
        &want_log,
        &format!("{what}: log"),
    );
    let Shop { stock, sold, .. } = shop;
    let got_stock: BTreeMap<_, _> = stock
        .into_map()
        .into_iter()
        .map(|(k, n)| (k, n.get()))
        .collect();
    assert_eq!(got_stock, want_stock, "{what}: stock");
    assert_same(&sold.into_vec(), &want_sold, &format!("{what}: sold"));
    // Every ticket of a committed buy was closed at commit; those of rolled-back
    // attempts were undone, and so were those of epochs squashed after the close or
    // the panic.
    assert_eq!(outstanding(), 0, "{what}: outstanding tickets");
}

/// A shop whose products are `Arc<Spec>` nodes in a `SpecMap`, replaced by restocks
/// while later orders write them, with tickets reserved through an escape with an
/// undo and commit-time logs, ends as its sequential twin does: completed, closed with
/// `Control::Break`, or panicking (caught around the loop), with the same log, stock
/// and sales, and no ticket left outstanding.
#[test]
fn inventory_orders_match_the_sequential_shop() {
    for threads in THREADS {
        for round in 0..ROUNDS {
            for ending in 0..3 {
                run_once(threads, round, ending, 250);
            }
        }
    }
}
