//! `TLS_MODE=profile` predicts speedups from an in-order run. The loops here have known
//! structure; a child process runs them in profile mode and writes the JSON report.

use std::process::Command;
use tls_runtime::{Control, Loop, Spec, SpecVec, Step};

#[path = "helpers/published.rs"]
mod published;

fn spin(us: u64) -> u64 {
    let t = std::time::Instant::now();
    let mut x = 1u64;
    while t.elapsed().as_micros() < u128::from(us) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    x
}

fn loops() {
    let out = SpecVec::from(vec![0u64; 400]);
    Loop::new().name("independent").run(0..400usize, |i| {
        out.set(i, spin(20));
        Control::<()>::Continue
    });
    let acc = Spec::new(0u64);
    Loop::new().name("chain").run(0..200u64, |i| {
        let a = acc.get();
        spin(20);
        acc.set(a ^ i);
        Control::<()>::Continue
    });
    let shared = Spec::new(0u64);
    Loop::new().name("every fourth").run(0..400usize, |i| {
        let s = if i % 4 == 0 { shared.get() } else { 0 };
        let x = spin(20);
        out.set(i, x);
        if i % 4 == 0 {
            shared.set(s.wrapping_add(x));
        }
        Control::<()>::Continue
    });
    #[derive(Clone)]
    enum Seg {
        Head(usize),
        Tail(u64),
    }
    let tail = Spec::new(0u64);
    Loop::new()
        .name("checkpointed tail")
        .run_segments(0..200usize, Seg::Head, |s| match s {
            Seg::Head(i) => Step::Checkpoint(Seg::Tail(spin(40) ^ i as u64)),
            Seg::Tail(x) => {
                tail.update(|t| *t = t.wrapping_add(x));
                Step::Done(Control::<()>::Continue)
            }
        });
    // For the advice: a load late in each epoch of what the previous one stores at
    // its end, and a running total every epoch updates last.
    let last = Spec::new(0u64);
    Loop::new().name("late load").run(0..200usize, |i| {
        let x = spin(20);
        let before = last.get();
        out.set(i, before ^ x);
        last.set(x ^ i as u64);
        Control::<()>::Continue
    });
    // Iteration 4k+1 needs, first thing, what 4k made at its end: a true dependence.
    let made = Spec::new(0u64);
    Loop::new().name("neighbours").run(0..200usize, |i| {
        let s = if i % 4 == 1 { made.get() } else { 0 };
        let x = spin(20) ^ s;
        out.set(i, x);
        if i % 4 == 0 {
            made.set(x);
        }
        Control::<()>::Continue
    });
    // The late load again, with a checkpoint already right before it; and with one
    // at the epoch's start, far before it.
    let kept = Spec::new(0u64);
    Loop::new()
        .name("late load, checkpointed")
        .run_segments(0..200usize, Seg::Head, |s| match s {
            Seg::Head(i) => Step::Checkpoint(Seg::Tail(spin(20) ^ i as u64)),
            Seg::Tail(x) => {
                let before = kept.get();
                kept.set(before ^ x);
                Step::Done(Control::<()>::Continue)
            }
        });
    let early = Spec::new(0u64);
    Loop::new()
        .name("late load, early checkpoint")
        .run_segments(0..200usize, Seg::Head, |s| match s {
            Seg::Head(i) => Step::Checkpoint(Seg::Tail(i as u64)),
            Seg::Tail(i) => {
                let x = spin(20) ^ i;
                let before = early.get();
                early.set(before ^ x);
                Step::Done(Control::<()>::Continue)
            }
        });
    let total = Spec::new(0u64);
    Loop::new().name("running total").run(0..200usize, |i| {
        let x = spin(20) ^ i as u64;
        total.update(|t| *t = t.wrapping_add(x));
        Control::<()>::Continue
    });
    // Shapes an outside probe found misadvised: a late load of what the iteration
    // before published, both through helpers in another file (it was advised an
    // escape, which, applied, gave wrong results); a counter bumped first thing
    // whose value the iteration goes on with (it was advised an accumulation).
    let shared = Spec::new(0u64);
    Loop::new()
        .name("late load through helpers")
        .run(0..200usize, |i| {
            let x = spin(20);
            let before = published::latest(&shared);
            out.set(i, before ^ x);
            published::publish(&shared, x ^ i as u64);
            Control::<()>::Continue
        });
    let next = Spec::new(0u64);
    Loop::new().name("counter first").run(0..200usize, |i| {
        let id = next.update(|c| {
            *c += 1 + i as u64 % 2;
            *c
        });
        out.set(i, spin(20) ^ id);
        Control::<()>::Continue
    });
    let r = tls_runtime::last_report().unwrap();
    assert_eq!(r.mode, tls_runtime::RunMode::Profile);
    assert!(r.predicted_speedup.is_some());
}

