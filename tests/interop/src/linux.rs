//! The guest's own SRP stack: soft-RoCE (`rdma_rxe`), the LIO SRP target (`ib_srpt`) and the
//! SRP initiator (`ib_srp`), set up through sysfs and configfs as Linux 6.1 has them.
//!
//! Facts these helpers rely on (from Linux 6.1's `drivers/infiniband/ulp/srpt/ib_srpt.c`,
//! `ulp/srp/ib_srp.c`, and checked by `tests/linux_loopback.rs`):
//! - ib_srpt names each port twice in configfs, `/sys/kernel/config/target/srpt/<name>`: by
//!   port GUID (`5054:00ff:fe77:0001`) and by port GID
//!   (`0xfe80000000000000505400fffe770001`), both from GID index 0. The harness uses the GID name.
//! - ib_srpt has no demo mode (no `generate_node_acls`): every initiator needs an explicit
//!   ACL. On a GID-named port the ACL is matched against the login's initiator port ID,
//!   `0x` + 32 lowercase hex digits (or the same without `0x`); on a GUID-named port against
//!   the session name, which for RDMA-CM logins is the *target's own* IP address.
//! - Linux ib_srp's initiator port ID is `initiator_ext` (8 bytes, 0 by default) followed by
//!   the interface ID of its port's GID 0 ([`linux_initiator_port_id`]).
//! - ib_srpt's `id_ext` and `ioc_guid` are both `srpt_service_guid`: the node GUID of the
//!   first RDMA device it saw (module parameter `srpt_service_guid`).
//! - RDMA-CM logins go to the port written to `/sys/kernel/config/target/srpt/discovery_auth/
//!   rdma_cm_port`; ib_srpt listens on all addresses.

use crate::{Error, Guest, Result};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::time::Duration;

/// An rdma_rxe device created on a guest NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxeDevice {
    /// The IB device, `rxe<i>`.
    pub name: String,
    /// Its netdev, `eth<i>`.
    pub netdev: String,
    /// Node GUID as sysfs prints it, `5054:00ff:fe77:0001`.
    pub node_guid: String,
    /// GID index 0 as sysfs prints it, `fe80:0000:0000:0000:5054:00ff:fe77:0001`.
    pub gid0: String,
    /// The index of the IPv4-mapped RoCEv2 GID (the one a RoCEv2 peer addresses).
    pub ipv4_gid_index: u32,
    /// The IPv4 address behind that GID.
    pub ip: Ipv4Addr,
}

impl RxeDevice {
    /// The interface ID of GID 0 as 16 hex digits (`505400fffe770001`): the port GUID.
    pub fn port_guid_hex(&self) -> String {
        self.gid0.split(':').skip(4).collect()
    }

    /// ib_srpt's configfs name for this port by GID: `0x` + 32 hex digits.
    pub fn srpt_gid_name(&self) -> String {
        format!("0x{}", self.gid0.replace(':', ""))
    }

    /// ib_srpt's configfs name for this port by GUID: `5054:00ff:fe77:0001`.
    pub fn srpt_guid_name(&self) -> String {
        self.gid0.split(':').skip(4).collect::<Vec<_>>().join(":")
    }
}

/// The initiator port ID Linux ib_srp sends from `rxe` with `initiator_ext` (0 unless the
/// login says otherwise): the ACL name ib_srpt matches, `0x` + 32 hex digits.
pub fn linux_initiator_port_id(rxe: &RxeDevice, initiator_ext: u64) -> String {
    format!("0x{initiator_ext:016x}{}", rxe.port_guid_hex())
}

