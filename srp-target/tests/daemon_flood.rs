//! A flood of mutated datagrams against the running daemon during verified I/O (issue
//! #14, Deliver 6). A well-behaved host logs in from 127.0.128.2 while dumpcap records its
//! datagrams (the CM REQ, RTU, SRP_CMDs, RDMA traffic); then, while that host keeps
//! writing and reading back, a second address (127.0.128.3) sends seeded mutants of them:
//! exact replays (ICRC recomputed for the new source, so only the addresses differ), bit
//! flips with the captured ICRC, bit flips with a valid ICRC, truncations, junk, and CM
//! REQs rewritten to name the sender's own address as their path (the forgery the CM's
//! source check cannot catch) with hostile timers. Afterwards: no login but the real
//! host's was accepted, its channel was never ended, no other channel exists, the HCA's
//! objects are back to the baseline, and every refusal was counted.
//!
//! `SRP_FLOOD_PACKETS=N` changes the flood's size (default 40 000); `SRP_FLOOD_SEED=n` its
//! seed. Needs dumpcap and tshark (scripts/test.sh installs them) and capture rights.

mod common;
mod host;

use access_layer::mad::cm::CmReq;
use common::TempDir;
use hca::Gid;
use hca::wire::icrc::{self, IcrcContext};
use host::Host;
use host::node::{Form, Node, await_event};
use srp_target::config::TargetConfig;
use srp_target::control::{ControlAnswer, ControlRequest, PortStatus};
use srp_target::daemon::{Daemon, DaemonEvent, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wirekit::WireRepr;

const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 128, 1));
const HOST: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 128, 2));
const FORGER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 128, 3));
const HOST_GUID: u64 = 0xd281;
/// The flood's pace: 50 datagrams, then this pause (at most 10 000 a second). Faster, the
/// target's socket buffer fills and the real host's datagrams are dropped by the kernel
/// with the flood's — a saturated link, which RC retries ride out only for their timeout
/// × 8 (here 67 ms × 8); what this test checks is what the stack *accepts*, not the
/// link's capacity (docs/testing.md).
const PACE: Duration = Duration::from_millis(5);
/// BTH + DETH: where a UD datagram's MAD starts.
const UD_HEADERS: usize = 20;
/// The CM data area in a MAD.
const MAD_HEADER: usize = 24;

/// splitmix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn ports(d: &Daemon) -> Vec<PortStatus> {
    match d.control().call(ControlRequest::ListPorts) {
        Ok(ControlAnswer::Ports(p)) => p,
        other => panic!("ListPorts: {other:?}"),
    }
}

fn sessions(d: &Daemon) -> usize {
    match d.control().call(ControlRequest::ListSessions) {
        Ok(ControlAnswer::Sessions(s)) => s.len(),
        other => panic!("ListSessions: {other:?}"),
    }
}

/// The UDP payloads of every datagram in `pcap`.
fn payloads(pcap: &std::path::Path) -> Vec<Vec<u8>> {
    testkit::tshark_field(pcap, "udp.payload")
        .iter()
        .map(|hex| {
            let hex: String = hex.chars().filter(char::is_ascii_hexdigit).collect();
            (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
                .collect()
        })
        .collect()
}

/// `p` with its ICRC made right for a datagram from `ctx`.
fn restamp(ctx: &IcrcContext, mut p: Vec<u8>) -> Vec<u8> {
    if p.len() > 16 {
        let n = p.len() - 4;
        let c = icrc::compute(ctx, &p[..n]);
        p[n..].copy_from_slice(&c.to_le_bytes());
    }
    p
}

/// If `p` is a CM REQ: the same REQ naming `from` as its path and asking for the longest
/// timers and most retries there are, ICRC valid for `ctx`.
fn forged_req(ctx: &IcrcContext, p: &[u8], from: IpAddr, rng: &mut Rng) -> Option<Vec<u8>> {
    let data = p.get(UD_HEADERS + MAD_HEADER..p.len().checked_sub(4)?)?;
    let attr = p.get(UD_HEADERS + 16..UD_HEADERS + 18)?;
    if p.get(UD_HEADERS + 1) != Some(&0x07) || attr != [0x00, 0x10] {
        return None;
    }
    let mut req = CmReq::parse(data).ok()?;
    req.primary_path.local_gid = Gid::from_ip(from);
    req.primary_path.local_ack_timeout = 31;
    req.local_cm_response_timeout = 31;
    req.remote_cm_response_timeout = 31;
    req.max_cm_retries = 15;
    if rng.below(2) == 0 {
        // Another initiator port ID (the first 16 bytes of the IB-CM-form login's port
        // IDs sit at private data offset 8).
        let at = 8 + rng.below(16);
        req.private_data.0[at] ^= 1 << rng.below(8);
    }
    let mut out = p.to_vec();
    req.emit(&mut out[UD_HEADERS + MAD_HEADER..]).ok()?;
    Some(restamp(ctx, out))
}

/// One mutant of a captured datagram, with the kind it is.
fn mutant(ctx: &IcrcContext, captured: &[Vec<u8>], rng: &mut Rng) -> (&'static str, Vec<u8>) {
    let p = &captured[rng.below(captured.len())];
    let flip = |p: &mut Vec<u8>, rng: &mut Rng| {
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(p.len());
            p[at] ^= 1 << rng.below(8);
        }
    };
    match rng.below(10) {
        0 => ("replay", restamp(ctx, p.clone())),
        1 | 2 => {
            let mut m = p.clone();
            flip(&mut m, rng);
            ("flip, captured ICRC", m)
        }
        3 | 4 => {
            let mut m = p.clone();
            let n = m.len().saturating_sub(4).max(1);
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(n);
                m[at] ^= 1 << rng.below(8);
            }
            ("flip, valid ICRC", restamp(ctx, m))
        }
        5 => {
            let mut m = p.clone();
            m.truncate(rng.below(p.len()));
            ("truncated", restamp(ctx, m))
        }
        6 => {
            let len = rng.below(1500);
            let m: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            (
                "junk",
                if rng.below(2) == 0 {
                    restamp(ctx, m)
                } else {
                    m
                },
            )
        }
        _ => match captured
            .iter()
            .cycle()
            .skip(rng.below(captured.len()))
            .take(captured.len())
            .find_map(|c| forged_req(ctx, c, FORGER, rng))
        {
            Some(m) => ("forged REQ", m),
            None => ("replay", restamp(ctx, p.clone())),
        },
    }
}

