//! A process's first speculative loop, run by a destructor while a panic unwinds (a
//! guard that flushes or rolls something back). The runtime installs its panic hook
//! at the first loop, and the standard library refuses hook changes on a panicking
//! thread: that must not turn the unwind into an abort. Its own test binary, so that
//! the loop below really is the first.

use tls_runtime::{Control, Loop, SpecVec};

struct FlushOnDrop;

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        let v = SpecVec::from(vec![0u64; 64]);
        Loop::new().threads(2).run(0..64usize, |i| {
            v.set(i, i as u64 * 3);
            Control::<()>::Continue
        });
        assert_eq!(v.into_vec(), (0..64u64).map(|i| i * 3).collect::<Vec<_>>());
    }
}

#[test]
fn the_first_loop_may_run_in_a_destructor_during_an_unwind() {
    let unwound = std::panic::catch_unwind(|| {
        let _guard = FlushOnDrop;
        panic!("on purpose");
    });
    assert!(unwound.is_err());
    // And loops after it still work.
    let w = SpecVec::from(vec![0u64; 16]);
    tls_runtime::for_each(0..16usize, |i| w.set(i, i as u64));
    assert_eq!(w.into_vec(), (0..16u64).collect::<Vec<_>>());
}
