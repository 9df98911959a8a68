#!/usr/bin/env bash
# Issue #28's numbers: our target over rdma-core next to LIO/ib_srpt on the same kernel rxe,
# in one Linux guest, both driven by the same ib_srp and fio (tests/interop/src/bench.rs).
# Release build of srpctl. Root only; about 2 + 1.5 x rounds minutes on a 2-core machine.
#
#   scripts/interop-bench.sh [OUT_DIR (bench-out)] [--rounds N] [--secs S] [--profile]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out}
[[ $# -gt 0 ]] && shift
[[ $(id -u) -eq 0 ]] || { echo "scripts/interop-bench.sh: run as root (namespaces, taps, apt)" >&2; exit 2; }
bash scripts/interop-setup.sh
cargo build --locked --release -p srpctl
cargo build --locked -p srp-interop --bins
mkdir -p "$out"
started=$(date -u +%Y-%m-%dT%H:%MZ)
SRPCTL_BIN="$PWD/target/release/srpctl" SRP_INTEROP=1 target/debug/interop-bench --out "$out/guest-rdma-core.md" "$@"
{
    echo
    echo "run started $started on $(uname -n), guest kernel $(cat "${SRP_INTEROP_CACHE:-/var/cache/srp-interop}/kernel.version"),"
    echo "srpctl $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes') (release)"
} >> "$out/guest-rdma-core.md"
echo "table: $out/guest-rdma-core.md"
