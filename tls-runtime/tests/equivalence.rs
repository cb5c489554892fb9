//! Property tests: random loop programs run speculatively at 1, 2 and 4 threads must
//! leave exactly what the same program leaves when run as plain sequential Rust:
//! final data, loop outcome, commit-time log, and escaped calls (each committed call
//! kept once, every rolled-back one undone).
//!
//! The programs use the shapes users write, not only the ones the runtime was built
//! for: containers made, used and consumed inside an iteration, nodes (`Arc<Spec>`)
//! created by one iteration and followed by later ones, accesses nested in `update`
//! closures, panics inside closures and commit-time actions, a plain thread updating
//! shared data while the loop runs, and threads an iteration starts through
//! `tls_runtime::scope`.

use proptest::prelude::*;
use std::collections::HashMap;
use std::collections::hash_map::{DefaultHasher, RandomState};
use std::hash::{BuildHasher, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tls_runtime::{
    Control, EscapeLock, Loop, LoopOutcome, LoopSite, Spec, SpecMap, SpecMemory, SpecVec, Step,
    escape, on_commit, on_violation,
};

const VEC_LEN: u64 = 8;
const MEM_WORDS: u64 = 32;

#[derive(Debug, Clone, Copy)]
enum Target {
    Cell,
    Vec,
    Map,
    Mem,
}

#[derive(Debug, Clone, Copy)]
enum ExitKind {
    Break,
    Return,
    Panic,
}

#[derive(Debug, Clone)]
enum Op {
    Read(Target, u64),
    Write(Target, u64),
    Update(Target, u64),
    Compute(u16),
    Checkpoint,
    Escape,
    Log,
    Exit(ExitKind, u64),
    /// A container made, written and consumed inside the iteration.
    Local(u8),
    /// `vec[a] += vec[a + 1]`, the read nested in the update's closure.
    Nested(u64),
    /// An update whose closure panics after changing the value, when `h % m == 0`.
    PanicInUpdate(u64),
    /// A commit-time action that logs, then panics when `h % m == 0`.
    LogThenPanic(u64),
    /// Link a new node holding `h` at a slot of `nodes`.
    Link(u64),
    /// Add `h` to the node at a slot of `nodes`, if any; fold its value into `h`.
    Follow(u64),
    /// `nodes[k] = None`.
    Unlink(u64),
    /// One increment of a counter that a plain thread increments at the same time.
    Shared,
    /// `vec[k] += h` by a thread the iteration starts through `tls_runtime::scope`;
    /// the new value folds into `h`.
    Threads(u64),
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::Cell),
        Just(Target::Vec),
        Just(Target::Map),
        Just(Target::Mem)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (target(), 0..64u64).prop_map(|(t, k)| Op::Read(t, k)),
        3 => (target(), 0..64u64).prop_map(|(t, k)| Op::Write(t, k)),
        2 => (target(), 0..64u64).prop_map(|(t, k)| Op::Update(t, k)),
        2 => (0..40u16).prop_map(Op::Compute),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Escape),
        1 => Just(Op::Log),
        1 => (prop_oneof![Just(ExitKind::Break), Just(ExitKind::Return), Just(ExitKind::Panic)],
              20..200u64).prop_map(|(k, m)| Op::Exit(k, m)),
        1 => (0..8u8).prop_map(Op::Local),
        1 => (0..64u64).prop_map(Op::Nested),
        1 => (20..300u64).prop_map(Op::PanicInUpdate),
        1 => (20..300u64).prop_map(Op::LogThenPanic),
        1 => (0..64u64).prop_map(Op::Link),
        2 => (0..64u64).prop_map(Op::Follow),
        1 => (0..64u64).prop_map(Op::Unlink),
        1 => Just(Op::Shared),
        1 => (0..64u64).prop_map(Op::Threads),
    ]
}

#[derive(Debug, Clone)]
struct Program {
    templates: Vec<Vec<Op>>,
    epochs: u64,
    stride: u64,
    /// The speculative map hashes its keys so that they collide (see [`MapHashing`]),
    /// and starts with no room rather than room for its keys.
    colliding: bool,
}

