use tls_runtime::on_commit;

struct Log;

impl Log {
    #[on_commit]
    fn append(&self, line: String) {
        let _ = line;
    }

    // The same borrow, written out.
    #[on_commit]
    fn flush(self: &Self, lines: usize) {
        let _ = lines;
    }
}

#[on_commit]
fn print_line(line: &str) {
    println!("{line}");
}

fn main() {}
