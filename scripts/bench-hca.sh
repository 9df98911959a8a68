#!/usr/bin/env bash
# The soft HCA benchmark: RDMA WRITE/READ bandwidth and SEND ping-pong latency between two
# processes on loopback, next to iperf3 TCP measured in the same run. Not part of CI.
#   scripts/bench-hca.sh                    # 3 rounds of 2 s per point
#   scripts/bench-hca.sh --seconds 10 --rounds 5
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v iperf3 >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq iperf3 >/dev/null
fi
cargo build --release -q -p srpctl
exec ./target/release/srpctl bench hca "$@"
