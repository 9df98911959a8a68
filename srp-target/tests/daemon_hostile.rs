//! Hostile initiators against the running daemon. Each breaks the protocol on its own
//! channel and loses that channel only: a truncated SRP_CMD, an empty IU, an unknown IU
//! type, an SRP_LOGIN_REQ on a live channel, a spurious SRP_CRED_RSP, immediate data that
//! was not negotiated, a tag reused while in flight, more requests than credits (each an
//! SRP_T_LOGOUT with the documented reason); an IU longer than negotiated, a descriptor
//! with a bad rkey or running past the initiator's region, an initiator that vanishes
//! mid-transfer (its QP destroyed, or its whole host dropped) (the channel closed). The
//! daemon reports each channel's Logout, and a well-behaved initiator logged in all along
//! keeps doing verified WRITE/READ. Refused logins (bad IU lengths, unknown target port,
//! unsupported formats, no login at all, the nexus's channel limit) cost nothing. Then
//! 1000 hostile rounds, each a fresh login, leave the daemon's HCA resources and session
//! count where they were. Loopback 127.0.117.x only.

mod common;
mod host;

use access_layer::mad::cm::RdmaPortSpace;
use common::{TempDir, pattern, read10, write10};
use hca::Guid;
use hca::ids::Rkey;
use host::node::{Form, In, Node, Out, await_event, await_logout, request};
use host::{IOVA, MEM};
use srp::wire::cred::CredRsp;
use srp::wire::desc::{DataDesc, DirectBuf};
use srp::wire::login::{BufFormats, LoginReq, MultiChannelAction};
use srp::wire::logout::{ILogout, TLogout, TLogoutReason};
use srp::wire::{IoClass, IuType, PortId, Tag};
use srp_target::config::TargetConfig;
use srp_target::control::{ControlAnswer, ControlRequest};
use srp_target::daemon::{Daemon, DaemonEvent, DaemonOptions};
use srp_target::login::ChannelId;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use wirekit::WireRepr;

const WINDOW: u32 = 4;
/// The IU length every hostile login negotiates (the host's default request).
const IT_IU_LEN: usize = 1024;
/// How long the target may take to notice a vanished initiator (RC retries: 8 × ~67 ms
/// with the CM's ack timeout 14).
const VANISH_DEADLINE: Duration = Duration::from_secs(10);

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 117, host))
}

/// One way to break a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// An SRP_CMD cut to 10 bytes: T_LOGOUT "invalid IU length".
    Truncated,
    /// IU type 0x7f: T_LOGOUT "invalid IU type".
    UnknownType,
    /// One byte over the negotiated IU length: the receive fails, the channel closes.
    Oversized,
    /// More SRP_CMDs at once than credits granted: T_LOGOUT "no reason".
    CreditOverrun,
    /// A data-out descriptor under an rkey never issued: the RDMA READ is NAKed.
    BadRkey,
    /// A data-in descriptor running past the initiator's region: the RDMA WRITE is NAKed.
    PastRegion,
    /// A SEND of no bytes at all: T_LOGOUT "invalid IU length".
    Empty,
    /// An SRP_LOGIN_REQ on a live channel: T_LOGOUT "invalid IU type".
    LoginOnChannel,
    /// An SRP_CRED_RSP answering no SRP_CRED_REQ: T_LOGOUT "spurious response".
    SpuriousCredRsp,
    /// Immediate data on a channel that did not negotiate it: T_LOGOUT.
    ImmediateNotNegotiated,
    /// A tag reused while its 256 KiB WRITE is still in flight: T_LOGOUT "no reason".
    DuplicateTag,
    /// A 256 KiB WRITE, then the initiator's QP is destroyed.
    Vanish,
}

const KINDS: [Kind; 11] = [
    Kind::Truncated,
    Kind::UnknownType,
    Kind::Oversized,
    Kind::CreditOverrun,
    Kind::BadRkey,
    Kind::PastRegion,
    Kind::Empty,
    Kind::LoginOnChannel,
    Kind::SpuriousCredRsp,
    Kind::ImmediateNotNegotiated,
    Kind::DuplicateTag,
];

struct Rig {
    daemon: Daemon,
    config: TargetConfig,
    good: Node,
    seen: Vec<DaemonEvent>,
    t: u8,
    _dir: TempDir,
}

