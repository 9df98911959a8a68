//! The interop smoke of the default test command (scripts/test.sh runs it with
//! `SRP_INTEROP=1`; the full matrix is scripts/interop.sh): Linux 6.1 in a QEMU guest
//! against our stack, both directions, a few minutes in all.
//! - A: Linux ib_srp logs in to `srpctl target run` over RDMA-CM, reads the identity
//!   (sg_inq), writes and verifies 64 MiB with fio and logs out; the target counted rxe's
//!   numbered IPv4 IDs and dropped nothing; the capture dissects in tshark with no
//!   malformed frame.
//! - B: `srpctl discover` finds Linux ib_srpt's IOC, `srpctl host run` (login "auto") logs in
//!   over RDMA-CM, and 32 MiB are written and verified through the block file; that capture
//!   dissects cleanly too.
//!
//! - C (rdma-core): in one guest, our target and our host run on the guest's own rxe0
//!   through libibverbs and librdmacm (`provider = "rdma-core"`, the kernel's RDMA stack):
//!   Linux ib_srp writes and verifies 16 MiB through our target, and our host (fencing with
//!   memory windows) writes and verifies 16 MiB through ib_srpt/LIO's block file.
//!
//! Our HCA sends runs of equal-size packets as one UDP GSO send, and the kernel numbers the
//! segments' IPv4 IDs 0, 1, 2, …; each carries the ICRC for its ID. Frames from our side
//! with a non-zero ID in the capture are such segments, and no retransmit or sequence NAK
//! on our side means rxe took every one.

use srp_interop::in_guest::{self, GuestDaemon, write_share};
use srp_interop::linux::{
    Backstore, SrpLogin, SrptConfig, setup_lio_srpt, setup_rxe, srp_login, srp_logout,
};
use srp_interop::matrix::Matrix;
use srp_interop::matrix::direction_b::{self, HOST_GUID};
use srp_interop::matrix::side::{OURS_IOC, ours_config};
use srp_interop::ours::{Daemon, WorkDir, srpctl};
use srp_interop::workload::Fio;
use srp_interop::{
    Capture, Guest, GuestConfig, NetNs, Watchdog, dissects_cleanly, skip_unless_enabled,
    tshark_fields,
};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(120);

