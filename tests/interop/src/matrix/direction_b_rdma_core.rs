//! Direction B over rdma-core: our host (`srpctl host run`, `provider = "rdma-core"`) run
//! *inside the guest* on the guest's `rxe0` and `rxe1` through libibverbs and librdmacm,
//! against Linux ib_srpt/LIO in the same guest — the kernel's RDMA stack under our host,
//! as on a machine with an RDMA NIC. The kernel owns QP1 there, so there is no Device
//! Management sweep: the targets are named in `host.toml` (`[[portal.target]]`: id_ext and
//! IOC GUID, what Linux's `add_target` is given). User space has no fast registration, so
//! the host fences each I/O with type-2 memory windows, and the session says so.
//!
//! Checks, named `B.rdma-core-<what>`: two logins over RDMA-CM with memory-window fencing,
//! one multipath disk over both, a verifying fio and ext4 on its block file (FUSE in the
//! guest), and a failover drill while one path's TPG is disabled — the drill run by
//! `srpctl drill failover` in the guest, its link commands writing the TPG's `enable`.

use super::Matrix;
use super::direction_b::HOST_GUID;
use crate::in_guest::{self, GuestDaemon};
use crate::linux::{Backstore, SrptConfig, SrptTarget, setup_lio_srpt, setup_rxe};
use crate::{Error, Guest, GuestConfig, NetNs, Result};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(120);
/// The host's files in the guest.
const DIR: &str = "/tmp/ours-host";
const SOCK: &str = "/tmp/ours-host/host.sock";
/// Who runs: the matrix's line label.
const L: &str = "host-rdma-core";

/// `host.toml` for the host in the guest: both guest addresses, each a portal whose one
/// target is ib_srpt's (named, not discovered), login over RDMA-CM, under `driver`.
pub fn host_config(lio: &SrptTarget, driver: &str) -> String {
    let portal = |ip: &str| {
        format!(
            "[[portal]]\naddress = \"{ip}\"\nlocal = [\"{ip}\"]\n\n\
             [[portal.target]]\nid_ext = \"0x{id}\"\nioc_guid = \"0x{ioc}\"\n",
            id = lio.id_ext,
            ioc = lio.ioc_guid
        )
    };
    format!(
        "[host]\nname = \"interop\"\nnode_guid = \"0x{HOST_GUID}\"\ndriver = \"{driver}\"\n\
         provider = \"rdma-core\"\n\
         disks_dir = \"{DIR}/disks\"\ncontrol_socket = \"{SOCK}\"\n\
         login = \"rdma-cm\"\nlogin_timeout = \"10s\"\nsweep_interval = \"2s\"\ncmd_timeout = \"30s\"\n\n\
         [timers]\nreconnect_delay = \"2s\"\nfast_io_fail = \"5s\"\ndev_loss = \"120s\"\n\n\
         [multipath]\npolicy = \"round-robin\"\nno_path_retry = \"60s\"\n\n{}\n{}",
        portal("192.168.77.1"),
        portal("192.168.78.1"),
    )
}

