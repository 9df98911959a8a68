//! Two of our appliances serving one LU on a Ceph RBD image (issue #30), through Linux
//! ib_srp: a Ceph cluster in the test's namespace (`scripts/ceph-cluster.sh` on the
//! namespace's loopback), appliance A on the guest's first link (192.168.77.254,
//! `port_base = 1`) and B on its second (192.168.78.254, `port_base = 2`), each the other's
//! `[[peer]]`, both exporting the image as LUN 0. The guest logs in to both:
//! - `P.pair-one-lu`: two SCSI devices, one NAA designator, relative target ports 1 and 2;
//! - `P.pair-reservations`: sg_persist through one appliance, enforced through the other —
//!   keys registered through each read back through the other, a Write Exclusive
//!   reservation taken through A refusing writes through B, a PREEMPT through B after
//!   which A's writes fail and A reads B's reservation;
//! - `P.pair-iscsi-test-cu-pr`: libiscsi's persistent-reservation suites (`SCSI.Prin*`,
//!   `SCSI.Prout*`) through A's device (those needing a second initiator skip on a SCSI
//!   generic device: they need libiscsi's own iSCSI sessions), with no test failed.

use super::Matrix;
use super::side::OURS_IOC;
use crate::linux::{RxeDevice, SrpLogin, linux_initiator_port_id, setup_rxe, srp_login};
use crate::ours::{Daemon, WorkDir};
use crate::{Error, Guest, GuestConfig, NetNs, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The IOC GUIDs of B (A uses [`OURS_IOC`]'s first).
const B_IOC: &str = "0002c90300c0fe01";

/// The cluster script, from the workspace root.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ceph-cluster.sh")
}

/// A cluster in `ns`, stopped on drop.
struct Cluster<'a> {
    ns: &'a NetNs,
    dir: PathBuf,
}