#[test]
fn a_linux_ib_srp_writes_and_verifies_through_our_target() {
    skip_unless_enabled!();
    let _watchdog = Watchdog::new("smoke A", Duration::from_secs(900));
    let t0 = Instant::now();
    let work = WorkDir::new("smoke-a").expect("work dir");
    let ns = NetNs::new().expect("namespace");
    // Two NICs: the matrix's target config has a port on each.
    let guest = Guest::boot(GuestConfig::new(&ns).nics(&[1500, 1500])).expect("boot");
    let nic = guest.nic(0).expect("nic").clone();
    let cap = Capture::start(
        &ns,
        &nic.tap,
        &work.path().join("a.pcapng"),
        Some("udp port 4791"),
    )
    .expect("capture");
    let rxe = setup_rxe(&guest).expect("rxe");
    let allow = vec![srp_interop::linux::linux_initiator_port_id(&rxe[0], 0)];
    let conf = work.path().join("target.toml");
    std::fs::write(&conf, ours_config(work.path(), &allow)).expect("write target.toml");
    let sock = work.path().join("target.sock").display().to_string();
    let mut target = Daemon::start(
        &ns,
        "target",
        &["target", "run", "-c", conf.to_str().expect("utf-8")],
        &work.path().join("target.log"),
    )
    .expect("start target");
    target
        .wait_for_log("control socket", Duration::from_secs(60))
        .expect("target up");

    let mut login = SrpLogin::with_ids("rxe0", OURS_IOC[0], OURS_IOC[0], "192.168.77.254:5555");
    login.expect_disks = 2;
    let session = srp_login(&guest, &login).expect("Linux ib_srp logs in to our target");
    let disk = session.disks.first().expect("a disk").clone();
    let inq = guest
        .run_ok(&format!("sg_inq {}", disk.sg), T)
        .expect("sg_inq");
    assert!(inq.contains("SRPSTACK"), "{inq}");
    Fio::new(&disk.block, "randwrite", "4k-256k", "64M")
        .run(&guest, Duration::from_secs(600))
        .expect("64 MiB written and verified");
    srp_logout(&guest, &session).expect("logout");

    // rxe numbers its IPv4 IDs: every packet verified by solving for the ID, none dropped.
    let ports = srpctl(&ns, &["target", "ports", "--json", "--socket", &sock]).expect("ports");
    let ports: serde_json::Value = serde_json::from_str(&ports).expect("json");
    let hca = &ports[0]["hca"];
    assert!(hca["ipv4_id_nonzero"].as_u64().unwrap_or(0) > 0, "{hca}");
    assert_eq!(hca["dropped"].as_u64(), Some(0), "{hca}");
    assert_eq!(hca["psn_naks_sent"].as_u64(), Some(0), "{hca}");
    // rxe took our GSO segments (each with its own IPv4 ID, checked below): had it refused
    // them, most of what we send would be sent again. A few retransmits are losses under
    // load (rxe NAKs a gap), recovered as RC does.
    let (tx, again) = (
        hca["tx_packets"].as_u64().unwrap_or(0),
        hca["retransmitted_packets"].as_u64().unwrap_or(u64::MAX),
    );
    assert!(
        again.saturating_mul(100) < tx,
        "{again} of {tx} sent again: {hca}"
    );

    let file = cap.stop();
    let frames = dissects_cleanly(&file, 1000).expect("the capture dissects");
    let ours: Vec<String> = tshark_fields(&file, "ip.src")
        .expect("tshark")
        .into_iter()
        .zip(tshark_fields(&file, "ip.id").expect("tshark"))
        .filter(|(src, id)| src == "192.168.77.254" && id != "0x0000")
        .map(|(_, id)| id)
        .collect();
    assert!(!ours.is_empty(), "no GSO segment of ours reached rxe");
    eprintln!(
        "smoke A: {} GSO segments with IDs ≠ 0 accepted by rxe",
        ours.len()
    );
    target.stop();
    guest.shutdown().expect("shutdown");
    eprintln!("smoke A: {frames} frames dissected; {:?}", t0.elapsed());
}

#[test]
fn b_our_host_logs_in_to_linux_ib_srpt_and_verifies_through_the_block_file() {
    skip_unless_enabled!();
    let _watchdog = Watchdog::new("smoke B", Duration::from_secs(900));
    let t0 = Instant::now();
    let work = WorkDir::new("smoke-b").expect("work dir");
    let ns = NetNs::new().expect("namespace");
    let guest = Guest::boot(GuestConfig::new(&ns)).expect("boot");
    let nic = guest.nic(0).expect("nic").clone();
    let cap = Capture::start(
        &ns,
        &nic.tap,
        &work.path().join("b.pcapng"),
        Some("udp port 4791"),
    )
    .expect("capture");
    let rxe = setup_rxe(&guest).expect("rxe");
    let lio = setup_lio_srpt(
        &guest,
        &SrptConfig::new(
            &rxe,
            vec![Backstore::Ramdisk { mib: 64 }],
            vec![format!("0x0000000000000000{HOST_GUID}")],
        ),
    )
    .expect("LIO + ib_srpt");
    let found = srpctl(
        &ns,
        &["discover", "192.168.77.1", "--local", "192.168.77.254"],
    )
    .expect("discover");
    assert!(
        found.contains(&format!("SRP.T10:{}", lio.ioc_guid)),
        "{found}"
    );

    // Our host under each driver model in turn, against the same ib_srpt: the StorPort
    // miniport, then the iSCSI-model driver (whose adapter also watches the IOC through
    // ib_srpt's Device Management agent on its own GSI port).
    for driver in ["storport", "iscsi-model"] {
        smoke_b_host(&ns, &work.path().join(driver), driver);
    }
    let file = cap.stop();
    let frames = dissects_cleanly(&file, 1000).expect("the capture dissects");
    guest.shutdown().expect("shutdown");
    eprintln!("smoke B: {frames} frames dissected; {:?}", t0.elapsed());
}

