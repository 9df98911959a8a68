#!/usr/bin/env bash
# A real, small Ceph cluster for tests, from Debian's packages, on this one machine:
# one monitor, one manager, one BlueStore OSD on a file, the pool `rbd` of size 1.
#
#   scripts/ceph-cluster.sh start DIR [--addr IP] [--cephx] [--osd-size SIZE] [--timeout SECS]
#   scripts/ceph-cluster.sh stop DIR
#   scripts/ceph-cluster.sh install        # the packages only (apt), if missing
#
# Everything lives in DIR (config, keyrings, daemon data, logs, admin sockets, the OSD's
# block file); nothing under /etc/ceph or /var/lib/ceph is touched. The daemons bind to IP
# (default 127.0.0.1): run the script under `ip netns exec NS` with an address of that
# namespace to make the cluster reachable from the test's other namespaces. `--cephx`
# turns on authentication and writes DIR/client.srp.keyring for the client `client.srp`
# (rbd profile on the pool `rbd`); without it, auth is none. Start-up is bounded
# (`--timeout`, default 120 s); a start that fails stops what it started and exits
# non-zero. `stop` kills the daemons by their pid files, waits for them, removes DIR.
# On success `start` prints the lines of DIR/env (CEPH_CONF=..., CEPH_ARGS=...), which the
# tools and librbd read.
#
# Facts behind the settings: ../shared/research/ceph.md (the block path beside the OSD
# directory, the small memory settings, the health warnings to ignore).
set -euo pipefail

PACKAGES=(ceph-mon ceph-osd ceph-mgr ceph-common librbd-dev)

install() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "ceph-cluster: installing ${missing[*]}" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            "${missing[@]}" >&2
    fi
}

