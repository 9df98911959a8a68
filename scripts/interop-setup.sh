#!/usr/bin/env bash
# Installs what the Linux-guest interop harness (tests/interop, crate srp-interop) needs and
# builds its artifacts. Idempotent: a second run only checks. Root only (apt, dpkg).
#
#   scripts/interop-setup.sh            install / check, print the pinned kernel
#   SRP_INTEROP_REFRESH=1 ...           also move the pin to the newest 6.1 kernel apt offers
#   SRP_INTEROP_KERNEL=6.1.0-56-amd64   pin that kernel ABI instead of the newest
#   SRP_INTEROP_QEMU=unpack             use the dpkg -x fallback for QEMU even if apt could install it
#
# Everything large lives in the cache, ${SRP_INTEROP_CACHE:-/var/cache/srp-interop}:
#   debs/                      downloaded .debs (kernel, QEMU fallback)
#   kernel/<abi>/              the unpacked linux-image package (boot/vmlinuz-<abi>, lib/modules/<abi>)
#   kernel.version             the pinned ABI, e.g. 6.1.0-56-amd64 (what the harness boots)
#   initramfs-<abi>.cpio.gz    busybox + the 9p/virtio modules + init (see below)
#   qemu.env                   QEMU_BIN= and QEMU_DATADIR= (firmware dirs, colon-separated) for the harness
#   qemu/                      QEMU 7.2 unpacked with dpkg -x (fallback only)
#   ready                      written last; the harness treats a cache without it as absent
set -euo pipefail

CACHE=${SRP_INTEROP_CACHE:-/var/cache/srp-interop}
export DEBIAN_FRONTEND=noninteractive

