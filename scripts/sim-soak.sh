#!/usr/bin/env bash
# The whole-stack simulation soak, outside CI: thousands of seeds of the deterministic
# simulation (sim/: the target daemon's loop, the StorPort-model initiator and multipath on
# a simulated net in virtual time, with loss, duplication, reordering, delay, partitions,
# link flaps and target crashes), every read checked against the acknowledged writes.
#
#   scripts/sim-soak.sh                 # seeds 1..10001 (10 000 seeds)
#   SEEDS=1..100001 scripts/sim-soak.sh # another range
#
# Release build (a seed takes ~0.1 s there); two seeds at a time. One summary line goes to
# stdout and to sim/soak.log; a failing seed prints its fault plan and log tail, and
#   SIM_SEED=n SIM_LOG=1 cargo test -p srp-sim --test whole_stack sim_seed -- --ignored --nocapture
# replays it exactly (SIM_TRACE_LBA=n adds every command on one block, HCA_SIM_TRACE=1 every
# datagram). The default test run (scripts/test.sh) runs seeds 1..101 in a debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS="${SEEDS:-1..10001}"
started=$(date +%s)
set +e
SIM_SEEDS="$SEEDS" cargo test --release --locked -p srp-sim --test whole_stack seeds \
    -- --nocapture 2>&1 | tee /tmp/sim-soak.$$.log
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^[0-9]+ seeds' /tmp/sim-soak.$$.log | tail -1)
rm -f /tmp/sim-soak.$$.log
line="$(date -u +%Y-%m-%dT%H:%MZ) $(git rev-parse --short HEAD) rc=$rc wall=$(( $(date +%s) - started ))s: $summary"
echo "$line"
echo "$line" >> sim/soak.log
exit "$rc"
