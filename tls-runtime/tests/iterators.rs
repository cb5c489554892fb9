//! Loops over iterators of every length: endless ones ended by `break` or `return`,
//! and the length automatic chunking plans with.

use tls_runtime::{Control, Loop, SpecVec, tls_loop};

/// `0..` and `repeat(..)` claim `usize::MAX` items: no plan may be made for that
/// (it overflowed in debug builds at an even thread count).
#[test]
fn endless_iterators_end_where_the_body_ends_them() {
    let v = SpecVec::from(vec![1u64, 1, 1, 1, 0, 1, 1]);
    for threads in 1..=6 {
        let gap = Loop::new().threads(threads).run(0usize.., |i| {
            if i >= v.len() || v.get(i) == 0 {
                Control::Return(i)
            } else {
                Control::Continue
            }
        });
        assert_eq!(gap.returned(), Some(4), "{threads} threads");
        let seen = SpecVec::from(vec![0u64; 40]);
        Loop::new()
            .threads(threads)
            .run(std::iter::repeat(3u64).enumerate(), |(i, x)| {
                if i == 40 {
                    return Control::<()>::Break;
                }
                seen.set(i, x * i as u64);
                Control::Continue
            });
        assert_eq!(
            seen.into_vec(),
            (0..40).map(|i| 3 * i).collect::<Vec<u64>>(),
            "{threads} threads"
        );
        assert_eq!(first_zero(&v, threads), 4, "{threads} threads");
    }
}

#[tls_loop(threads = threads)]
fn first_zero(v: &SpecVec<u64>, threads: usize) -> usize {
    for i in 0usize.. {
        if i >= v.len() || v.get(i) == 0 {
            return i;
        }
    }
    unreachable!()
}

/// A `#[tls_loop]` loop's items keep their iterator's bound, so that automatic
/// chunking evens out its runs as it does `Loop::run`'s.
#[test]
fn a_marked_loop_s_items_keep_their_bound() {
    let items = tls_runtime::__private::epoch_items(0..10u32);
    assert_eq!(items.size_hint(), (10, Some(10)));
    let items = tls_runtime::__private::epoch_items([1, 2, 3].iter().filter(|&&x| x > 1));
    assert_eq!(items.size_hint(), (0, Some(3)));
}
