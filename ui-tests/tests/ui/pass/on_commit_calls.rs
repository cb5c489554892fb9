//! `#[on_commit]` on free functions and by-value methods: delayed to commit inside a
//! loop, in epoch order; immediate outside.
use std::sync::{Arc, Mutex};
use tls_runtime::{on_commit, tls_loop};

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[on_commit]
fn emit(line: String) {
    LINES.lock().unwrap().push(line);
}

struct Sink(Arc<Mutex<Vec<u32>>>);

impl Sink {
    #[on_commit]
    fn send(self, x: u32) {
        self.0.lock().unwrap().push(x);
    }
}

#[tls_loop(threads = 2)]
fn produce(n: u32, out: &Arc<Mutex<Vec<u32>>>) {
    for i in 0..n {
        emit(format!("item {i}"));
        Sink(out.clone()).send(i * 10);
    }
}

fn main() {
    emit("first".to_string());
    assert_eq!(*LINES.lock().unwrap(), ["first"]);
    let out = Arc::new(Mutex::new(Vec::new()));
    produce(50, &out);
    let lines = LINES.lock().unwrap().clone();
    assert_eq!(lines.len(), 51);
    assert!(lines[1..].iter().enumerate().all(|(i, l)| *l == format!("item {i}")));
    assert_eq!(*out.lock().unwrap(), (0..50).map(|i| i * 10).collect::<Vec<_>>());
}
