#!/usr/bin/env bash
# The project's test command: formatting, lints, doc links, every test, and the fuzz targets
# compiling and replaying their committed corpus.
# README's second set-up command and .ci/run both call this script.
set -euo pipefail
cd "$(dirname "$0")/.."

# rustfmt and clippy ship with the toolchain here; add them if a minimal install lacks them.
for component in rustfmt clippy; do
    if ! rustup component list --installed 2>/dev/null | grep -q "^${component}"; then
        rustup component add "${component}"
    fi
done

# The HCA's wire check captures loopback traffic with dumpcap and dissects it with tshark
# (Debian package tshark); python3 recomputes the ICRC independently.
if ! command -v tshark >/dev/null 2>&1 || ! command -v dumpcap >/dev/null 2>&1; then
    echo "== installing tshark (wire check)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get install -y -qq tshark >/dev/null
fi

# The host's block-file, ext4 and multipath tests: loop devices and e2fsprogs (losetup,
# mkfs.ext4, e2fsck), network namespaces (ip from iproute2, nsenter from util-linux), ping
# (iputils-ping: the multipath netem test checks each link carries pings before I/O);
# systemd and pgrep (procps) for the units' acceptance test, which boots systemd as PID 1
# of a namespace of its own (srpctl/tests/systemd_units.rs).
missing=()
for pair in ip:iproute2 nsenter:util-linux losetup:mount mkfs.ext4:e2fsprogs e2fsck:e2fsprogs ping:iputils-ping pgrep:procps; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair##*:}")
done
[[ -x /lib/systemd/systemd ]] || missing+=(systemd)
# The rdma-core provider's layout test compiles C against rdma-core's own headers (every
# struct and inline-ops offset the FFI module mirrors); the provider loads the libraries
# these packages bring at run time.
[[ -f /usr/include/infiniband/verbs.h ]] || missing+=(libibverbs-dev)
[[ -f /usr/include/rdma/rdma_cma.h ]] || missing+=(librdmacm-dev)
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "== installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The test Ceph cluster (scripts/ceph-cluster.sh: ceph-mon, ceph-osd, ceph-mgr, ceph-common;
# librbd-dev for the RBD backend), started by srpctl/tests/ceph_cluster.rs in a namespace.
bash scripts/ceph-cluster.sh install

