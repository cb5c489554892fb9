#!/usr/bin/env bash
# Regenerates the measured figures that the README, examples/tpcc/README.md and the
# book show, from one run of each command, into book/src/figures/ (text and JSON) and
# book/src/img/ (charts). The book includes those files ({{#include}}); the READMEs
# carry copies between markers, which this script rewrites:
#
#   <!-- figure: NAME -->
#   ```text
#   ...contents of book/src/figures/NAME...
#   ```
#   <!-- end figure -->
#
# Usage:
#   scripts/figures.sh            measure everything (about 10 minutes on 2 cores),
#                                 then rewrite the READMEs' copies
#   scripts/figures.sh ONLY...    measure only these (speedup checkpoint predict
#                                 advice compare tpcc-bound tpcc-loops journey
#                                 changed-lines walkthrough),
#                                 then rewrite
#   scripts/figures.sh --check    measure nothing; fail if a README's copy differs
#                                 from its file or names a file that does not exist
#
# Every figure comes from a shared, noisy machine: compare numbers within one file,
# never across files or runs.
set -euo pipefail
cd "$(dirname "$0")/.."

FIG=book/src/figures
IMG=book/src/img
READMES=(README.md examples/tpcc/README.md)

# Rewrites (or, with --check, verifies) every marked copy in the READMEs.
sync_copies() {
    local mode=$1 status=0
    for readme in "${READMES[@]}"; do
        python3 - "$readme" "$FIG" "$mode" <<'EOF' || status=1
import re, sys, pathlib
readme, fig, mode = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
text = readme.read_text()
pattern = re.compile(r"(<!-- figure: (\S+) -->\n```text\n)(.*?)(```\n<!-- end figure -->)", re.S)
problems = []
def replace(m):
    source = fig / m.group(2)
    if not source.exists():
        problems.append(f"{readme}: figure {m.group(2)} has no file {source}")
        return m.group(0)
    body = source.read_text()
    if not body.endswith("\n"):
        body += "\n"
    if mode == "check" and body != m.group(3):
        problems.append(f"{readme}: the copy of {m.group(2)} differs from {source}; run scripts/figures.sh --sync")
    return m.group(1) + body + m.group(4)
new = pattern.sub(replace, text)
for p in problems:
    print(p, file=sys.stderr)
if problems:
    sys.exit(1)
if mode == "write" and new != text:
    readme.write_text(new)
    print(f"rewrote the figures in {readme}")
EOF
    done
    return $status
}

case "${1:-}" in
--check)
    sync_copies check
    echo "every README copy matches book/src/figures/"
    exit 0
    ;;
--sync)
    sync_copies write
    exit 0
    ;;
esac

wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then
    wanted=(speedup checkpoint predict advice compare tpcc-bound tpcc-loops journey changed-lines walkthrough)
fi
want() {
    local w
    for w in "${wanted[@]}"; do [ "$w" = "$1" ] && return 0; done
    return 1
}

mkdir -p "$FIG" "$IMG"
step() { echo "== $*" >&2; }

step "building (release)"
cargo build --release -q -p tpcc -p tls-chart
cargo build --release -q -p tls-runtime --examples

if want speedup; then
    step "speedup bench (tls-runtime, rayon beside it)"
    cargo bench -q -p tls-runtime --bench speedup 2>/dev/null | grep -E 'x|ns' >"$FIG/speedup.txt"
fi

if want checkpoint; then
    step "checkpoint bench"
    cargo bench -q -p ui-tests --bench checkpoint 2>/dev/null | grep -E '^speedup' >"$FIG/checkpoint.txt"
fi

if want predict; then
    step "profile-mode predictions against measured runs"
    cargo bench -q -p tls-runtime --bench predict 2>/dev/null |
        grep -E '^(loop|no dependence|full chain|every|checkpointed|neighbours|lengths vary|sum at)' >"$FIG/predict.txt"
fi

if want advice; then
    step "the report's advice: predicted gain of each fix against the gain measured with it"
    cargo bench -q -p tls-runtime --bench advice 2>/dev/null |
        grep -E '^(loop|late load|running total|log append)' >"$FIG/advice.txt"
fi

if want compare; then
    step "tpcc compare: sequential, tls, sqlite (loads three databases)"
    target/release/tpcc compare >"$FIG/compare.txt"
    # tls over sequential, from the same run's table.
    python3 - "$FIG/compare.txt" >"$FIG/compare-ratios.txt" <<'EOF'
import sys
print("transaction     seq p50 us   tls p50 us   tls/seq")
for line in open(sys.argv[1]):
    cols = [c.split() for c in line.split("|")]
    if len(cols) < 3 or len(cols[1]) != 4 or len(cols[2]) != 4:
        continue
    try:
        seq, tls = float(cols[1][1]), float(cols[2][1])
    except ValueError:
        continue
    print(f"{cols[0][0]:<15} {seq:>10.1f}   {tls:>10.1f}   {tls / seq:>7.2f}")
