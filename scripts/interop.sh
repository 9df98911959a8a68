#!/usr/bin/env bash
# The full Linux-guest interop matrix of issue #12 (docs/interop.md): Debian's Linux 6.1
# under QEMU (TCG) in network namespaces this run creates and removes.
#   A  Linux ib_srp -> a target, over RDMA-CM: against LIO + ib_srpt in the guest (the bar)
#      and against `srpctl target run`; MTU 1500 and 9000.
#   B  our host (`srpctl discover`, `srpctl host run`) -> Linux ib_srpt/LIO in the guest.
#   A over rdma-core: Linux ib_srp -> our target run inside the guest on its rxe devices
#      through libibverbs/librdmacm (the kernel's RDMA stack); B over rdma-core: our host
#      inside the guest (memory-window fencing) -> ib_srpt/LIO, failover drill included;
#      P: the rdma-core provider's device test in the guest, plain and under
#      AddressSanitizer (nightly, installed here if missing).
#   C  libiscsi's iscsi-test-cu (an independent SCSI conformance battery) through ib_srp,
#      against LIO and against ours: no test LIO passes and we fail.
#   pair  two of our appliances serving one Ceph RBD LU (a cluster in the namespace), ib_srp
#      logged in to both: one identity, reservations enforced across them (sg_persist,
#      libiscsi's PR suites).
# One line per check as it ends, then a summary (also written to OUT/summary.txt) that
# names every check LIO passes and we fail. Exits non-zero if a check of ours fails (the
# checks against LIO are the bar, shown for comparison).
# Root only. About an hour on a 2-core machine (4 475 s from a clone of d314ae8, a fuzz run beside it).
#
#   scripts/interop.sh [OUT] [--only a-lio|a-ours|a-rdma-core|a-jumbo|b|b-rdma-core|provider|pair|conformance]...
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-interop-out}
[[ $# -gt 0 ]] && shift
[[ $(id -u) -eq 0 ]] || { echo "scripts/interop.sh: run as root (namespaces, taps, apt)" >&2; exit 2; }
bash scripts/interop-setup.sh
# The pair's Ceph cluster (Debian's packages).
bash scripts/ceph-cluster.sh install
# The provider's AddressSanitizer build (matrix part P) needs nightly.
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
cargo build --locked -p srpctl -p srp-interop --bins
mkdir -p "$out"
started=$(date -u +%Y-%m-%dT%H:%MZ)
SRP_INTEROP=1 target/debug/interop-matrix --summary "$out/summary.txt" "$@" 2> "$out/stderr.log" \
    | tee "$out/checks.txt"
rc=${PIPESTATUS[0]}
{
    echo "run started $started on $(uname -n), guest kernel $(cat "${SRP_INTEROP_CACHE:-/var/cache/srp-interop}/kernel.version")"
    echo "srpctl $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+changes')"
} >> "$out/summary.txt"
echo "summary: $out/summary.txt (failure details: $out/stderr.log)"
exit "$rc"
