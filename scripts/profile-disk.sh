#!/usr/bin/env bash
# Where the time of `srpctl bench disk` goes (docs/benchmarks.md, "Profile"): for each
# point (4k randread QD32, 128k seqread QD32, 4k QD1) one run under `perf stat` — system
# calls, context switches and malloc calls (a uprobe on libc's malloc) per I/O, CPU time
# per I/O — and one under `perf record`, whose top functions and busiest threads it prints.
#
#   bash scripts/profile-disk.sh [--secs S] [--out DIR]
#
# Needs root (perf events, the uprobe). Installs linux-perf with apt-get when missing.
# Uses target/release/srpctl (built if missing). Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/daemons.sh
SECS=5
OUT=
while [ $# -gt 0 ]; do
    case "$1" in
        --secs) SECS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
command -v perf >/dev/null 2>&1 || {
    apt-get install -y linux-perf >/dev/null 2>&1 ||
        { apt-get update >/dev/null 2>&1 && apt-get install -y linux-perf >/dev/null 2>&1; }
}
need jq bc
[ -x target/release/srpctl ] || cargo build --release -q -p srpctl
bin=target/release/srpctl
OUT=${OUT:-$(mktemp -d /tmp/profile-disk.XXXXXX)}
mkdir -p "$OUT"
libc=$(ldd "$bin" | awk '/libc.so/ {print $3}')
malloc_event=
perf probe -q -x "$libc" -a malloc >/dev/null 2>&1 || true   # exists already: fine
if [ "$(perf probe -l 2>/dev/null | grep -c 'probe_libc:malloc')" -gt 0 ]; then
    malloc_event=probe_libc:malloc
fi

printf '%-20s %10s %12s %12s %12s %12s\n' point IOs "CPU µs/IO" "syscalls/IO" "ctx sw/IO" "mallocs/IO"
for w in randread4k seqread128k lat4k; do
    run_stat() { # events file
        perf stat -x, -e "$1" -o "$OUT/$w.$2" -- \
            "$bin" bench disk --secs "$SECS" --rounds 1 --size-mib 256 --workloads "$w" --json \
            >"$OUT/$w.$2.json" 2>"$OUT/$w.err"
    }
    get() { awk -F, -v e="$2" '$3 == e {print $1; exit}' "$OUT/$w.$1"; }
    ios_of() { jq -r '.results[0] | (.iops * '"$SECS"') | floor' "$OUT/$w.$1.json"; }
    run_stat raw_syscalls:sys_enter,context-switches,task-clock stat
    ios=$(ios_of stat)
    sc=$(get stat raw_syscalls:sys_enter); cs=$(get stat context-switches); ms=$(get stat task-clock)
    # The uprobe slows every malloc: counted in a run of its own, per I/O of that run.
    ma=0
    if [ -n "$malloc_event" ]; then
        run_stat "$malloc_event" malloc
        ma=$(echo "$(get malloc "$malloc_event") / $(ios_of malloc)" | bc -l)
    fi
    printf '%-20s %10d %12.1f %12.1f %12.2f %12.1f\n' "$w" "$ios" \
        "$(echo "$ms * 1000 / $ios" | bc -l)" "$(echo "$sc / $ios" | bc -l)" \
        "$(echo "$cs / $ios" | bc -l)" "$ma"
    perf record -q -F 999 -g -o "$OUT/$w.data" -- \
        "$bin" bench disk --secs "$SECS" --rounds 1 --size-mib 256 --workloads "$w" >/dev/null 2>&1
done
for w in randread4k seqread128k lat4k; do
    echo
    echo "== $w: top functions (self), then threads"
    perf report -i "$OUT/$w.data" --no-children --sort symbol --stdio 2>/dev/null |
        grep -E '^ +[0-9]' | head -15 | sed 's/ \{2,\}/ /g'
    perf report -i "$OUT/$w.data" --no-children --sort comm --stdio 2>/dev/null |
        grep -E '^ +[0-9]' | head -8 | sed 's/ \{2,\}/ /g'
done
echo
echo "data in $OUT"
