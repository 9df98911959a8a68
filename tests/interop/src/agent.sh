#!/bin/sh
# srp-interop guest agent: PID 1 of the guest after the initramfs switched root into the
# host's tree (read-only over 9p). The harness writes this file into the share each boot.
#
# Protocol, one line each way over the virtio-serial port "org.srp.agent":
#   host -> guest   PING <n>            guest -> host   PONG <n>
#                   RUN <id> <secs>                     DONE <id> <exit code>
#                   HALT                                (powers off)
# RUN executes /run/interop/cmd/<id>.sh with bash in the background (so a hung command does
# not block the next one), stdout and stderr to <id>.out / <id>.err in the same share, killed
# after <secs> (TERM, KILL 5 s later: exit code 124 or 137).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LC_ALL=C
X=/run/interop
say() { echo "srp-interop-agent: $*" >/dev/console; }
hostname srp-interop-guest 2>/dev/null
modprobe virtio_console || say "modprobe virtio_console failed"
dev=
i=0
while [ -z "$dev" ] && [ $i -lt 400 ]; do
    for p in /sys/class/virtio-ports/*; do
        if [ -f "$p/name" ] && [ "$(cat "$p/name")" = org.srp.agent ] && [ -c "/dev/${p##*/}" ]; then
            dev=/dev/${p##*/}
        fi
    done
    [ -n "$dev" ] || sleep 0.05
    i=$((i + 1))
done
if [ -z "$dev" ]; then
    say "FAILED: no virtio port org.srp.agent"
    echo o >/proc/sysrq-trigger
    sleep 60
fi
mkdir -p $X/cmd
exec 3<>"$dev"
say "listening on $dev"
echo "READY" >&3
seen=
while :; do
    if ! read -r verb id secs <&3; then
        # EOF: the host side is not connected. Before the first command that is the harness
        # still connecting; after it, the harness is gone (killed, crashed): power off so
        # QEMU exits instead of outliving it.
        if [ -n "$seen" ]; then
            say "host disconnected: powering off"
            echo o >/proc/sysrq-trigger
            sleep 60
        fi
        sleep 0.2
        continue
    fi
    seen=1
    case "$verb" in
    PING) echo "PONG $id" >&3 ;;
    RUN)
        (
            cd /tmp || exit 1
            timeout -k 5 "$secs" /bin/bash "$X/cmd/$id.sh" </dev/null >"$X/cmd/$id.out" 2>"$X/cmd/$id.err"
            echo "DONE $id $?" >&3
        ) &
        ;;
    HALT)
        sync
        echo o >/proc/sysrq-trigger
        sleep 60
        ;;
    esac
    # Reap finished commands (dash reaps background jobs when it lists them).
    jobs >/dev/null 2>&1
done
