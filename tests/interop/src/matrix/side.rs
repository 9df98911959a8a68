//! The target under test in direction A, ours or Linux's, behind one interface: both
//! export the same two LUNs (LUN 0: 256 MiB, LUN 1: 32 MiB) through two target ports, one
//! per guest NIC, and admit only the guest's two initiator ports (initiator_ext 0).
//!
//! - Ours: `srpctl target run` in the namespace, IOC `ioc-a` on port p0 (192.168.77.254)
//!   and `ioc-b` on p1 (192.168.78.254), LUN 0 a file, LUN 1 RAM.
//! - Ours over rdma-core: the same target run *inside the guest* on the guest's `rxe0` and
//!   `rxe1` through libibverbs and librdmacm (`provider = "rdma-core"`: the kernel's RDMA
//!   stack, as on a machine with an RDMA NIC), ports at the guest's own 192.168.77.1 and
//!   192.168.78.1; Linux ib_srp reaches it through the same rxe devices.
//! - LIO: ib_srpt on both rxe devices of the guest (TPG 1 each), LUN 0 `rd_mcp`, LUN 1
//!   `fileio`; the guest logs in to its own addresses.

use crate::in_guest::{self, GuestDaemon};
use crate::linux::{
    Backstore, RxeDevice, SrpLogin, SrptConfig, SrptTarget, linux_initiator_port_id, setup_lio_srpt,
};
use crate::ours::{Daemon, srpctl};
use crate::{Error, Guest, NetNs, Result};
use std::path::Path;
use std::time::Duration;

/// Our IOCs' GUIDs (= their `id_ext`), path 0 and path 1.
pub const OURS_IOC: [&str; 2] = ["0002c90300c0ff01", "0002c90300c0ff02"];
/// Bytes of LUN 0 and LUN 1.
pub const LUN_MIB: [u64; 2] = [256, 32];

/// Our target, running.
#[derive(Debug)]
pub struct Ours {
    runs: Runs,
    /// The loop device of the conformance battery's block-device LUN, detached on drop.
    _device: Option<LoopDevice>,
    sock: String,
    /// Each path's target address (`ip:port`).
    dest: [String; 2],
}

/// Where our target runs.
#[derive(Debug)]
enum Runs {
    /// In the namespace, on our software HCA.
    Namespace(Daemon),
    /// In the guest, on its rxe devices through rdma-core.
    Guest(GuestDaemon),
}

/// Linux's target in the guest.
#[derive(Debug)]
pub struct Lio {
    target: SrptTarget,
}

/// The target under test.
#[derive(Debug)]
pub enum Side {
    /// `srpctl target run`.
    Ours(Ours),
    /// LIO + ib_srpt.
    Lio(Lio),
}

/// `target.toml` for our side: two ports, two IOCs, two LUNs, the guest's initiators.
pub fn ours_config(work: &Path, allow: &[String]) -> String {
    ours_config_with(
        work,
        allow,
        [
            "address = \"192.168.77.254\"\n".into(),
            "address = \"192.168.78.254\"\n".into(),
        ],
    )
}

/// `target.toml` for our target in the guest over rdma-core: port p0 finds its device by
/// its address (rxe0's RoCEv2 GID), p1 names `rxe1`.
pub fn ours_rdma_core_config(work: &Path, allow: &[String]) -> String {
    ours_config_with(
        work,
        allow,
        [
            "address = \"192.168.77.1\"\nprovider = \"rdma-core\"\n".into(),
            "address = \"192.168.78.1\"\nprovider = \"rdma-core\"\ndevice = \"rxe1\"\n".into(),
        ],
    )
}

fn ours_config_with(work: &Path, allow: &[String], ports: [String; 2]) -> String {
    let allow: Vec<String> = allow.iter().map(|a| format!("\"{a}\"")).collect();
    let allow = allow.join(", ");
    format!(
        "[target]\nnode_guid = \"0x0002c90300c0ff00\"\nname = \"interop\"\n\
         control_socket = \"{sock}\"\nrdma_cm_port = 5555\nstate_dir = \"{state}\"\n\n\
         [[port]]\nname = \"p0\"\n{p0}\n\
         [[port]]\nname = \"p1\"\n{p1}\n\
         [[lun]]\nname = \"vol0\"\nfile = \"{img}\"\nsize = \"{m0}MiB\"\n\n\
         [[lun]]\nname = \"vol1\"\nram = true\nsize = \"{m1}MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x{a}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol0\", 1 = \"vol1\" }}\nallow = [{allow}]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x{b}\"\nports = [\"p1\"]\n\
         exports = {{ 0 = \"vol0\", 1 = \"vol1\" }}\nallow = [{allow}]\n",
        sock = work.join("target.sock").display(),
        state = work.join("state").display(),
        img = work.join("vol0.img").display(),
        m0 = LUN_MIB[0],
        m1 = LUN_MIB[1],
        a = OURS_IOC[0],
        b = OURS_IOC[1],
        p0 = ports[0],
        p1 = ports[1],
    )
}