/// Loads `rdma_rxe` and creates `rxe<i>` on each `eth<i>` of the guest (`rdma link add`),
/// then waits until each device's GID table holds the IPv4-mapped GID of its NIC.
pub fn setup_rxe(guest: &Guest) -> Result<Vec<RxeDevice>> {
    let mut script = String::from("set -e\nmodprobe rdma_rxe\nmodprobe rdma_ucm || true\n");
    for nic in guest.nics() {
        let o = nic.guest_ip.octets();
        // ::ffff:a.b.c.d as sysfs prints GIDs.
        let mapped = format!(
            "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}",
            o[0], o[1], o[2], o[3]
        );
        let _ = write!(
            script,
            r#"
dev=rxe{i}
[ -d /sys/class/infiniband/$dev ] || rdma link add $dev type rxe netdev {netdev}
found=
for _ in $(seq 300); do
    for g in /sys/class/infiniband/$dev/ports/1/gids/*; do
        if [ "$(cat "$g" 2>/dev/null)" = "{mapped}" ]; then found=${{g##*/}}; break; fi
    done
    [ -n "$found" ] && break
    sleep 0.1
done
[ -n "$found" ] || {{ echo "no GID {mapped} on $dev" >&2; rdma link show >&2; exit 1; }}
echo "RXE $dev {netdev} $(cat /sys/class/infiniband/$dev/node_guid) $(cat /sys/class/infiniband/$dev/ports/1/gids/0) $found"
"#,
            i = nic.index,
            netdev = nic.guest_if,
        );
    }
    let out = guest.run_ok(&script, Duration::from_secs(90))?;
    let mut devices = Vec::new();
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if let ["RXE", name, netdev, node_guid, gid0, index] = w[..] {
            let nic = guest
                .nics()
                .iter()
                .find(|n| n.guest_if == netdev)
                .ok_or_else(|| Error::Guest(format!("rxe on unknown netdev {netdev}")))?;
            devices.push(RxeDevice {
                name: name.into(),
                netdev: netdev.into(),
                node_guid: node_guid.into(),
                gid0: gid0.into(),
                ipv4_gid_index: index
                    .parse()
                    .map_err(|_| Error::Guest(format!("bad GID index in `{line}`")))?,
                ip: nic.guest_ip,
            });
        }
    }
    if devices.len() != guest.nics().len() {
        return Err(Error::Guest(format!(
            "expected {} rxe devices, got: {out}",
            guest.nics().len()
        )));
    }
    Ok(devices)
}

/// A LIO backstore exported as one LUN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backstore {
    /// `rd_mcp` RAM disk of this many MiB (LIO's `RAMDISK-MCP`).
    Ramdisk {
        /// Size in MiB.
        mib: u64,
    },
    /// `fileio` on a file of this many MiB in the guest's tmpfs `/tmp` (LIO's `FILEIO`).
    FileIo {
        /// Size in MiB.
        mib: u64,
    },
}

/// How to set up ib_srpt and LIO.
#[derive(Debug, Clone)]
pub struct SrptConfig {
    /// The rxe devices that get a target port (their GID-named configfs port, TPG 1).
    pub ports: Vec<RxeDevice>,
    /// One LUN per backstore, LUN 0 first.
    pub luns: Vec<Backstore>,
    /// The initiator port IDs allowed to log in (ACLs; `0x` + 32 hex digits), each mapped
    /// to every LUN. See [`linux_initiator_port_id`].
    pub initiators: Vec<String>,
    /// The RDMA-CM listening port (5555).
    pub rdma_cm_port: u16,
    /// Module parameters for ib_srpt (`srp_max_req_size`, `srpt_srq_size`, …); ignored when
    /// the module is already loaded.
    pub module_params: Vec<(String, String)>,
}

impl SrptConfig {
    /// A target on `ports` with one LUN and the given initiators, RDMA-CM port 5555.
    pub fn new(ports: &[RxeDevice], luns: Vec<Backstore>, initiators: Vec<String>) -> SrptConfig {
        SrptConfig {
            ports: ports.to_vec(),
            luns,
            initiators,
            rdma_cm_port: 5555,
            module_params: Vec::new(),
        }
    }
}

/// What [`setup_lio_srpt`] set up: the values an initiator logs in with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrptTarget {
    /// `srpt_service_guid`, 16 hex digits.
    pub service_guid: String,
    /// The target's `id_ext` (= `service_guid`).
    pub id_ext: String,
    /// The target's `ioc_guid` (= `service_guid`).
    pub ioc_guid: String,
    /// The RDMA-CM port.
    pub rdma_cm_port: u16,
    /// The configfs TPG directories created, one per port.
    pub tpgs: Vec<String>,
}

