//! Two HCAs in two processes on loopback move data by SEND/RECV, RDMA WRITE and RDMA READ at
//! sizes from 1 byte to 4 MiB and every path MTU; the peer process reports checksums of its
//! memory, so what crossed is checked on both sides.
//!
//! The peer is this test binary re-run with `HCA_PEER_PROCESS=1`, driven over its stdin and
//! stdout; it is killed when the test ends, pass or fail.

mod common;

use common::udp::{UdpNode, checksum};
use common::*;
use hca::ids::{Psn, Qpn, Rkey};
use hca::verbs::{SendOp, WcStatus};
use hca::wire::PathMtu;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

const MARK: &str = "@@ ";
const SIZES: [usize; 6] = [1, 300, 4096, 65_537, 1 << 20, 4 << 20];
const MTUS: [PathMtu; 5] = [
    PathMtu::Mtu256,
    PathMtu::Mtu512,
    PathMtu::Mtu1024,
    PathMtu::Mtu2048,
    PathMtu::Mtu4096,
];

fn ip(net: u8, host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, net, host))
}

/// The peer process: one HCA, commands on stdin, answers on stdout after [`MARK`].
#[test]
fn peer_process() {
    if std::env::var_os("HCA_PEER_PROCESS").is_none() {
        return; // only meaningful when spawned by `two_processes_move_data`
    }
    let out = |s: String| {
        println!("{MARK}{s}");
        let _ = std::io::stdout().flush();
    };
    let mut node: Option<UdpNode> = None;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let w: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| w.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        match w.first().copied() {
            Some("OPEN") => {
                let mtu = PathMtu::from(num(2) as u8);
                let n = UdpNode::open(
                    ip(num(1) as u8, 3),
                    PairOpts {
                        mtu,
                        timeout: 12,
                        ..PairOpts::default()
                    },
                );
                out(format!("READY {} {}", n.qpn.get(), n.rkey().0));
                node = Some(n);
            }
            Some("CONNECT") => {
                if let Some(n) = &node {
                    let opts = PairOpts {
                        mtu: PathMtu::from(num(3) as u8),
                        timeout: 12,
                        ..PairOpts::default()
                    };
                    let peer = ip(num(1) as u8, 2);
                    n.connect(
                        peer,
                        Qpn::from_wire(num(2) as u32),
                        Psn::from_wire(0x200),
                        Psn::from_wire(0x100),
                        opts,
                    );
                    out("CONNECTED".into());
                }
            }
            Some("RECV") => {
                if let Some(n) = &node {
                    n.post_recv(recv_wr(num(3), vec![n.sge(num(1), num(2) as u32)]));
                    out("POSTED".into());
                }
            }
            Some("WAITRECV") => {
                if let Some(n) = &node {
                    let wcs = n.wait(1, Duration::from_secs(20));
                    match wcs.first() {
                        Some(wc) => out(format!("RECVD {:?} {}", wc.status, wc.byte_len)),
                        None => out("RECVD none 0".into()),
                    }
                }
            }
            Some("FILL") => {
                if let Some(n) = &node {
                    fill(&n.mem, num(1), num(2) as usize, num(3));
                    out("FILLED".into());
                }
            }
            Some("SUM") => {
                if let Some(n) = &node {
                    out(format!("SUM {}", checksum(&n.mem, num(1), num(2) as usize)));
                }
            }
            Some("QUIT") | None => break,
            Some(other) => out(format!("ERROR unknown command {other}")),
        }
    }
}

