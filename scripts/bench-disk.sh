#!/usr/bin/env bash
# Library-level block benchmark (docs/benchmarks.md, ../shared/design/PERFORMANCE.md):
# `srpctl bench disk` next to its peers, measured in the same run, rounds interleaved
# (local A, nbdkit B, ours C, A B C, ...), medians reported with each number's ratio to the
# best peer.
#
#   peers: local file on /dev/shm    fio --ioengine=libaio --direct=1
#          nbdkit file plugin         fio --ioengine=nbd (nbdkit started and stopped here)
#          tgtd (iSCSI, rdwr backing) iscsi-perf (libiscsi; tgtd started and stopped here)
#   ours:  srpctl bench disk          target daemon + SRP miniport port, in one process
#          srpctl host (user level)   `srpctl target run` on the same file, `srpctl host run`
#                                     logged in over one path, fio libaio direct on its block
#                                     file (FUSE): what a disk user gets
#   workloads: 4k randread QD32 (IOPS), 128k seqread QD32 (MiB/s), 4k randread QD1 (avg µs)
#   server CPU: each server process's CPU time per I/O over each point (nbdkit, tgtd, and
#               our target daemon under the user-level row), a second table
#
# Usage: scripts/bench-disk.sh [--secs S] [--rounds N] [--size-mib M] [--registration R]
#                              [--pinned] [--no-user-level] [--no-tgt] [--srpctl PATH]
#   --registration  per-io (default), trust-target or both (passed to srpctl bench disk)
#   --pinned        also measure the QD1 latency with everything on vCPU 0 (taskset -c 0)
#   --no-user-level skip the block-file row (it needs root and /dev/fuse)
#   --no-tgt        skip the tgtd peer
# Also: TCP loopback (iperf3, one stream) each round, and the daemons' idle CPU (10 s, logged in).
# Installs fio, nbdkit, tgt, libiscsi-bin and iperf3 with apt-get when missing. Cleans up (servers, files) on exit.
set -euo pipefail

SECS=10
ROUNDS=3
SIZE_MIB=1024
REG=per-io
PINNED=0
USER_LEVEL=1
TGT=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRPCTL="$ROOT/target/release/srpctl"
while [ $# -gt 0 ]; do
    case "$1" in
        --secs) SECS=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --size-mib) SIZE_MIB=$2; shift 2 ;;
        --registration) REG=$2; shift 2 ;;
        --pinned) PINNED=1; shift ;;
        --no-user-level) USER_LEVEL=0; shift ;;
        --no-tgt) TGT=0; shift ;;
        --srpctl) SRPCTL=$2; shift 2 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

. "$ROOT/scripts/lib/daemons.sh"
HAVE_FIO=1; HAVE_NBDKIT=1; HAVE_IPERF=1
need fio || HAVE_FIO=0
need iperf3 || HAVE_IPERF=0
need nbdkit || HAVE_NBDKIT=0
command -v jq >/dev/null 2>&1 || need jq
[ "$HAVE_FIO" = 1 ] && ! fio --enghelp 2>/dev/null | grep -qw nbd && HAVE_NBDKIT=0
HAVE_TGT=0
[ "$TGT" = 1 ] && [ "$(id -u)" = 0 ] && need tgtd:tgt iscsi-perf:libiscsi-bin && HAVE_TGT=1
[ -x "$SRPCTL" ] || (cd "$ROOT" && cargo build --release -p srpctl)