/// Loads ib_srpt (and LIO), creates the backstores, a GID-named target port with TPG 1 on
/// each rxe device, the LUNs and the ACLs, enables the TPGs and sets the RDMA-CM port.
pub fn setup_lio_srpt(guest: &Guest, cfg: &SrptConfig) -> Result<SrptTarget> {
    if cfg.ports.is_empty() || cfg.luns.is_empty() {
        return Err(Error::Guest("setup_lio_srpt: no ports or no LUNs".into()));
    }
    let params: Vec<String> = cfg
        .module_params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut s = format!(
        r#"set -euo pipefail
modprobe configfs
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
modprobe target_core_mod
modprobe target_core_file
modprobe ib_srpt {params}
T=/sys/kernel/config/target
mkdir -p $T/srpt
echo {port} > $T/srpt/discovery_auth/rdma_cm_port
"#,
        params = params.join(" "),
        port = cfg.rdma_cm_port
    );
    let mut devs = Vec::new();
    for (i, lun) in cfg.luns.iter().enumerate() {
        let dev = match lun {
            Backstore::Ramdisk { mib } => {
                let dev = format!("$T/core/rd_mcp_{i}/ramdisk{i}");
                let _ = write!(
                    s,
                    "mkdir -p {dev}\necho rd_pages={} > {dev}/control\necho 1 > {dev}/enable\n",
                    mib * 256
                );
                dev
            }
            Backstore::FileIo { mib } => {
                let dev = format!("$T/core/fileio_{i}/file{i}");
                let file = format!("/tmp/srp-interop-lun{i}.img");
                let _ = write!(
                    s,
                    "truncate -s {mib}M {file}\nmkdir -p {dev}\n\
                     echo fd_dev_name={file},fd_dev_size={} > {dev}/control\n\
                     echo 1 > {dev}/enable\n",
                    mib << 20
                );
                dev
            }
        };
        // A unit serial, as targetcli gives every backstore: LIO then reports an NAA
        // designator in VPD page 0x83 (without one, only the vendor "LIO-ORG").
        let _ = writeln!(
            s,
            "echo {i:08x}-5e1a-4c0d-9f0e-4a1b9c2d0001 > {dev}/wwn/vpd_unit_serial"
        );
        devs.push(dev);
    }
    let mut tpgs = Vec::new();
    for rxe in &cfg.ports {
        let tpg = format!(
            "/sys/kernel/config/target/srpt/{}/tpgt_1",
            rxe.srpt_gid_name()
        );
        let _ = writeln!(s, "P={tpg}\nmkdir -p $P");
        for (i, dev) in devs.iter().enumerate() {
            let _ = writeln!(
                s,
                "mkdir -p $P/lun/lun_{i}\n[ -L $P/lun/lun_{i}/dev ] || ln -s {dev} $P/lun/lun_{i}/dev"
            );
        }
        for acl in &cfg.initiators {
            let acl = acl.to_ascii_lowercase();
            let _ = writeln!(s, "mkdir -p $P/acls/{acl}");
            for i in 0..devs.len() {
                let _ = writeln!(
                    s,
                    "mkdir -p $P/acls/{acl}/lun_{i}\n\
                     [ -L $P/acls/{acl}/lun_{i}/lun ] || ln -s $P/lun/lun_{i} $P/acls/{acl}/lun_{i}/lun"
                );
            }
        }
        let _ = writeln!(s, "echo 1 > $P/enable");
        tpgs.push(tpg);
    }
    s.push_str("cat /sys/module/ib_srpt/parameters/srpt_service_guid\n");
    let out = guest.run_ok(&s, Duration::from_secs(120))?;
    let guid = out
        .lines()
        .last()
        .map(|l| l.trim().trim_start_matches("0x").to_ascii_lowercase())
        .filter(|g| g.len() == 16 && g.chars().all(|c| c.is_ascii_hexdigit()))
        .ok_or_else(|| Error::Guest(format!("no srpt_service_guid in: {out}")))?;
    Ok(SrptTarget {
        id_ext: guid.clone(),
        ioc_guid: guid.clone(),
        service_guid: guid,
        rdma_cm_port: cfg.rdma_cm_port,
        tpgs,
    })
}

