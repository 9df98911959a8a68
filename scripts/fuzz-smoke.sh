#!/usr/bin/env bash
# Fuzz smoke run: every parser that takes bytes from the wire, for a fixed number of inputs.
# Not part of CI (it needs nightly and takes minutes). Usage:
#   scripts/fuzz-smoke.sh            # 1,000,000 executions per target
#   RUNS=100000 scripts/fuzz-smoke.sh srp_iu mad
# Each target parses arbitrary bytes and, when parsing succeeds, checks that emit + parse
# gives the same value back. A crash or a failed check stops the run with the input saved
# under fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

RUNS="${RUNS:-1000000}"
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(srp_iu scsi_cdb scsi_sense mad roce_packet ctl_msg)
fi

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz-smoke: needs the nightly toolchain (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

for t in "${TARGETS[@]}"; do
    echo "== ${t}: ${RUNS} runs"
    mkdir -p "corpus/${t}"
    log="$(mktemp)"
    start=$(date +%s)
    cargo +nightly fuzz run "${t}" "corpus/${t}" -- -runs="${RUNS}" -max_len=4096 -print_final_stats=1 2>"${log}" || {
        # The panic message first (the tail is mostly the backtrace), then the tail.
        grep -m1 -A4 'panicked at' "${log}" >&2 || true
        tail -40 "${log}" >&2
        echo "fuzz-smoke: ${t} FAILED" >&2
        exit 1
    }
    execs=$(grep -m1 'stat::number_of_executed_units' "${log}" | awk '{print $2}')
    echo "${t}: ${execs:-?} executions in $(( $(date +%s) - start )) s, no crash"
    rm -f "${log}"
done