/// The peer process, killed on drop.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Peer {
    fn spawn() -> Peer {
        let exe = std::env::current_exe().expect("test binary path");
        let mut child = Command::new(exe)
            .args(["--exact", "peer_process", "--nocapture", "--test-threads=1"])
            .env("HCA_PEER_PROCESS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the peer process");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // libtest may print its own text ahead of ours on the same line.
                if let Some(at) = line.find(MARK) {
                    if tx.send(line[at + MARK.len()..].to_owned()).is_err() {
                        break;
                    }
                }
            }
        });
        Peer {
            child,
            stdin,
            lines,
        }
    }

    /// Sends a command and returns the answer's words.
    fn ask(&mut self, cmd: &str) -> Vec<String> {
        writeln!(self.stdin, "{cmd}").expect("write to peer");
        self.stdin.flush().expect("flush");
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("peer did not answer {cmd:?}"));
        line.split_whitespace().map(str::to_owned).collect()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "QUIT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn two_processes_move_data() {
    if std::env::var_os("HCA_PEER_PROCESS").is_some() {
        return;
    }
    for (i, mtu) in MTUS.into_iter().enumerate() {
        let net = 40 + i as u8;
        let mut peer = Peer::spawn();
        let code = u8::from(mtu);
        let ready = peer.ask(&format!("OPEN {net} {code}"));
        assert_eq!(ready[0], "READY", "{ready:?}");
        let peer_qpn = Qpn::from_wire(ready[1].parse().expect("qpn"));
        let peer_rkey = Rkey(ready[2].parse().expect("rkey"));
        let opts = PairOpts {
            mtu,
            timeout: 12,
            ..PairOpts::default()
        };
        let me = UdpNode::open(ip(net, 2), opts);
        me.connect(
            ip(net, 3),
            peer_qpn,
            Psn::from_wire(0x100),
            Psn::from_wire(0x200),
            opts,
        );
        assert_eq!(
            peer.ask(&format!("CONNECT {net} {} {code}", me.qpn.get()))[0],
            "CONNECTED"
        );
        for (j, len) in SIZES.into_iter().enumerate() {
            let tag = (i * 100 + j) as u64 + 1;
            let what = format!("MTU {} {len} B", mtu.bytes().unwrap_or(0));
            // SEND/RECV into the peer's buffer at 8 MiB.
            assert_eq!(
                peer.ask(&format!("RECV {} {len} {tag}", 8 << 20))[0],
                "POSTED"
            );
            fill(&me.mem, 0, len, tag);
            me.post_send(send_wr(tag, SendOp::Send, vec![me.sge(0, len as u32)]));
            let wcs = me.wait(1, Duration::from_secs(20));
            assert_eq!(
                wcs.first().map(|w| w.status),
                Some(WcStatus::Success),
                "SEND {what}: {wcs:?}"
            );
            assert_eq!(
                peer.ask("WAITRECV"),
                ["RECVD", "Success", &len.to_string()],
                "SEND {what}"
            );
            let want = checksum(&me.mem, 0, len).to_string();
            assert_eq!(
                peer.ask(&format!("SUM {} {len}", 8 << 20)),
                ["SUM", &want],
                "SEND {what}"
            );
            // RDMA WRITE into the peer's memory at 12 MiB.
            fill(&me.mem, 0, len, tag + 7);
            let op = SendOp::Write {
                remote_addr: IOVA + (12 << 20),
                rkey: peer_rkey,
            };
            me.post_send(send_wr(tag, op, vec![me.sge(0, len as u32)]));
            let wcs = me.wait(1, Duration::from_secs(20));
            assert_eq!(
                wcs.first().map(|w| w.status),
                Some(WcStatus::Success),
                "WRITE {what}: {wcs:?}"
            );
            let want = checksum(&me.mem, 0, len).to_string();
            assert_eq!(
                peer.ask(&format!("SUM {} {len}", 12 << 20)),
                ["SUM", &want],
                "WRITE {what}"
            );
            // RDMA READ of the peer's memory at 4 MiB into ours at 8 MiB.
            assert_eq!(
                peer.ask(&format!("FILL {} {len} {}", 4 << 20, tag + 13))[0],
                "FILLED"
            );
            let op = SendOp::Read {
                remote_addr: IOVA + (4 << 20),
                rkey: peer_rkey,
            };
            me.post_send(send_wr(tag, op, vec![me.sge(8 << 20, len as u32)]));
            let wcs = me.wait(1, Duration::from_secs(20));
            assert_eq!(
                wcs.first().map(|w| w.status),
                Some(WcStatus::Success),
                "READ {what}: {wcs:?}"
            );
            let got = checksum(&me.mem, 8 << 20, len).to_string();
            assert_eq!(
                peer.ask(&format!("SUM {} {len}", 4 << 20)),
                ["SUM", &got],
                "READ {what}"
            );
        }
    }
}
