#!/usr/bin/env bash
# The portable crates' tests on Windows (issue #31, Deliver 2): built for
# x86_64-pc-windows-gnu with the mingw-w64 toolchain and run under Wine (Debian's wine64).
# What runs: the wire formats and sans-IO cores (wirekit, scsi, ib-verbs, srp, the access
# layer's MAD/CM/DM/PnP cores, mpio's core and its simulated-path tests), the shared port
# primitives (win-port), the SRP transport's crate, and both emulated Windows ports with
# their verifiers (tests/port_*.rs of srp-initiator-storport and srp-initiator-iscsi-model).
# What does not: tests that need Linux sockets, namespaces or the target daemon (the
# `srp_*` end-to-end tests, the control socket's), which are `cfg(target_os = "linux")`.
# A failing test fails this script, and scripts/test.sh with it.
#
# Usage: scripts/wine-test.sh [extra cargo test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || missing+=(gcc-mingw-w64-x86-64)
[[ -x /usr/lib/wine/wine64 ]] || missing+=(wine64)
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "== installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu; then
    rustup target add x86_64-pc-windows-gnu
fi

# A Wine prefix of the run's own under target/ (made on first use, ~15 s), the wineserver
# it starts stopped on the way out, whatever happens.
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
export WINEPREFIX="$target_dir/wine-prefix"
export WINEDEBUG=-all
export WINEDLLOVERRIDES="mscoree,mshtml="
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=/usr/lib/wine/wine64
trap 'wineserver -k >/dev/null 2>&1 || true' EXIT
if [[ ! -d "$WINEPREFIX/drive_c/windows/system32" ]]; then
    /usr/lib/wine/wine64 wineboot --init >/dev/null 2>&1 || true
fi
# Debian 12's Wine (8.0) lacks bcryptprimitives.dll, which Rust's std (1.78+) imports for
# ProcessPrng; the shim (scripts/wine/bcryptprimitives.c) serves it from RtlGenRandom.
system32="$WINEPREFIX/drive_c/windows/system32"
if [[ ! -f "$system32/bcryptprimitives.dll" ]] || ! grep -q ProcessPrng "$system32/bcryptprimitives.dll"; then
    x86_64-w64-mingw32-gcc -shared -O2 -o "$system32/bcryptprimitives.dll" \
        scripts/wine/bcryptprimitives.c -ladvapi32 -Wl,--kill-at
fi

log=$(mktemp)
trap 'rm -f "$log"; wineserver -k >/dev/null 2>&1 || true' EXIT
set +e
cargo test --locked --target x86_64-pc-windows-gnu \
    -p wirekit -p scsi -p ib-verbs -p srp -p access-layer -p mpio -p win-port \
    -p srp-initiator -p srp-initiator-storport -p srp-initiator-iscsi-model "$@" 2>&1 | tee "$log" |
    grep -E "^(test result|error|     Running)|FAILED|panicked"
status=${PIPESTATUS[0]}
set -e
passed=$(awk '/^test result:/ {n += $4} END {print n + 0}' "$log")
echo "== under Wine: $passed tests passed (exit status $status)"
if [[ $status -ne 0 ]]; then
    exit "$status"
fi
# A run that built nothing runnable (a runner that skips, a target not built) passes no
# test: that is a failure too. 860 passed when this was written.
if [[ $passed -lt 500 ]]; then
    echo "only $passed tests ran under Wine: expected hundreds" >&2
    exit 1
fi