/// A daemon at 127.0.117.`t` (RAM LUN 0, file LUN 1) and the well-behaved node at `t`+1.
/// Its IOC lets a nexus have channels from several addresses (`nexus_from_any_address`):
/// the hostile nodes here fill one nexus from four addresses to reach its channel limit;
/// the one-address rule has its own test (`daemon_identity.rs`).
fn rig(t: u8) -> Rig {
    let dir = TempDir::new("daemon-hostile");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d7c700\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"ram\"\nram = true\nsize = \"1MiB\"\n\n\
         [[lun]]\nname = \"file\"\nfile = \"{}\"\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d7c701\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"ram\", 1 = \"file\" }}\nallow = [\"any\"]\n\
         nexus_from_any_address = true\n",
        ip(t),
        dir.path().join("file.img").display(),
    );
    let config = TargetConfig::from_str(&text, "hostile.toml")
        .expect("config valid")
        .config;
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = WINDOW;
    options.limits.max_transfer = 256 << 10;
    options.limits.max_table_entries = 16;
    options.limits.max_channels_per_nexus = 4;
    options.shutdown_step = Duration::from_millis(300);
    let daemon = Daemon::start(config.clone(), options).expect("daemon starts");
    let good = Node::open(ip(t + 1), ip(t), 0xd001, &config.iocs[0], Form::IbCm, false);
    let mut seen = Vec::new();
    await_event(&daemon, &mut seen, |e| {
        matches!(e, DaemonEvent::Login { initiator, .. } if *initiator == good.me).then_some(())
    });
    Rig {
        daemon,
        config,
        good,
        seen,
        t,
        _dir: dir,
    }
}

impl Rig {
    /// A hostile host at 127.0.117.(`t` + `k`) with node GUID `guid`, logged in.
    fn hostile(&mut self, k: u8, guid: u64) -> (Node, ChannelId) {
        let (t, ioc) = (self.t, &self.config.iocs[0]);
        let node = Node::open(ip(t + k), ip(t), guid, ioc, Form::IbCm, false);
        let ch = self.login_of(&node);
        (node, ch)
    }

    /// The channel of `node`'s newest login.
    fn login_of(&mut self, node: &Node) -> ChannelId {
        await_event(&self.daemon, &mut self.seen, |e| match e {
            DaemonEvent::Login {
                channel, initiator, ..
            } if *initiator == node.me => Some(*channel),
            _ => None,
        })
    }

    /// The well-behaved node writes and reads back, on both LUNs.
    fn still_serves(&mut self, seed: u8) {
        self.good.write_read(0, 16, seed);
        self.good.write_read(1, 16, seed.wrapping_add(1));
    }

    fn live_sessions(&self) -> usize {
        match self.daemon.control().call(ControlRequest::ListSessions) {
            Ok(ControlAnswer::Sessions(s)) => s.len(),
            other => panic!("ListSessions: {other:?}"),
        }
    }
}

