//! Direction B: our host (`srpctl discover`, `srpctl host run`) against Linux ib_srpt/LIO in
//! the guest: discovery through ib_srpt's Device Management agent, the RDMA-CM login
//! (`login = "auto"`: IB CM first, refused by ib_srpt, then RDMA-CM), the block file under
//! a verifying workload and ext4, one multipath disk over two logins, and a failover drill
//! while one path's target port (its TPG) is disabled in the guest. The checks of issue
//! #12's deliverable 3, named `B.<what>`.

use super::Matrix;
use crate::linux::{Backstore, SrptConfig, SrptTarget, setup_lio_srpt, setup_rxe};
use crate::ours::{Daemon, WorkDir, srpctl, srpctl_bin};
use crate::{Error, Guest, GuestConfig, NetNs, Result};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Our host's node GUID: its initiator port ID is `0x0000000000000000` + this.
pub const HOST_GUID: &str = "0002c90300b0b001";
const T: Duration = Duration::from_secs(120);

/// The driver model direction B's host runs: `SRP_INTEROP_DRIVER` (`storport`, the
/// default, or `iscsi-model`).
pub fn driver() -> String {
    std::env::var("SRP_INTEROP_DRIVER").unwrap_or_else(|_| "storport".into())
}

/// `host.toml`: two portals (the guest's two addresses), login "auto", quick timers, the
/// initiator under the driver model `driver`.
pub fn host_config(work: &Path, driver: &str) -> String {
    format!(
        "[host]\nname = \"interop\"\nnode_guid = \"0x{HOST_GUID}\"\ndriver = \"{driver}\"\n\
         disks_dir = \"{disks}\"\ncontrol_socket = \"{sock}\"\n\
         login = \"auto\"\nlogin_timeout = \"10s\"\nsweep_interval = \"2s\"\ncmd_timeout = \"30s\"\n\n\
         [timers]\nreconnect_delay = \"2s\"\nfast_io_fail = \"5s\"\ndev_loss = \"120s\"\n\n\
         [multipath]\npolicy = \"round-robin\"\nno_path_retry = \"60s\"\n\n\
         [[portal]]\naddress = \"192.168.77.1\"\nlocal = [\"192.168.77.254\"]\n\n\
         [[portal]]\naddress = \"192.168.78.1\"\nlocal = [\"192.168.78.254\"]\n",
        disks = work.join("disks").display(),
        sock = work.join("host.sock").display(),
    )
}

/// Runs direction B, recording every check in `m`.
pub fn run(m: &mut Matrix) -> Result<()> {
    let l = "host";
    let work = WorkDir::new("b")?;
    let ns = NetNs::new()?;
    let guest = Guest::boot(GuestConfig::new(&ns).nics(&[1500, 1500]))?;
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
    m.check(l, "B.discover", || discover(&ns, &lio));
    let conf = work.path().join("host.toml");
    std::fs::write(&conf, host_config(work.path(), &driver()))
        .map_err(Error::io(format!("write {}", conf.display())))?;
    let conf = conf.display().to_string();
    let sock = work.path().join("host.sock").display().to_string();
    let mut host = Daemon::start(
        &ns,
        "host",
        &["host", "run", "-c", &conf],
        &work.path().join("host.log"),
    )?;
    let logged_in = m.check(l, "B.login-rdma-cm", || login(&ns, &mut host, &sock));
    if !logged_in {
        m.skip(l, "B.*", "no login");
        eprintln!("---- host log ----\n{}\n----", host.stop());
        return Ok(());
    }
    let mut file = String::new();
    let mut disk = String::new();
    m.check(l, "B.multipath-disk", || {
        let (f, id, d) = multipath_disk(&ns, &sock)?;
        file = f;
        disk = id;
        Ok(d)
    });
    if file.is_empty() {
        m.skip(l, "B.*", "no multipath disk");
        eprintln!("---- host log ----\n{}\n----", host.stop());
        return Ok(());
    }
    m.check(l, "B.block-file-fio-verify", || host_fio(&file));
    m.check(l, "B.ext4", || host_ext4(work.path(), &file));
    m.check(l, "B.failover-drill-tpg-disabled", || {
        drill(&ns, &guest, &lio, work.path(), &sock, &disk)
    });
    let log = host.stop();
    if !m.all_passed() {
        eprintln!("---- host log ----\n{log}\n----");
        let d = guest.dmesg().unwrap_or_default();
        let srp: Vec<&str> = d.lines().filter(|l| l.contains("srp")).collect();
        eprintln!("---- guest dmesg (srp) ----\n{}\n----", srp.join("\n"));
    }
    // A guest that will not power off (LIO's failed checks can leave ib_srp busy) is
    // killed: nothing of ours to fail on.
    if let Err(e) = guest.shutdown() {
        eprintln!("guest shutdown: {e}");
    }
    Ok(())
}