/// The LUNs of the conformance battery's target (ours): LUN 1 RAM, LUN 2 a file, LUN 3 a
/// block device, 32 MiB each — the battery's WRITE ATOMIC, durability and provisioning
/// tests see each kind of backing store.
pub const CONFORMANCE_LUNS: [(u8, &str); 3] = [(1, "ram"), (2, "file"), (3, "device")];

/// A loop device over a file, detached on drop.
#[derive(Debug)]
pub struct LoopDevice(String);

impl LoopDevice {
    /// Attaches `file` (created, `mib` MiB).
    fn new(file: &Path, mib: u64) -> Result<LoopDevice> {
        let f =
            std::fs::File::create(file).map_err(Error::io(format!("create {}", file.display())))?;
        f.set_len(mib << 20)
            .map_err(Error::io(format!("size {}", file.display())))?;
        let out = std::process::Command::new("losetup")
            .args(["--find", "--show"])
            .arg(file)
            .output()
            .map_err(Error::io("losetup".to_owned()))?;
        if !out.status.success() {
            return Err(Error::Guest(format!(
                "losetup {}: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(LoopDevice(
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        ))
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

/// [`ours_config`] with the conformance battery's LUNs 2 (a file) and 3 (`device`).
fn ours_conformance_config(work: &Path, allow: &[String], device: &str) -> String {
    let base = ours_config(work, allow).replace(
        "exports = { 0 = \"vol0\", 1 = \"vol1\" }",
        "exports = { 0 = \"vol0\", 1 = \"vol1\", 2 = \"vol2\", 3 = \"vol3\" }",
    );
    format!(
        "{base}\n[[lun]]\nname = \"vol2\"\nfile = \"{img}\"\nsize = \"{m}MiB\"\n\n         [[lun]]\nname = \"vol3\"\ndevice = \"{device}\"\n",
        img = work.join("vol2.img").display(),
        m = LUN_MIB[1],
    )
}

impl Side {
    /// Starts our target in `ns` (files in `work`), admitting the guest's `rxe` ports.
    pub fn ours(ns: &NetNs, work: &Path, rxe: &[RxeDevice]) -> Result<Side> {
        let allow: Vec<String> = rxe.iter().map(|r| linux_initiator_port_id(r, 0)).collect();
        Self::ours_with(ns, work, &ours_config(work, &allow), None)
    }

    /// [`Side::ours`] with the conformance battery's LUNs ([`CONFORMANCE_LUNS`]): LUN 3 a
    /// loop device over a file in `work`.
    pub fn ours_conformance(ns: &NetNs, work: &Path, rxe: &[RxeDevice]) -> Result<Side> {
        let allow: Vec<String> = rxe.iter().map(|r| linux_initiator_port_id(r, 0)).collect();
        let device = LoopDevice::new(&work.join("vol3.img"), LUN_MIB[1])?;
        let text = ours_conformance_config(work, &allow, &device.0);
        Self::ours_with(ns, work, &text, Some(device))
    }

    fn ours_with(ns: &NetNs, work: &Path, text: &str, device: Option<LoopDevice>) -> Result<Side> {
        let conf = work.join("target.toml");
        std::fs::write(&conf, text).map_err(Error::io(format!("write {}", conf.display())))?;
        let conf = conf.display().to_string();
        let mut daemon = Daemon::start(
            ns,
            "target",
            &["target", "run", "-c", &conf],
            &work.join("target.log"),
        )?;
        daemon.wait_for_log("control socket", Duration::from_secs(60))?;
        Ok(Side::Ours(Ours {
            runs: Runs::Namespace(daemon),
            _device: device,
            sock: work.join("target.sock").display().to_string(),
            dest: ["192.168.77.254:5555".into(), "192.168.78.254:5555".into()],
        }))
    }

    /// Starts our target inside `guest` on its `rxe` devices through rdma-core (files in
    /// the guest's `/tmp`, the log in its share), admitting the same initiator ports.
    pub fn ours_rdma_core(guest: &Guest, rxe: &[RxeDevice]) -> Result<Side> {
        let allow: Vec<String> = rxe.iter().map(|r| linux_initiator_port_id(r, 0)).collect();
        let work = Path::new("/tmp/ours");
        guest.run_ok("mkdir -p /tmp/ours", Duration::from_secs(30))?;
        let conf = in_guest::write_share(
            guest,
            "target-rdma-core.toml",
            &ours_rdma_core_config(work, &allow),
        )?;
        let daemon = GuestDaemon::start(guest, "target", &["target", "run", "-c", &conf])?;
        daemon.wait_for_log(guest, "control socket", Duration::from_secs(60))?;
        Ok(Side::Ours(Ours {
            runs: Runs::Guest(daemon),
            _device: None,
            sock: work.join("target.sock").display().to_string(),
            dest: ["192.168.77.1:5555".into(), "192.168.78.1:5555".into()],
        }))
    }

    /// Sets up LIO + ib_srpt on the guest's `rxe` ports, admitting them.
    pub fn lio(guest: &Guest, rxe: &[RxeDevice]) -> Result<Side> {
        let allow: Vec<String> = rxe.iter().map(|r| linux_initiator_port_id(r, 0)).collect();
        let target = setup_lio_srpt(
            guest,
            &SrptConfig::new(
                rxe,
                vec![
                    Backstore::Ramdisk { mib: LUN_MIB[0] },
                    Backstore::FileIo { mib: LUN_MIB[1] },
                ],
                allow,
            ),
        )?;
        Ok(Side::Lio(Lio { target }))
    }

    /// `ours` or `lio`.
    pub fn label(&self) -> &'static str {
        match self {
            Side::Ours(Ours {
                runs: Runs::Namespace(_),
                ..
            }) => "ours",
            Side::Ours(_) => "ours-rdma-core",
            Side::Lio(_) => "lio",
        }
    }

    /// Whether this is our target (not LIO).
    pub fn is_ours(&self) -> bool {
        matches!(self, Side::Ours(_))
    }

    /// `srpctl <args> --socket <ours>` where our target runs (the namespace or the guest);
    /// an error for LIO.
    pub fn ctl(&self, guest: &Guest, ns: &NetNs, args: &[&str]) -> Result<String> {
        let Side::Ours(o) = self else {
            return Err(Error::Guest("srpctl against LIO".into()));
        };
        let mut args = args.to_vec();
        args.extend(["--socket", o.sock.as_str()]);
        match o.runs {
            Runs::Namespace(_) => srpctl(ns, &args),
            Runs::Guest(_) => in_guest::srpctl(guest, &args),
        }
    }

    /// Linux ib_srp's login on path `k` from `rxe` (the guest's `rxe<k>`), both LUNs
    /// expected.
    pub fn login(&self, k: usize, rxe: &RxeDevice) -> SrpLogin {
        let mut l = match self {
            Side::Ours(o) => SrpLogin::with_ids(&rxe.name, OURS_IOC[k], OURS_IOC[k], &o.dest[k]),
            Side::Lio(l) => SrpLogin::new(&rxe.name, &l.target, rxe.ip),
        };
        l.expect_disks = 2;
        l
    }

    /// Takes path `k`'s target port out of service: our IOC disabled (its sessions logged
    /// out), or LIO's TPG disabled.
    pub fn fail_path(&self, guest: &Guest, ns: &NetNs, k: usize) -> Result<()> {
        match self {
            Side::Ours(_) => {
                let name = ["ioc-a", "ioc-b"][k];
                self.ctl(guest, ns, &["target", "ioc", "disable", name])
                    .map(|_| ())
            }
            Side::Lio(l) => guest
                .run_ok(
                    &format!("echo 0 > {}/enable", l.target.tpgs[k]),
                    Duration::from_secs(60),
                )
                .map(|_| ()),
        }
    }

    /// Puts path `k`'s target port back.
    pub fn restore_path(&self, guest: &Guest, ns: &NetNs, k: usize) -> Result<()> {
        match self {
            Side::Ours(_) => {
                let name = ["ioc-a", "ioc-b"][k];
                self.ctl(guest, ns, &["target", "ioc", "enable", name])
                    .map(|_| ())
            }
            Side::Lio(l) => guest
                .run_ok(
                    &format!("echo 1 > {}/enable", l.target.tpgs[k]),
                    Duration::from_secs(60),
                )
                .map(|_| ()),
        }
    }

    /// Our target's log so far (empty for LIO).
    pub fn log(&self) -> String {
        match self {
            Side::Ours(Ours {
                runs: Runs::Namespace(d),
                ..
            }) => d.log(),
            Side::Ours(Ours {
                runs: Runs::Guest(d),
                ..
            }) => d.log(),
            Side::Lio(_) => String::new(),
        }
    }

    /// Stops our target; its log.
    pub fn stop(&mut self, guest: &Guest) -> String {
        match self {
            Side::Ours(Ours {
                runs: Runs::Namespace(d),
                ..
            }) => d.stop(),
            Side::Ours(Ours {
                runs: Runs::Guest(d),
                ..
            }) => d.stop(guest).0,
            Side::Lio(_) => String::new(),
        }
    }
}