/// Does `kind` to `node`'s channel; returns the T_LOGOUT reason the host saw, if one came.
fn attack(node: &mut Node, kind: Kind) -> Option<TLogoutReason> {
    let tag = node.next_tag();
    let tur = |node: &Node, tag| node.cmd(tag, 0, &[0; 6], Out::None, In::None).0;
    match kind {
        Kind::Truncated => {
            let mut iu = tur(node, tag);
            iu.truncate(10);
            node.host.send(&node.ep, &iu);
        }
        Kind::UnknownType => node.host.send(&node.ep, &[0x7f; 64]),
        Kind::Oversized => node
            .host
            .send(&node.ep, &vec![u8::from(IuType::Cmd); IT_IU_LEN + 1]),
        Kind::Empty => node.host.send(&node.ep, &[]),
        Kind::LoginOnChannel => {
            let req = host::login_req(node.me, node.me, MultiChannelAction::Multi);
            node.host.send(&node.ep, &host::ib_form(&req));
        }
        Kind::SpuriousCredRsp => {
            let rsp = CredRsp { tag: Tag(tag) };
            let mut buf = vec![0u8; rsp.buffer_len()];
            rsp.emit(&mut buf).expect("fits");
            node.host.send(&node.ep, &buf);
        }
        Kind::ImmediateNotNegotiated => {
            let data = pattern(512, 1);
            let (iu, _) = node.cmd(tag, 0, &write10(0, 1, false), Out::Imm(&data), In::None);
            node.host.send(&node.ep, &iu);
        }
        Kind::DuplicateTag => {
            let data = pattern(256 << 10, 2);
            let ius = [
                node.cmd(
                    tag,
                    0,
                    &write10(0, 512, false),
                    Out::Direct(&data),
                    In::None,
                )
                .0,
                tur(node, tag),
            ];
            node.send_all(&ius);
        }
        Kind::CreditOverrun => {
            let n = 4 * node.rsp.req_lim_delta as usize + 1;
            let ius: Vec<Vec<u8>> = (0..n as u64).map(|k| tur(node, tag + 100 + k)).collect();
            node.send_all(&ius);
        }
        Kind::BadRkey | Kind::PastRegion | Kind::Vanish => {
            let (cdb, len) = match kind {
                Kind::Vanish => (write10(0, 512, false), 256 << 10),
                Kind::BadRkey => (write10(0, 8, false), 4096),
                _ => (read10(0, 8), 4096),
            };
            let good = node.host.buf(&node.ep, host::node::OUT, len);
            let desc = match kind {
                Kind::BadRkey => DirectBuf::new(good.va(), Rkey(good.rkey().0 ^ 0x5a5a_0000), len),
                Kind::PastRegion => DirectBuf::new(IOVA + MEM as u64 - 1024, good.rkey(), len),
                _ => good,
            };
            let (out, into) = match kind {
                Kind::PastRegion => (DataDesc::None, DataDesc::Direct(desc)),
                _ => (DataDesc::Direct(desc), DataDesc::None),
            };
            node.write(host::node::OUT, &pattern(len as usize, 0x66));
            node.host
                .send(&node.ep, &host::cmd_iu(tag, 0, &cdb, out, into));
            if kind == Kind::Vanish {
                node.destroy(&node.ep);
                return None;
            }
        }
    }
    // Read what comes back until a T_LOGOUT or a failed completion (SRP_RSPs to the
    // credited part of an overrun come first).
    let end = Instant::now() + host::DEADLINE;
    while Instant::now() < end {
        match node.next_event(Duration::from_millis(100)) {
            Some(Ok(iu)) if iu.first() == Some(&u8::from(IuType::TLogout)) => {
                return Some(TLogout::parse(&iu).expect("T_LOGOUT").reason);
            }
            Some(Ok(iu)) => assert_eq!(iu[0], u8::from(IuType::Rsp), "{kind:?}: {iu:02x?}"),
            Some(Err(_)) => return None,
            None => {}
        }
    }
    None
}

/// What the host must see, and what the daemon's Logout reason must say.
fn expected(kind: Kind) -> (Option<TLogoutReason>, &'static str) {
    match kind {
        Kind::Truncated => (Some(TLogoutReason::InvalidIuLength), "malformed"),
        Kind::UnknownType => (Some(TLogoutReason::InvalidIuType), "IU type 0x7f"),
        Kind::CreditOverrun => (Some(TLogoutReason::NoReason), "credit"),
        Kind::Oversized => (None, "Recv"),
        Kind::Empty => (Some(TLogoutReason::InvalidIuLength), "malformed"),
        Kind::LoginOnChannel => (Some(TLogoutReason::InvalidIuType), "IU type 0x00"),
        Kind::SpuriousCredRsp => (
            Some(TLogoutReason::SpuriousResponse),
            "spurious SRP_CRED_RSP",
        ),
        Kind::ImmediateNotNegotiated => {
            (Some(TLogoutReason::UnsupportedDataOutFormat), "immediate")
        }
        Kind::DuplicateTag => (Some(TLogoutReason::NoReason), "tag"),
        Kind::BadRkey | Kind::PastRegion => (None, "RemAccessErr"),
        Kind::Vanish => (None, "Retry"),
    }
}

/// One hostile event on `node`'s channel `ch`: the host sees what it must, the daemon
/// reports the channel's Logout with the matching reason.
fn hostile_event(r: &mut Rig, node: &mut Node, ch: ChannelId, kind: Kind) {
    let (logout, says) = expected(kind);
    let got = attack(node, kind);
    assert_eq!(got, logout, "{kind:?}: what the initiator saw");
    let reason = await_logout(&r.daemon, &mut r.seen, ch);
    assert!(reason.contains(says), "{kind:?}: logout reason {reason:?}");
}

