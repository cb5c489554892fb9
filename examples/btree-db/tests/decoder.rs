//! The page decoder against random bytes: it must return an error or a
//! well-formed page, never panic; and an all-zero page is never valid.

use btree_db::{Database, Options, SyncMode, decode_page};
use proptest::prelude::*;

/// Stamps the checksum of page `id` (it covers the page number).
fn seal(id: u32, page: &mut [u8]) {
    let mut h = crc32fast::Hasher::new();
    h.update(&id.to_le_bytes());
    h.update(&page[4..]);
    page[..4].copy_from_slice(&h.finalize().to_le_bytes());
}

/// The page number the random pages are decoded as.
const ID: u32 = 5;

/// Real leaf and branch images from a small database, with their numbers.
fn real_pages() -> Vec<(u32, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("t.db"),
        Options {
            page_size: 512,
            sync: SyncMode::Off,
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for i in 0..400u32 {
        txn.put(t, &i.to_be_bytes(), &[i as u8; 9]).unwrap();
    }
    txn.commit().unwrap();
    let path = db.path_to(t, &7u32.to_be_bytes()).unwrap();
    path.iter()
        .map(|&p| {
            let img = db.page_image(p).unwrap();
            let mut v = vec![0u8; 512];
            btree_db::PageAccess::read_bytes(&img, 0, &mut v);
            seal(p, &mut v);
            (p, v)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        let _ = decode_page(ID, &bytes);
        let mut page = bytes.clone();
        page.resize(512, 0);
        seal(ID, &mut page);
        let _ = decode_page(ID, &page);
    }

    #[test]
    fn mutated_real_pages_never_panic(flips in proptest::collection::vec((0usize..512, any::<u8>()), 1..8), which in 0usize..3) {
        let pages = real_pages_cached();
        let (id, original) = &pages[which % pages.len()];
        let mut page = original.clone();
        for (off, x) in flips {
            page[off] ^= x;
        }
        // Unsealed: the checksum must catch it.
        if page != *original {
            prop_assert!(decode_page(*id, &page).is_err());
        }
        // The right bytes in the wrong place fail too.
        prop_assert!(decode_page(id + 1, original).is_err());
        seal(*id, &mut page);
        if let Ok((cells, _)) = decode_page(*id, &page) {
            for w in cells.windows(2) {
                prop_assert!(w[0].0 < w[1].0);
            }
        }
    }
}

fn real_pages_cached() -> &'static Vec<(u32, Vec<u8>)> {
    static PAGES: std::sync::OnceLock<Vec<(u32, Vec<u8>)>> = std::sync::OnceLock::new();
    PAGES.get_or_init(real_pages)
}

#[test]
fn real_pages_decode() {
    for (id, p) in real_pages_cached() {
        let (cells, _) = decode_page(*id, p).unwrap();
        assert!(!cells.is_empty());
    }
}

#[test]
fn zero_pages_are_never_valid() {
    for size in [512usize, 4096] {
        assert!(decode_page(ID, &vec![0u8; size]).is_err());
    }
}
