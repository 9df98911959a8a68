# What the operator scripts share (sourced by drill.sh, bench-disk.sh, soak.sh,
# profile-disk.sh): installing missing tools, stopping the daemons they started, and
# waiting for a control socket or a host daemon's block file.

# need PROGRAM[:PACKAGE]... : installs the Debian packages of the programs that are missing
# (PACKAGE when the package is named otherwise; apt-get, with `apt-get update` once if the
# first try fails). Returns 1 if it cannot.
need() {
    local missing=() p
    for p in "$@"; do command -v "${p%%:*}" >/dev/null 2>&1 || missing+=("${p#*:}"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing ${missing[*]} with apt-get" >&2
    if ! { apt-get install -y "${missing[@]}" >/dev/null 2>&1 ||
           { apt-get update >/dev/null 2>&1 && apt-get install -y "${missing[@]}" >/dev/null 2>&1; }; }; then
        echo "cannot install ${missing[*]}" >&2
        return 1
    fi
}

# cpu_ticks PID : user + system CPU time of process PID so far, in clock ticks (USER_HZ,
# 100 per second); 0 if it is gone.
cpu_ticks() {
    awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

# stop_pids PID... : SIGTERM to each, up to 5 s for it to end, then SIGKILL.
stop_pids() {
    local p
    for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "$@"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    done
}

# wait_for_socket PATH : up to 10 s for a daemon's control socket to appear.
wait_for_socket() {
    for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.1; done
    return 1
}

# wait_for_block_file DIR : up to 30 s for a block file in a host daemon's disks
# directory; prints its path (nothing, and returns 1, if none came).
wait_for_block_file() {
    local f
    for _ in $(seq 300); do
        f=$(find "$1" -maxdepth 1 -type f 2>/dev/null | head -1)
        [ -n "$f" ] && { echo "$f"; return 0; }
        sleep 0.1
    done
    return 1
}