#[test]
fn child() {
    if std::env::var_os("TLS_PROFILE_CHILD").is_some() {
        loops();
    }
}

/// The predictions come from a run's own timings (the epochs' lengths, the
/// calibrated per-epoch cost), which another tenant of a shared machine can disturb
/// for seconds (two plain threads have been seen running no faster than one): a
/// failed check is run again, up to three times, and must pass once.
/// The tests' child processes take turns: two at once on a small machine would
/// disturb the timings the predictions are built from.
static CHILDREN: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn profile_mode_predicts_speedups_by_loop_structure() {
    let _turn = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
    for attempt in 1..=3 {
        match std::panic::catch_unwind(predictions_follow_loop_structure) {
            Ok(()) => return,
            Err(_) if attempt < 3 => eprintln!("attempt {attempt} failed (above); again"),
            Err(e) => std::panic::resume_unwind(e),
        }
    }
}

fn predictions_follow_loop_structure() {
    let dir = std::env::temp_dir().join(format!("tls-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report.json");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env("TLS_PROFILE_CHILD", "1")
        .env("TLS_MODE", "profile")
        .env("TLS_REPORT", &report)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let find = |name: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
            .unwrap_or_else(|| panic!("no loop {name} in {v}"))["predicted_speedup"]
            .clone()
    };
    let p = |name: &str, cores: &str| find(name)[cores].as_f64().unwrap();
    // The runtime's own calibration loop is not the user's: it never appears.
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .all(|l| !l["name"].as_str().unwrap().contains("calibration")),
        "{v}"
    );
    for name in ["independent", "chain", "every fourth", "checkpointed tail"] {
        for cores in ["1", "2", "4", "8", "16", "32", "64"] {
            assert!(p(name, cores) > 0.0, "{name} {cores}");
        }
        assert!((p(name, "1") - 1.0).abs() < 0.05, "{name}: {}", find(name));
    }
    // No dependences: close to the core count (20 us epochs dwarf the runtime's costs).
    assert!(p("independent", "2") > 1.8, "{}", find("independent"));
    // Further out, the shape rather than the figure: the per-epoch cost the
    // calibration measures on a shared machine moves the 16-core prediction by
    // tens of percent between runs (9.96x and 15x+ seen for this loop).
    assert!(
        p("independent", "16") > p("independent", "8")
            && p("independent", "8") > p("independent", "4")
            && p("independent", "16") > 6.0,
        "{}",
        find("independent")
    );
    // A full chain gains nothing (the runtime falls back to in-order execution).
    assert!(p("chain", "2") < 1.1, "{}", find("chain"));
    assert!(p("chain", "64") < 1.1, "{}", find("chain"));
    // One dependence every fourth epoch: fine on 2 cores, limited further out.
    assert!(p("every fourth", "2") > 1.6, "{}", find("every fourth"));
    assert!(p("every fourth", "64") < p("independent", "64"), "{v}");
    // A short conflicting tail after a checkpoint: the heads overlap.
    assert!(
        p("checkpointed tail", "2") > 1.6,
        "{}",
        find("checkpointed tail")
    );
    // The advice on each loop's top predicted dependence, and the gain it predicts.
    let advice = |name: &str| {
        let l = v
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
            .unwrap();
        l["dependences"][0]["advice"].clone()
    };
    let kind = |name: &str| advice(name)["kind"].as_str().unwrap_or("none").to_string();
    let after = |name: &str| advice(name)["predicted_speedup_2"].as_f64().unwrap();
    // The chain loads one location at its epoch's start and stores it at its end: a
    // value the iteration goes on with (a counter, an id), as far as the runtime can
    // see, so a true dependence; the text names the accumulation for a loop that
    // needs the value only at its end.
    assert_eq!(kind("chain"), "true dependence", "{}", advice("chain"));
    let text = advice("chain")["text"].as_str().unwrap().to_string();
    assert!(
        text.contains("early in its epoch") && text.contains("accumulation"),
        "{text}"
    );
    assert_eq!(
        kind("neighbours"),
        "true dependence",
        "{}",
        advice("neighbours")
    );
    assert_eq!(kind("late load"), "checkpoint", "{}", advice("late load"));
    // What it keeps is the work before the load, less what each rollback of the
    // tail costs (unwinding: several microseconds here). Without it, the runtime
    // synchronizes the load when it violates most epochs (and so does the
    // prediction), which keeps most of that work too: the fix is predicted no worse,
    // not necessarily much better.
    assert!(after("late load") > 1.1, "{}", advice("late load"));
    assert!(
        after("late load") >= p("late load", "2") - 0.05,
        "{} {}",
        find("late load"),
        advice("late load")
    );
    // With a checkpoint right before the load, another one would keep nothing: not
    // advised (the load and the store hit one location in every epoch, so it is
    // advised as the accumulation it may be). With the checkpoint at the epoch's
    // start, the work between it and the load is what one before the load keeps.
    assert_ne!(
        kind("late load, checkpointed"),
        "checkpoint",
        "{}",
        advice("late load, checkpointed")
    );
    assert_eq!(
        kind("late load, early checkpoint"),
        "checkpoint",
        "{}",
        advice("late load, early checkpoint")
    );
    assert_eq!(
        kind("late load through helpers"),
        "checkpoint",
        "{}",
        advice("late load through helpers")
    );
    let text = advice("late load through helpers")["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.contains("in the loop body, just before the call that leads to it"),
        "{text}"
    );
    assert_eq!(
        kind("counter first"),
        "true dependence",
        "{}",
        advice("counter first")
    );
    // A total updated last by every epoch: whether the model's lockstep threads
    // collide on it depends on the recorded lengths (real threads collide about half
    // the time), so only the advice is checked, when the dependence shows.
    if kind("running total") != "none" {
        assert_eq!(
            kind("running total"),
            "accumulate",
            "{}",
            advice("running total")
        );
        assert!(after("running total") > 1.5, "{}", advice("running total"));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn injected_child() {
    if std::env::var_os("TLS_PROFILE_INJECT_CHILD").is_some() {
        // Injection on before the process's first loop: profile mode's calibration,
        // which runs then, must not be hit by it.
        tls_runtime::inject_violations(100_000);
        let v = tls_runtime::SpecVec::from(vec![0u64; 10]);
        tls_runtime::for_each(0..10usize, |i| v.update(i, |x| *x += 1));
        tls_runtime::inject_violations(0);
        assert_eq!(v.into_vec(), vec![1; 10]);
        println!("INJECTED CHILD DONE");
    }
}

/// Violation injection and profile mode together (a test suite run with
/// `TLS_MODE=profile`): the calibration's own epochs are not injected into.
#[test]
fn profile_mode_runs_with_violations_injected() {
    let out = profiled_child("injected_child", "TLS_PROFILE_INJECT_CHILD");
    assert!(out.contains("INJECTED CHILD DONE"));
}

/// Runs this binary's test `test` alone in a child process in profile mode, with
/// `var` set (the test's switch), after the children before it; its output, once it
/// has passed.
fn profiled_child(test: &str, var: &str) -> String {
    let _turn = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(var, "1")
        .env("TLS_MODE", "profile")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn own_writes_child() {
    if std::env::var_os("TLS_PROFILE_OWN_WRITES_CHILD").is_none() {
        return;
    }
    // A write made inside another location's closure (values with drop glue run
    // `with` under the slot's lock) is a version of the epoch's own, not a write in
    // place: the read after it must see it.
    let n = 50usize;
    let names = SpecVec::from((0..n).map(|i| "x".repeat(i + 1)).collect::<Vec<String>>());
    let lens = SpecVec::from(vec![0usize; n]);
    let seen = SpecVec::from(vec![0usize; n]);
    tls_runtime::for_each(0..n, |i| {
        names.with(i, |s| lens.set(i, s.len()));
        seen.set(i, lens.get(i));
    });
    assert_eq!(seen.into_vec(), (1..=n).collect::<Vec<_>>());
    // A destructor that writes and reads back while the iteration's panic unwinds.
    static READ_BACK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    struct Guard<'a>(&'a SpecVec<usize>);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            self.0.set(0, 7);
            READ_BACK.store(self.0.get(0), std::sync::atomic::Ordering::SeqCst);
        }
    }
    let x = SpecVec::from(vec![0usize; 1]);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tls_runtime::for_each(0..1usize, |_| {
            let _g = Guard(&x);
            panic!("the iteration panics");
        });
    }));
    assert!(panicked.is_err());
    assert_eq!(READ_BACK.load(std::sync::atomic::Ordering::SeqCst), 7);
    println!("OWN WRITES CHILD DONE");
}

/// Profile mode reads committed values while an epoch holds no version of its own,
/// and its own versions once it does (a write inside another location's closure, or
/// while a panic unwinds): the read after such a write saw the value before it.
#[test]
fn profile_mode_reads_see_the_epochs_own_writes() {
    let out = profiled_child("own_writes_child", "TLS_PROFILE_OWN_WRITES_CHILD");
    assert!(out.contains("OWN WRITES CHILD DONE"));
}