WORK=$(mktemp -d /tmp/bench-disk.XXXXXX)
FILE=/dev/shm/bench-disk-$$.img
NBD_PORT=10809
NBD_PID=
TGT_PORT=3261
TGT_CTL=7   # tgtd's control socket number: apart from a system tgtd's (0)
TGT_IQN=iqn.2026-11.org.srp-stack:bench-disk
TGT_PID=
TARGET_PID=
IPERF_PORT=5211
IPERF_PID=
DAEMONS=()
cleanup() {
    if [ -n "$IPERF_PID" ]; then kill "$IPERF_PID" 2>/dev/null || true; wait "$IPERF_PID" 2>/dev/null || true; fi
    if [ -n "$NBD_PID" ]; then kill "$NBD_PID" 2>/dev/null || true; wait "$NBD_PID" 2>/dev/null || true; fi
    # tgtd ignores SIGTERM while it serves a target.
    if [ -n "$TGT_PID" ]; then kill -KILL "$TGT_PID" 2>/dev/null || true; wait "$TGT_PID" 2>/dev/null || true; fi
    stop_pids "${DAEMONS[@]}"
    umount -l "$WORK/disks" 2>/dev/null || true
    rm -f "$FILE"
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

echo "bench-disk: ${SIZE_MIB} MiB random file $FILE, $ROUNDS round(s) of $SECS s per point, interleaved" >&2
head -c $((SIZE_MIB << 20)) /dev/urandom >"$FILE"

if [ "$HAVE_NBDKIT" = 1 ]; then
    nbdkit -f -i 127.0.0.1 -p $NBD_PORT --exit-with-parent file "$FILE" &
    NBD_PID=$!
    for _ in $(seq 50); do
        (exec 3<>/dev/tcp/127.0.0.1/$NBD_PORT) 2>/dev/null && break
        sleep 0.1
    done
fi

# tcp_point : one iperf3 single-stream TCP run on loopback, MiB/s (a server per run): the
# reference of the 128k goal (>= 70 % of TCP loopback).
tcp_point() {
    timeout $((SECS + 30)) iperf3 -s -1 -B 127.0.0.1 -p $IPERF_PORT >/dev/null 2>&1 &
    IPERF_PID=$!
    local mib=
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        mib=$(iperf3 -c 127.0.0.1 -p $IPERF_PORT -t "$SECS" -J 2>/dev/null |
            jq -r '.end.sum_received.bits_per_second / 8 / 1048576' 2>/dev/null) && [ -n "$mib" ] && break
        sleep 0.2
    done
    wait "$IPERF_PID" 2>/dev/null || true; IPERF_PID=
    echo "$mib"
}

# tgtd serving the file as LUN 1 of one iSCSI target on 127.0.0.1:$TGT_PORT (backing store
# rdwr: pread/pwrite, as nbdkit's file plugin). HAVE_TGT=0 with a reason if it will not.
start_tgt() {
    tgtd -f -C "$TGT_CTL" --iscsi portal=127.0.0.1:$TGT_PORT >"$WORK/tgtd.log" 2>&1 &
    TGT_PID=$!
    local ok=0
    for _ in $(seq 50); do
        (exec 3<>/dev/tcp/127.0.0.1/$TGT_PORT) 2>/dev/null && { ok=1; break; }
        sleep 0.1
    done
    if [ "$ok" = 1 ] && tgtadm -C "$TGT_CTL" --lld iscsi --op new --mode target --tid 1 -T "$TGT_IQN" &&
        tgtadm -C "$TGT_CTL" --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$FILE" &&
        tgtadm -C "$TGT_CTL" --lld iscsi --op bind --mode target --tid 1 -I ALL; then
        return 0
    fi
    HAVE_TGT=0
    echo "tgtd peer skipped: it did not start; its log:" >&2
    tail -5 "$WORK/tgtd.log" >&2
}
[ "$HAVE_TGT" = 1 ] && start_tgt

# The user-level row: the target daemon on the same file (read-only LUN), the host daemon
# logged in over one path, its block file. Sets BLOCK_FILE, or USER_LEVEL=0 with a reason.
start_user_level() {
    if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ] || [ "$HAVE_FIO" != 1 ]; then
        USER_LEVEL=0; echo "user level skipped: needs root, /dev/fuse and fio" >&2; return 0
    fi
    cat >"$WORK/target.toml" <<TOML
[target]
name = "bench-target"
node_guid = "0x0002c90300b20000"
rdma_cm_port = 5603
control_socket = "$WORK/target.sock"
state_dir = "$WORK/state"

[[port]]
name = "p0"
address = "127.0.203.1"

[[lun]]
name = "bench-vol"
file = "$FILE"
read_only = true

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300b20001"
ports = ["p0"]
exports = { 0 = "bench-vol" }
allow = ["any"]
TOML
    cat >"$WORK/host.toml" <<TOML
[host]
name = "bench-host"
node_guid = "0x0002c90300b20100"
disks_dir = "$WORK/disks"
control_socket = "$WORK/host.sock"
registration = "${REG/both/per-io}"

[[portal]]
address = "127.0.203.1"
local = ["127.0.203.2"]
TOML
    "$SRPCTL" target run -c "$WORK/target.toml" >"$WORK/target.log" 2>&1 &
    TARGET_PID=$!
    DAEMONS+=($!)
    wait_for_socket "$WORK/target.sock" || true
    "$SRPCTL" host run -c "$WORK/host.toml" >"$WORK/host.log" 2>&1 &
    DAEMONS+=($!)
    if ! BLOCK_FILE=$(wait_for_block_file "$WORK/disks"); then
        USER_LEVEL=0
        echo "user level skipped: no block file within 30 s; host log:" >&2
        tail -5 "$WORK/host.log" >&2
    fi
}