/// Runs direction B over rdma-core under `driver`, recording every check in `m`.
pub fn run(m: &mut Matrix, driver: &str) -> Result<()> {
    let ns = NetNs::new()?;
    let guest = Guest::boot(GuestConfig::new(&ns).nics(&[1500, 1500]).memory_mib(2048))?;
    let rxe = setup_rxe(&guest)?;
    let lio = setup_lio_srpt(
        &guest,
        &SrptConfig::new(
            &rxe,
            vec![
                Backstore::Ramdisk { mib: 256 },
                Backstore::FileIo { mib: 32 },
            ],
            vec![format!("0x0000000000000000{HOST_GUID}")],
        ),
    )?;
    // The block files are FUSE files in the guest; ext4 goes on a loop device.
    guest.run_ok(
        &format!("modprobe fuse && modprobe loop && mkdir -p {DIR}/disks && ls -l /dev/fuse"),
        T,
    )?;
    let conf = in_guest::write_share(&guest, "host-rdma-core.toml", &host_config(&lio, driver))?;
    let mut host = GuestDaemon::start(&guest, "host", &["host", "run", "-c", &conf])?;
    let r = Run { guest: &guest };
    let logged_in = m.check(L, "B.rdma-core-login-windows", || r.login(&host));
    let mut disk = (String::new(), String::new());
    if logged_in {
        m.check(L, "B.rdma-core-multipath-disk", || {
            let (file, id, detail) = r.multipath_disk()?;
            disk = (file, id);
            Ok(detail)
        });
    } else {
        m.skip(L, "B.rdma-core-*", "no login");
    }
    if !disk.0.is_empty() {
        m.check(L, "B.rdma-core-block-file-fio-verify", || r.fio(&disk.0));
        m.check(L, "B.rdma-core-ext4", || {
            crate::workload::ext4_round_trip_loop(&guest, &disk.0)
        });
        m.check(L, "B.rdma-core-failover-drill-tpg-disabled", || {
            r.drill(&lio, &disk.1)
        });
    }
    let (log, _) = host.stop(&guest);
    if !m.all_passed() {
        eprintln!("---- host (guest, rdma-core) log ----\n{log}\n----");
        let d = guest.dmesg().unwrap_or_default();
        let srp: Vec<&str> = d
            .lines()
            .filter(|l| l.contains("srp") || l.contains("rxe") || l.contains("fuse"))
            .collect();
        eprintln!("---- guest dmesg ----\n{}\n----", srp.join("\n"));
    }
    if let Err(e) = guest.shutdown() {
        eprintln!("guest shutdown: {e}");
    }
    Ok(())
}

struct Run<'a> {
    guest: &'a Guest,
}

