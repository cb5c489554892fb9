//! Feeds arbitrary bytes to the page decoder, both as they come (almost
//! always a checksum error) and with a valid checksum stamped in, so the
//! structural checks see random layouts. It must never panic.
//!
//! Run with `cargo fuzz run page_decoder` from `examples/btree-db`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The checksum covers the page number; decode as page 5.
    const ID: u32 = 5;
    let _ = btree_db::decode_page(ID, data);
    for size in [512usize, 4096] {
        let mut page = vec![0u8; size];
        let n = data.len().min(size);
        page[..n].copy_from_slice(&data[..n]);
        let mut covered = ID.to_le_bytes().to_vec();
        covered.extend_from_slice(&page[4..]);
        let crc = crc32(&covered);
        page[..4].copy_from_slice(&crc.to_le_bytes());
        if let Ok((cells, _high)) = btree_db::decode_page(ID, &page) {
            for w in cells.windows(2) {
                assert!(w[0].0 < w[1].0, "decoder accepted unsorted keys");
            }
        }
    }
});

/// CRC-32 (IEEE), bitwise: the fuzz crate stays free of extra dependencies.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
