//! A TPC-C New Order shaped transaction (one warehouse, spec-sized item,
//! stock and customer tables, 5-15 order lines) run sequentially with
//! `sync = Off` and an in-memory-sized pool: p50 / p95 latency. The real
//! TPC-C lives in `examples/tpcc`; this keeps the engine's own speed visible.
//!
//! `cargo bench -p btree-db --bench new_order` (`BENCH_TXNS=N` to change the count).

use std::time::Instant;

use btree_db::{Database, Options, SyncMode};

fn key(parts: &[u32]) -> Vec<u8> {
    parts.iter().flat_map(|p| p.to_be_bytes()).collect()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % (hi - lo + 1) as u64) as u32
    }
}

fn main() {
    let txns: usize = std::env::var("BENCH_TXNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let items: u32 = std::env::var("BENCH_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("tpcc.db"),
        Options {
            page_size: 4096,
            pool_pages: 65536,
            sync: SyncMode::Off,
            ..Options::default()
        },
    )
    .unwrap();
    let warehouse = db.create_table("warehouse").unwrap();
    let district = db.create_table("district").unwrap();
    let customer = db.create_table("customer").unwrap();
    let item = db.create_table("item").unwrap();
    let stock = db.create_table("stock").unwrap();
    let orders = db.create_table("orders").unwrap();
    let new_order = db.create_table("new_order").unwrap();
    let order_line = db.create_table("order_line").unwrap();
    let load = Instant::now();
    let mut txn = db.begin();
    txn.insert(warehouse, &key(&[1]), &[7u8; 89]).unwrap();
    for d in 1..=10 {
        let mut row = vec![1u8; 95];
        row[..4].copy_from_slice(&3001u32.to_le_bytes());
        txn.insert(district, &key(&[1, d]), &row).unwrap();
        for c in 1..=3000 {
            txn.insert(customer, &key(&[1, d, c]), &[3u8; 655]).unwrap();
        }
    }
    txn.commit().unwrap();
    let mut txn = db.begin();
    for i in 1..=items {
        txn.insert(item, &key(&[i]), &[4u8; 82]).unwrap();
        let mut row = vec![5u8; 306];
        row[..4].copy_from_slice(&50u32.to_le_bytes());
        txn.insert(stock, &key(&[1, i]), &row).unwrap();
    }
    txn.commit().unwrap();
    db.checkpoint().unwrap();
    println!("loaded in {:.2?}", load.elapsed());

    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut lat = Vec::with_capacity(txns);
    let mut buf = Vec::new();
    let start = Instant::now();
    for _ in 0..txns {
        let t0 = Instant::now();
        let d = rng.range(1, 10);
        let c = rng.range(1, 3000);
        let lines = rng.range(5, 15);
        let mut txn = db.begin();
        txn.get_into(warehouse, &key(&[1]), &mut buf).unwrap();
        txn.get_for_update(district, &key(&[1, d]), &mut buf)
            .unwrap();
        let o_id = u32::from_le_bytes(buf[..4].try_into().unwrap());
        buf[..4].copy_from_slice(&(o_id + 1).to_le_bytes());
        txn.update(district, &key(&[1, d]), &buf).unwrap();
        txn.get_into(customer, &key(&[1, d, c]), &mut buf).unwrap();
        txn.insert(orders, &key(&[1, d, o_id]), &[6u8; 24]).unwrap();
        txn.insert(new_order, &key(&[1, d, o_id]), &[]).unwrap();
        for ol in 1..=lines {
            let i = rng.range(1, items);
            txn.get_into(item, &key(&[i]), &mut buf).unwrap();
            txn.get_for_update(stock, &key(&[1, i]), &mut buf).unwrap();
            let q = u32::from_le_bytes(buf[..4].try_into().unwrap());
            let nq = if q > 10 { q - 5 } else { q + 86 };
            buf[..4].copy_from_slice(&nq.to_le_bytes());
            txn.update(stock, &key(&[1, i]), &buf).unwrap();
            txn.insert(order_line, &key(&[1, d, o_id, ol]), &[8u8; 54])
                .unwrap();
        }
        txn.commit().unwrap();
        lat.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let total = start.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    println!(
        "new order x{txns}: p50 {:.1} us, p95 {:.1} us, {:.0} txn/s",
        lat[lat.len() / 2],
        lat[lat.len() * 95 / 100],
        txns as f64 / total
    );
}