/// Direction B's host under `driver`: logs in (RDMA-CM), a verified fio run through its
/// block file; under the iSCSI model the IOC watch runs against ib_srpt's DM agent and
/// must not take the live IOC for gone.
fn smoke_b_host(ns: &NetNs, dir: &std::path::Path, driver: &str) {
    std::fs::create_dir_all(dir).expect("host dir");
    // The matrix's host config, its first portal only (this guest has one NIC).
    let text = direction_b::host_config(dir, driver);
    let text = &text[..text
        .find("\n\n[[portal]]\naddress = \"192.168.78.1\"")
        .expect("portal 2")];
    let conf = dir.join("host.toml");
    std::fs::write(&conf, format!("{text}\n")).expect("write host.toml");
    let sock = dir.join("host.sock").display().to_string();
    let mut host = Daemon::start(
        ns,
        "host",
        &["host", "run", "-c", conf.to_str().expect("utf-8")],
        &dir.join("host.log"),
    )
    .expect("start host");
    host.wait_for_log("control socket", Duration::from_secs(90))
        .expect("host up");
    let end = Instant::now() + Duration::from_secs(60);
    let file = loop {
        let out = srpctl(ns, &["disks", "--json", "--socket", &sock]).expect("disks");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        if let Some(p) = v[0]["path"].as_str().filter(|p| !p.is_empty()) {
            break p.to_owned();
        }
        assert!(Instant::now() < end, "no disk: {out}\n{}", host.log());
        std::thread::sleep(Duration::from_millis(500));
    };
    let sessions = srpctl(ns, &["sessions", "--json", "--socket", &sock]).expect("sessions");
    let v: serde_json::Value = serde_json::from_str(&sessions).expect("json");
    assert_eq!(v[0]["login"], "rdma-cm", "{sessions}");
    assert_eq!(v[0]["driver"], driver, "{sessions}");
    let mut m = Matrix::default();
    let ok = m.check("host", "B.block-file-fio-verify", || {
        let out = std::process::Command::new("fio")
            .args([
                "--name=verify",
                &format!("--filename={file}"),
                "--rw=randwrite",
                "--bsrange=4k-256k",
                "--size=32M",
                "--ioengine=libaio",
                "--iodepth=16",
                "--direct=1",
                "--verify=crc32c",
                "--verify_fatal=1",
                "--output-format=terse",
                "--terse-version=3",
            ])
            .output()
            .map_err(|e| srp_interop::Error::Guest(format!("fio: {e}")))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let errors = text
            .lines()
            .find(|l| l.starts_with("3;"))
            .and_then(|l| l.split(';').nth(4));
        if !out.status.success() || errors != Some("0") {
            return Err(srp_interop::Error::Guest(format!(
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok("32 MiB verified".into())
    });
    assert!(
        ok,
        "{driver}: fio through the block file failed:\n{}",
        host.log()
    );
    let log = host.log();
    assert!(
        !log.contains("surprise removal"),
        "{driver}: the live IOC was taken for gone:\n{log}"
    );
    host.stop();
    eprintln!("smoke B: {driver} verified");
}

#[test]
fn c_rdma_core_both_directions_in_the_guest() {
    skip_unless_enabled!();
    let _watchdog = Watchdog::new("smoke C", Duration::from_secs(900));
    let t0 = Instant::now();
    let ns = NetNs::new().expect("namespace");
    let guest = Guest::boot(GuestConfig::new(&ns).memory_mib(2048)).expect("boot");
    let rxe = setup_rxe(&guest).expect("rxe");
    // LIO for our host; ib_srpt listens for RDMA-CM on 5555 on every address, so our
    // target takes 5556.
    let lio = setup_lio_srpt(
        &guest,
        &SrptConfig::new(
            &rxe,
            vec![Backstore::Ramdisk { mib: 64 }],
            vec![format!("0x0000000000000000{HOST_GUID}")],
        ),
    )
    .expect("LIO + ib_srpt");
    let ip = rxe[0].ip;
    let allow = srp_interop::linux::linux_initiator_port_id(&rxe[0], 0);
    let target_conf = format!(
        "[target]\nname = \"smoke\"\nnode_guid = \"0x0002c90300c0ff00\"\ncontrol_socket = \"/tmp/t/target.sock\"\n\
         state_dir = \"/tmp/t/state\"\nrdma_cm_port = 5556\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{ip}\"\nprovider = \"rdma-core\"\n\n\
         [[lun]]\nname = \"ram\"\nram = true\nsize = \"64MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x{ioc}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"ram\" }}\nallow = [\"{allow}\"]\n",
        ioc = OURS_IOC[0]
    );
    let conf = write_share(&guest, "smoke-target.toml", &target_conf).expect("target.toml");
    guest
        .run_ok("mkdir -p /tmp/t /tmp/h/disks && modprobe fuse", T)
        .expect("dirs");
    let target = GuestDaemon::start(&guest, "target", &["target", "run", "-c", &conf])
        .expect("start the target");
    target
        .wait_for_log(&guest, "control socket", Duration::from_secs(60))
        .expect("target up");
    let login = SrpLogin::with_ids("rxe0", OURS_IOC[0], OURS_IOC[0], &format!("{ip}:5556"));
    let session = srp_login(&guest, &login).expect("Linux ib_srp logs in to our rdma-core target");
    let disk = session.disks.first().expect("a disk").clone();
    Fio::new(&disk.block, "randwrite", "4k-256k", "16M")
        .run(&guest, Duration::from_secs(600))
        .expect("16 MiB written and verified through our target");
    srp_logout(&guest, &session).expect("logout");
    eprintln!(
        "smoke C: ib_srp -> ours over rdma-core verified; {:?}",
        t0.elapsed()
    );

    let host_conf = format!(
        "[host]\nname = \"smoke\"\nnode_guid = \"0x{HOST_GUID}\"\nprovider = \"rdma-core\"\n\
         disks_dir = \"/tmp/h/disks\"\ncontrol_socket = \"/tmp/h/host.sock\"\n\
         login = \"rdma-cm\"\nlogin_timeout = \"10s\"\nsweep_interval = \"2s\"\n\n\
         [[portal]]\naddress = \"{ip}\"\nlocal = [\"{ip}\"]\n\n\
         [[portal.target]]\nid_ext = \"0x{id}\"\nioc_guid = \"0x{ioc}\"\n",
        id = lio.id_ext,
        ioc = lio.ioc_guid
    );
    let conf = write_share(&guest, "smoke-host.toml", &host_conf).expect("host.toml");
    let host =
        GuestDaemon::start(&guest, "host", &["host", "run", "-c", &conf]).expect("start the host");
    host.wait_for_log(&guest, "control socket", Duration::from_secs(90))
        .expect("host up");
    let end = Instant::now() + Duration::from_secs(90);
    let (file, fencing) = loop {
        let out = in_guest::srpctl(
            &guest,
            &["sessions", "--json", "--socket", "/tmp/h/host.sock"],
        )
        .expect("sessions");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        let disks = in_guest::srpctl(&guest, &["disks", "--json", "--socket", "/tmp/h/host.sock"])
            .expect("disks");
        let d: serde_json::Value = serde_json::from_str(&disks).expect("json");
        if let Some(p) = d[0]["path"].as_str().filter(|p| !p.is_empty()) {
            break (
                p.to_owned(),
                v[0]["fencing"].as_str().unwrap_or("").to_owned(),
            );
        }
        assert!(
            Instant::now() < end,
            "no disk: {out}\n{disks}\n{}",
            host.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(fencing.contains("memory windows"), "fencing {fencing:?}");
    Fio::new(&file, "randwrite", "4k-256k", "16M")
        .run(&guest, Duration::from_secs(600))
        .expect("16 MiB written and verified through our host's block file");
    drop((target, host));
    guest.shutdown().expect("shutdown");
    eprintln!(
        "smoke C: both directions over rdma-core; {:?}",
        t0.elapsed()
    );
}
