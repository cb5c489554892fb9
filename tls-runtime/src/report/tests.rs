//! The report's own tests: names made printable, counts, which threads ran.

use super::*;

#[test]
fn control_characters_in_a_name_are_escaped() {
    assert_eq!(super::printable("items été"), "items été");
    assert_eq!(super::printable("a\nb\t\u{1b}[31m"), "a\\nb\\t\\u{1b}[31m");
}

/// Two participants, one of which ran nothing: the report says one of the two
/// threads ran epochs; with both, it says nothing more.
#[test]
fn a_report_says_when_not_every_thread_ran_epochs() {
    let report = |helper_ran: bool| {
        let mut all = ThreadStats::default();
        all.merge(ThreadStats {
            epochs: 10,
            items: 10,
            busy: Duration::from_micros(100),
            ..ThreadStats::default()
        });
        all.merge(ThreadStats {
            epochs: u64::from(helper_ran),
            ..ThreadStats::default()
        });
        let wall = Duration::from_micros(100);
        all.into_report("l".into(), Location::caller(), RunMode::Parallel, 2, wall)
    };
    assert_eq!(counted(1, "thread"), "1 thread");
    assert_eq!(counted(0, "epoch"), "0 epochs");
    let alone = report(false);
    assert_eq!(alone.threads_ran, 1);
    assert!(
        alone
            .to_string()
            .contains("(Parallel, 2 threads, 1 of them ran epochs)")
    );
    let both = report(true);
    assert_eq!(both.threads_ran, 2);
    assert!(both.to_string().contains("(Parallel, 2 threads)"), "{both}");
}
