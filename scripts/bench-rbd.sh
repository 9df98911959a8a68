#!/usr/bin/env bash
# LUNs on Ceph RBD against librbd itself (issue #30, Deliver 5; docs/benchmarks.md,
# ../shared/design/PERFORMANCE.md): one image of a cluster this script starts
# (scripts/ceph-cluster.sh: one monitor, manager and BlueStore OSD on this machine, the
# pool `rbd` of size 1, on 127.0.174.1), measured in the same run, rounds interleaved:
#
#   librbd      fio --ioengine=rbd straight into the image (fio's own engine)
#   ours        srpctl bench disk --rbd: the target daemon serving the image as an RBD LUN
#               and the SRP miniport's port driven directly, in one process (library level)
#   block file  `srpctl target run` serving the image, `srpctl host run` logged in over one
#               path, fio libaio direct on its block file (FUSE): what a disk user gets
#
#   workloads: 4k randread QD32, 4k randwrite QD32 (IOPS), 128k seqread QD32 (MiB/s)
#   CPU per I/O of each point: the client side (fio; our process, target and initiator
#   together; fio and both daemons for the block file) and the cluster's OSD — on this
#   machine they share its cores, so what one spends the other cannot
#
# Medians of the rounds, each with its ratio to librbd's (goal at library level: >= 0.9 on
# every point). librbd runs with its cache off, as the target runs it. The image is written
# whole first, so reads find data, not holes.
#
# Usage: scripts/bench-rbd.sh [--secs S] [--rounds N] [--size-mib M] [--no-user-level]
#                             [--profile] [--srpctl PATH]
#   --profile  then `perf record` of our library-level process over the 4k randread point:
#              its CPU by library (DSO) and its top functions (apt linux-perf)
# Installs Ceph's packages (the cluster script), fio and jq when missing. Stops the cluster
# and the daemons and removes its files on exit, also on failure.
set -euo pipefail

SECS=10
ROUNDS=3
SIZE_MIB=1024
USER_LEVEL=1
PROFILE=0
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRPCTL="$ROOT/target/release/srpctl"
while [ $# -gt 0 ]; do
    case "$1" in
        --secs) SECS=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --size-mib) SIZE_MIB=$2; shift 2 ;;
        --no-user-level) USER_LEVEL=0; shift ;;
        --profile) PROFILE=1; shift ;;
        --srpctl) SRPCTL=$2; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

. "$ROOT/scripts/lib/daemons.sh"
need fio jq
fio --enghelp 2>/dev/null | grep -qw rbd || { echo "this fio has no rbd engine" >&2; exit 1; }
bash "$ROOT/scripts/ceph-cluster.sh" install
[ -x "$SRPCTL" ] || (cd "$ROOT" && cargo build --release -p srpctl)

WORK=$(mktemp -d /tmp/bench-rbd.XXXXXX)
CLUSTER="$WORK/cluster"
ADDR=127.0.174.1
DAEMONS=()
cleanup() {
    stop_pids "${DAEMONS[@]}"
    bash "$ROOT/scripts/ceph-cluster.sh" stop "$CLUSTER" >/dev/null 2>&1 || true
    umount -l "$WORK/disks" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

bash "$ROOT/scripts/ceph-cluster.sh" start "$CLUSTER" --addr "$ADDR" --osd-size 8G >/dev/null
export CEPH_CONF="$CLUSTER/ceph.conf"
# librbd as the target runs it: its cache off (a write completes on the OSDs; with the
# default writearound cache librbd acknowledges writes before they get there).
export CEPH_ARGS="${CEPH_ARGS:-} --rbd_cache=false"
rbd create --size "${SIZE_MIB}M" --image-feature layering rbd/bench
echo "filling rbd/bench (${SIZE_MIB} MiB) ..." >&2
fio --name=fill --ioengine=rbd --pool=rbd --rbdname=bench --clientname=admin --rw=write \
    --bs=4M --iodepth=8 --size="${SIZE_MIB}M" --output=/dev/null

# The block-file row: the target daemon on the image, the host daemon over one path.
start_user_level() {
    if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ]; then
        USER_LEVEL=0; echo "block-file row skipped: needs root and /dev/fuse" >&2; return 0
    fi
    cat >"$WORK/target.toml" <<TOML
[target]
name = "bench-rbd"
node_guid = "0x0002c90300b30000"
rdma_cm_port = 5605
control_socket = "$WORK/target.sock"
state_dir = "$WORK/state"

[[port]]
name = "p0"
address = "127.0.209.1"

[[lun]]
name = "bench-rbd"
rbd = "rbd/bench"
ceph_conf = "$CEPH_CONF"

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300b30001"
ports = ["p0"]
exports = { 0 = "bench-rbd" }
allow = ["any"]
TOML
    cat >"$WORK/host.toml" <<TOML
[host]
name = "bench-rbd-host"
node_guid = "0x0002c90300b30100"
disks_dir = "$WORK/disks"
control_socket = "$WORK/host.sock"

[[portal]]
address = "127.0.209.1"
local = ["127.0.209.2"]
TOML
    "$SRPCTL" target run -c "$WORK/target.toml" >"$WORK/target.log" 2>&1 &
    DAEMONS+=($!)
    wait_for_socket "$WORK/target.sock" || true
    "$SRPCTL" host run -c "$WORK/host.toml" >"$WORK/host.log" 2>&1 &
    DAEMONS+=($!)
    if ! BLOCK_FILE=$(wait_for_block_file "$WORK/disks"); then
        USER_LEVEL=0
        echo "block-file row skipped: no block file within 30 s; logs:" >&2
        tail -5 "$WORK/target.log" "$WORK/host.log" >&2
    fi
}