log() { printf '== interop-setup: %s\n' "$*" >&2; }
die() { printf 'interop-setup: error: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root (apt-get, dpkg, /lib/modules)"
mkdir -p "$CACHE/debs" "$CACHE/kernel"
# One setup at a time (two test binaries may call this concurrently).
exec 9>"$CACHE/.setup.lock"
flock 9
rm -f "$CACHE/ready"

APT_UPDATED=0
apt_update() {
    if [[ $APT_UPDATED -eq 0 ]]; then
        log "apt-get update"
        apt-get update -qq
        APT_UPDATED=1
    fi
}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'; }
apt_install() {
    local missing=()
    for p in "$@"; do installed "$p" || missing+=("$p"); done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    apt_update
    log "apt-get install ${missing[*]}"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# --- 1. host tools (the guest runs them too: it sees the host's root over 9p) ----------------
# tshark asks whether non-root users may capture; answer no before it can ask.
if ! installed tshark; then
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
fi
# No systemd runs on these machines, so multipath-tools starts no daemon on the host; the
# guest gets multipath/multipathd for dm-multipath runs.
apt_install busybox-static cpio kmod iproute2 util-linux procps e2fsprogs dmsetup \
    multipath-tools sg3-utils fio libiscsi-bin tshark iputils-ping \
    ibverbs-utils ibverbs-providers rdmacm-utils perftest

# --- 2. QEMU ----------------------------------------------------------------------------
# Debian 12's qemu-system-x86 (7.2) conflicts with a backported qemu-utils (10.x, preinstalled
# on these machines). Prefer the backport of qemu-system-x86 of the very same version; else
# Debian's own when nothing conflicts; else unpack 7.2 with dpkg -x into the cache.
QEMU_BIN=""
QEMU_DATADIR=""
qemu_works() { "$1" -version >/dev/null 2>&1; }
ensure_backports_source() {
    if grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        return 0
    fi
    log "adding bookworm-backports to apt sources (priority 100: nothing upgrades by itself)"
    cat >/etc/apt/sources.list.d/srp-interop-backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    APT_UPDATED=0
}
qemu_unpack() {
    local dir="$CACHE/qemu" ver
    if [[ -x $dir/usr/bin/qemu-system-x86_64 ]] && qemu_works "$dir/usr/bin/qemu-system-x86_64"; then
        QEMU_BIN="$dir/usr/bin/qemu-system-x86_64"
        QEMU_DATADIR="$dir/usr/share/qemu:$dir/usr/share/seabios:$dir/usr/lib/ipxe/qemu"
        return 0
    fi
    apt_update
    # Debian's own versions (not the backports): the first non-bpo candidate of each. The
    # arch:all qemu-system-data has no binNMU suffix, so each package gets its own version.
    local pkgs=() p v debs="$CACHE/debs/qemu"
    for p in qemu-system-x86 qemu-system-common qemu-system-data seabios ipxe-qemu; do
        v=$(apt-cache madison "$p" | awk -F'|' '$2 !~ /bpo/ {gsub(/ /,"",$2); print $2; exit}')
        [[ -n $v ]] || die "no Debian 12 version of $p in the apt sources"
        pkgs+=("$p=$v")
    done
    log "unpacking ${pkgs[*]} into $dir (dpkg -x: apt would conflict with the installed qemu-utils)"
    rm -rf "$debs" "$dir.tmp" && mkdir -p "$debs" "$dir.tmp"
    (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "${pkgs[@]}")
    for deb in "$debs"/*.deb; do
        dpkg -x "$deb" "$dir.tmp"
    done
    # Its shared libraries: the lib* packages it depends on (installing them conflicts with nothing).
    local deps
    deps=$(dpkg-deb -f "$debs"/qemu-system-x86_*.deb Depends |
        tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/ //g' | grep '^lib' || true)
    # shellcheck disable=SC2086
    apt_install $deps
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    QEMU_BIN="$dir/usr/bin/qemu-system-x86_64"
    # Debian's QEMU looks for firmware in three directories; -L takes one each.
    QEMU_DATADIR="$dir/usr/share/qemu:$dir/usr/share/seabios:$dir/usr/lib/ipxe/qemu"
    qemu_works "$QEMU_BIN" || die "unpacked QEMU does not run: $("$QEMU_BIN" -version 2>&1 | head -3)"
}
if [[ ${SRP_INTEROP_QEMU:-} == unpack ]]; then
    qemu_unpack
elif command -v qemu-system-x86_64 >/dev/null && qemu_works qemu-system-x86_64; then
    QEMU_BIN=$(command -v qemu-system-x86_64)
else
    utils_ver=$(dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null || true)
    if [[ $utils_ver == *bpo* ]]; then
        ensure_backports_source
        apt_update
        if apt-cache madison qemu-system-x86 | awk -F'|' '{gsub(/ /,"",$2); print $2}' | grep -qxF "$utils_ver"; then
            log "installing qemu-system-x86 $utils_ver from bookworm-backports (matches qemu-utils)"
            apt-get install -y -qq --no-install-recommends -t bookworm-backports \
                "qemu-system-x86=$utils_ver" "qemu-system-common=$utils_ver" \
                "qemu-system-data=$utils_ver" >/dev/null
            QEMU_BIN=$(command -v qemu-system-x86_64)
        else
            qemu_unpack
        fi
    else
        apt_install qemu-system-x86
        QEMU_BIN=$(command -v qemu-system-x86_64 || true)
        [[ -n $QEMU_BIN ]] || qemu_unpack
    fi
fi
qemu_works "$QEMU_BIN" || die "QEMU at $QEMU_BIN does not run"
"$QEMU_BIN" -device help 2>&1 | grep -q virtio-9p-pci || die "QEMU at $QEMU_BIN lacks virtio-9p (virtfs)"
printf 'QEMU_BIN=%s\nQEMU_DATADIR=%s\n' "$QEMU_BIN" "$QEMU_DATADIR" >"$CACHE/qemu.env"
log "QEMU: $("$QEMU_BIN" -version | head -1) ($QEMU_BIN)"

# --- 3. the guest kernel: Debian's linux-image-6.1.0-N-amd64, unpacked --------------------
newest_kernel() {
    local abis abi policy
    abis=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' | awk '{print $1}' |
        sed 's/^linux-image-//' | sort -V -r)
    for abi in $abis; do
        # Listed is not downloadable: keep the first with an install candidate.
        policy=$(apt-cache policy "linux-image-$abi")
        if [[ $policy == *"Candidate: "[0-9]* ]]; then
            echo "$abi"
            return 0
        fi
    done
}
KVER=${SRP_INTEROP_KERNEL:-}
if [[ -z $KVER && -z ${SRP_INTEROP_REFRESH:-} && -s $CACHE/kernel.version ]]; then
    KVER=$(cat "$CACHE/kernel.version")
fi
if [[ -z $KVER ]]; then
    apt_update
    KVER=$(newest_kernel)
    [[ -n $KVER ]] || die "apt offers no linux-image-6.1.0-N-amd64"
fi
KDIR="$CACHE/kernel/$KVER"
if [[ ! -f $KDIR/.complete ]]; then
    apt_update
    log "downloading linux-image-$KVER"
    rm -f "$CACHE"/debs/linux-image-"$KVER"_*.deb
    (cd "$CACHE/debs" && apt-get download -qq -o APT::Sandbox::User=root "linux-image-$KVER" 2>/dev/null)
    rm -rf "$KDIR.tmp" && mkdir -p "$KDIR.tmp"
    dpkg -x "$CACHE"/debs/linux-image-"$KVER"_*.deb "$KDIR.tmp"
    depmod -b "$KDIR.tmp" "$KVER"
    for m in rdma_rxe ib_srp ib_srpt target_core_mod target_core_file dm_multipath 9p virtio_net; do
        modprobe -d "$KDIR.tmp" -S "$KVER" --show-depends "$m" >/dev/null ||
            die "linux-image-$KVER has no module $m"
    done
    touch "$KDIR.tmp/.complete"
    rm -rf "$KDIR" && mv "$KDIR.tmp" "$KDIR"
    rm -f "$CACHE"/debs/linux-image-"$KVER"_*.deb
fi
echo "$KVER" >"$CACHE/kernel.version"
# The guest bind-mounts the unpacked modules over /lib/modules of the host's (read-only) root:
# the mount point must exist on the host.
mkdir -p /lib/modules

# --- 4. the initramfs -------------------------------------------------------------------
# init: load the 9p transport, mount the host's root read-only over virtio-9p (tag hostroot),
# bind the unpacked modules over /lib/modules, tmpfs on /tmp /run /var (the cache is put back
# at its path under /var), the guest's own /proc /sys /dev, the read-write share (tag xfer) at
# /run/interop, then switch_root into the host's tree and run the agent the harness wrote there.
INIT=$(cat <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() {
    echo "srp-interop-init: FAILED: $*" >/dev/console
    echo o >/proc/sysrq-trigger
    sleep 5
}
for m in $(cat /modules.list); do
    insmod "/modules/$m" || fail "insmod $m"
done
CACHE=; KVER=
for arg in $(cat /proc/cmdline); do
    case $arg in
        srp.cache=*) CACHE=${arg#srp.cache=} ;;
        srp.kver=*) KVER=${arg#srp.kver=} ;;
    esac
done
[ -n "$CACHE" ] && [ -n "$KVER" ] || fail "srp.cache= and srp.kver= missing from the command line"
R=/newroot
mkdir -p $R /cache
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot $R || fail "mount hostroot"
[ -d $R/lib/modules ] || fail "/lib/modules missing on the host (run scripts/interop-setup.sh)"
mount --bind "$R$CACHE/kernel/$KVER/lib/modules" $R/lib/modules || fail "bind modules"
mount --bind "$R$CACHE" /cache || fail "bind cache"
for d in tmp run var; do
    mount -t tmpfs -o mode=1777 tmpfs $R/$d || fail "tmpfs $d"
done
mkdir -p "$R$CACHE" && mount --move /cache "$R$CACHE" || fail "cache under /var"
mkdir -p $R/var/tmp $R/var/log $R/var/lib $R/var/run $R/run/lock
mount -t proc proc $R/proc || fail "proc"
mount -t sysfs sysfs $R/sys || fail "sysfs"
mount -t devtmpfs devtmpfs $R/dev || fail "devtmpfs"
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
mkdir -p $R/run/interop
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=262144 xfer $R/run/interop || fail "mount xfer"
[ -f $R/run/interop/agent.sh ] || fail "no agent.sh in the xfer share"
umount /proc /sys /dev 2>/dev/null
echo "srp-interop-init: switching root"
exec switch_root $R /bin/sh /run/interop/agent.sh
EOF
)
MODS="virtio_pci 9pnet_virtio 9p"
STAMP=$(printf '%s\n%s\n%s\n' "$INIT" "$MODS" "$(sha256sum /bin/busybox | cut -c1-64)" | sha256sum | cut -c1-64)
IRD="$CACHE/initramfs-$KVER.cpio.gz"
if [[ ! -f $IRD || $(cat "$IRD.stamp" 2>/dev/null) != "$STAMP" ]]; then
    log "building $IRD"
    W=$(mktemp -d)
    trap 'rm -rf "$W"' EXIT
    mkdir -p "$W/bin" "$W/modules"
    cp /bin/busybox "$W/bin/busybox"
    printf '%s\n' "$INIT" >"$W/init"
    chmod 755 "$W/init"
    : >"$W/modules.list"
    # insmod order = modprobe's dependency order; builtins print "builtin X" and are skipped.
    # shellcheck disable=SC2086
    for m in $MODS; do modprobe -d "$KDIR" -S "$KVER" --show-depends "$m"; done |
        awk '$1 == "insmod" {print $2}' | while read -r ko; do
        b=$(basename "$ko")
        grep -qxF "$b" "$W/modules.list" && continue
        cp "$ko" "$W/modules/$b"
        echo "$b" >>"$W/modules.list"
    done
    (cd "$W" && find . | cpio -o -H newc --quiet | gzip -1) >"$IRD.tmp"
    mv "$IRD.tmp" "$IRD"
    echo "$STAMP" >"$IRD.stamp"
    rm -rf "$W"
    trap - EXIT
fi

touch "$CACHE/ready"
log "ready: cache $CACHE"
echo "kernel: $KVER ($KDIR/boot/vmlinuz-$KVER)"