fn discover(ns: &NetNs, lio: &SrptTarget) -> Result<String> {
    let out = srpctl(
        ns,
        &[
            "discover",
            "192.168.77.1",
            "--local",
            "192.168.77.254",
            "--json",
        ],
    )?;
    let v: serde_json::Value = serde_json::from_str(&out)
        .map_err(|e| Error::Guest(format!("discover JSON: {e}: {out}")))?;
    let text = v.to_string();
    if !text.contains(&lio.ioc_guid) || !text.contains(&format!("SRP.T10:{}", lio.ioc_guid)) {
        return Err(Error::Guest(format!(
            "IOC {} not discovered: {out}",
            lio.ioc_guid
        )));
    }
    Ok(format!(
        "ib_srpt's DM agent: IOC {} with service SRP.T10:{}",
        lio.ioc_guid, lio.ioc_guid
    ))
}

fn sessions(ns: &NetNs, sock: &str) -> Result<serde_json::Value> {
    let out = srpctl(ns, &["sessions", "--json", "--socket", sock])?;
    serde_json::from_str(&out).map_err(|e| Error::Guest(format!("sessions JSON: {e}: {out}")))
}

fn login(ns: &NetNs, host: &mut Daemon, sock: &str) -> Result<String> {
    let t = Instant::now();
    host.wait_for_log("control socket", Duration::from_secs(90))?;
    let end = Instant::now() + Duration::from_secs(90);
    loop {
        let v = sessions(ns, sock)?;
        let list = v.as_array().cloned().unwrap_or_default();
        let running: Vec<&serde_json::Value> =
            list.iter().filter(|s| s["state"] == "running").collect();
        if running.len() == 2 {
            let forms: Vec<&str> = running.iter().filter_map(|s| s["login"].as_str()).collect();
            if forms != ["rdma-cm", "rdma-cm"] {
                return Err(Error::Guest(format!("login forms {forms:?}")));
            }
            return Ok(format!(
                "2 sessions running over RDMA-CM ({:.1} s; the IB CM form refused first: {})",
                t.elapsed().as_secs_f64(),
                host.log().contains("InvalidServiceId")
            ));
        }
        if Instant::now() > end {
            return Err(Error::Guest(format!("sessions: {v}\n{}", host.log())));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn multipath_disk(ns: &NetNs, sock: &str) -> Result<(String, String, String)> {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let out = srpctl(ns, &["disks", "--json", "--socket", sock])?;
        let v: serde_json::Value = serde_json::from_str(&out)
            .map_err(|e| Error::Guest(format!("disks JSON: {e}: {out}")))?;
        let disks = v.as_array().cloned().unwrap_or_default();
        let big = disks
            .iter()
            .find(|d| d["blocks"].as_u64() == Some(256 * 2048));
        if let Some(d) = big {
            let paths = d["paths"].as_array().map_or(0, Vec::len);
            let id = d["identity"].as_str().unwrap_or("");
            if paths == 2 && id.starts_with("naa.6001405") {
                let file = d["path"].as_str().unwrap_or("").to_owned();
                return Ok((
                    file.clone(),
                    id.to_owned(),
                    format!("{} disk(s); {id} over 2 paths at {file}", disks.len()),
                ));
            }
        }
        if Instant::now() > end {
            return Err(Error::Guest(format!("disks: {out}")));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn host_run(script: &str) -> Result<String> {
    let out = Command::new("bash")
        .args(["-c", script])
        .output()
        .map_err(Error::io("run bash"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(Error::Command {
            script: script.into(),
            rc: out.status.code().unwrap_or(-1),
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(stdout)
}

fn host_fio(file: &str) -> Result<String> {
    let t = Instant::now();
    let out = host_run(&format!(
        "fio --name=verify --filename={file} --rw=randwrite --bsrange=4k-256k --size=64M \
         --ioengine=libaio --iodepth=16 --direct=1 --verify=crc32c --do_verify=1 \
         --verify_backlog=128 --verify_fatal=1 --output-format=terse --terse-version=3"
    ))?;
    let errors = out
        .lines()
        .find(|l| l.starts_with("3;"))
        .and_then(|l| l.split(';').nth(4));
    if errors != Some("0") {
        return Err(Error::Guest(format!("fio: {out}")));
    }
    Ok(format!(
        "fio on the block file: 64 MiB random write+verify, 0 errors ({:.1} s)",
        t.elapsed().as_secs_f64()
    ))
}

fn host_ext4(work: &Path, file: &str) -> Result<String> {
    let t = Instant::now();
    let m = work.join("mnt");
    let out = host_run(&format!(
        r#"set -euo pipefail
M={m}
mkdir -p $M
LOOP=$(losetup -f --show {file})
trap 'umount $M 2>/dev/null || true; losetup -d $LOOP || true' EXIT
mkfs.ext4 -q -F $LOOP
mount $LOOP $M
dd if=/dev/urandom of=$M/big bs=1M count=24 status=none
mkdir -p $M/tree
for i in $(seq 200); do head -c $((i * 97)) /dev/urandom > $M/tree/f$i; done
(cd $M && find . -type f -print0 | sort -z | xargs -0 sha256sum) > {w}/ext4.sum
sync
umount $M
e2fsck -fn $LOOP
mount $LOOP $M
(cd $M && sha256sum -c --quiet {w}/ext4.sum)
umount $M
echo files: $(wc -l < {w}/ext4.sum)
"#,
        m = m.display(),
        w = work.display()
    ))?;
    let files = out
        .lines()
        .find_map(|l| l.strip_prefix("files: "))
        .unwrap_or("?");
    Ok(format!(
        "loop device on the block file: mkfs.ext4, {files} files, e2fsck clean, checksums \
         match after remount ({:.1} s)",
        t.elapsed().as_secs_f64()
    ))
}

/// `srpctl drill failover` with a "link" fault whose commands hand over to this thread,
/// which disables (then enables) the TPG of the path to 192.168.78.1 in the guest.
fn drill(
    ns: &NetNs,
    guest: &Guest,
    lio: &SrptTarget,
    work: &Path,
    sock: &str,
    disk: &str,
) -> Result<String> {
    let v = sessions(ns, sock)?;
    let session = v
        .as_array()
        .and_then(|a| a.iter().find(|s| s["portal"] == "192.168.78.1"))
        .and_then(|s| s["id"].as_u64())
        .ok_or_else(|| Error::Guest(format!("no session to 192.168.78.1: {v}")))?;
    let w = work.display();
    let down = format!("touch {w}/down.req; while [ ! -e {w}/down.ack ]; do sleep 0.1; done");
    let up = format!("touch {w}/up.req; while [ ! -e {w}/up.ack ]; do sleep 0.1; done");
    let report = work.join("drill.json");
    let out_file = work.join("drill.out");
    let err_file = work.join("drill.err");
    let mut child = crate::ours::in_netns(ns, srpctl_bin()?)
        .args([
            "drill", "failover", "--socket", sock, "--disk", disk, "--fault", "link",
        ])
        .args(["--path", &session.to_string()])
        .args(["--link-cmd-down", &down, "--link-cmd-up", &up])
        .args(["--warmup", "4", "--fault-secs", "15", "--after", "8"])
        .args(["--region-mb", "32", "--report"])
        .arg(&report)
        .stdout(std::fs::File::create(&out_file).map_err(Error::io("drill.out"))?)
        .stderr(std::fs::File::create(&err_file).map_err(Error::io("drill.err"))?)
        .spawn()
        .map_err(Error::io("start the drill"))?;
    let output = || {
        format!(
            "{}{}",
            std::fs::read_to_string(&out_file).unwrap_or_default(),
            std::fs::read_to_string(&err_file).unwrap_or_default()
        )
    };
    let tpg = &lio.tpgs[1];
    let mut serve = |name: &str, enable: u8| -> Result<()> {
        let req = work.join(format!("{name}.req"));
        let end = Instant::now() + Duration::from_secs(120);
        while !req.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(Error::Guest(format!(
                    "the drill ended ({status}) before asking for {name}:\n{}",
                    output()
                )));
            }
            if Instant::now() > end {
                return Err(Error::Guest(format!("the drill never asked for {name}")));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        guest.run_ok(&format!("echo {enable} > {tpg}/enable"), T)?;
        std::fs::write(work.join(format!("{name}.ack")), b"")
            .map_err(Error::io("write the handshake"))?;
        Ok(())
    };
    let served = serve("down", 0).and_then(|()| serve("up", 1));
    if served.is_err() {
        let _ = child.kill();
    }
    let status = child.wait().map_err(Error::io("wait for the drill"))?;
    served?;
    let stdout = output();
    let stderr = String::new();
    let json = std::fs::read_to_string(&report).unwrap_or_default();
    let r: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
    let errors = r["io"]["errors"].as_u64();
    let mismatches = r["io"]["mismatches"].as_u64();
    if !status.success() || errors != Some(0) || mismatches != Some(0) {
        return Err(Error::Guest(format!(
            "drill failed ({status}): errors {errors:?}, mismatches {mismatches:?}\n{stdout}\n{stderr}\n{json}"
        )));
    }
    Ok(format!(
        "TPG of path {session} disabled 15 s, then enabled: {} reads, {} writes, 0 errors, \
         0 mismatches, max stall {} ms, failback {} ms",
        r["io"]["reads"], r["io"]["writes"], r["max_stall"]["ms"], r["failback_ms"]
    ))
}
