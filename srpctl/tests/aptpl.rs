//! Issue #14 acceptance: persistent reservations made with APTPL=1 survive `kill -9` of the
//! target process and a restart — a Windows failover cluster's arbitration sequence (each
//! node registers its key, one reserves Write Exclusive – Registrants Only, the challenger
//! preempts), the target killed after each step that matters, the state read back through
//! the restarted target and enforced on writes. A REGISTER with APTPL=0 then drops
//! persistence: after the next kill the reservations are gone.
//!
//! The target is the real `srpctl target run` process with its state directory in the test's
//! temp dir; the initiators are the access-layer test host shared with srp-target's daemon
//! tests, two nodes on 127.0.118.2/.3 (each logs in from its own address). Killed and
//! cleaned up even on failure.

#[path = "../../srp-target/tests/common/mod.rs"]
mod common;
#[path = "../../srp-target/tests/host/mod.rs"]
mod host;
mod process;

use common::pr::{PREEMPT, REGISTER, REGISTER_IGNORE, RESERVE};
use common::{TempDir, pr_out, write10};
use hca::Guid;
use host::{HOST_GUID, Host, ib_form, login_req};
use process::TargetProcess;
use scsi::Status;
use srp::wire::login::MultiChannelAction;
use srp::wire::{IoClass, PortId};
use srp_target::config::TargetConfig;
use std::net::{IpAddr, Ipv4Addr};

const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 118, 1));
/// Write Exclusive – Registrants Only: what Windows failover clustering reserves.
const WERO: u8 = 0x5;
const APTPL: u8 = 0x01;
const KEY_A: u64 = 0x0000_0001_cafe_0001;
const KEY_B: u64 = 0x0000_0002_cafe_0002;

/// One cluster node: its own address and initiator port ID, logged in to the IOC.
struct ClusterNode {
    host: Host,
    ep: host::Ep,
    tag: u64,
}

impl ClusterNode {
    fn log_in(config: &TargetConfig, n: u8) -> ClusterNode {
        let ioc = &config.iocs[0];
        let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 118, 1 + n));
        let mut host = Host::open_as(ip, TARGET, HOST_GUID + u64::from(n));
        let ep = host.ep(0);
        let me = PortId::new(0, Guid(HOST_GUID + u64::from(n)), IoClass::SrpR16a);
        let req = login_req(me, ioc.target_port_id(), MultiChannelAction::Single);
        host.login(&ep, ioc.service_id, ib_form(&req))
            .unwrap_or_else(|code| panic!("node {n}: login rejected: {code:#x}"));
        ClusterNode { host, ep, tag: 1 }
    }

    fn run(&mut self, cdb: &[u8], dout: &[u8], din: u32) -> (Status, Vec<u8>) {
        self.tag += 1;
        self.host.command(&self.ep, self.tag, 0, cdb, dout, din)
    }

    fn pr_out(&mut self, sa: u8, ty: u8, key: u64, sa_key: u64, flags: u8) -> Status {
        let (cdb, list) = pr_out(sa, ty, key, sa_key, flags);
        self.run(&cdb, &list, 0).0
    }

    /// PERSISTENT RESERVE IN READ KEYS: (generation, keys).
    fn keys(&mut self) -> (u32, Vec<u64>) {
        let (st, d) = self.run(&[0x5e, 0, 0, 0, 0, 0, 0, 1, 0, 0], &[], 256);
        assert_eq!(st, Status::Good, "READ KEYS");
        let len = u32::from_be_bytes([d[4], d[5], d[6], d[7]]) as usize;
        let keys = d[8..8 + len]
            .chunks(8)
            .map(|k| u64::from_be_bytes(k.try_into().expect("8")))
            .collect();
        (u32::from_be_bytes([d[0], d[1], d[2], d[3]]), keys)
    }

    /// READ RESERVATION: (holder's key, type), if reserved.
    fn reservation(&mut self) -> Option<(u64, u8)> {
        let (st, d) = self.run(&[0x5e, 1, 0, 0, 0, 0, 0, 1, 0, 0], &[], 256);
        assert_eq!(st, Status::Good, "READ RESERVATION");
        let len = u32::from_be_bytes([d[4], d[5], d[6], d[7]]);
        (len >= 16).then(|| {
            (
                u64::from_be_bytes(d[8..16].try_into().expect("8")),
                d[21] & 0x0f,
            )
        })
    }

    /// REPORT CAPABILITIES: (PTPL_C, PTPL_A).
    fn ptpl(&mut self) -> (bool, bool) {
        let (st, d) = self.run(&[0x5e, 2, 0, 0, 0, 0, 0, 0, 8, 0], &[], 8);
        assert_eq!(st, Status::Good, "REPORT CAPABILITIES");
        (d[2] & 0x01 != 0, d[3] & 0x01 != 0)
    }

    fn write(&mut self) -> Status {
        self.run(&write10(8, 1, false), &[0x5a; 512], 0).0
    }
}

