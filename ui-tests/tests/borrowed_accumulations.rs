//! Accumulations whose arguments borrow the iteration's own data: `out.push_str(&s)`
//! with a local `s`, `text += &x.to_string()`, `out.extend(local.iter())`. The update
//! runs at commit, after the iteration; these must copy what they borrow while it is
//! there (they once kept the borrow, and read freed memory at commit). Each function
//! is written once and expanded twice, with and without `#[tls_loop]`, and compared
//! at 1, 2 and 4 threads, with injected violations and with real ones (every body
//! reads and writes a shared `SpecVec`, so that updates of rolled-back attempts are
//! thrown away).

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use tls_runtime::{SpecVec, inject_violations};

/// Busy work, so epochs overlap.
fn work(x: u64) -> u64 {
    let mut h = x ^ 0x9e37_79b9_7f4a_7c15;
    for _ in 0..100 {
        h = h.wrapping_mul(0x5851_f42d_4c95_7f2d).wrapping_add(1) ^ (h >> 29);
    }
    h
}

/// A string builder of the program's own: not a standard collection, so its appends
/// are recorded as they are (their arguments owned here).
#[derive(Default, Debug, PartialEq)]
pub struct Lines(Vec<String>);

impl Lines {
    fn push_str(&mut self, s: String) {
        self.0.push(s);
    }

    /// Appends `count` marks: an `extend` that takes no iterator.
    fn extend(&mut self, count: u64) {
        for _ in 0..count {
            self.0.push("+".into());
        }
    }
}

/// Sums of slices it is given: an `extend` that takes a slice (the caller's, which
/// outlives the loop), not its items.
#[derive(Default, Debug, PartialEq)]
pub struct Sums(Vec<u64>);

impl Sums {
    fn extend(&mut self, from: &[u64]) {
        self.0.push(from.iter().sum());
    }
}

/// A reading without a copy (not `Clone`): `total += &readings[i]` keeps the borrow,
/// of the caller's slice, which outlives the loop.
pub struct Reading(u64);

/// Adds readings it is given by reference.
#[derive(Default, Debug, PartialEq)]
pub struct Total(u64);

impl std::ops::AddAssign<&Reading> for Total {
    fn add_assign(&mut self, r: &Reading) {
        self.0 = self.0.wrapping_mul(31).wrapping_add(r.0);
    }
}

/// What `collections` builds.
type Collected = (
    Vec<u64>,
    Vec<u64>,
    BTreeSet<u64>,
    HashSet<u64>,
    VecDeque<u64>,
    BTreeMap<u64, String>,
    u64,
);

/// Writes each function twice: `annotated::f` with `#[tls_loop(threads = T)]` (`T`
/// one of its parameters, named first), `plain::f` as written.
macro_rules! twins {
    ($threads:ident; $($item:item)*) => {
        mod annotated {
            use super::*;
            $( #[tls_runtime::tls_loop(threads = $threads)] $item )*
        }
        mod plain {
            #![allow(unused_variables)]
            use super::*;
            $( $item )*
        }
    };
}

twins! {
    threads;

    pub(super) fn strings(xs: &[u64], shared: &SpecVec<u64>, threads: usize) -> (String, String, String, Lines, Sums) {
        let mut csv = String::new();
        let mut named = String::new();
        let mut text = String::new();
        let mut lines = Lines::default();
        let mut sums = Sums::default();
        for &x in xs {
            let w = work(x) + shared.get((x % 8) as usize);
            csv.push_str(&format!("{w},"));
            let piece = format!("<{}>", w % 1000);
            named.push_str(&piece);
            text += &(w % 77).to_string();
            text += piece.as_str().get(..2).map_or("", |_| ";");
            lines.push_str(piece.clone());
            lines.extend(w % 3);
            sums.extend(&xs[(x as usize) % 8..]);
            if w.is_multiple_of(5) {
                shared.set((x % 8) as usize, w % 3);
            }
        }
        (csv, named, text, lines, sums)
    }

    pub(super) fn collections(
        xs: &[u64],
        shared: &SpecVec<u64>,
        threads: usize,
    ) -> Collected {
        let mut refs = Vec::new();
        let mut slices = Vec::new();
        let mut set = BTreeSet::new();
        let mut hashed = HashSet::new();
        let mut queue = VecDeque::new();
        let mut names = BTreeMap::new();
        let mut sum = 0u64;
        for &x in xs {
            let w = work(x) + shared.get((x % 8) as usize);
            let local = vec![w % 100, w % 7, x];
            refs.extend(local.iter());
            slices.extend_from_slice(&local);
            set.extend(&local);
            // Not given a part (its order depends on the inserts'): owned items.
            hashed.extend(local.iter().copied());
            queue.extend(local.iter().rev());
            let label = format!("{x}:{}", w % 9);
            names.extend([(w % 40, label.clone())]);
            let boxed = Box::new(w % 1000);
            sum += &*boxed;
            if w.is_multiple_of(7) {
                shared.update((x % 8) as usize, |s| *s += 1);
            }
        }
        (refs, slices, set, hashed, queue, names, sum)
    }

    pub(super) fn readings(readings: &[Reading], shared: &SpecVec<u64>, threads: usize) -> Total {
        let mut total = Total::default();
        for i in 0..readings.len() {
            let w = work(i as u64) + shared.get(i % 8);
            total += &readings[(w % readings.len() as u64) as usize];
            if w.is_multiple_of(3) {
                shared.set(i % 8, w % 5);
            }
        }
        total
    }
}

#[test]
fn borrowed_arguments_of_accumulations_give_the_sequential_result() {
    let xs: Vec<u64> = (0..2000).collect();
    let fresh = || SpecVec::from(vec![0u64; 8]);
    let (s, c) = (fresh(), fresh());
    let readings: Vec<Reading> = (0..500).map(Reading).collect();
    let r = fresh();
    let expected = (
        plain::strings(&xs, &s, 1),
        plain::collections(&xs, &c, 1),
        plain::readings(&readings, &r, 1),
    );
    let expected_shared = (s.into_vec(), c.into_vec(), r.into_vec());
    for inject in [0, 150_000] {
        for threads in [1, 2, 4] {
            for round in 0..3 {
                let (s, c, r) = (fresh(), fresh(), fresh());
                inject_violations(inject);
                let got = (
                    annotated::strings(&xs, &s, threads),
                    annotated::collections(&xs, &c, threads),
                    annotated::readings(&readings, &r, threads),
                );
                inject_violations(0);
                let what = format!("threads {threads}, injected {inject}, round {round}");
                assert_eq!(got, expected, "{what}");
                let shared = (s.into_vec(), c.into_vec(), r.into_vec());
                assert_eq!(shared, expected_shared, "{what}");
            }
        }
    }
}
