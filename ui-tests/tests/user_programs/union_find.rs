//! Union-find over a stream of edges: `find` is a plain helper walking parent links in
//! a `SpecVec` (tracked reads in a loop, so a zombie is caught at each `get`), `union`
//! writes sizes with a nested access, each edge makes a local `Spec` scratch, merges
//! accumulate across a checkpoint, and the loop returns `None` early when a forbidden
//! pair is joined.

use crate::common::{ROUNDS, THREADS, assert_same, spin};
use tls_runtime::{Spec, SpecVec, checkpoint, tls_loop};

struct Forest {
    parent: SpecVec<usize>,
    size: SpecVec<u64>,
}

fn find(parent: &SpecVec<usize>, mut x: usize) -> usize {
    let mut hops = 0;
    while parent.get(x) != x {
        x = parent.get(x);
        hops += 1;
        // Stale links can form a cycle in a zombie; a tracked access rolls it back,
        // and this bound makes a plain panic the worst case (a zombie's is never seen).
        assert!(hops < 10_000, "cycle in parent links");
    }
    x
}

impl Forest {
    fn new(n: usize) -> Self {
        Forest {
            parent: SpecVec::from((0..n).collect::<Vec<_>>()),
            size: SpecVec::from(vec![1; n]),
        }
    }

    fn union(&self, a: usize, b: usize) -> bool {
        let (ra, rb) = (find(&self.parent, a), find(&self.parent, b));
        if ra == rb {
            return false;
        }
        let (big, small) = if self.size.get(ra) >= self.size.get(rb) {
            (ra, rb)
        } else {
            (rb, ra)
        };
        self.parent.set(small, big);
        // Nested access: the big root's size grows by the small one's, read inside.
        self.size.update(big, |s| *s += self.size.get(small));
        true
    }
}

#[tls_loop(name = "unions", threads = threads)]
fn connect(
    f: &Forest,
    edges: &[(usize, usize)],
    forbidden: (usize, usize),
    threads: usize,
) -> Option<(u64, Vec<usize>)> {
    let mut merges = 0u64;
    let mut order = Vec::new();
    for (k, &(a, b)) in edges.iter().enumerate() {
        let scratch = Spec::new(0u64);
        scratch.set(spin((k % 3) as u64) % 2);
        let w = scratch.into_inner();
        checkpoint!();
        if f.union(a, b) {
            merges += 1;
            order.push(k);
        }
        if find(&f.parent, forbidden.0) == find(&f.parent, forbidden.1) {
            return None;
        }
        let _ = w;
    }
    Some((merges, order))
}

/// The sequential twin.
fn connect_plain(
    parent: &mut [usize],
    size: &mut [u64],
    edges: &[(usize, usize)],
    forbidden: (usize, usize),
) -> Option<(u64, Vec<usize>)> {
    fn pfind(p: &[usize], mut x: usize) -> usize {
        while p[x] != x {
            x = p[x];
        }
        x
    }
    let mut merges = 0;
    let mut order = vec![];
    for (k, &(a, b)) in edges.iter().enumerate() {
        let (ra, rb) = (pfind(parent, a), pfind(parent, b));
        if ra != rb {
            let (big, small) = if size[ra] >= size[rb] {
                (ra, rb)
            } else {
                (rb, ra)
            };
            parent[small] = big;
            size[big] += size[small];
            merges += 1;
            order.push(k);
        }
        if pfind(parent, forbidden.0) == pfind(parent, forbidden.1) {
            return None;
        }
    }
    Some((merges, order))
}

/// Unions of a stream of edges through a `#[tls_loop]` function (parent links walked
/// with tracked reads, sizes grown by a nested access, a local `Spec` per edge, a
/// checkpoint, an early `return None` once a forbidden pair is joined) leave the same
/// result, parents and sizes as the sequential twin, for a forbidden pair that never
/// joins and one that joins midway.
#[test]
fn union_find_matches_the_sequential_forest() {
    let (n, m) = (200, 400);
    let edges: Vec<(usize, usize)> = (0..m)
        .map(|i| ((i * 17 + 3) % n, (i * 29 + 11) % n))
        .collect();
    for threads in THREADS {
        for round in 0..ROUNDS {
            // Edges join only nodes of equal parity, so 0 and 1 never join and the loop
            // completes; 63 and 31 join at edge 180, and the loop returns `None` there.
            for (forbidden, completes) in [((0, 1), true), ((63, 31), false)] {
                let what = format!(
                    "union-find, threads = {threads}, round {round}, forbidden {forbidden:?}"
                );
                let f = Forest::new(n);
                let got = connect(&f, &edges, forbidden, threads);
                let (mut p, mut s) = ((0..n).collect::<Vec<_>>(), vec![1u64; n]);
                let want = connect_plain(&mut p, &mut s, &edges, forbidden);
                assert_eq!(want.is_some(), completes, "{what}: twin");
                assert_eq!(got, want, "{what}: result");
                assert_same(&f.parent.into_vec(), &p, &format!("{what}: parents"));
                assert_same(&f.size.into_vec(), &s, &format!("{what}: sizes"));
            }
        }
    }
}