# iscsi_point RW BS QD : prints "iops mib_s lat_us" of one iscsi-perf run against tgtd
# (its average IOPS; the latency of QD1 is 1 / IOPS, as for a closed loop).
iscsi_point() {
    local rw=$1 bs=$2 qd=$3 blocks iops random=
    blocks=$(( $(numfmt --from=iec "${bs^^}") / 512 ))
    [ "$rw" = randread ] && random=-r
    iops=$(${PIN_CMD:-} timeout $((SECS + 20)) iscsi-perf -m "$qd" -b "$blocks" $random -t "$SECS" \
        "iscsi://127.0.0.1:$TGT_PORT/$TGT_IQN/1" 2>&1 | tr '\r' '\n' |
        sed -n 's/^ *iops average \([0-9]*\).*/\1/p' | tail -1)
    [ -z "$iops" ] && return 0
    awk -v i="$iops" -v b="$blocks" -v q="$qd" 'BEGIN { printf "%s %s %s\n", i, i * b * 512 / 1048576, q * 1e6 / i }'
}

# fio_point ENGINE-ARGS... : prints "iops mib_s lat_us" of one job.
fio_point() {
    local rw=$1 bs=$2 qd=$3; shift 3
    ${PIN_CMD:-} fio --name=p --rw="$rw" --bs="$bs" --iodepth="$qd" --time_based --runtime="$SECS" \
        --numjobs=1 --norandommap --randrepeat=0 --output-format=json "$@" 2>/dev/null |
        sed -n '/^{/,$p' | jq -r '.jobs[0].read | "\(.iops) \(.bw_bytes / 1048576) \(.lat_ns.mean / 1000)"'
}

# WORKLOADS: name rw bs qd field (1 iops, 2 MiB/s, 3 µs)
WL=("4k randread QD32|randread|4k|32|1|IOPS"
    "128k seqread QD32|read|128k|32|2|MiB/s"
    "4k randread QD1|randread|4k|1|3|µs avg")

declare -A R   # R[peer|workload-index] = space-separated round values
add() { R["$1|$2"]="${R["$1|$2"]:-} $3"; }
declare -A C   # C[server|workload-index] = its CPU µs per I/O, per round
add_cpu() { C["$1|$2"]="${C["$1|$2"]:-} $3"; }

run_fio_peer() { # peer pin
    local peer=$1 pin=$2 i=0 w name rw bs qd field unit out
    for w in "${WL[@]}"; do
        IFS='|' read -r name rw bs qd field unit <<<"$w"
        if [ "$pin" = 1 ] && [ "$qd" != 1 ]; then i=$((i + 1)); continue; fi
        local server= t0=0
        case "$peer" in
            nbdkit) server=$NBD_PID ;;
            tgtd) server=$TGT_PID ;;
            host) server=$TARGET_PID ;;
        esac
        [ -n "$server" ] && t0=$(cpu_ticks "$server")
        case "$peer" in
            local) out=$(fio_point "$rw" "$bs" "$qd" --ioengine=libaio --direct=1 --filename="$FILE") ;;
            nbdkit) out=$(fio_point "$rw" "$bs" "$qd" --ioengine=nbd --uri="nbd://127.0.0.1:$NBD_PORT") ;;
            tgtd) out=$(iscsi_point "$rw" "$bs" "$qd") ;;
            host) out=$(fio_point "$rw" "$bs" "$qd" --ioengine=libaio --direct=1 --filename="$BLOCK_FILE") ;;
        esac
        local who=$peer
        [ "$peer" = host ] && who="srpctl host (block file)"
        [ "$peer" = tgtd ] && who="tgtd (iSCSI)"
        if [ -n "$server" ] && [ -n "$out" ] && [ "$pin" = 0 ]; then
            # CPU ticks (10 ms) of the server over the point, per I/O it served.
            local name=$peer
            [ "$peer" = host ] && name="srpctl target (user-level row)"
            add_cpu "$name" "$i" "$(awk -v t="$(( $(cpu_ticks "$server") - t0 ))" -v i="${out%% *}" -v s="$SECS" \
                'BEGIN { if (i > 0) printf "%.1f", t * 10000 / (i * s) }')"
        fi
        add "$who$([ "$pin" = 1 ] && echo ' (vCPU 0)')" "$i" "$(echo "$out" | cut -d' ' -f"$field")"
        i=$((i + 1))
    done
}

