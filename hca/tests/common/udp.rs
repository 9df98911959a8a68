//! Helpers for tests on real UDP sockets: open an HCA on a loopback address, build an RC
//! endpoint on it, and wait for completions with a deadline.

use super::*;
use hca::driver::{Hca, HcaConfig};
use hca::verbs::Wc;
use std::time::{Duration, Instant};

/// An HCA with one RC endpoint.
pub struct UdpNode {
    pub hca: Hca,
    pub ip: IpAddr,
    pub pd: PdId,
    pub mem: Arc<MemBlock>,
    pub mr: MrKeys,
    pub cq: CqId,
    pub qp: QpId,
    pub qpn: Qpn,
}

impl UdpNode {
    /// Opens an HCA on `ip:4791` with an endpoint.
    pub fn open(ip: IpAddr, opts: PairOpts) -> UdpNode {
        Self::open_with(ip, opts, true)
    }

    /// Opens an HCA on `ip:4791` with an endpoint, UDP GSO/GRO as given.
    pub fn open_with(ip: IpAddr, opts: PairOpts, gso: bool) -> UdpNode {
        let mut config =
            HcaConfig::new(Guid(0x5352_5000_0000_1000 | u64::from(last(ip))), vec![ip]);
        config.gso = gso;
        let hca = Hca::open(config).unwrap_or_else(|e| panic!("open HCA on {ip}: {e}"));
        let (pd, mem, mr, cq, qp, qpn) = hca.with(|e, _| rc_endpoint(e, opts));
        UdpNode {
            hca,
            ip,
            pd,
            mem,
            mr,
            cq,
            qp,
            qpn,
        }
    }

    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: IOVA + offset,
            len,
            lkey: self.mr.lkey,
        }
    }

    pub fn rkey(&self) -> Rkey {
        self.mr.rkey.expect("remote access")
    }

    /// Connects this endpoint to a peer's.
    pub fn connect(
        &self,
        peer_ip: IpAddr,
        peer_qpn: Qpn,
        sq_psn: Psn,
        rq_psn: Psn,
        opts: PairOpts,
    ) {
        self.hca
            .with(|e, now| connect_qp(e, now, self.qp, peer_ip, peer_qpn, sq_psn, rq_psn, opts));
    }

    pub fn post_send(&self, wr: SendWr) {
        self.hca
            .with(|e, now| e.post_send(now, self.qp, wr))
            .expect("post_send");
    }

    pub fn post_recv(&self, wr: RecvWr) {
        self.hca
            .with(|e, now| e.post_recv(now, self.qp, wr))
            .expect("post_recv");
    }

    /// Polls until `n` completions arrived or `timeout` passed.
    pub fn wait(&self, n: usize, timeout: Duration) -> Vec<Wc> {
        let end = Instant::now() + timeout;
        let mut out = Vec::new();
        while out.len() < n && Instant::now() < end {
            let got = self
                .hca
                .with(|e, _| e.poll_cq(self.cq, n - out.len(), &mut out))
                .expect("poll");
            if got == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        out
    }
}

fn last(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(v4) => v4.octets()[3],
        IpAddr::V6(v6) => v6.octets()[15],
    }
}

/// CRC-32 of `len` bytes at `offset`.
pub fn checksum(mem: &MemBlock, offset: u64, len: usize) -> u32 {
    crc32fast::hash(&read(mem, offset, len))
}
