#!/usr/bin/env bash
# The loaded soak (issue #13's acceptance; docs/benchmarks.md): QD32 verified random I/O on
# a host daemon's block file for N minutes while a parallel `cargo build` loads the machine.
# Passes when fio reports no error and no verify failure, the session logged in exactly
# once and lost its channel never, and the disk saw no I/O error.
#
#   bash scripts/soak.sh [--minutes N] [--no-load] [--out DIR]
#
#   target: `srpctl target run`, one 1 GiB file LUN on /dev/shm (127.0.205.1)
#   host:   `srpctl host run`, one path (127.0.205.2), per-I/O FRMR
#   I/O:    fio libaio direct, randwrite 4k-128k, iodepth 32, every block verified
#           (crc32c, verify_backlog: written blocks are read back and checked as it goes)
#   load:   `cargo build --release` of this workspace into a scratch target dir, repeated
#           (skipped with --no-load)
# Needs root (FUSE) and fio (installed with apt-get when missing). Not part of CI: it runs
# for --minutes (default 10). Everything it starts is stopped on exit, even on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/daemons.sh
MINUTES=10
LOAD=1
OUT=
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) MINUTES=$2; shift 2 ;;
        --no-load) LOAD=0; shift ;;
        --out) OUT=$2; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
need fio jq
cargo build --release -q -p srpctl
bin=target/release/srpctl
work="$(mktemp -d /tmp/srp-soak.XXXXXX)"
[ -n "$OUT" ] || OUT="$work/out"
mkdir -p "$OUT"
file=/dev/shm/srp-soak-$$.img
pids=()
load_pid=
cleanup() {
    if [ -n "$load_pid" ]; then kill -TERM -- "-$load_pid" 2>/dev/null || kill "$load_pid" 2>/dev/null || true; fi
    stop_pids "${pids[@]}"
    umount -l "$work/disks" 2>/dev/null || true
    rm -f "$file"
    rm -rf "$work/load-target"
}
trap cleanup EXIT

cat >"$work/target.toml" <<TOML
[target]
name = "soak-target"
node_guid = "0x0002c90300b50000"
rdma_cm_port = 5605
control_socket = "$work/target.sock"
state_dir = "$work/state"

[[port]]
name = "p0"
address = "127.0.205.1"

[[lun]]
name = "soak-vol"
file = "$file"
size = "1GiB"

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300b50001"
ports = ["p0"]
exports = { 0 = "soak-vol" }
allow = ["any"]
TOML
cat >"$work/host.toml" <<TOML
[host]
name = "soak-host"
node_guid = "0x0002c90300b50100"
disks_dir = "$work/disks"
control_socket = "$work/host.sock"

[[portal]]
address = "127.0.205.1"
local = ["127.0.205.2"]
TOML

"$bin" target run -c "$work/target.toml" >"$OUT/target.log" 2>&1 &
pids+=($!)
wait_for_socket "$work/target.sock" || true
"$bin" host run -c "$work/host.toml" >"$OUT/host.log" 2>&1 &
pids+=($!)
disk=$(wait_for_block_file "$work/disks") || { echo "soak: no block file within 30 s" >&2; tail "$OUT/host.log" >&2; exit 1; }
echo "soak: $disk, $MINUTES min of QD32 verified random writes$([ "$LOAD" = 1 ] && echo ', cargo build running beside')" >&2

if [ "$LOAD" = 1 ]; then
    # Its own process group, so cleanup stops rustc too.
    setsid bash -c "while :; do rm -rf '$work/load-target'; cargo build --release -q --workspace --target-dir '$work/load-target' >/dev/null 2>&1 || true; done" &
    load_pid=$!
fi

status=0
fio --name=soak --filename="$disk" --ioengine=libaio --direct=1 --iodepth=32 \
    --rw=randwrite --bsrange=4k-128k --bs_unaligned=0 --size=1g \
    --verify=crc32c --verify_backlog=4096 --verify_fatal=1 --do_verify=1 \
    --time_based --runtime=$((MINUTES * 60)) --output-format=json \
    --output="$OUT/fio.json" || status=$?

"$bin" sessions --socket "$work/host.sock" --json >"$OUT/sessions.json" || true
"$bin" paths --socket "$work/host.sock" >"$OUT/paths.txt" 2>&1 || true
errors=$(jq -r '.jobs[0].error' "$OUT/fio.json" 2>/dev/null || echo unknown)
written=$(jq -r '.jobs[0].write.io_bytes' "$OUT/fio.json" 2>/dev/null || echo 0)
iops=$(jq -r '.jobs[0].write.iops' "$OUT/fio.json" 2>/dev/null || echo 0)
logins=$(jq -r '.[0].logins' "$OUT/sessions.json" 2>/dev/null || echo unknown)
losses=$(jq -r '.[0].losses' "$OUT/sessions.json" 2>/dev/null || echo unknown)
retx=$(jq -r '.[0].hca.retransmitted_packets // 0' "$OUT/sessions.json" 2>/dev/null || echo unknown)
drops=$(jq -r '.[0].hca.dropped // 0' "$OUT/sessions.json" 2>/dev/null || echo unknown)
echo "soak: fio exit $status, error $errors, $((written >> 20)) MiB written and verified, $iops write IOPS; session logins $logins, channel losses $losses; host HCA: $retx packets retransmitted, $drops dropped (recovered by the RC protocol)"
if [ "$status" != 0 ] || [ "$errors" != 0 ] || [ "$logins" != 1 ] || [ "$losses" != 0 ]; then
    echo "soak: FAILED (logs and reports in $OUT)" >&2
    exit 1
fi
echo "soak: passed (reports in $OUT)"