run_ours() { # pin
    local pin=$1 wls=randread4k,seqread128k,lat4k json
    [ "$pin" = 1 ] && wls=lat4k
    json=$(${PIN_CMD:-} "$SRPCTL" bench disk --secs "$SECS" --rounds 1 --file "$FILE" \
        --registration "$REG" --workloads "$wls" --json 2>"$WORK/srpctl.err") || {
        # A failed round is a finding, not a reason to lose the others: report and go on.
        FAILED+=("round $round$([ "$pin" = 1 ] && echo ' (vCPU 0)'): $(grep -m1 '^Error' "$WORK/srpctl.err" || tail -1 "$WORK/srpctl.err")")
        return 0; }
    echo "$json" >>"$WORK/ours.json"
    local r i
    for r in $(echo "$json" | jq -r '.results[].registration' | sort -u); do
        for i in 0 1 2; do
            local key; key=$(echo "${WL[$i]}" | cut -d'|' -f1)
            local v; v=$(echo "$json" | jq -r --arg r "$r" --arg n "$key" \
                '.results[] | select(.registration == $r and .name == $n) |
                 if .workload == "randread4k" then .iops elif .workload == "seqread128k" then .mib_s else .lat_avg_us end')
            [ -n "$v" ] && add "srpctl ($r)$([ "$pin" = 1 ] && echo ' (vCPU 0)')" "$i" "$v"
        done
    done
}

PIN_CMD=
FAILED=()
TCP=
[ "$USER_LEVEL" = 1 ] && start_user_level
# Idle daemons (issue #13: ~0 % CPU): both logged in, no I/O, IDLE_SECS seconds.
IDLE_SECS=10
if [ "$USER_LEVEL" = 1 ]; then
    sleep 1
    idle_t0=(); for p in "${DAEMONS[@]}"; do idle_t0+=("$(cpu_ticks "$p")"); done
    sleep "$IDLE_SECS"
    i=0; IDLE_LINE="idle (logged in, no I/O, ${IDLE_SECS} s), % of one CPU:"
    for who in target host; do
        t=$(( $(cpu_ticks "${DAEMONS[$i]}") - ${idle_t0[$i]} ))
        IDLE_LINE+=" $who $(awk -v t="$t" -v s="$IDLE_SECS" 'BEGIN { printf "%.1f", t / s }')"
        i=$((i + 1))
    done
    echo "$IDLE_LINE" >&2
fi
for round in $(seq "$ROUNDS"); do
    [ "$HAVE_FIO" = 1 ] && run_fio_peer local 0
    [ "$HAVE_NBDKIT" = 1 ] && run_fio_peer nbdkit 0
    [ "$HAVE_TGT" = 1 ] && run_fio_peer tgtd 0
    run_ours 0
    [ "$USER_LEVEL" = 1 ] && run_fio_peer host 0
    if [ "$HAVE_IPERF" = 1 ]; then t=$(tcp_point); [ -n "$t" ] && TCP+=" $t"; fi
    if [ "$PINNED" = 1 ]; then
        if [ "$HAVE_NBDKIT" = 1 ]; then   # the server too: restart nbdkit on vCPU 0
            kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null || true
            taskset -c 0 nbdkit -f -i 127.0.0.1 -p $NBD_PORT --exit-with-parent file "$FILE" &
            NBD_PID=$!; sleep 0.5
        fi
        PIN_CMD="taskset -c 0"
        [ "$HAVE_FIO" = 1 ] && run_fio_peer local 1
        [ "$HAVE_NBDKIT" = 1 ] && run_fio_peer nbdkit 1
        run_ours 1
        PIN_CMD=
        if [ "$HAVE_NBDKIT" = 1 ]; then
            kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null || true
            nbdkit -f -i 127.0.0.1 -p $NBD_PORT --exit-with-parent file "$FILE" &
            NBD_PID=$!; sleep 0.5
        fi
    fi
    echo "round $round/$ROUNDS done" >&2
done

med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }

# Report: per workload, every row's median and its ratio to the best peer (for latency:
# ours/best, lower is better; else ours/best, higher is better).
echo
echo "bench-disk: library level (fio engines and the SRP miniport's port driven directly), medians of $ROUNDS interleaved round(s), $SECS s per point"
printf '%-24s  %-32s  %12s  %-7s  %14s\n' workload who median unit "/ best peer"
for i in 0 1 2; do
    IFS='|' read -r name rw bs qd field unit <<<"${WL[$i]}"
    for suffix in "" " (vCPU 0)"; do
        [ -n "$suffix" ] && [ "$qd" != 1 ] && continue
        [ -n "$suffix" ] && [ "$PINNED" != 1 ] && continue
        best=
        # The local file is the limit, not a peer: the best peer is the best *remote* one
        # (highest IOPS or MiB/s, lowest latency).
        for p in nbdkit "tgtd (iSCSI)"; do
            v=$(echo "${R["$p$suffix|$i"]:-}" | med)
            [ -z "$v" ] && continue
            if [ -z "$best" ] || awk -v v="$v" -v b="$best" -v lat="$([ "$field" = 3 ] && echo 1)" \
                'BEGIN { exit !(lat ? v < b : v > b) }'; then
                best=$v
            fi
        done
        while IFS= read -r who; do
            [ "$suffix" = "" ] && [[ "$who" == *"(vCPU 0)" ]] && continue
            [ -n "$suffix" ] && [[ "$who" != *"(vCPU 0)" ]] && continue
            v=$(echo "${R["$who|$i"]}" | med)
            ratio=-
            [ -n "$best" ] && ratio=$(awk -v a="$v" -v b="$best" 'BEGIN {printf "%.2fx", a / b}')
            printf '%-24s  %-32s  %12.1f  %-7s  %14s\n' "$name$suffix" "$who" "$v" "$unit" "$ratio"
        done < <(printf '%s\n' "${!R[@]}" | grep "|$i\$" | sed 's/|[0-9]*$//' | sort -u)
    done
done
echo "ratios: to the best peer of nbdkit (file plugin, fio nbd engine) and tgtd (iSCSI, iscsi-perf); higher is better except for µs (lower is better). local = tmpfs file, fio libaio direct: the limit, shown for scale. srpctl host (block file): the daemons as processes, fio libaio direct on the FUSE block file (user level)"
if [ ${#C[@]} -gt 0 ]; then
    echo
    echo "server CPU per I/O (µs of the server process's user + system time over each point / I/Os served; medians; 10 ms tick resolution)"
    printf '%-24s  %-32s  %12s\n' workload server "CPU µs/IO"
    for i in 0 1 2; do
        IFS='|' read -r name rw bs qd field unit <<<"${WL[$i]}"
        while IFS= read -r who; do
            printf '%-24s  %-32s  %12s\n' "$name" "$who" "$(echo "${C["$who|$i"]}" | med)"
        done < <(printf '%s\n' "${!C[@]}" | grep "|$i\$" | sed 's/|[0-9]*$//' | sort -u)
    done
    echo "each server at the load its own client gives it (nbdkit: fio nbd; tgtd: iscsi-perf; srpctl target: the host daemon's block file under fio)"
fi
if [ -n "$TCP" ]; then
    tcp=$(echo "$TCP" | med)
    ours=$(echo "${R["srpctl (per-io)|1"]:-${R["srpctl (trust-target)|1"]:-}}" | med)
    echo
    printf 'TCP loopback (iperf3, one stream, median of the rounds): %.1f MiB/s' "$tcp"
    [ -n "$ours" ] && awk -v o="$ours" -v t="$tcp" 'BEGIN { printf "; 128k seqread QD32 of srpctl = %.0f %% of it", 100 * o / t }'
    echo
fi
[ -n "${IDLE_LINE:-}" ] && { echo; echo "$IDLE_LINE"; }
for f in "${FAILED[@]}"; do echo "srpctl bench disk failed in $f"; done
[ "$HAVE_FIO" = 1 ] || echo "fio missing: peers not measured"
[ "$HAVE_NBDKIT" = 1 ] || echo "nbdkit (or fio's nbd engine) missing: no NBD peer"
[ "$HAVE_TGT" = 1 ] || echo "tgtd peer not measured (--no-tgt, not root, or tgt/libiscsi-bin missing)"