fn program() -> impl Strategy<Value = Program> {
    (
        prop::collection::vec(prop::collection::vec(op(), 1..12), 1..4),
        1..60u64,
        1..5u64,
        any::<bool>(),
    )
        .prop_map(|(templates, epochs, stride, colliding)| Program {
            templates,
            epochs,
            stride,
            colliding,
        })
}

/// The speculative map's hasher: std's, or one under which the 16 keys get three
/// hashes, all in one shard, so that the map's tables hold many keys per hash.
#[derive(Clone)]
struct MapHashing {
    colliding: bool,
    std: RandomState,
}

enum MapHasher {
    Std(DefaultHasher),
    Colliding(u64),
}

impl BuildHasher for MapHashing {
    type Hasher = MapHasher;

    fn build_hasher(&self) -> MapHasher {
        if self.colliding {
            MapHasher::Colliding(0)
        } else {
            MapHasher::Std(self.std.build_hasher())
        }
    }
}

impl Hasher for MapHasher {
    fn finish(&self) -> u64 {
        match self {
            MapHasher::Std(h) => h.finish(),
            MapHasher::Colliding(h) => *h,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        match self {
            MapHasher::Std(h) => h.write(bytes),
            MapHasher::Colliding(h) => {
                *h = bytes.iter().fold(*h, |a, &b| a.wrapping_add(u64::from(b))) % 3;
            }
        }
    }
}

fn key(k: u64, i: u64, stride: u64, len: u64) -> u64 {
    (k + i * stride) % len
}

fn work(n: u16, h: u64) -> u64 {
    let mut x = h;
    for j in 0..u64::from(n) * 300 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(j);
    }
    std::hint::black_box(x) | 1
}

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Completed,
    Broke,
    Returned(u64),
    Panicked(u64),
}

#[derive(Debug, PartialEq)]
struct Final {
    cell: u64,
    vec: Vec<u64>,
    map: Vec<(u64, u64)>,
    mem: Vec<u8>,
    outcome: Outcome,
    log: Vec<(u64, u64)>,
    escapes: i64,
    nodes: Vec<Option<u64>>,
    shared: u64,
}

struct EpochPanic(u64);

const NODES: u64 = 6;
/// Increments of the shared counter made by a plain thread during each run.
const PLAIN_INCREMENTS: u64 = 300;

/// What `Op::Local(n)` computes from `h`, in plain Rust.
fn local_plain(n: u8, h: u64) -> u64 {
    let mut v: Vec<u64> = (0..u64::from(n) + 1).map(|k| h.wrapping_add(k)).collect();
    for x in v.iter_mut() {
        *x = x.wrapping_mul(3);
    }
    let c = v.iter().fold(1u64, |a, x| a.wrapping_add(*x));
    c ^ u64::from(n)
}

/// The same with speculative containers made inside the iteration.
fn local_spec(n: u8, h: u64) -> u64 {
    let v = SpecVec::from(
        (0..u64::from(n) + 1)
            .map(|k| h.wrapping_add(k))
            .collect::<Vec<_>>(),
    );
    tls_runtime::for_each(0..v.len(), |k| v.update(k, |x| *x = x.wrapping_mul(3)));
    let c = Spec::new(1u64);
    for x in v.into_vec() {
        c.update(|a| *a = a.wrapping_add(x));
    }
    let dropped = Spec::new(String::from("dropped"));
    dropped.set(String::from("inside the epoch"));
    drop(dropped);
    c.into_inner() ^ u64::from(n)
}