#[test]
fn a_flood_of_mutants_from_another_address_changes_nothing() {
    let packets: usize = std::env::var("SRP_FLOOD_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40_000);
    let seed: u64 = std::env::var("SRP_FLOOD_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(14);
    let dir = TempDir::new("daemon-flood");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d28000\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{TARGET}\"\n\n\
         [[lun]]\nname = \"ram\"\nram = true\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d28001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"ram\" }}\nallow = [\"guid:0x{HOST_GUID:016x}\"]\n"
    );
    let config = TargetConfig::from_str(&text, "flood.toml")
        .expect("config valid")
        .config;
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = 8;
    options.limits.max_transfer = 64 << 10;
    options.limits.max_table_entries = 16;
    options.shutdown_step = Duration::from_millis(300);
    let d = Daemon::start(config.clone(), options).expect("daemon starts");

    // The real host's login and I/O, captured.
    let pcap = dir.path().join("host.pcap");
    let cap = testkit::Capture::start(&pcap, &format!("udp port 4791 and src host {HOST}"));
    // Its RC QPs wait 67 ms per try (timeout 14, as Linux asks), not the test host's 4 ms:
    // two cores shared by the flood, the daemon and this host can stall it longer than
    // 8 × 4 ms.
    let mut host = Host::open_as(HOST, TARGET, HOST_GUID);
    host.rc_timeout = 14;
    let mut node = Node::try_open_with(host, &config.iocs[0], Form::IbCm, false)
        .unwrap_or_else(|code| panic!("login rejected: {code:#x}"));
    for seed in 0..4 {
        node.write_read(0, 8 * u32::from(seed), seed);
    }
    cap.stop();
    let captured = payloads(&pcap);
    assert!(captured.len() > 10, "{} datagrams captured", captured.len());
    let mut seen = Vec::new();
    let channel = await_event(&d, &mut seen, |e| match e {
        DaemonEvent::Login { channel, .. } => Some(*channel),
        _ => None,
    });
    let baseline = ports(&d);

    // The flood, from its own thread, while the host writes and verifies.
    let socket = UdpSocket::bind(SocketAddr::new(FORGER, 0)).expect("bind the forger");
    let ctx = IcrcContext::new(FORGER, TARGET, socket.local_addr().expect("addr").port());
    let done = Arc::new(AtomicBool::new(false));
    let flood = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut rng = Rng(seed);
            let mut kinds = std::collections::BTreeMap::<&str, u64>::new();
            let to = SocketAddr::new(TARGET, 4791);
            for i in 0..packets {
                let (kind, m) = mutant(&ctx, &captured, &mut rng);
                *kinds.entry(kind).or_default() += 1;
                let _ = socket.send_to(&m, to);
                if i % 50 == 49 {
                    std::thread::sleep(PACE);
                }
            }
            done.store(true, Ordering::Release);
            kinds
        })
    };
    let start = Instant::now();
    let mut rounds = 0u32;
    while !done.load(Ordering::Acquire) || rounds < 20 {
        node.write_read(0, 8 * (rounds % 64), rounds as u8);
        rounds += 1;
    }
    let kinds = flood.join().expect("flood");
    eprintln!(
        "{packets} mutants in {:?} ({kinds:?}) while the host did {rounds} verified write+read rounds",
        start.elapsed()
    );

    // Let whatever the flood started settle (REJs sent, timers run out).
    std::thread::sleep(Duration::from_secs(2));
    node.write_read(0, 0, 0xaa);
    while let Ok(e) = d.events().try_recv() {
        seen.push(e);
    }
    let foreign: Vec<_> = seen
        .iter()
        .filter(|e| matches!(e, DaemonEvent::Login { channel: c, .. } if *c != channel))
        .collect();
    assert!(
        foreign.is_empty(),
        "logins accepted from the flood: {foreign:?}"
    );
    let ended: Vec<_> = seen
        .iter()
        .filter(|e| matches!(e, DaemonEvent::Logout { .. }))
        .collect();
    assert!(ended.is_empty(), "channels ended: {ended:?}");
    assert_eq!(sessions(&d), 1, "only the real host's channel");
    let after = ports(&d);
    assert_eq!(
        after[0].resources, baseline[0].resources,
        "HCA objects back to the baseline"
    );
    let refused = seen
        .iter()
        .filter(|e| {
            matches!(
                e,
                DaemonEvent::Rejected { .. } | DaemonEvent::CmRefused { .. }
            )
        })
        .count();
    let s = &after[0].hca;
    eprintln!(
        "refused logins (REJ or CM refusal): {refused}; HCA drops: ICRC {}, wrong peer {}, malformed {}, unknown QP {}",
        s.get("icrc_errors"),
        s.get("wrong_peer"),
        s.get("malformed"),
        s.get("unknown_qp")
    );
    assert!(refused > 0, "the forged REQs were refused, and counted");
    assert!(s.get("icrc_errors") > 0 && s.get("wrong_peer") > 0, "{s:?}");
    d.shutdown();
}
