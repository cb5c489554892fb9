use tls_runtime::tls_loop;

// A local named like an outer variable shadows it only to the end of its scope (and
// not in its own initializer): there the name is the outer variable again.
#[tls_loop]
fn budget(costs: &[u64]) -> (u64, Vec<u64>, u64) {
    let mut total = 0;
    let mut out = Vec::new();
    let mut last = 0;
    for &c in costs {
        total += c;
        {
            let mut total = c;
            total += 1;
            out.push(total);
        }
        let seen = total;
        let total = total + 1;
        if let Some(last) = Some(c) {
            let _ = last;
        }
        last = c;
        let spare = |mut out: Vec<u64>| out.push(seen + total);
        spare(Vec::new());
        let r = &mut out;
        r.clear();
    }
    (total, out, last)
}

fn main() {}