/// The sequential twin: the same program on plain data.
fn run_plain(p: &Program) -> Final {
    let mut cell = 7u64;
    let mut vec = vec![0u64; VEC_LEN as usize];
    let mut map: HashMap<u64, u64> = HashMap::new();
    let mut mem = vec![0u8; (MEM_WORDS * 8) as usize];
    let mut log = Vec::new();
    let mut escapes = 0i64;
    let mut nodes: Vec<Option<u64>> = vec![None; NODES as usize];
    let mut shared = PLAIN_INCREMENTS;
    let mut outcome = Outcome::Completed;
    'epochs: for i in 0..p.epochs {
        let mut h = i.wrapping_mul(0x9e3779b97f4a7c15) | 1;
        for op in &p.templates[(i % p.templates.len() as u64) as usize] {
            match *op {
                Op::Read(t, k) => {
                    let v = match t {
                        Target::Cell => cell,
                        Target::Vec => vec[key(k, i, p.stride, VEC_LEN) as usize],
                        Target::Map => *map.get(&key(k, i, p.stride, 16)).unwrap_or(&3),
                        Target::Mem => {
                            let a = key(k, i, p.stride, MEM_WORDS) as usize * 8;
                            u64::from_le_bytes(mem[a..a + 8].try_into().unwrap())
                        }
                    };
                    h = h.wrapping_mul(31).wrapping_add(v);
                }
                Op::Write(t, k) | Op::Update(t, k) => {
                    let update = matches!(op, Op::Update(..));
                    let f = |old: u64| if update { old.wrapping_add(h) } else { h ^ i };
                    match t {
                        Target::Cell => cell = f(cell),
                        Target::Vec => {
                            let s = &mut vec[key(k, i, p.stride, VEC_LEN) as usize];
                            *s = f(*s);
                        }
                        Target::Map => {
                            let k = key(k, i, p.stride, 16);
                            let old = map.get(&k).copied().unwrap_or(3);
                            map.insert(k, f(old));
                        }
                        Target::Mem => {
                            let a = key(k, i, p.stride, MEM_WORDS) as usize * 8;
                            let old = u64::from_le_bytes(mem[a..a + 8].try_into().unwrap());
                            mem[a..a + 8].copy_from_slice(&f(old).to_le_bytes());
                        }
                    }
                }
                Op::Compute(n) => h = work(n, h),
                Op::Checkpoint => {}
                Op::Escape => escapes += 1,
                Op::Log => log.push((i, h)),
                Op::Exit(kind, m) => {
                    if h % m == 0 {
                        outcome = match kind {
                            ExitKind::Break => Outcome::Broke,
                            ExitKind::Return => Outcome::Returned(h),
                            ExitKind::Panic => Outcome::Panicked(i),
                        };
                        break 'epochs;
                    }
                }
                Op::Local(n) => h = h.wrapping_add(local_plain(n, h)),
                Op::Nested(k) => {
                    let a = key(k, i, p.stride, VEC_LEN) as usize;
                    let b = (a + 1) % VEC_LEN as usize;
                    vec[a] = vec[a].wrapping_add(vec[b]);
                }
                Op::PanicInUpdate(m) => {
                    cell = cell.wrapping_add(h);
                    if h % m == 0 {
                        outcome = Outcome::Panicked(i);
                        break 'epochs;
                    }
                }
                Op::LogThenPanic(m) => {
                    log.push((i, h));
                    if h % m == 0 {
                        outcome = Outcome::Panicked(i);
                        break 'epochs;
                    }
                }
                Op::Link(k) => nodes[key(k, i, p.stride, NODES) as usize] = Some(h),
                Op::Follow(k) => {
                    if let Some(n) = nodes[key(k, i, p.stride, NODES) as usize].as_mut() {
                        *n = n.wrapping_add(h);
                        h = h.wrapping_mul(31).wrapping_add(*n);
                    }
                }
                Op::Unlink(k) => nodes[key(k, i, p.stride, NODES) as usize] = None,
                Op::Shared => shared += 1,
                Op::Threads(k) => {
                    let s = &mut vec[key(k, i, p.stride, VEC_LEN) as usize];
                    *s = s.wrapping_add(h);
                    h = h.wrapping_mul(31).wrapping_add(*s);
                }
            }
        }
    }
    let mut map: Vec<_> = map.into_iter().collect();
    map.sort();
    Final {
        cell,
        vec,
        map,
        mem,
        outcome,
        log,
        escapes,
        nodes,
        shared,
    }
}

/// Segment state: (epoch, running hash, next op).
type State = (u64, u64, usize);

