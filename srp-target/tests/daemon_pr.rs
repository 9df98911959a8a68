//! Issue #5 acceptance over the wire: two initiators, each logged in to a different IOC of
//! the running daemon, share one LUN. Its identity (VPD 83h NAA) is the same through both
//! IOCs, and persistent reservations conflict per SPC-4: a Write Exclusive holder writes,
//! the other initiator's writes get RESERVATION CONFLICT while its reads succeed, and a
//! PREEMPT moves the reservation and removes the loser's registration. Loopback
//! 127.0.105.x only.

mod common;
mod host;

use common::{TempDir, read10, write10};
use hca::Guid;
use host::{Ep, Host, ib_form, login_req};
use scsi::Status;
use srp::wire::login::MultiChannelAction;
use srp::wire::{IoClass, PortId};
use srp_target::config::{IocConfig, TargetConfig};
use srp_target::daemon::{Daemon, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};

const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 105, 1));
const HOST_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 105, 2));
const HOST_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 105, 3));
const GUID_A: u64 = 0x0002_c903_00aa_0001;
const GUID_B: u64 = 0x0002_c903_00bb_0001;

const REGISTER: u8 = 0x00;
const RESERVE: u8 = 0x01;
const PREEMPT: u8 = 0x04;
const WRITE_EXCLUSIVE: u8 = 0x1;

fn config_text(dir: &TempDir) -> String {
    format!(
        "[target]\nnode_guid = \"0x0002c90300c0c000\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{TARGET}\"\n\n\
         [[lun]]\nname = \"shared\"\nfile = \"{}\"\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300c0c001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"shared\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300c0c002\"\nports = [\"p0\"]\n\
         exports = {{ 3 = \"shared\" }}\nallow = [\"any\"]\n",
        dir.path().join("shared.img").display()
    )
}

/// A host with its own GUID logged in to `ioc` (IB CM form).
fn log_in(local: IpAddr, guid: u64, ioc: &IocConfig) -> (Host, Ep) {
    let mut host = Host::open_as(local, TARGET, guid);
    let ep = host.ep(0);
    let me = PortId::new(0, Guid(guid), IoClass::SrpR16a);
    let req = login_req(me, ioc.target_port_id(), MultiChannelAction::Single);
    host.login(&ep, ioc.service_id, ib_form(&req))
        .unwrap_or_else(|code| panic!("login rejected: {code:#x}"));
    (host, ep)
}

/// PERSISTENT RESERVE OUT: `action` with `key` and `sa_key`, reservation type `kind`.
fn pr_out(action: u8, kind: u8, key: u64, sa_key: u64) -> ([u8; 10], Vec<u8>) {
    let cdb = [0x5f, action, kind, 0, 0, 0, 0, 0, 24, 0];
    let mut params = vec![0u8; 24];
    params[..8].copy_from_slice(&key.to_be_bytes());
    params[8..16].copy_from_slice(&sa_key.to_be_bytes());
    (cdb, params)
}

struct Node {
    host: Host,
    ep: Ep,
    lun: u32,
    tag: u64,
}

impl Node {
    fn run(&mut self, cdb: &[u8], data_out: &[u8], data_in: u32) -> (Status, Vec<u8>) {
        self.tag += 1;
        self.host
            .command(&self.ep, self.tag, self.lun, cdb, data_out, data_in)
    }

    fn pr(&mut self, action: u8, kind: u8, key: u64, sa_key: u64) -> Status {
        let (cdb, params) = pr_out(action, kind, key, sa_key);
        self.run(&cdb, &params, 0).0
    }

    fn write(&mut self) -> Status {
        self.run(&write10(16, 1, false), &[0x5a; 512], 0).0
    }

    fn read(&mut self) -> Status {
        self.run(&read10(16, 1), &[], 512).0
    }

    /// The NAA designator of VPD page 83h (the LUN's own first designator).
    fn naa(&mut self) -> Vec<u8> {
        let (st, page) = self.run(&[0x12, 1, 0x83, 0, 255, 0], &[], 255);
        assert_eq!(st, Status::Good);
        assert_eq!(page[4 + 1] & 0x0f, 3, "designator type NAA");
        page[8..24].to_vec()
    }
}

#[test]
fn two_initiators_two_iocs_one_lun_identity_and_reservations() {
    let dir = TempDir::new("daemon-pr");
    let text = config_text(&dir);
    let config = TargetConfig::from_str(&text, "pr.toml")
        .expect("valid")
        .config;
    let mut options = DaemonOptions::default();
    options.limits.window = 8;
    options.limits.max_transfer = 64 << 10;
    options.limits.max_table_entries = 16;
    let daemon = Daemon::start(config.clone(), options).expect("daemon starts");

    let (host, ep) = log_in(HOST_A, GUID_A, &config.iocs[0]);
    let mut a = Node {
        host,
        ep,
        lun: 0,
        tag: 0,
    };
    let (host, ep) = log_in(HOST_B, GUID_B, &config.iocs[1]);
    let mut b = Node {
        host,
        ep,
        lun: 3,
        tag: 0,
    };

    // One LUN, one identity, whichever IOC and LUN number it is reached through.
    let naa = a.naa();
    assert_eq!(naa[0] >> 4, 6, "NAA 6");
    assert_eq!(naa, b.naa());

    // A registers and takes Write Exclusive; B registers too.
    assert_eq!(a.pr(REGISTER, 0, 0, 0xaaaa), Status::Good);
    assert_eq!(b.pr(REGISTER, 0, 0, 0xbbbb), Status::Good);
    assert_eq!(a.pr(RESERVE, WRITE_EXCLUSIVE, 0xaaaa, 0), Status::Good);
    assert_eq!(a.write(), Status::Good, "the holder writes");
    assert_eq!(
        b.write(),
        Status::ReservationConflict,
        "others may not write"
    );
    assert_eq!(b.read(), Status::Good, "Write Exclusive lets others read");
    // RESERVE with a key that is not B's own registration conflicts.
    assert_eq!(
        b.pr(RESERVE, WRITE_EXCLUSIVE, 0xaaaa, 0),
        Status::ReservationConflict
    );

    // B preempts A: B holds the reservation, A's registration is gone.
    assert_eq!(b.pr(PREEMPT, WRITE_EXCLUSIVE, 0xbbbb, 0xaaaa), Status::Good);
    assert_eq!(b.write(), Status::Good, "the new holder writes");
    // A's next command reports the unit attention REGISTRATIONS PREEMPTED (6/2A/05, checked
    // in daemon_preempt) and clears it.
    assert_eq!(a.write(), Status::CheckCondition);
    assert_eq!(a.write(), Status::ReservationConflict);
    assert_eq!(
        a.pr(RESERVE, WRITE_EXCLUSIVE, 0xaaaa, 0),
        Status::ReservationConflict,
        "A's key was removed"
    );

    // READ KEYS (PERSISTENT RESERVE IN, service action 0) through A's IOC lists B's key only.
    let (st, keys) = a.run(&[0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0], &[], 64);
    assert_eq!(st, Status::Good);
    let len = u32::from_be_bytes([keys[4], keys[5], keys[6], keys[7]]);
    assert_eq!(len, 8, "one registration left");
    assert_eq!(&keys[8..16], &0xbbbbu64.to_be_bytes());

    drop(daemon.shutdown());
}