# A clean test build (workspace, Windows check, fuzz corpus replay) takes about 4 GB under
# target/ and fuzz/target/; incremental caches would add gigabytes a one-off run never reuses.
# CI ran out of disk before either change (2026-11-26), so the free space is printed first.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
echo "== disk: $(df -h --output=avail . | tail -1 | tr -d ' ') free for target/"

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The portable crates (the sans-IO cores, the verbs interface, the StorPort miniport and its
# emulated port, the iSCSI model's emulated port, multipath) type-check for Windows; the
# Linux-only pieces (UDP driver, control socket, FUSE) are behind cfg. `cargo check` needs no
# MSVC linker or WDK. See docs/architecture.md, "Windows portability".
echo "== cargo check x86_64-pc-windows-msvc, i686-pc-windows-msvc (portable crates)"
for win in x86_64-pc-windows-msvc i686-pc-windows-msvc; do
    if ! rustup target list --installed 2>/dev/null | grep -qx "$win"; then
        rustup target add "$win"
    fi
    cargo check --locked --quiet --target "$win" \
        -p wirekit -p ib-verbs -p opskit -p scsi -p hca -p srp -p access-layer -p win-port \
        -p srp-initiator -p srp-initiator-storport -p srp-initiator-iscsi-model -p srp-host -p mpio
done

# The two Windows driver models are siblings over the shared transport (srp-initiator) and
# port primitives (win-port): neither depends on the other, tests included (issue #31).
echo "== the driver models do not import each other"
for pair in "srp-initiator-iscsi-model srp-initiator-storport" "srp-initiator-storport srp-initiator-iscsi-model"; do
    set -- $pair
    if cargo tree --locked -q -p "$1" -e normal,dev,build --prefix none | grep -q "^$2 "; then
        echo "$1 depends on its sibling $2: share through srp-initiator or win-port" >&2
        exit 1
    fi
done

# The crates a Windows kernel driver would contain build with no `std` (issue #31): the wire
# formats (wirekit, scsi, srp), the verbs vocabulary (ib-verbs), the access layer's cores
# (MAD, GSI, CM, DM, verbs, completions, PnP events, the power domain), the SRB and port
# primitives (win-port), the initiator transport (srp-initiator) and the multipath core
# (mpio, with opskit's histograms and srp-host's device interface) and the StorPort
# miniport's routines (srp-initiator-storport's `hw` and `srp`), each without its `std`
# feature. A target that has no `std` at all proves nothing in their dependency graph links
# it; the same crates are then checked for both Windows targets with `core` and `alloc`
# built from source and no `std` in the sysroot (nightly's -Z build-std, installed here if
# missing). docs/architecture.md, "Windows portability", gives each gated piece's reason.
# About 1 minute on a fresh clone (the nightly toolchain and its library source), seconds after.
NOSTD="-p wirekit -p ib-verbs -p scsi -p srp -p access-layer -p win-port -p srp-initiator -p srp-initiator-storport -p srp-initiator-iscsi-model -p opskit -p srp-host -p mpio"
echo "== no_std: the driver's crates for x86_64-unknown-none (no std exists there)"
if ! rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-none; then
    rustup target add x86_64-unknown-none
fi
cargo build --locked --quiet --target x86_64-unknown-none $NOSTD --no-default-features
cargo clippy --locked --quiet --target x86_64-unknown-none $NOSTD --no-default-features -- -D warnings
echo "== no_std: the driver's crates for x86_64- and i686-pc-windows-msvc, sysroot core+alloc only"
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
    rustup component add rust-src --toolchain nightly
fi
for win in x86_64-pc-windows-msvc i686-pc-windows-msvc; do
    cargo +nightly check --quiet -Z build-std=core,alloc --target "$win" $NOSTD --no-default-features
done

# The portable crates' tests on Windows: built for x86_64-pc-windows-gnu (mingw-w64) and run
# under Wine; the script installs what it needs. About 3 minutes on a fresh clone (the
# Windows build; the tests themselves ~30 s).
echo "== Windows: the portable crates' tests under Wine (scripts/wine-test.sh)"
bash scripts/wine-test.sh

# The StorPort miniport as kernel driver images, x64 and x86 (srp.sys; issue #31 Deliver 4):
# built with mingw-w64 and checked structurally by the script (PE machine, native
# subsystem, imports only from ntoskrnl.exe, hal.dll and storport.sys, DriverEntry the
# entry, x86 stdcall); the glue's safe half tested on the host; every storport import
# mapped to its emulated-port counterpart by srp-initiator-storport's driver_imports test
# (in the cargo test run below). About 1½ minutes on a fresh clone (core and alloc built
# from source for each architecture), seconds after.
echo "== Windows: the StorPort driver images (scripts/driver-image.sh)"
bash scripts/driver-image.sh
cargo fmt --manifest-path driver/storport/Cargo.toml -- --check
cargo clippy --manifest-path driver/storport/Cargo.toml --all-targets --locked --quiet -- -D warnings
cargo test --manifest-path driver/storport/Cargo.toml --locked --quiet

echo "== cargo doc -D warnings (intra-doc links)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

# The fuzz crate is outside the workspace (cargo fuzz builds it on nightly): its targets
# compile and pass clippy here, and its committed corpus replays as a regression test below.
echo "== fuzz targets: fmt, clippy (running them: scripts/fuzz-smoke.sh)"
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --locked --quiet -- -D warnings

echo "== cargo test"
cargo test --workspace --locked

# Every file of fuzz/corpus/<target>/ through its target's checks, on stable (the library
# the fuzz binaries call; --no-default-features leaves libFuzzer out).
echo "== fuzz corpus regression"
cargo test --manifest-path fuzz/Cargo.toml --no-default-features --locked

# The Linux-guest interop smoke: Linux 6.1 under QEMU against our target and our host
# (tests/interop/tests/smoke.rs, a few minutes). scripts/interop-setup.sh installs QEMU,
# the kernel and the tools; the full matrix is scripts/interop.sh.
if [[ $(id -u) -eq 0 ]]; then
    echo "== Linux-guest interop smoke"
    bash scripts/interop-setup.sh
    SRP_INTEROP=1 cargo test --locked -p srp-interop --test smoke
else
    echo "== Linux-guest interop smoke: SKIPPED (needs root: namespaces, taps, apt)"
fi