#[test]
fn each_hostile_initiator_loses_its_own_channel_only() {
    let mut r = rig(1);
    let (mut bad, mut ch) = r.hostile(2, 0xe001);
    let ioc = r.config.iocs[0].clone();
    for (k, kind) in KINDS.into_iter().enumerate() {
        if k > 0 {
            bad.relogin(
                k as u64 % 4,
                &ioc,
                Form::IbCm,
                &request(bad.me, &ioc, false),
            )
            .expect("hostile login accepted");
            ch = r.login_of(&bad);
        }
        hostile_event(&mut r, &mut bad, ch, kind);
        r.still_serves(k as u8);
    }
}

#[test]
fn an_initiator_vanishing_mid_transfer_is_closed() {
    let mut r = rig(11);
    // Its QP destroyed right after a 256 KiB WRITE went out.
    let (mut bad, ch) = r.hostile(2, 0xe002);
    let start = Instant::now();
    assert_eq!(attack(&mut bad, Kind::Vanish), None);
    let reason = await_logout_within(&mut r, ch, VANISH_DEADLINE);
    eprintln!("QP destroyed: closed after {:?}: {reason}", start.elapsed());
    r.still_serves(1);
    // The whole host (HCA, sockets) dropped right after the WRITE went out.
    let (mut gone, ch) = r.hostile(3, 0xe003);
    let tag = gone.next_tag();
    let data = pattern(256 << 10, 9);
    let (iu, _) = gone.cmd(
        tag,
        1,
        &write10(0, 512, false),
        Out::Direct(&data),
        In::None,
    );
    gone.host.send(&gone.ep, &iu);
    drop(gone);
    let start = Instant::now();
    let reason = await_logout_within(&mut r, ch, VANISH_DEADLINE);
    eprintln!("host dropped: closed after {:?}: {reason}", start.elapsed());
    r.still_serves(2);
    assert_eq!(
        r.live_sessions(),
        1,
        "only the well-behaved session is left"
    );
}

fn await_logout_within(r: &mut Rig, ch: ChannelId, wait: Duration) -> String {
    let end = Instant::now() + wait;
    loop {
        // await_logout has its own deadline; go round until ours.
        let left = end.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "channel {ch} not closed within {wait:?}: {:?}",
            r.seen
        );
        if let Some(DaemonEvent::Logout { reason, .. }) = r
            .daemon
            .events()
            .recv_timeout(left.min(Duration::from_millis(100)))
            .ok()
            .inspect(|e| r.seen.push(e.clone()))
            .filter(|e| matches!(e, DaemonEvent::Logout { channel, .. } if *channel == ch))
        {
            return reason;
        }
    }
}

