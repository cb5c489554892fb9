//! The buffer pool's memory is taken as pages are first used, not at open. Its own
//! test binary, with one test: it measures the process's resident memory, which
//! other tests running beside it would change.

use btree_db::{Database, Options, SyncMode};

/// The pool's memory is taken when pages are first used, not at open: a pool of
/// 256 MiB over a nearly empty database leaves the process small (each frame
/// zeroed as it was made, the default pool alone made it 64 MiB larger).
#[test]
fn an_unused_pool_takes_no_memory() {
    // Resident pages of this process (Linux: /proc/self/statm, in pages).
    fn resident_pages() -> Option<u64> {
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        statm.split_whitespace().nth(1)?.parse().ok()
    }
    let Some(before) = resident_pages() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("t.db"),
        Options {
            pool_pages: 65536,
            sync: SyncMode::Off,
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    txn.put(t, b"k", b"v").unwrap();
    txn.commit().unwrap();
    let grown_mib = resident_pages().unwrap().saturating_sub(before) * 4096 / (1 << 20);
    assert!(grown_mib < 64, "the process grew {grown_mib} MiB");
}
