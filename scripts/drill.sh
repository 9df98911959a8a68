#!/usr/bin/env bash
# A failover drill on loopback, as an operator runs one: a target exporting one
# file-backed LUN through two IOCs (127.0.202.1 and 127.0.202.4), a host daemon logged in
# over both (one multipath disk, two paths), then `srpctl drill failover` disabling the IOC
# behind one path on the target and enabling it again, under a verifying workload.
# Writes the report and the picture to the output directory (default ./drill-out).
#
#   bash scripts/drill.sh [OUT_DIR]
#   DRILL_DRIVER=storport|iscsi-model DRILL_FAULT=admin|ioc DRILL_WARMUP=3 DRILL_FAULT_SECS=10 DRILL_AFTER=5 bash scripts/drill.sh
#
# Needs root (FUSE). Everything it starts is stopped on exit, even on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/daemons.sh
out="$(realpath -m "${1:-drill-out}")"
mkdir -p "$out"
bin="${SRPCTL:-target/release/srpctl}"
if [[ -z "${SRPCTL:-}" ]]; then
    cargo build --release -q -p srpctl
fi
work="$(mktemp -d /tmp/srp-drill.XXXXXX)"
pids=()
cleanup() {
    stop_pids "${pids[@]}"
    umount -l "$work/disks" 2>/dev/null || true
    # The daemons' logs go with the report (a failed drill is read from them).
    cp "$work/target.log" "$work/host.log" "$out/" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cat > "$work/target.toml" <<TOML
[target]
name = "drill-target"
node_guid = "0x0002c90300d10000"
rdma_cm_port = 5602
control_socket = "$work/target.sock"
state_dir = "$work/state"

[[port]]
name = "p0"
address = "127.0.202.1"

[[port]]
name = "p1"
address = "127.0.202.4"

[[lun]]
name = "drill-vol"
file = "$work/drill-vol.img"
size = "256MiB"

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300d10001"
ports = ["p0"]
exports = { 0 = "drill-vol" }
allow = ["any"]

[[ioc]]
name = "ioc-b"
guid = "0x0002c90300d10002"
ports = ["p1"]
exports = { 0 = "drill-vol" }
allow = ["any"]
TOML

cat > "$work/host.toml" <<TOML
[host]
name = "drill-host"
node_guid = "0x0002c90300d10100"
disks_dir = "$work/disks"
control_socket = "$work/host.sock"
sweep_interval = "1s"
driver = "${DRILL_DRIVER:-storport}"

[timers]
reconnect_delay = "1s"
fast_io_fail = "15s"
dev_loss = "600s"

[multipath]
policy = "round-robin"
no_path_retry = "30s"

[[portal]]
address = "127.0.202.1"
local = ["127.0.202.2"]

[[portal]]
address = "127.0.202.4"
local = ["127.0.202.5"]
TOML

echo "== target: $work/target.toml"
"$bin" target run -c "$work/target.toml" > "$work/target.log" 2>&1 &
pids+=($!)
wait_for_socket "$work/target.sock" || true
echo "== host: $work/host.toml"
"$bin" host run -c "$work/host.toml" > "$work/host.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
    if [[ -S "$work/host.sock" ]] && "$bin" disks --socket "$work/host.sock" --json 2>/dev/null \
        | grep -q '"ioc_name": "ioc-b"'; then
        break
    fi
    sleep 0.1
done
"$bin" paths --socket "$work/host.sock"

fault="${DRILL_FAULT:-ioc}"
echo "== drill: --fault $fault"
status=0
"$bin" drill failover --socket "$work/host.sock" --fault "$fault" \
    --target-socket "$work/target.sock" \
    --warmup "${DRILL_WARMUP:-3}" --fault-secs "${DRILL_FAULT_SECS:-10}" --after "${DRILL_AFTER:-5}" \
    --report "$out/drill-report.json" --picture "$out/drill.svg" || status=$?
"$bin" paths --socket "$work/host.sock" || true
echo "report: $out/drill-report.json  picture: $out/drill.svg"
if [[ $status -ne 0 ]]; then
    echo "== the drill failed ($status); daemon logs:"
    tail -n 40 "$work/target.log" "$work/host.log"
fi
exit $status