/// An SRP login by Linux ib_srp over RDMA-CM.
#[derive(Debug, Clone)]
pub struct SrpLogin {
    /// The local rxe device, e.g. `rxe0` (writes to `srp-<rxe>-1/add_target`).
    pub rxe: String,
    /// The target's `id_ext`, 16 hex digits.
    pub id_ext: String,
    /// The target's `ioc_guid`, 16 hex digits.
    pub ioc_guid: String,
    /// `<ip>:<port>` of the target's RDMA-CM listener.
    pub dest: String,
    /// More `key=value` options for `add_target` (`initiator_ext=…`, `max_sect=…`, …).
    pub options: Vec<String>,
    /// How many disks (LUNs) to wait for (1).
    pub expect_disks: usize,
    /// Bound on the login and the disks appearing (60 s).
    pub timeout: Duration,
}

impl SrpLogin {
    /// A login from `rxe` to the target at `ip:port`, expecting one disk.
    pub fn new(rxe: &str, target: &SrptTarget, ip: Ipv4Addr) -> SrpLogin {
        SrpLogin {
            rxe: rxe.into(),
            id_ext: target.id_ext.clone(),
            ioc_guid: target.ioc_guid.clone(),
            dest: format!("{ip}:{}", target.rdma_cm_port),
            options: Vec::new(),
            expect_disks: 1,
            timeout: Duration::from_secs(60),
        }
    }

    /// A login from `rxe` to any SRP target (ours, say) at `dest` (`<ip>:<port>`) with the
    /// given `id_ext` and `ioc_guid` (16 hex digits each), expecting one disk.
    pub fn with_ids(rxe: &str, id_ext: &str, ioc_guid: &str, dest: &str) -> SrpLogin {
        SrpLogin {
            rxe: rxe.into(),
            id_ext: id_ext.into(),
            ioc_guid: ioc_guid.into(),
            dest: dest.into(),
            options: Vec::new(),
            expect_disks: 1,
            timeout: Duration::from_secs(60),
        }
    }

    /// The string written to `add_target`.
    pub fn target_string(&self) -> String {
        let mut s = format!(
            "id_ext={},ioc_guid={},dest={}",
            self.id_ext, self.ioc_guid, self.dest
        );
        for o in &self.options {
            s.push(',');
            s.push_str(o);
        }
        s
    }
}

/// A disk of an SRP session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrpDisk {
    /// `H:C:T:L`.
    pub hctl: String,
    /// The LUN.
    pub lun: u64,
    /// The block device, `/dev/sdX`.
    pub block: String,
    /// The SCSI generic device, `/dev/sgN`.
    pub sg: String,
}

/// A logged-in SRP session: its SCSI host and disks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrpSession {
    /// The SCSI host number.
    pub host_no: u32,
    /// The disks, by LUN.
    pub disks: Vec<SrpDisk>,
}

/// Logs in with Linux ib_srp (loads `ib_srp`, `sd_mod`, `sg`), waits for the disks and
/// returns them. A refused login is an [`Error::Login`] with the kernel's explanation.
pub fn srp_login(guest: &Guest, login: &SrpLogin) -> Result<SrpSession> {
    let marker = format!("srp-interop-login-{}", unique());
    let secs = login.timeout.as_secs().max(5);
    let script = format!(
        r#"set -uo pipefail
modprobe ib_srp && modprobe sd_mod && modprobe sg || exit 3
A=/sys/class/infiniband_srp/srp-{rxe}-1/add_target
for _ in $(seq 100); do [ -e $A ] && break; sleep 0.1; done
[ -e $A ] || {{ echo "no $A" >&2; ls /sys/class/infiniband_srp >&2; exit 3; }}
before=$(ls /sys/class/scsi_host)
echo "{marker}" > /dev/kmsg
# EEXIST: the same target's previous session is still being torn down (ib_srp removes a
# deleted target port asynchronously); try again for a while.
ok=
for _ in $(seq 40); do
    if err=$(echo "{target}" 2>&1 > $A); then ok=1; break; fi
    case "$err" in *"File exists"*) sleep 0.5 ;; *) break ;; esac
done
if [ -z "$ok" ]; then
    echo "$err" >&2
    sleep 1
    echo "LOGIN-FAILED"
    dmesg | sed -n '/{marker}/,$p'
    exit 2
