//! What the engine's unit tests connect an RC QP with: the peer at 127.0.0.`host`, QPN
//! `qpn`, PSNs `sq`/`rq`, path MTU 1024, one outstanding READ each way, `retry_cnt`
//! transport retries (RNR retries as many), local ACK timeout 2^14 × 4.096 µs.

use super::*;
use crate::ids::{Gid, Psn};
use crate::mr::Access;
use crate::wire::PathMtu;
use std::net::Ipv4Addr;

pub(super) fn rc_peer(host: u8, qpn: Qpn, sq: u32, rq: u32, retry_cnt: u8) -> RcConnect {
    RcConnect {
        access: Access::LOCAL_WRITE,
        dest_gid: Gid::from_ip(IpAddr::V4(Ipv4Addr::new(127, 0, 0, host))),
        dest_qpn: qpn,
        path_mtu: PathMtu::Mtu1024,
        sq_psn: Psn::from_wire(sq),
        rq_psn: Psn::from_wire(rq),
        timeout: 14,
        retry_cnt,
        rnr_retry: retry_cnt,
        min_rnr_timer: 1,
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        pkey_index: 0,
        flow_label: 0,
        hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
        traffic_class: 0,
    }
}