fn run_speculative(p: &Program, threads: usize) -> Final {
    static ESCAPES: AtomicI64 = AtomicI64::new(0);
    static LOCK: EscapeLock = EscapeLock::new();
    static LOG: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
    static SERIALIZE: Mutex<()> = Mutex::new(());
    // The globals above are shared by the test threads: one program at a time.
    let _one = SERIALIZE.lock().unwrap_or_else(|e| e.into_inner());
    ESCAPES.store(0, Ordering::SeqCst);
    LOG.lock().unwrap().clear();

    let cell = Spec::new(7u64);
    let vec = SpecVec::from(vec![0u64; VEC_LEN as usize]);
    let hashing = MapHashing {
        colliding: p.colliding,
        std: RandomState::new(),
    };
    let map: SpecMap<u64, u64, MapHashing> = if p.colliding {
        SpecMap::with_hasher(hashing)
    } else {
        SpecMap::with_capacity_and_hasher(16, hashing)
    };
    let mem = SpecMemory::new((MEM_WORDS * 8) as usize);
    let nodes: SpecVec<Option<Arc<Spec<u64>>>> = SpecVec::from(vec![None; NODES as usize]);
    let shared = Spec::new(0u64);
    let step = |(i, mut h, mut at): State| -> Step<State, u64> {
        let ops = &p.templates[(i % p.templates.len() as u64) as usize];
        while at < ops.len() {
            let op = &ops[at];
            at += 1;
            match *op {
                Op::Read(t, k) => {
                    let v = match t {
                        Target::Cell => cell.get(),
                        Target::Vec => vec.get(key(k, i, p.stride, VEC_LEN) as usize),
                        Target::Map => map.get(&key(k, i, p.stride, 16)).unwrap_or(3),
                        Target::Mem => mem.read_u64(key(k, i, p.stride, MEM_WORDS) as usize * 8),
                    };
                    h = h.wrapping_mul(31).wrapping_add(v);
                }
                Op::Write(t, k) => {
                    let v = h ^ i;
                    match t {
                        Target::Cell => cell.set(v),
                        Target::Vec => vec.set(key(k, i, p.stride, VEC_LEN) as usize, v),
                        Target::Map => {
                            map.insert(key(k, i, p.stride, 16), v);
                        }
                        Target::Mem => {
                            mem.write_u64(key(k, i, p.stride, MEM_WORDS) as usize * 8, v)
                        }
                    }
                }
                Op::Update(t, k) => match t {
                    Target::Cell => cell.update(|c| *c = c.wrapping_add(h)),
                    Target::Vec => vec.update(key(k, i, p.stride, VEC_LEN) as usize, |c| {
                        *c = c.wrapping_add(h)
                    }),
                    Target::Map => {
                        let k = key(k, i, p.stride, 16);
                        let old = map.get(&k).unwrap_or(3);
                        map.insert(k, old.wrapping_add(h));
                    }
                    Target::Mem => {
                        let a = key(k, i, p.stride, MEM_WORDS) as usize * 8;
                        let old = mem.read_u64(a);
                        mem.write_u64(a, old.wrapping_add(h));
                    }
                },
                Op::Compute(n) => h = work(n, h),
                Op::Checkpoint => return Step::Checkpoint((i, h, at)),
                Op::Escape => {
                    escape(&LOCK, || ESCAPES.fetch_add(1, Ordering::SeqCst));
                    on_violation(|| {
                        ESCAPES.fetch_sub(1, Ordering::SeqCst);
                    });
                }
                Op::Log => on_commit(move || LOG.lock().unwrap().push((i, h))),
                Op::Local(n) => h = h.wrapping_add(local_spec(n, h)),
                Op::Nested(k) => {
                    let a = key(k, i, p.stride, VEC_LEN) as usize;
                    let b = (a + 1) % VEC_LEN as usize;
                    vec.update(a, |x| *x = x.wrapping_add(vec.get(b)));
                }
                Op::PanicInUpdate(m) => cell.update(|c| {
                    *c = c.wrapping_add(h);
                    if h % m == 0 {
                        std::panic::panic_any(EpochPanic(i));
                    }
                }),
                Op::LogThenPanic(m) => on_commit(move || {
                    LOG.lock().unwrap().push((i, h));
                    if h % m == 0 {
                        std::panic::panic_any(EpochPanic(i));
                    }
                }),
                Op::Link(k) => {
                    let node = Arc::new(Spec::new(0u64));
                    node.set(h);
                    nodes.set(key(k, i, p.stride, NODES) as usize, Some(node));
                }
                Op::Follow(k) => {
                    if let Some(n) = nodes.get(key(k, i, p.stride, NODES) as usize) {
                        let v = n.update(|v| {
                            *v = v.wrapping_add(h);
                            *v
                        });
                        h = h.wrapping_mul(31).wrapping_add(v);
                    }
                }
                Op::Unlink(k) => nodes.set(key(k, i, p.stride, NODES) as usize, None),
                Op::Shared => shared.update(|s| *s += 1),
                Op::Threads(k) => {
                    let a = key(k, i, p.stride, VEC_LEN) as usize;
                    let v = tls_runtime::scope(|s| {
                        let t = s.spawn(|| {
                            vec.update(a, |x| {
                                *x = x.wrapping_add(h);
                                *x
                            })
                        });
                        t.join().unwrap()
                    });
                    h = h.wrapping_mul(31).wrapping_add(v);
                }
                Op::Exit(kind, m) => {
                    if h % m == 0 {
                        match kind {
                            ExitKind::Break => return Step::Done(Control::Break),
                            ExitKind::Return => return Step::Done(Control::Return(h)),
                            ExitKind::Panic => std::panic::panic_any(EpochPanic(i)),
                        }
                    }
                }
            }
        }
        Step::Done(Control::Continue)
    };
    let run = std::thread::scope(|s| {
        // A plain thread updating data the loop updates too: no increment may be lost.
        s.spawn(|| {
            for _ in 0..PLAIN_INCREMENTS {
                shared.update(|s| *s += 1);
                std::hint::spin_loop();
            }
        });
        catch_unwind(AssertUnwindSafe(|| {
            // A fresh adaptive site per run: one program's dependences must not switch
            // the next program to in-order execution.
            let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
            Loop::new().threads(threads).site(site).run_segments(
                0..p.epochs,
                |i| (i, i.wrapping_mul(0x9e3779b97f4a7c15) | 1, 0),
                step,
            )
        }))
    });
    let outcome = match run {
        Ok(LoopOutcome::Completed) => Outcome::Completed,
        Ok(LoopOutcome::Broke) => Outcome::Broke,
        Ok(LoopOutcome::Returned(h)) => Outcome::Returned(h),
        Err(payload) => match payload.downcast::<EpochPanic>() {
            Ok(p) => Outcome::Panicked(p.0),
            Err(other) => std::panic::resume_unwind(other),
        },
    };
    let mut map: Vec<_> = map.into_map().into_iter().collect();
    map.sort();
    Final {
        cell: cell.into_inner(),
        vec: vec.into_vec(),
        map,
        mem: mem.into_bytes(),
        outcome,
        log: std::mem::take(&mut *LOG.lock().unwrap()),
        escapes: ESCAPES.load(Ordering::SeqCst),
        nodes: nodes
            .into_vec()
            .into_iter()
            .map(|n| n.map(|n| n.get()))
            .collect(),
        shared: shared.into_inner(),
    }
}

fn quiet_epoch_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<EpochPanic>().is_none() {
                previous(info)
            }
        }));
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn speculative_runs_equal_the_sequential_program(p in program()) {
        quiet_epoch_panics();
        let want = run_plain(&p);
        for threads in [1, 2, 4] {
            let got = run_speculative(&p, threads);
            prop_assert_eq!(&got, &want, "threads = {}", threads);
        }
        // Again with one check in five rolling its epoch back: every rollback path
        // (each kind of access, checkpoints, escapes, commit actions) taken often.
        tls_runtime::inject_violations(200_000);
        let got = run_speculative(&p, 2);
        tls_runtime::inject_violations(0);
        prop_assert_eq!(&got, &want, "threads = 2, violations injected");
    }
}