fi
host=
for h in $(ls /sys/class/scsi_host); do
    case " $(echo $before) " in *" $h "*) continue ;; esac
    [ "$(cat /sys/class/scsi_host/$h/id_ext 2>/dev/null)" = "0x{id_ext}" ] && host=$h
done
[ -n "$host" ] || {{ echo "no new SCSI host for id_ext {id_ext}" >&2; exit 4; }}
echo "HOST ${{host#host}}"
end=$(( $(date +%s) + {secs} ))
while :; do
    n=0
    for d in /sys/class/scsi_host/$host/device/target*/[0-9]*:*; do
        [ -d "$d/block" ] && [ -d "$d/scsi_generic" ] && n=$((n + 1))
    done
    [ $n -ge {expect} ] && break
    [ $(date +%s) -lt $end ] || {{ echo "only $n of {expect} disks appeared" >&2; exit 5; }}
    sleep 0.2
done
for d in /sys/class/scsi_host/$host/device/target*/[0-9]*:*; do
    [ -d "$d/block" ] || continue
    b=$(ls $d/block); g=$(ls $d/scsi_generic)
    for _ in $(seq 50); do [ -b /dev/$b ] && [ -c /dev/$g ] && break; sleep 0.1; done
    echo "DISK ${{d##*/}} /dev/$b /dev/$g"
done
"#,
        rxe = login.rxe,
        target = login.target_string(),
        id_ext = login.id_ext.to_ascii_lowercase(),
        expect = login.expect_disks,
    );
    let out = guest.run(&script, login.timeout + Duration::from_secs(30))?;
    if out.rc == 2 {
        let dmesg: String = out
            .stdout
            .lines()
            .skip_while(|l| *l != "LOGIN-FAILED")
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n");
        return Err(Error::Login {
            reason: login_reason(&dmesg, &out.stderr),
            dmesg,
        });
    }
    if out.rc != 0 {
        return Err(Error::Command {
            script: format!("srp_login {}", login.target_string()),
            rc: out.rc,
            stdout: out.stdout,
            stderr: out.stderr,
        });
    }
    let mut session = SrpSession {
        host_no: 0,
        disks: Vec::new(),
    };
    for line in out.stdout.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["HOST", n] => {
                session.host_no = n
                    .parse()
                    .map_err(|_| Error::Guest(format!("bad host in `{line}`")))?;
            }
            ["DISK", hctl, block, sg] => session.disks.push(SrpDisk {
                hctl: hctl.into(),
                lun: hctl
                    .rsplit(':')
                    .next()
                    .and_then(|l| l.parse().ok())
                    .unwrap_or(0),
                block: block.into(),
                sg: sg.into(),
            }),
            _ => {}
        }
    }
    session.disks.sort_by_key(|d| d.lun);
    Ok(session)
}

/// The line of a failed login's kernel log that explains it best.
fn login_reason(dmesg: &str, stderr: &str) -> String {
    let telling = [
        "Rejected login",
        "rejected",
        "REJECT",
        "reject",
        "failed",
        "unreachable",
        "timeout",
        "timed out",
        "error",
    ];
    for key in telling {
        if let Some(l) = dmesg.lines().find(|l| l.contains(key)) {
            return l.trim().to_owned();
        }
    }
    let err = stderr.trim();
    if err.is_empty() {
        dmesg
            .lines()
            .last()
            .unwrap_or("no kernel message")
            .trim()
            .to_owned()
    } else {
        err.to_owned()
    }
}

/// Logs out: deletes the session's SRP remote port (`srp_remote_ports/port-<host>:1/delete`)
/// and waits for its SCSI host to go away.
pub fn srp_logout(guest: &Guest, session: &SrpSession) -> Result<()> {
    let h = session.host_no;
    let script = format!(
        r#"set -u
ports=$(ls -d /sys/class/srp_remote_ports/port-{h}:* 2>/dev/null)
[ -n "$ports" ] || {{ echo "no SRP remote port for host{h}" >&2; exit 1; }}
for p in $ports; do echo 1 > $p/delete || exit 1; done
for _ in $(seq 300); do [ -e /sys/class/scsi_host/host{h} ] || exit 0; sleep 0.1; done
echo "host{h} still there 30 s after delete" >&2
exit 1
"#
    );
    guest.run_ok(&script, Duration::from_secs(60)).map(|_| ())
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}