#[test]
fn aptpl_reservations_survive_kill_9_and_restart() {
    let dir = TempDir::new("aptpl");
    let cfg_path = dir.path().join("target.toml");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d1a000\"\ncontrol_socket = \"{}\"\n\
         state_dir = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{TARGET}\"\n\n\
         [[lun]]\nname = \"quorum\"\nfile = \"{}\"\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d1a001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"quorum\" }}\nallow = [\"any\"]\n",
        dir.path().join("ctl.sock").display(),
        dir.path().join("state").display(),
        dir.path().join("quorum.img").display()
    );
    std::fs::write(&cfg_path, &text).expect("write config");
    let config = TargetConfig::from_str(&text, "target.toml")
        .expect("valid")
        .config;
    let state_file = dir.path().join("state").join("lun-quorum.pr");

    // Both nodes register (APTPL=1, as the cluster asks); node A reserves.
    let target = TargetProcess::start(&cfg_path);
    {
        let mut a = ClusterNode::log_in(&config, 1);
        let mut b = ClusterNode::log_in(&config, 2);
        assert_eq!(a.ptpl(), (true, false), "PTPL_C, not yet activated");
        assert_eq!(a.pr_out(REGISTER_IGNORE, 0, 0, KEY_A, APTPL), Status::Good);
        assert_eq!(b.pr_out(REGISTER_IGNORE, 0, 0, KEY_B, APTPL), Status::Good);
        assert_eq!(a.pr_out(RESERVE, WERO, KEY_A, 0, 0), Status::Good);
        assert_eq!(a.ptpl(), (true, true), "PTPL_A");
        assert!(state_file.exists(), "saved before GOOD");
    }
    target.kill9();

    // Restarted: the keys, the holder and the type are back, and enforced.
    let target = TargetProcess::start(&cfg_path);
    {
        let mut a = ClusterNode::log_in(&config, 1);
        let mut b = ClusterNode::log_in(&config, 2);
        let mut outsider = ClusterNode::log_in(&config, 3);
        let (generation, keys) = a.keys();
        assert_eq!(keys, vec![KEY_A, KEY_B]);
        assert_eq!(generation, 2, "two registrations; RESERVE does not count");
        assert_eq!(a.reservation(), Some((KEY_A, WERO)));
        assert_eq!(b.write(), Status::Good, "a registrant writes under WERO");
        assert_eq!(outsider.write(), Status::ReservationConflict);
        // The challenger preempts the holder (a cluster failover).
        assert_eq!(b.pr_out(PREEMPT, WERO, KEY_B, KEY_A, 0), Status::Good);
    }
    target.kill9();

    let target = TargetProcess::start(&cfg_path);
    {
        let mut b = ClusterNode::log_in(&config, 2);
        let (_, keys) = b.keys();
        assert_eq!(keys, vec![KEY_B], "A's registration was preempted");
        assert_eq!(b.reservation(), Some((KEY_B, WERO)));
        // A REGISTER with APTPL=0 deactivates persistence: the file goes.
        assert_eq!(b.pr_out(REGISTER, 0, KEY_B, KEY_B, 0), Status::Good);
        assert_eq!(b.ptpl(), (true, false));
        assert!(!state_file.exists(), "persistence deactivated");
    }
    target.kill9();

    let _target = TargetProcess::start(&cfg_path);
    let mut b = ClusterNode::log_in(&config, 2);
    assert_eq!(b.keys().1, Vec::<u64>::new(), "not persisted any more");
    assert_eq!(b.reservation(), None);
}