EOF
fi

if want tpcc-bound; then
    step "tpcc: sequential, tls and the loops split by hand, alternated in one process"
    MODES=sequential,tls,by-hand cargo bench -q -p tpcc --bench speculation 2>/dev/null |
        grep -vE '^loaded' >"$FIG/tpcc-bound.txt"
fi

if want tpcc-loops; then
    step "tpcc loops: reports and chart, in order and speculative, same seed and database"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    target/release/tpcc load --db "$tmp/seq.db" --warehouses 1 >/dev/null
    target/release/tpcc load --db "$tmp/tls.db" --warehouses 1 >/dev/null
    run=(run --mode tls --transactions 4000 --seed 7 --sync off)
    TLS_MODE=sequential TLS_REPORT="$FIG/tpcc-loops-sequential.json" \
        target/release/tpcc "${run[@]}" --db "$tmp/seq.db" >/dev/null
    TLS_REPORT=stderr target/release/tpcc "${run[@]}" --db "$tmp/tls.db" 2>&1 >/dev/null |
        sed -n '/^tls-runtime: loop summary/,$p' >"$FIG/tpcc-loops.txt"
    rm -rf "$tmp"/tls.db*
    target/release/tpcc load --db "$tmp/tls.db" --warehouses 1 >/dev/null
    TLS_REPORT="$FIG/tpcc-loops-tls.json" \
        target/release/tpcc "${run[@]}" --db "$tmp/tls.db" >/dev/null
    target/release/tls-chart --baseline "$FIG/tpcc-loops-sequential.json" \
        -o "$IMG/tpcc-loops.svg" "$FIG/tpcc-loops-tls.json"
    # Profile mode on the same transactions: each loop's predicted speedup beside the
    # one measured (the loop's wall time in order over its wall time speculative).
    rm -rf "$tmp"/tls.db*
    target/release/tpcc load --db "$tmp/tls.db" --warehouses 1 >/dev/null
    TLS_MODE=profile TLS_REPORT="$tmp/profile.json" \
        target/release/tpcc "${run[@]}" --db "$tmp/tls.db" >/dev/null
    python3 - "$tmp/profile.json" "$FIG/tpcc-loops-sequential.json" "$FIG/tpcc-loops-tls.json" \
        >"$FIG/tpcc-predict.txt" <<'EOF'
import json, sys
profile, seq, tls = (
    {l["name"]: l for l in json.load(open(f))} for f in sys.argv[1:4]
)
cores = ["2", "4", "8", "16", "64"]
print(("loop                    measured 2  " + "".join(f"predicted {c:<4}" for c in cores)).rstrip())
for name, p in profile.items():
    pred = p.get("predicted_speedup") or {}
    measured = "-"
    if name in seq and name in tls and tls[name]["wall_ns"] > 0:
        measured = f"{seq[name]['wall_ns'] / tls[name]['wall_ns']:.2f}x"
    print(f"{name:<22} {measured:>11}  " + "".join(f"{pred.get(c, 0):>12.2f}x " for c in cores).rstrip())
EOF
fi

if want journey; then
    step "the New Order journey: each step of examples/tpcc/src/engine/kv/journey.rs"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # Each step's report, as TLS_REPORT=stderr prints it (its New Order part), each
    # from its own run on a fresh copy of one loaded database.
    target/release/tpcc load --db "$tmp/base.db" --warehouses 1 >/dev/null
    for s in pages pages,checkpoint rows; do
        rm -f "$tmp"/t.db*
        for f in "$tmp"/base.db*; do cp "$f" "$tmp/t.db${f#"$tmp"/base.db}"; done
        TPCC_JOURNEY=$s TLS_REPORT=stderr target/release/tpcc run --mode tls \
            --transactions 4000 --seed 7 --sync off --db "$tmp/t.db" 2>&1 >/dev/null |
            awk '/^  new_order items/ {on = 1; print; next} /^  [a-z]/ {on = 0} on' \
                >"$FIG/journey-${s/,/-}.txt"
    done
    # The steps' times, alternated in one process with the sequential engine and the
    # shipped loop run in order (the chart's baseline).
    steps=(tls:pages tls:pages+checkpoint tls:rows tls:rows+checkpoint)
    modes=$(IFS=,; echo "sequential,tls:in-order,${steps[*]}")
    MODES=$modes REPORTS="$tmp/reports" cargo bench -q -p tpcc --bench speculation 2>/dev/null \
        >"$tmp/bench.txt"
    python3 - "$tmp" "${steps[@]}" >"$FIG/journey.txt" <<'EOF'