impl<'a> Cluster<'a> {
    fn start(ns: &'a NetNs, dir: PathBuf) -> Result<Cluster<'a>> {
        let out = ns
            .command("bash")
            .arg(script())
            .arg("start")
            .arg(&dir)
            .args(["--addr", "127.0.0.1", "--timeout", "180"])
            .output()
            .map_err(Error::io("scripts/ceph-cluster.sh".to_owned()))?;
        let c = Cluster { ns, dir };
        if !out.status.success() {
            return Err(Error::Guest(format!(
                "the Ceph cluster did not start: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(c)
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("ceph.conf")
    }

    fn rbd(&self, args: &[&str]) -> Result<()> {
        let out = self
            .ns
            .command("rbd")
            .arg("-c")
            .arg(self.conf())
            .args(args)
            .output()
            .map_err(Error::io("rbd".to_owned()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error::Guest(format!(
                "rbd {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            )))
        }
    }
}

impl Drop for Cluster<'_> {
    fn drop(&mut self) {
        let _ = self
            .ns
            .command("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

/// Appliance `name`'s configuration: its one port at `addr`, its IOC `ioc` from `base`,
/// the other appliance's group `peer`.
#[allow(clippy::too_many_arguments)]
fn config(
    work: &Path,
    name: &str,
    addr: &str,
    cm_port: u16,
    base: u16,
    ioc: &str,
    peer: u16,
    conf: &Path,
    allow: &str,
) -> String {
    let node = format!("{}00", &ioc[..14]);
    format!(
        "[target]\nnode_guid = \"0x{node}\"\nname = \"{name}\"\n\
         control_socket = \"{sock}\"\nrdma_cm_port = {cm_port}\nstate_dir = \"{state}\"\n\
         port_base = {base}\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{addr}\"\n\n\
         [[lun]]\nname = \"shared\"\nrbd = \"rbd/shared\"\nceph_conf = \"{conf}\"\n\n\
         [[ioc]]\nname = \"ioc\"\nguid = \"0x{ioc}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"shared\" }}\nallow = [{allow}]\n\n\
         [[peer]]\nname = \"peer\"\nport_groups = [{peer}]\n",
        sock = work.join(format!("{name}.sock")).display(),
        state = work.join(format!("state-{name}")).display(),
        conf = conf.display(),
    )
}

/// The pair, logged in from the guest: (A's device, B's device) as (sg, block), and the
/// sessions (logged out at the end).
struct Pair {
    a: (String, String),
    b: (String, String),
    sessions: Vec<crate::linux::SrpSession>,
}

fn log_in(guest: &Guest, rxe: &[RxeDevice]) -> Result<Pair> {
    let a = srp_login(
        guest,
        &SrpLogin::with_ids(
            &rxe[0].name,
            OURS_IOC[0],
            OURS_IOC[0],
            "192.168.77.254:5555",
        ),
    )?;
    let b = srp_login(
        guest,
        &SrpLogin::with_ids(&rxe[1].name, B_IOC, B_IOC, "192.168.78.254:5556"),
    )?;
    let first = |s: &crate::linux::SrpSession| {
        s.disks
            .first()
            .map(|d| (d.sg.clone(), d.block.clone()))
            .ok_or_else(|| Error::Guest("no disk".into()))
    };
    Ok(Pair {
        a: first(&a)?,
        b: first(&b)?,
        sessions: vec![a, b],
    })
}

/// VPD 83h through `sg` (sg_vpd's raw page): (the NAA designator in hex, the relative
/// target port).
fn identity(guest: &Guest, sg: &str) -> Result<(String, u16)> {
    let out = guest.run_ok(
        &format!("sg_vpd --page=di --raw {sg} | od -An -tx1 -v | tr -d ' \\n'"),
        Duration::from_secs(30),
    )?;
    let hex = out.trim();
    let page: Vec<u8> = (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect();
    let (mut naa, mut rel) = (String::new(), 0u16);
    let mut at = 4;
    while at + 4 <= page.len() {
        let len = usize::from(page[at + 3]);
        let v = page.get(at + 4..at + 4 + len).unwrap_or_default();
        match page[at + 1] & 0x3f {
            0x03 => naa = v.iter().map(|b| format!("{b:02x}")).collect(),
            0x14 if v.len() >= 4 => rel = u16::from_be_bytes([v[2], v[3]]),
            _ => {}
        }
        at += 4 + len;
    }
    Ok((naa, rel))
}

/// The sg_persist sequence across the pair; its markers.
fn reservations(guest: &Guest, p: &Pair) -> Result<String> {
    let (a, da, b, db) = (&p.a.0, &p.a.1, &p.b.0, &p.b.1);
    let script = format!(
        r#"set -u
w() {{ dd if=/dev/zero of=$1 bs=4096 count=1 oflag=direct 2>/dev/null && echo ok || echo refused; }}
sg_persist --out --register --param-sark=0xa {a} >/dev/null; echo reg-a=$?
sg_persist --out --register --param-sark=0xb {b} >/dev/null; echo reg-b=$?
echo keys-via-a=$(sg_persist --in --read-keys {a} | grep -E '^ +0x' | tr -d ' ' | sort | tr '\n' ' ')
sg_persist --out --reserve --param-rk=0xa --prout-type=1 {a} >/dev/null; echo reserve-a=$?
echo write-b-under-a=$(w {db})
echo write-a-under-a=$(w {da})
sg_persist --out --preempt --param-rk=0xb --param-sark=0xa --prout-type=1 {b} >/dev/null; echo preempt-b=$?
echo write-a-after-preempt=$(w {da})
echo holder-via-a=$(sg_persist --in --read-reservation {a} | grep -o 'Key=0x[0-9a-f]*')
sg_persist --out --clear --param-rk=0xb {b} >/dev/null; echo clear-b=$?
"#
    );
    let out = guest.run_ok(&script, Duration::from_secs(300))?;
    let want = [
        "reg-a=0",
        "reg-b=0",
        "keys-via-a=0xa 0xb",
        "reserve-a=0",
        "write-b-under-a=refused",
        "write-a-under-a=ok",
        "preempt-b=0",
        "write-a-after-preempt=refused",
        "holder-via-a=Key=0xb",
        "clear-b=0",
    ];
    for w in want {
        if !out.lines().any(|l| l.trim() == w) {
            return Err(Error::Guest(format!("expected {w:?}; got:\n{out}")));
        }
    }
    Ok("keys, a reservation and a PREEMPT across the pair, as sg_persist sees them".into())
}

/// libiscsi's PR suites through `sg`: (passed, failed, skipped).
fn pr_battery(guest: &Guest, sg: &str) -> Result<String> {
    let mut all = super::conformance::Verdicts::new();
    for suites in ["SCSI.Prin*", "SCSI.Prout*"] {
        let out = guest.run(
            &format!("cd /tmp && iscsi-test-cu --dataloss --verbose --test='{suites}' {sg} 2>&1"),
            Duration::from_secs(1800),
        )?;
        all.extend(super::conformance::parse(&out.stdout));
    }
    use super::conformance::Verdict as V;
    let n = |v: V| all.values().filter(|x| **x == v).count();
    let failed: Vec<&String> = all
        .iter()
        .filter(|(_, v)| **v == V::Failed)
        .map(|(k, _)| k)
        .collect();
    if all.is_empty() || !failed.is_empty() {
        return Err(Error::Guest(format!(
            "{} passed, failed: {failed:?}",
            n(V::Passed)
        )));
    }
    Ok(format!(
        "{} passed, 0 failed, {} skipped",
        n(V::Passed),
        n(V::Skipped)
    ))
}

/// Runs the group into `m`.
pub fn run(m: &mut Matrix) {
    let mut ctx: Option<(WorkDir, NetNs, Guest, Vec<RxeDevice>)> = None;
    let started = m.check("ours", "P.pair-start", || {
        let work = WorkDir::new("pair")?;
        let ns = NetNs::new()?;
        let guest = Guest::boot(GuestConfig::new(&ns).nics(&[1500, 1500]))?;
        let rxe = setup_rxe(&guest)?;
        ctx = Some((work, ns, guest, rxe));
        Ok("guest up".into())
    });
    let Some((work, ns, guest, rxe)) = ctx else {
        return;
    };
    if !started {
        return;
    }
    let allow: Vec<String> = rxe
        .iter()
        .map(|r| format!("\"{}\"", linux_initiator_port_id(r, 0)))
        .collect();
    let allow = allow.join(", ");
    let mut daemons: Vec<Daemon> = Vec::new();
    let cluster = Cluster::start(&ns, work.path().join("cluster"));
    let mut pair = None;
    m.check("ours", "P.pair-one-lu", || {
        let cluster = cluster.as_ref().map_err(|e| Error::Guest(e.to_string()))?;
        cluster.rbd(&[
            "create",
            "--size",
            "64M",
            "--image-feature",
            "layering",
            "rbd/shared",
        ])?;
        for (name, addr, port, base, ioc, peer) in [
            ("a", "192.168.77.254", 5555u16, 1u16, OURS_IOC[0], 2u16),
            ("b", "192.168.78.254", 5556, 2, B_IOC, 1),
        ] {
            let conf = work.path().join(format!("{name}.toml"));
            let text = config(
                work.path(),
                name,
                addr,
                port,
                base,
                ioc,
                peer,
                &cluster.conf(),
                &allow,
            );
            std::fs::write(&conf, text).map_err(Error::io(format!("write {}", conf.display())))?;
            let mut d = Daemon::start(
                &ns,
                &format!("target-{name}"),
                &["target", "run", "-c", &conf.display().to_string()],
                &work.path().join(format!("target-{name}.log")),
            )?;
            d.wait_for_log("control socket", Duration::from_secs(60))?;
            daemons.push(d);
        }
        let p = log_in(&guest, &rxe)?;
        let (ia, ib) = (identity(&guest, &p.a.0)?, identity(&guest, &p.b.0)?);
        pair = Some(p);
        if ia.0.is_empty() || ia.0 != ib.0 {
            return Err(Error::Guest(format!(
                "NAA through A {:?}, through B {:?}",
                ia.0, ib.0
            )));
        }
        if (ia.1, ib.1) != (1, 2) {
            return Err(Error::Guest(format!(
                "relative ports {} and {}: expected 1 (A) and 2 (B)",
                ia.1, ib.1
            )));
        }
        Ok(format!(
            "one NAA {}, relative ports {} and {}",
            ia.0, ia.1, ib.1
        ))
    });
    if let Some(p) = &pair {
        m.check("ours", "P.pair-reservations", || reservations(&guest, p));
        m.check("ours", "P.pair-iscsi-test-cu-pr", || {
            pr_battery(&guest, &p.a.0)
        });
        for s in &p.sessions {
            let _ = crate::linux::srp_logout(&guest, s);
        }
    }
    for mut d in daemons {
        d.stop();
    }
    drop(cluster);
    if let Err(e) = guest.shutdown() {
        eprintln!("guest shutdown: {e}");
    }
}