#[test]
fn a_thousand_hostile_events_leak_nothing() {
    let mut r = rig(21);
    let ioc = r.config.iocs[0].clone();
    let baseline = r.daemon.resources().expect("resources");
    assert_eq!(r.live_sessions(), 1);
    let (mut bad, mut ch) = r.hostile(2, 0xe004);
    // A live channel holds one QP, one CQ and one memory region on the daemon's device:
    // the comparison below would see one left behind.
    let one = r.daemon.resources().expect("resources");
    assert_eq!(
        (one[0].qps, one[0].cqs, one[0].mrs),
        (
            baseline[0].qps + 1,
            baseline[0].cqs + 1,
            baseline[0].mrs + 1
        ),
        "{one:?} vs {baseline:?}"
    );
    let req = request(bad.me, &ioc, false);
    let start = Instant::now();
    // Time spent per kind (the six of KINDS, then Vanish), for the log.
    let mut per_kind = [Duration::ZERO; KINDS.len() + 1];
    for round in 0..1000usize {
        if round > 0 {
            bad.relogin(round as u64 % 4, &ioc, Form::IbCm, &req)
                .unwrap_or_else(|c| panic!("round {round}: login rejected {c:#x}"));
            ch = r.login_of(&bad);
        }
        // A vanishing initiator costs the RC retry time (~0.5 s): one round in 100.
        let k = if round % 100 == 99 {
            KINDS.len()
        } else {
            round % KINDS.len()
        };
        let kind = KINDS.get(k).copied().unwrap_or(Kind::Vanish);
        let t0 = Instant::now();
        hostile_event(&mut r, &mut bad, ch, kind);
        per_kind[k] += t0.elapsed();
        r.still_serves(round as u8);
    }
    let took = start.elapsed();
    eprintln!("1000 hostile rounds in {took:?}; per kind {per_kind:?}");
    bad.destroy(&bad.ep);
    // Every Login has its Logout; only the well-behaved session is left.
    let logins = r
        .seen
        .iter()
        .filter(|e| matches!(e, DaemonEvent::Login { initiator, .. } if *initiator == bad.me))
        .count();
    let logouts = r
        .seen
        .iter()
        .filter(|e| matches!(e, DaemonEvent::Logout { .. }))
        .count();
    assert_eq!(
        (logins, logouts),
        (1000, 1000),
        "every Login has its Logout"
    );
    assert_eq!(r.live_sessions(), 1);
    // The daemon's device holds what it held with one session.
    let end = Instant::now() + host::DEADLINE;
    loop {
        let now = r.daemon.resources().expect("resources");
        if now == baseline {
            break;
        }
        assert!(
            Instant::now() < end,
            "leak: {now:?} vs baseline {baseline:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    r.still_serves(0x5a);
    assert!(took < Duration::from_secs(60), "1000 rounds took {took:?}");
}

/// A login that must be refused with `code`: the REJ's LOGIN_REJ reason, a Rejected event.
fn refused(r: &mut Rig, h: &mut host::Host, form: Form, private: Vec<u8>, code: u32) {
    let ioc = &r.config.iocs[0];
    let service = match form {
        Form::IbCm => ioc.service_id,
        Form::RdmaCm(p) => access_layer::mad::ServiceId::rdma_ip(RdmaPortSpace::Tcp, p),
    };
    let ep = h.ep(0);
    assert_eq!(h.login(&ep, service, private).map(|_| ()), Err(code));
    h.hca.with(|e, now| {
        let _ = e.destroy_qp(now, ep.qp);
        let _ = e.destroy_cq(ep.cq);
    });
    await_event(&r.daemon, &mut r.seen, |e| {
        matches!(e, DaemonEvent::Rejected { code: c, .. } if *c == code).then_some(())
    });
}

#[test]
fn hostile_logins_are_refused_and_cost_nothing() {
    let mut r = rig(31);
    let baseline = r.daemon.resources().expect("resources");
    let (local, target) = (ip(33), ip(31));
    let mut h = host::Host::open_as(local, target, 0xe005);
    let ioc = r.config.iocs[0].clone();
    let me = PortId::new(0, Guid(0xe005), IoClass::SrpR16a);
    let req = request(me, &ioc, false);
    let ib = |f: &dyn Fn(&mut LoginReq)| {
        let mut q = req;
        f(&mut q);
        host::ib_form(&q)
    };
    // IU lengths outside 64..=8260, a target port that is no IOC's, a required format
    // not offered, private data that is no login (docs/target.md, login rejects).
    let cases: [(Vec<u8>, u32); 5] = [
        (ib(&|q| q.req_it_iu_len = 16), 0x0001_0002),
        (ib(&|q| q.req_it_iu_len = 1 << 20), 0x0001_0002),
        (ib(&|q| q.target_port_id = PortId([0x5a; 16])), 0x0001_0003),
        (
            ib(&|q| q.req_buf_fmt = BufFormats::from_bits_retain(0x8)),
            0x0001_0004,
        ),
        (vec![0x55; 64], 0x0001_0000),
    ];
    for (private, code) in cases {
        refused(&mut r, &mut h, Form::IbCm, private, code);
    }
    let mut q = req;
    q.target_port_id = PortId([0x5a; 16]);
    let private = host::rdma_cm_form(&q, local, target);
    refused(&mut r, &mut h, Form::RdmaCm(5555), private, 0x0001_0003);
    // The nexus's channel limit (4 here): the fifth MULTI login is refused; the four
    // log out with SRP_I_LOGOUT and close.
    let mut four: Vec<(Node, ChannelId)> = (0..4).map(|k| r.hostile(34 + k, 0xe006)).collect();
    refused(
        &mut r,
        &mut h,
        Form::IbCm,
        ib(&|q| q.initiator_port_id = four[0].0.me),
        0x0001_0006,
    );
    for (n, ch) in &mut four {
        let mut iu = vec![0u8; 16];
        ILogout {
            tag: Tag(n.next_tag()),
        }
        .emit(&mut iu)
        .expect("fits");
        n.host.send(&n.ep, &iu);
        let reason = await_logout(&r.daemon, &mut r.seen, *ch);
        assert!(reason.contains("logged out"), "{reason}");
    }
    r.still_serves(0x31);
    assert_eq!(r.live_sessions(), 1);
    let end = Instant::now() + host::DEADLINE;
    while r.daemon.resources().expect("resources") != baseline {
        assert!(Instant::now() < end, "refused logins left resources behind");
        std::thread::sleep(Duration::from_millis(10));
    }
}
