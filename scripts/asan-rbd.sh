#!/usr/bin/env bash
# The librbd binding's FFI module (rbd-client/src/ffi) under AddressSanitizer: its test
# against a real cluster (scripts/ceph-cluster.sh, started by the test) built with
# -Zsanitizer=address on nightly (installed here if missing), checked to be instrumented.
# Outside the default run (nightly); about a minute. A line with the commit goes to stdout.
#   scripts/asan-rbd.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
bash scripts/ceph-cluster.sh install
export RUSTFLAGS="-Zsanitizer=address"
args=(-p rbd-client --test cluster --target x86_64-unknown-linux-gnu --target-dir target/asan)
bin=$(cargo +nightly test "${args[@]}" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    try: v=json.loads(l)
    except Exception: continue
    if v.get("reason")=="compiler-artifact" and v.get("target",{}).get("name")=="cluster" and v.get("executable"):
        print(v["executable"])')
# A build without the sanitizer's runtime would pass without checking anything.
grep -q __asan_init "$bin" || { echo "asan-rbd: $bin is not instrumented" >&2; exit 1; }
ASAN_OPTIONS=detect_leaks=1 "$bin" 2>&1 | tee target/asan/rbd-client.log | grep -E "test result|Sanitizer" || true
if grep -q "Sanitizer" target/asan/rbd-client.log || ! grep -q "test result: ok" target/asan/rbd-client.log; then
    echo "asan-rbd: FAILED (target/asan/rbd-client.log)" >&2
    exit 1
fi
echo "$(date -u +%F) $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes) rbd-client under AddressSanitizer: ok"