# Kills the daemons whose pid files are in DIR/run and waits (bounded) for them to exit.
kill_daemons() {
    local dir=$1 pids=()
    for f in "$dir"/run/*.pid; do
        [ -e "$f" ] || continue
        local pid
        pid=$(cat "$f" 2>/dev/null || true)
        [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && pids+=("$pid")
    done
    [ ${#pids[@]} -eq 0 ] && return 0
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 100); do
        local alive=0
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && return 0
        sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
}

stop() {
    local dir=$1
    [ -d "$dir" ] || return 0
    kill_daemons "$dir"
    rm -rf "$dir"
}

start() {
    local dir=$1
    shift
    local addr=127.0.0.1 cephx=0 osd_size=4G timeout=120
    while [ $# -gt 0 ]; do
        case "$1" in
            --addr) addr=$2; shift 2 ;;
            --cephx) cephx=1; shift ;;
            --osd-size) osd_size=$2; shift 2 ;;
            --timeout) timeout=$2; shift 2 ;;
            *) echo "ceph-cluster: unknown option $1" >&2; exit 2 ;;
        esac
    done
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
        echo "ceph-cluster: $dir exists and is not empty (stop it first)" >&2
        exit 2
    fi
    install
    mkdir -p "$dir"/{mon,mgr,osd,run,log}
    dir=$(cd "$dir" && pwd)
    # A failed start leaves nothing running and nothing behind.
    trap 'echo "ceph-cluster: start failed at: $BASH_COMMAND; stopping what was started (logs were in $dir/log)" >&2;
          tail -n 5 "$dir"/log/*.log >&2 2>/dev/null || true; stop "$dir"' ERR
    local deadline=$((SECONDS + timeout))
    local fsid
    fsid=$(cat /proc/sys/kernel/random/uuid)
    local auth=none
    [ $cephx = 1 ] && auth=cephx
    local size_bytes
    size_bytes=$(numfmt --from=iec "$osd_size")
    cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon_host = $addr:6789
public_addr = $addr
auth_cluster_required = $auth
auth_service_required = $auth
auth_client_required = $auth
run_dir = $dir/run
admin_socket = $dir/run/\$name.asok
pid_file = $dir/run/\$name.pid
log_file = $dir/log/\$name.log
mon_data = $dir/mon/\$name
mgr_data = $dir/mgr/\$name
osd_data = $dir/osd/\$name
ms_bind_ipv6 = false
ms_bind_msgr2 = false
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
mon_warn_on_insecure_global_id_reclaim_allowed = false
mon_data_avail_warn = 1
mon_data_avail_crit = 0
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
osd_memory_target = 939524096
bluestore_cache_autotune = false
bluestore_cache_size = 134217728
bluestore_block_path = $dir/osd/block-\$id
bluestore_block_create = true
bluestore_block_size = $size_bytes
osd_objectstore = bluestore

[mon]
keyring = $dir/keyring
[mgr]
keyring = $dir/mgr/\$name/keyring
[osd]
keyring = $dir/osd/\$name/keyring
[client]
keyring = $dir/keyring
EOF
    export CEPH_CONF="$dir/ceph.conf"
    local to="--connect-timeout 10"
    # Keys (cephx) or an empty keyring (none).
    if [ $cephx = 1 ]; then
        ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
        ceph-authtool "$dir/keyring" --gen-key -n client.admin --cap mon 'allow *' \
            --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
    else
        : >"$dir/keyring"
    fi
    monmaptool --create --fsid "$fsid" --add a "$addr:6789" "$dir/monmap" >/dev/null
    ceph-mon --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" >/dev/null
    ceph-mon -i a
    until ceph $to -s >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || { echo "ceph-cluster: the monitor did not answer" >&2; false; }
        sleep 0.5
    done
    mkdir -p "$dir/mgr/mgr.x"
    if [ $cephx = 1 ]; then
        ceph $to auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
            -o "$dir/mgr/mgr.x/keyring"
    fi
    ceph-mgr -i x
    local uuid id
    uuid=$(cat /proc/sys/kernel/random/uuid)
    # Retried: a command right after the monitor's first answer is sometimes refused
    # ("problem getting command descriptions from mon", seen on this machine); `osd new`
    # with the same uuid gives the same id.
    until id=$(ceph $to osd new "$uuid" 2>"$dir/log/osd-new.err"); do
        [ $SECONDS -lt $deadline ] || { cat "$dir/log/osd-new.err" >&2; false; }
        sleep 0.5
    done
    mkdir -p "$dir/osd/osd.$id"
    if [ $cephx = 1 ]; then
        ceph $to auth get-or-create "osd.$id" mon 'allow profile osd' mgr 'allow profile osd' \
            osd 'allow *' -o "$dir/osd/osd.$id/keyring"
        ceph-osd -i "$id" --mkfs --osd-uuid "$uuid" --keyring "$dir/osd/osd.$id/keyring" \
            >/dev/null 2>&1
    else
        ceph-osd -i "$id" --mkfs --osd-uuid "$uuid" >/dev/null 2>&1
    fi
    ceph-osd -i "$id" 2>>"$dir/log/osd-start.log"
    until ceph $to osd stat -f json 2>/dev/null | grep -q '"num_up_osds":1'; do
        [ $SECONDS -lt $deadline ] || { echo "ceph-cluster: the OSD did not come up" >&2; false; }
        sleep 0.5
    done
    ceph $to osd pool create rbd 8 >/dev/null 2>&1
    ceph $to osd pool set rbd size 1 --yes-i-really-mean-it >/dev/null 2>&1
    rbd pool init rbd
    if [ $cephx = 1 ]; then
        ceph $to auth get-or-create client.srp mon 'profile rbd' osd 'profile rbd pool=rbd' \
            mgr 'profile rbd pool=rbd' -o "$dir/client.srp.keyring"
    fi
    # Every placement group of every pool active and clean ("N pgs: N active+clean; ...").
    until ceph $to pg stat 2>/dev/null | grep -Eq '^([0-9]+) pgs: \1 active\+clean;'; do
        [ $SECONDS -lt $deadline ] || { echo "ceph-cluster: the pool's PGs did not go active" >&2; false; }
        sleep 0.5
    done
    trap - ERR
    {
        echo "CEPH_CONF=$dir/ceph.conf"
        echo "CEPH_ADDR=$addr"
        echo "CEPH_AUTH=$auth"
        [ $cephx = 1 ] && echo "CEPH_CLIENT_KEYRING=$dir/client.srp.keyring"
    } >"$dir/env"
    cat "$dir/env"
}

case "${1:-}" in
    start) [ $# -ge 2 ] || { echo "usage: $0 start DIR [options]" >&2; exit 2; }; start "${@:2}" ;;
    stop) [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
    install) install ;;
    *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