import json, sys, pathlib
tmp, steps = pathlib.Path(sys.argv[1]), sys.argv[2:]
lines = (tmp / "bench.txt").read_text().splitlines()
header = next(l for l in lines if l.startswith("transaction")).split()
row = next(l for l in lines if l.startswith("new_order")).split()
# The bench prints each mode's p50, then each mode's ratio to the first.
modes = ["sequential", "tls:in-order"] + steps
p50 = dict(zip(modes, row[2:2 + len(modes)]))
def loop(mode):
    return json.load(open(tmp / "reports" / f"{mode}.json"))[0]
base = loop("tls:in-order")
print(lines[0])
print("New Order's items loop (committed orders), and the transaction's p50 latency:")
print(f"{'step (TPCC_JOURNEY)':<20} {'loop / in order':>15} {'busy':>5} {'violated':>8} {'waiting':>7} {'idle':>5} "
      f"{'violations':>10} {'sync. waits':>11} {'p50 us':>7} {'p50 / sequential':>16}")
seq = float(p50["sequential"])
print(f"{'(sequential engine)':<20} {'':>15} {'':>5} {'':>8} {'':>7} {'':>5} {'':>10} {'':>11} {seq:>7.1f} {1:>16.2f}")
for mode in ["tls:in-order"] + steps:
    l = loop(mode)
    name = mode[4:].replace("+", ",")
    if mode == "tls:in-order":
        name = "rows, in order"
    t = l["busy_ns"] + l["wasted_ns"] + l["wait_ns"] + l["idle_ns"]
    share = lambda k: f"{100 * l[k] / t:.0f}%"
    p = float(p50[mode])
    print(f"{name:<20} {l['wall_ns'] / base['wall_ns']:>15.2f} {share('busy_ns'):>5} {share('wasted_ns'):>8} "
          f"{share('wait_ns'):>7} {share('idle_ns'):>5} {l['violations']:>10} {l['synchronized_waits']:>11} "
          f"{p:>7.1f} {p / seq:>16.2f}")
EOF
    # The chart: New Order's loop at each step, normalized to the loop run in order.
    root=$PWD
    charts=()
    for s in "${steps[@]}"; do
        name=${s#tls:}
        cp "$tmp/reports/$s.json" "$tmp/$name.json"
        charts+=("$name.json")
    done
    cp "$tmp/reports/tls:in-order.json" "$tmp/in-order.json"
    (cd "$tmp" && "$root/target/release/tls-chart" --baseline in-order.json \
        -o "$root/$IMG/journey.svg" "${charts[@]}")
    rm -rf "$tmp"
fi

if want changed-lines; then
    step "annotation cost: changed lines from the last sequential-only engine"
    # Code lines (comments and blank lines left out) added or removed since the last
    # commit before the database and TPC-C took speculation in.
    base=cb2ad52
    count() {
        git diff "$base" HEAD -- "$@" | grep '^[+-]' | grep -v '^[+-][+-]' | sed 's/^[+-]//' |
            grep -cvE '^\s*(//|$)' || true
    }
    db=(shared_txn.rs chain.rs txn.rs btree/tree.rs btree/store.rs scratch.rs lock.rs)
    kv=(engine/kv/spec.rs engine/kv/row_key.rs engine/kv/speculative.rs
        engine/kv/transactions.rs engine/kv/mod.rs engine/sequential.rs engine/memory.rs)
    {
        echo "changed lines of code since $base (comments and blank lines left out)"
        printf '%-9s %5s  %s\n' btree-db "$(count "${db[@]/#/examples/btree-db/src/}")" "${db[*]}"
        printf '%-9s %5s  %s\n' tpcc "$(count "${kv[@]/#/examples/tpcc/src/}")" "${kv[*]}"
    } >"$FIG/changed-lines.txt"
fi

if want walkthrough; then
    step "the report walkthrough's chart and timeline"
    tmp=$(mktemp -d)
    ex=target/release/examples/report_walkthrough
    # The example prints its loop's report on stdout: the text beside each chart bar.
    TLS_MODE=sequential TLS_REPORT="$tmp/seq.json" "$ex" >"$FIG/walkthrough-sequential.txt"
    TLS_REPORT="$tmp/before.json" TLS_TRACE="$tmp/trace.json" "$ex" >"$FIG/walkthrough-before.txt"
    TLS_REPORT="$tmp/after.json" "$ex" fixed >"$FIG/walkthrough-after.txt"
    target/release/tls-chart --baseline "$tmp/seq.json" -o "$IMG/breakdown.svg" \
        "$tmp/before.json" "$tmp/after.json"
    target/release/tls-chart --timeline "$tmp/trace.json" -o "$IMG/timeline.svg"
    rm -rf "$tmp"
fi

sync_copies write
step "done: book/src/figures/ and book/src/img/ rewritten; review with git diff"
