//! Property tests: random loop programs run speculatively at 1, 2 and 4 threads must
//! leave exactly what the same program leaves when run as plain sequential Rust:
//! final data, loop outcome, commit-time log, and escaped calls (each committed call
//! kept once, every rolled-back one undone).

use proptest::prelude::*;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
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
    ]
}

#[derive(Debug, Clone)]
struct Program {
    templates: Vec<Vec<Op>>,
    epochs: u64,
    stride: u64,
}

fn program() -> impl Strategy<Value = Program> {
    (
        prop::collection::vec(prop::collection::vec(op(), 1..12), 1..4),
        1..60u64,
        1..5u64,
    )
        .prop_map(|(templates, epochs, stride)| Program {
            templates,
            epochs,
            stride,
        })
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
}

struct EpochPanic(u64);

/// The sequential twin: the same program on plain data.
fn run_plain(p: &Program) -> Final {
    let mut cell = 7u64;
    let mut vec = vec![0u64; VEC_LEN as usize];
    let mut map: HashMap<u64, u64> = HashMap::new();
    let mut mem = vec![0u8; (MEM_WORDS * 8) as usize];
    let mut log = Vec::new();
    let mut escapes = 0i64;
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
    let map: SpecMap<u64, u64> = SpecMap::new();
    let mem = SpecMemory::new((MEM_WORDS * 8) as usize);
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
    let run = catch_unwind(AssertUnwindSafe(|| {
        // A fresh adaptive site per run: one program's dependences must not switch the
        // next program to in-order execution.
        let site: &'static LoopSite = Box::leak(Box::new(LoopSite::new()));
        Loop::new().threads(threads).site(site).run_segments(
            0..p.epochs,
            |i| (i, i.wrapping_mul(0x9e3779b97f4a7c15) | 1, 0),
            step,
        )
    }));
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
    }
}
