use tls_runtime::tls_loop;

struct Txn {
    log: Vec<u8>,
}

struct Bufs {
    row: Vec<u8>,
}

impl Bufs {
    fn line(&mut self, tx: &mut Txn, item: u32) -> u64 {
        self.row.clear();
        tx.log.push(item as u8);
        u64::from(item)
    }

    // A transaction's items loop marked as it is: every iteration borrows the
    // transaction and the shared buffers `&mut`, which no two epochs can hold at once.
    #[tls_loop]
    fn items(&mut self, tx: &mut Txn, items: &[u32]) -> u64 {
        let mut total = 0;
        for &i in items {
            total += self.line(tx, i);
        }
        total
    }
}

fn main() {}