OSD_PID=$(cat "$CLUSTER"/run/osd*.pid 2>/dev/null | head -1)

# fio_point RW BS QD ENGINE-ARGS... : prints "iops mib_s client_cpu_us_per_io" of one job
# (the whole fio process's CPU, librbd's threads included: its last reading from /proc
# before it exits, taken every 0.1 s — under 0.1 s of CPU short of the whole).
fio_point() {
    local rw=$1 bs=$2 qd=$3 dir=read pid ticks; shift 3
    [ "$rw" = randwrite ] && dir=write
    rm -f "$WORK/fio.json"
    fio --name=p --rw="$rw" --bs="$bs" --iodepth="$qd" --time_based --runtime="$SECS" \
        --numjobs=1 --norandommap --randrepeat=0 --output-format=json \
        --output="$WORK/fio.json" "$@" >/dev/null 2>&1 &
    pid=$!
    ticks=0
    while kill -0 "$pid" 2>/dev/null && [ "$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
        local t; t=$(cpu_ticks "$pid")
        [ "${t:-0}" -gt "$ticks" ] && ticks=$t
        sleep 0.1
    done
    wait "$pid" || return 0
    sed -n '/^{/,$p' "$WORK/fio.json" | jq -r --arg d "$dir" --arg t "$ticks" --arg s "$SECS" \
        '.jobs[0][$d] | "\(.iops) \(.bw_bytes / 1048576) \(if .iops > 0 then ($t | tonumber) * 10000 / (.iops * ($s | tonumber)) else 0 end)"'
}

# per_io TICKS IOPS : CPU µs per I/O of TICKS clock ticks (10 ms) over SECS at IOPS.
per_io() { awk -v t="$1" -v i="$2" -v s="$SECS" 'BEGIN { if (i > 0) printf "%.1f", t * 10000 / (i * s); else print 0 }'; }

# WORKLOADS: name | fio rw | bs | qd | field (1 IOPS, 2 MiB/s) | unit | srpctl workload
WL=("4k randread QD32|randread|4k|32|1|IOPS|randread4k"
    "4k randwrite QD32|randwrite|4k|32|1|IOPS|randwrite4k"
    "128k seqread QD32|read|128k|32|2|MiB/s|seqread128k")

declare -A R   # R[row|workload-index] = space-separated round values
add() { R["$1|$2"]="${R["$1|$2"]:-} $3"; }
declare -A CC  # CC[row|workload-index]: client CPU µs per I/O, per round
declare -A OC  # OC[row|workload-index]: OSD CPU µs per I/O, per round
add_cpu() { CC["$1|$2"]="${CC["$1|$2"]:-} $3"; OC["$1|$2"]="${OC["$1|$2"]:-} $4"; }
FAILED=()

run_fio() { # row engine-args...
    local row=$1 i=0 w name rw bs qd field unit key out o0 d0 d1 p iops client; shift
    for w in "${WL[@]}"; do
        IFS='|' read -r name rw bs qd field unit key <<<"$w"
        o0=$(cpu_ticks "$OSD_PID"); d0=0
        for p in "${DAEMONS[@]}"; do d0=$((d0 + $(cpu_ticks "$p"))); done
        out=$(fio_point "$rw" "$bs" "$qd" "$@") || out=
        if [ -n "$out" ]; then
            add "$row" "$i" "$(echo "$out" | cut -d' ' -f"$field")"
            iops=$(echo "$out" | cut -d' ' -f1)
            client=$(echo "$out" | cut -d' ' -f3)
            if [ "$row" = "srpctl host (block file)" ]; then
                d1=0
                for p in "${DAEMONS[@]}"; do d1=$((d1 + $(cpu_ticks "$p"))); done
                client=$(awk -v a="$client" -v b="$(per_io $((d1 - d0)) "$iops")" 'BEGIN { printf "%.1f", a + b }')
            fi
            add_cpu "$row" "$i" "$client" "$(per_io $(( $(cpu_ticks "$OSD_PID") - o0 )) "$iops")"
        fi
        i=$((i + 1))
    done
}

run_ours() { # one workload per run, so that the OSD's CPU is the point's
    local json i=0 w name rw bs qd field unit key v iops o0 row="srpctl bench disk (library)"
    for w in "${WL[@]}"; do
        IFS='|' read -r name rw bs qd field unit key <<<"$w"
        o0=$(cpu_ticks "$OSD_PID")
        json=$("$SRPCTL" bench disk --rbd rbd/bench --ceph-conf "$CEPH_CONF" --secs "$SECS" \
            --rounds 1 --workloads "$key" --json 2>"$WORK/srpctl.err") || {
            FAILED+=("round $round $key: $(grep -m1 '^Error' "$WORK/srpctl.err" || tail -1 "$WORK/srpctl.err")")
            i=$((i + 1)); continue; }
        v=$(echo "$json" | jq -r --arg k "$key" \
            '.results[] | select(.workload == $k) | if $k == "seqread128k" then .mib_s else .iops end')
        iops=$(echo "$json" | jq -r '.results[0].iops')
        [ -n "$v" ] && add "$row" "$i" "$v"
        add_cpu "$row" "$i" "$(echo "$json" | jq -r '.results[0].cpu_us_per_io')" \
            "$(per_io $(( $(cpu_ticks "$OSD_PID") - o0 )) "$iops")"
        i=$((i + 1))
    done
}

[ "$USER_LEVEL" = 1 ] && start_user_level
for round in $(seq "$ROUNDS"); do
    run_fio "librbd (fio rbd engine)" --ioengine=rbd --pool=rbd --rbdname=bench --clientname=admin
    run_ours
    [ "$USER_LEVEL" = 1 ] && run_fio "srpctl host (block file)" --ioengine=libaio --direct=1 \
        --filename="$BLOCK_FILE"
    echo "round $round/$ROUNDS done" >&2
done

med() { tr ' ' '\n' | { grep -v '^$' || true; } | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }

echo
echo "bench-rbd: one ${SIZE_MIB} MiB image of a one-OSD cluster on this machine, medians of $ROUNDS interleaved round(s), $SECS s per point, at $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo '+changes')"
printf '%-20s  %-30s  %12s  %-6s  %9s  %13s  %10s\n' workload who median unit "/ librbd" \
    "client µs/IO" "OSD µs/IO"
for i in 0 1 2; do
    IFS='|' read -r name rw bs qd field unit key <<<"${WL[$i]}"
    base=$(echo "${R["librbd (fio rbd engine)|$i"]:-}" | med)
    for row in "librbd (fio rbd engine)" "srpctl bench disk (library)" "srpctl host (block file)"; do
        v=$(echo "${R["$row|$i"]:-}" | med)
        [ -z "$v" ] && continue
        ratio=$(awk -v v="$v" -v b="${base:-0}" 'BEGIN { if (b > 0) printf "%.2fx", v / b; else print "-" }')
        printf '%-20s  %-30s  %12.1f  %-6s  %9s  %13.1f  %10.1f\n' "$name" "$row" "$v" "$unit" "$ratio" \
            "$(echo "${CC["$row|$i"]:-}" | med)" "$(echo "${OC["$row|$i"]:-}" | med)"
    done
done
echo "client µs/IO: CPU per I/O of the fio process with librbd's threads (librbd row), of our process (target and initiator: library row), of fio and both daemons (block-file row); OSD µs/IO: the OSD's. $(nproc) CPUs shared by all, the cluster's daemons included."
if [ "$PROFILE" = 1 ] && need perf:linux-perf; then
    echo
    echo "profile of srpctl bench disk --rbd, 4k randread QD32, $SECS s (perf record -g, 999 Hz):"
    perf record -F 999 -g -o "$WORK/perf.data" -- "$SRPCTL" bench disk --rbd rbd/bench \
        --ceph-conf "$CEPH_CONF" --secs "$SECS" --rounds 1 --workloads randread4k >/dev/null 2>"$WORK/perf.err" || true
    echo "by library (share of the process's samples):"
    { perf report -i "$WORK/perf.data" --stdio --no-children --sort dso 2>/dev/null |
        grep -E '^ +[0-9]' | head -12; } || true
    echo "top functions:"
    { perf report -i "$WORK/perf.data" --stdio --no-children --sort dso,sym -g none 2>/dev/null |
        grep -E '^ +[0-9]' | head -25; } || true
fi
for f in "${FAILED[@]}"; do echo "failed: $f"; done
[ ${#FAILED[@]} -eq 0 ]
