#!/usr/bin/env bash
# Fuzzing, outside CI (it needs nightly and takes minutes to hours). Two modes:
#
#   scripts/fuzz-smoke.sh [targets]              # smoke: 1,000,000 executions per target
#   RUNS=100000 scripts/fuzz-smoke.sh srp_iu mad
#   scripts/fuzz-smoke.sh --campaign [targets]   # campaign: 10,000,000 per target, then cmin
#   CAMPAIGN_RUNS=20000000 scripts/fuzz-smoke.sh --campaign pr_out
#
# Smoke runs with AddressSanitizer (cargo fuzz's default), from the committed corpus, into
# an uncommitted working corpus (fuzz/target/smoke-corpus/<target>/). The campaign runs
# without a sanitizer (the stack has no unsafe code outside the HCA's registered memory,
# which no target reaches) and with debug assertions, which is several times faster and
# checks the stack's paired debug_assert!s; it starts from the committed corpus in
# fuzz/corpus/<target>/ and grows it, then minimises it (cargo fuzz cmin, by edges), so what
# is committed stays small. Each target runs alone, one job at a time; a line per target
# with executions, wall time and corpus size goes to stdout and to fuzz/campaign.log.
#
# Every target is a function in the fuzz crate's library (fuzz/src/); the stable test
# fuzz/tests/corpus.rs replays the committed corpus through the same code in CI. A crash
# or a failed check stops the run with the input saved under fuzz/artifacts/<target>/.
# Every line names the commit it ran on (`+changes` when the tree differed from it): a smoke
# run's goes to fuzz/smoke.log, a campaign's to fuzz/campaign.log, so the figures the docs
# quote come from a committed command and a known tree.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

ALL=(srp_iu scsi_cdb scsi_sense mad roce_packet ctl_msg target_channel pr_out lu_data
    ctl_target ctl_host config_target config_host)

CAMPAIGN=0
if [ "${1:-}" = "--campaign" ]; then
    CAMPAIGN=1
    shift
fi
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=("${ALL[@]}")
fi

if [ "${CAMPAIGN}" = 1 ]; then
    RUNS="${CAMPAIGN_RUNS:-10000000}"
    # cargo fuzz options: no sanitizer, debug assertions.
    BUILD=(--sanitizer "${CAMPAIGN_SANITIZER:-none}" --debug-assertions)
    # A wall-time cap per target, in seconds (0: none); the figures say if it was hit.
    MAX_TIME="${CAMPAIGN_MAX_TIME:-0}"
else
    RUNS="${RUNS:-1000000}"
    BUILD=()
    MAX_TIME=0
fi

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz-smoke: needs the nightly toolchain (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# Seeds the fuzzer cannot easily invent: the example configs (after a newline, the first
# byte, which tells the config targets to take the rest as text).
seed() {
    case "$1" in
        config_target) { echo; cat ../srp-target/examples/target.toml; } \
            >"corpus/$1/seed-example-target" ;;
        config_host) { echo; sed -n 's|^//! \{0,1\}||p' ../srp-hostd/src/config.rs |
            sed -n '/^```toml$/,/^```$/p' | sed '1d;$d;s/"srpadmin"/"root"/'; } \
            >"corpus/$1/seed-example-host" ;;
    esac
}

COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- .. 2>/dev/null || echo '+changes')"
for t in "${TARGETS[@]}"; do
    mkdir -p "corpus/${t}"
    if [ -z "$(ls -A "corpus/${t}")" ]; then
        seed "${t}"
    fi
    echo "== ${t}: ${RUNS} runs$([ "${CAMPAIGN}" = 1 ] && echo ' (campaign)')"
    cargo +nightly fuzz build "${BUILD[@]}" "${t}"
    # The campaign grows the committed corpus (and minimises it after); a smoke run reads
    # it and writes what it finds to a working folder under target/, never committed.
    dirs=("corpus/${t}")
    if [ "${CAMPAIGN}" = 0 ]; then
        mkdir -p "target/smoke-corpus/${t}"
        dirs=("target/smoke-corpus/${t}" "corpus/${t}")
    fi
    log="$(mktemp)"
    start=$(date +%s)
    cargo +nightly fuzz run "${BUILD[@]}" "${t}" "${dirs[@]}" -- -runs="${RUNS}" \
        -max_len=4096 -max_total_time="${MAX_TIME}" -timeout=10 -print_final_stats=1 \
        2>"${log}" || {
        # The panic message first (the tail is mostly the backtrace), then the tail.
        grep -m1 -A4 'panicked at' "${log}" >&2 || true
        tail -40 "${log}" >&2
        echo "fuzz-smoke: ${t} FAILED" >&2
        exit 1
    }
    secs=$(($(date +%s) - start))
    execs=$(grep -m1 'stat::number_of_executed_units' "${log}" | awk '{print $2}')
    rm -f "${log}"
    if [ "${CAMPAIGN}" = 1 ]; then
        # By edges alone (no hit counters): every edge the campaign reached stays covered,
        # by a corpus several times smaller than one that keeps every counter bucket.
        cargo +nightly fuzz cmin "${BUILD[@]}" "${t}" "corpus/${t}" -- -max_len=4096 \
            -use_counters=0 >/dev/null 2>&1
        files=$(find "corpus/${t}" -type f | wc -l)
        bytes=$(du -sb "corpus/${t}" | awk '{print $1}')
        line="$(date -u +%F) ${COMMIT} ${t}: ${execs:-?} executions in ${secs} s, no crash; corpus ${files} files, ${bytes} bytes"
        echo "${line}" | tee -a campaign.log
    else
        line="$(date -u +%F) ${COMMIT} ${t}: ${execs:-?} executions in ${secs} s, no crash"
        echo "${line}" | tee -a smoke.log
    fi
done