impl Run<'_> {
    fn json(&self, args: &[&str]) -> Result<serde_json::Value> {
        let mut args = args.to_vec();
        args.extend(["--json", "--socket", SOCK]);
        let out = in_guest::srpctl(self.guest, &args)?;
        serde_json::from_str(&out).map_err(|e| Error::Guest(format!("JSON: {e}: {out}")))
    }

    /// Two sessions running over RDMA-CM on rdma-core, fenced by memory windows.
    fn login(&self, host: &GuestDaemon) -> Result<String> {
        let t = Instant::now();
        host.wait_for_log(self.guest, "control socket", Duration::from_secs(90))?;
        let end = Instant::now() + Duration::from_secs(90);
        loop {
            let v = self.json(&["sessions"])?;
            let list = v.as_array().cloned().unwrap_or_default();
            let running: Vec<&serde_json::Value> =
                list.iter().filter(|s| s["state"] == "running").collect();
            if running.len() == 2 {
                for s in &running {
                    let (login, provider, fencing) = (
                        s["login"].as_str().unwrap_or(""),
                        s["provider"].as_str().unwrap_or(""),
                        s["fencing"].as_str().unwrap_or(""),
                    );
                    if login != "rdma-cm"
                        || !provider.starts_with("rdma-core ")
                        || !fencing.contains("memory windows")
                    {
                        return Err(Error::Guest(format!(
                            "session login {login:?}, provider {provider:?}, fencing {fencing:?}: {s}"
                        )));
                    }
                }
                return Ok(format!(
                    "2 sessions over RDMA-CM on {} and {}, fencing {} ({:.1} s)",
                    running[0]["provider"],
                    running[1]["provider"],
                    running[0]["fencing"],
                    t.elapsed().as_secs_f64()
                ));
            }
            if Instant::now() > end {
                return Err(Error::Guest(format!("sessions: {v}\n{}", host.log())));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn multipath_disk(&self) -> Result<(String, String, String)> {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let v = self.json(&["disks"])?;
            let disks = v.as_array().cloned().unwrap_or_default();
            let big = disks
                .iter()
                .find(|d| d["blocks"].as_u64() == Some(256 * 2048));
            if let Some(d) = big {
                let paths = d["paths"].as_array().map_or(0, Vec::len);
                let id = d["identity"].as_str().unwrap_or("");
                let file = d["path"].as_str().unwrap_or("");
                if paths == 2 && id.starts_with("naa.6001405") && !file.is_empty() {
                    return Ok((
                        file.to_owned(),
                        id.to_owned(),
                        format!("{} disk(s); {id} over 2 paths at {file}", disks.len()),
                    ));
                }
            }
            if Instant::now() > end {
                return Err(Error::Guest(format!("disks: {v}")));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn fio(&self, file: &str) -> Result<String> {
        let t = Instant::now();
        let out = self.guest.run_ok(
            &format!(
                "fio --name=verify --filename={file} --rw=randwrite --bsrange=4k-256k \
                 --size=48M --ioengine=libaio --iodepth=16 --direct=1 --verify=crc32c \
                 --do_verify=1 --verify_backlog=128 --verify_fatal=1 \
                 --output-format=terse --terse-version=3"
            ),
            Duration::from_secs(900),
        )?;
        let errors = out
            .lines()
            .find(|l| l.starts_with("3;"))
            .and_then(|l| l.split(';').nth(4));
        if errors != Some("0") {
            return Err(Error::Guest(format!("fio: {out}")));
        }
        Ok(format!(
            "fio on the block file in the guest: 48 MiB random write+verify, 4k-256k, 0 errors ({:.1} s)",
            t.elapsed().as_secs_f64()
        ))
    }

    /// `srpctl drill failover` in the guest, the link fault being path 2's TPG disabled
    /// and enabled again by the drill's own commands.
    fn drill(&self, lio: &SrptTarget, disk: &str) -> Result<String> {
        let v = self.json(&["sessions"])?;
        let session = v
            .as_array()
            .and_then(|a| a.iter().find(|s| s["portal"] == "192.168.78.1"))
            .and_then(|s| s["id"].as_u64())
            .ok_or_else(|| Error::Guest(format!("no session to 192.168.78.1: {v}")))?;
        let tpg = &lio.tpgs[1];
        let bin = in_guest::guest_srpctl(self.guest)?;
        let report = in_guest::guest_path("drill.json");
        let session = session.to_string();
        let down = format!("echo 0 > {tpg}/enable");
        let up = format!("echo 1 > {tpg}/enable");
        let args: Vec<String> = [
            "drill",
            "failover",
            "--socket",
            SOCK,
            "--disk",
            disk,
            "--fault",
            "link",
            "--path",
            &session,
            "--link-cmd-down",
            &down,
            "--link-cmd-up",
            &up,
            "--warmup",
            "4",
            "--fault-secs",
            "15",
            "--after",
            "8",
            "--region-mb",
            "32",
            "--report",
            &report,
        ]
        .iter()
        .map(|a| in_guest::shell_quote(a))
        .collect();
        let out = self.guest.run(
            &format!("{bin} {} 2>&1", args.join(" ")),
            Duration::from_secs(600),
        )?;
        let json =
            std::fs::read_to_string(self.guest.share_dir().join("drill.json")).unwrap_or_default();
        let r: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        let errors = r["io"]["errors"].as_u64();
        let mismatches = r["io"]["mismatches"].as_u64();
        if out.rc != 0 || errors != Some(0) || mismatches != Some(0) {
            return Err(Error::Guest(format!(
                "drill failed (exit {}): errors {errors:?}, mismatches {mismatches:?}\n{}\n{}\n{json}",
                out.rc, out.stdout, out.stderr
            )));
        }
        Ok(format!(
            "TPG of path {session} disabled 15 s, then enabled: {} reads, {} writes, 0 errors, \
             0 mismatches, max stall {} ms, failback {} ms",
            r["io"]["reads"], r["io"]["writes"], r["max_stall"]["ms"], r["failback_ms"]
        ))
    }
}
