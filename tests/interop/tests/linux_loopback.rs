//! Linux with itself, none of the project's code: the guest's ib_srp logs in over RDMA-CM to
//! the guest's own ib_srpt (LIO) on its own IP over soft-RoCE, the disk answers sg_inq and
//! sg_readcap, 16 MiB of fio write+verify pass, and the session logs out; an initiator
//! without an ACL is refused and the error carries the kernel's reason.
//! Opt-in: `SRP_INTEROP=1` (tests/interop/README.md).

use srp_interop::linux::{
    Backstore, SrpLogin, SrptConfig, linux_initiator_port_id, setup_lio_srpt, setup_rxe, srp_login,
    srp_logout,
};
use srp_interop::{Error, Guest, GuestConfig, NetNs, Watchdog, skip_unless_enabled};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(120);

#[test]
fn linux_srp_logs_in_to_linux_srpt_over_rdma_cm() {
    skip_unless_enabled!();
    let _watchdog = Watchdog::new("linux_loopback", Duration::from_secs(900));
    let t0 = Instant::now();
    let ns = NetNs::new().expect("namespace");
    let guest = Guest::boot(GuestConfig::new(&ns)).expect("boot");
    eprintln!("boot: {:?}", guest.boot_time());

    let t = Instant::now();
    let rxe = setup_rxe(&guest).expect("rxe").remove(0);
    eprintln!("rxe: {:?} ({:?})", rxe, t.elapsed());
    assert_eq!(rxe.name, "rxe0");
    // rxe's node GUID is the MAC's EUI-64.
    assert_eq!(rxe.node_guid, "5054:00ff:fe77:0001");
    assert_eq!(rxe.gid0, "fe80:0000:0000:0000:5054:00ff:fe77:0001");

    let t = Instant::now();
    let initiator = linux_initiator_port_id(&rxe, 0);
    assert_eq!(initiator, "0x0000000000000000505400fffe770001");
    let target = setup_lio_srpt(
        &guest,
        &SrptConfig::new(
            std::slice::from_ref(&rxe),
            vec![Backstore::Ramdisk { mib: 64 }],
            vec![initiator],
        ),
    )
    .expect("LIO + ib_srpt");
    eprintln!("target: {target:?} ({:?})", t.elapsed());
    assert_eq!(target.service_guid, "505400fffe770001");

    let t = Instant::now();
    let login = SrpLogin::new("rxe0", &target, rxe.ip);
    let session = srp_login(&guest, &login).expect("login");
    eprintln!("login: {session:?} ({:?})", t.elapsed());
    assert_eq!(session.disks.len(), 1);
    let disk = &session.disks[0];
    assert_eq!(disk.lun, 0);

    let inq = guest
        .run_ok(&format!("sg_inq {}", disk.sg), T)
        .expect("sg_inq");
    assert!(inq.contains("LIO-ORG"), "{inq}");
    assert!(inq.contains("RAMDISK-MCP"), "{inq}");
    let cap = guest
        .run_ok(&format!("sg_readcap {}", disk.sg), T)
        .expect("sg_readcap");
    // 64 MiB of 512-byte blocks.
    assert!(cap.contains("Last LBA=131071"), "{cap}");
    assert!(cap.contains("Logical block length=512"), "{cap}");

    let t = Instant::now();
    let fio = guest
        .run_ok(
            &format!(
                "fio --name=verify --filename={} --rw=write --bs=64k --size=16M \
                 --ioengine=libaio --iodepth=8 --direct=1 --verify=crc32c --do_verify=1 \
                 --verify_fatal=1 --output-format=terse --terse-version=3",
                disk.block
            ),
            Duration::from_secs(300),
        )
        .expect("fio write+verify");
    eprintln!("fio 16 MiB write+verify: {:?}", t.elapsed());
    // terse v3: field 5 is the error count.
    let err_field = fio.split(';').nth(4).unwrap_or("?");
    assert_eq!(err_field, "0", "{fio}");

    srp_logout(&guest, &session).expect("logout");
    let left = guest
        .run_ok(
            &format!(
                "if [ -e /sys/class/scsi_host/host{} ] || [ -e {} ]; then echo still; fi",
                session.host_no, disk.block
            ),
            T,
        )
        .expect("after logout");
    assert!(!left.contains("still"), "{left}");

    // Another initiator port ID (initiator_ext=1) has no ACL: refused, with the reason.
    let mut stranger = SrpLogin::new("rxe0", &target, rxe.ip);
    stranger
        .options
        .push("initiator_ext=0000000000000001".into());
    stranger.timeout = Duration::from_secs(30);
    match srp_login(&guest, &stranger) {
        Err(Error::Login { reason, dmesg }) => {
            eprintln!("refused as expected: {reason}\n{dmesg}");
            assert!(dmesg.contains("ib_srpt"), "{dmesg}");
        }
        other => panic!("a login without an ACL must fail: {other:?}"),
    }

    guest.shutdown().expect("shutdown");
    eprintln!("whole test: {:?}", t0.elapsed());
}
