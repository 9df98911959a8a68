//! The systemd units `srpctl install` writes: one template per daemon, instantiated per
//! configuration file (`srp-target@array1` runs `/etc/srp/target/array1.toml`), as
//! srp_daemon's units are per port.
//!
//! Both are `Type=notify` (READY once serving, WATCHDOG while the loop answers, RELOADING
//! and STOPPING: [`crate::notify`]), reload with SIGHUP, stop with SIGTERM (the orderly
//! logout), restart on failure, and drop every capability but the ones named, each for a
//! reason written beside it.
//!
//! The target is also fenced in the file system (ProtectSystem=full, PrivateTmp,
//! ProtectHome=read-only): its LUN files belong under /srv or /var/lib. The host daemon is
//! not: its disks are FUSE mounts, which must be made in the system's mount namespace to
//! be seen (and loop-mounted) outside the service, and every file-system fence
//! (ProtectSystem, PrivateTmp, ProtectHome) would give it a namespace of its own.

/// `srp-target@.service` with the binary at `bin` and configurations in `config_dir`.
pub(crate) fn target(bin: &str, config_dir: &str) -> String {
    format!(
        "\
# srpctl install: the SRP target, one instance per {config_dir}/target/NAME.toml
# (systemctl enable --now srp-target@NAME). Reload: systemctl reload srp-target@NAME.
[Unit]
Description=SRP target %i (srpctl target run)
Documentation=man:srpctl-target-run(1) man:srpctl-target-reload(1)
After=network-online.target
Wants=network-online.target
ConditionPathExists={config_dir}/target/%i.toml

[Service]
Type=notify
NotifyAccess=main
ExecStartPre={bin} target check -c {config_dir}/target/%i.toml
ExecStart={bin} target run -c {config_dir}/target/%i.toml
ExecReload=/bin/kill -HUP $MAINPID
TimeoutStopSec=30
WatchdogSec=30
Restart=on-failure
RestartSec=2
# The control socket's directory (/run/srp-target) and the state directory
# (/var/lib/srp-target: saved mode pages, persistent reservations).
RuntimeDirectory=srp-target/%i
RuntimeDirectoryPreserve=no
StateDirectory=srp-target
Environment=SRPCTL_LOG=info
# CAP_DAC_OVERRIDE: LUN files and block devices whatever their owner; CAP_CHOWN,
# CAP_FOWNER: the control socket's group and mode (control_group); CAP_NET_ADMIN: the
# HCA's socket buffers above the sysctl limit (SO_RCVBUFFORCE); CAP_NET_BIND_SERVICE: a
# port address below 1024; CAP_IPC_LOCK: registered memory that stays resident.
CapabilityBoundingSet=CAP_DAC_OVERRIDE CAP_CHOWN CAP_FOWNER CAP_NET_ADMIN CAP_NET_BIND_SERVICE CAP_IPC_LOCK
AmbientCapabilities=
NoNewPrivileges=yes
ProtectSystem=full
ProtectHome=read-only
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
SystemCallArchitectures=native

[Install]
WantedBy=multi-user.target
"
    )
}

/// `srp-host@.service` with the binary at `bin` and configurations in `config_dir`.
pub(crate) fn host(bin: &str, config_dir: &str) -> String {
    format!(
        "\
# srpctl install: the SRP host daemon, one instance per {config_dir}/host/NAME.toml
# (systemctl enable --now srp-host@NAME). Its disks are block files under
# /run/srp-host/NAME/disks (loop-mount them); logins persist in /var/lib/srp-host.
[Unit]
Description=SRP host %i (srpctl host run)
Documentation=man:srpctl-host-run(1)
After=network-online.target
Wants=network-online.target
ConditionPathExists={config_dir}/host/%i.toml

[Service]
Type=notify
NotifyAccess=main
ExecStartPre={bin} host check -c {config_dir}/host/%i.toml
ExecStart={bin} host run -c {config_dir}/host/%i.toml
ExecReload=/bin/kill -HUP $MAINPID
TimeoutStopSec=60
WatchdogSec=30
Restart=on-failure
RestartSec=2
RuntimeDirectory=srp-host/%i
RuntimeDirectoryPreserve=no
StateDirectory=srp-host
Environment=SRPCTL_LOG=info
# CAP_SYS_ADMIN: the FUSE mount of the disks directory; CAP_DAC_OVERRIDE: /dev/fuse and
# the state files; CAP_CHOWN, CAP_FOWNER: the control socket's group and mode;
# CAP_NET_ADMIN: the HCA's socket buffers (SO_RCVBUFFORCE); CAP_IPC_LOCK: registered
# memory. No file-system fences: they would hide the FUSE mount in a namespace of the
# service's own (see the unit's documentation in docs/operators-guide.md).
CapabilityBoundingSet=CAP_SYS_ADMIN CAP_DAC_OVERRIDE CAP_CHOWN CAP_FOWNER CAP_NET_ADMIN CAP_IPC_LOCK
AmbientCapabilities=
NoNewPrivileges=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
SystemCallArchitectures=native

[Install]
WantedBy=multi-user.target
"
    )
}
