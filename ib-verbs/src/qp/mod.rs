//! Queue pairs as a consumer describes them: what a QP is created with ([`QpInit`]),
//! the attributes `modify_qp` sets ([`QpAttr`]), what connecting an RC QP needs
//! ([`RcConnect`]), and the state machine every provider follows ([`state`]).

pub mod state;

use crate::ca::{CqId, SrqId};
use crate::ids::{Gid, Psn, QKey, Qpn};
use crate::mr::{Access, PdId};
use crate::mtu::PathMtu;
use state::{QpState, QpType};

/// What a QP is created with.
#[derive(Clone, Copy, Debug)]
pub struct QpInit {
    /// RC or UD.
    pub qp_type: QpType,
    /// Protection domain of every memory access the QP makes.
    pub pd: PdId,
    /// Where send completions go.
    pub send_cq: CqId,
    /// Where receive completions go.
    pub recv_cq: CqId,
    /// Receives come from this shared queue instead of the QP's own.
    pub srq: Option<SrqId>,
    /// Send queue depth.
    pub max_send_wr: usize,
    /// Receive queue depth (ignored with an SRQ).
    pub max_recv_wr: usize,
    /// Scatter/gather entries per work request.
    pub max_sge: usize,
    /// Every send completes with a CQE, signaled or not.
    pub sq_sig_all: bool,
}

impl QpInit {
    /// An RC QP on one CQ for both directions, its own receive queue, one SGE per work
    /// request, completions only for signaled sends: what every SRP channel uses.
    pub fn rc(pd: PdId, cq: CqId, max_send_wr: usize, max_recv_wr: usize) -> QpInit {
        QpInit {
            qp_type: QpType::Rc,
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            max_send_wr,
            max_recv_wr,
            max_sge: 1,
            sq_sig_all: false,
        }
    }
}

/// Attributes set by `modify_qp`; which ones count is said by the [`state::QpAttrMask`].
#[derive(Clone, Copy, Debug)]
pub struct QpAttr {
    /// New state.
    pub state: QpState,
    /// Current state, checked when `CUR_STATE` is in the mask.
    pub cur_state: QpState,
    /// P_Key index: the QP's partition in its port's table (the port's `set_pkey_table`).
    pub pkey_index: u16,
    /// Port number, 1-based.
    pub port: u8,
    /// Q_Key (UD).
    pub qkey: QKey,
    /// Inbound RDMA rights (RC).
    pub access: Access,
    /// The peer's GID (RC).
    pub dest_gid: Gid,
    /// Path MTU (RC).
    pub path_mtu: PathMtu,
    /// The peer's QP (RC).
    pub dest_qpn: Qpn,
    /// First PSN expected from the peer (RC).
    pub rq_psn: Psn,
    /// First PSN sent.
    pub sq_psn: Psn,
    /// Local ACK timeout code: 4.096 µs × 2^timeout (RC; 0 = no timeout).
    pub timeout: u8,
    /// Transport retries before failing (RC; 0..=7).
    pub retry_cnt: u8,
    /// RNR retries before failing (RC; 7 = forever).
    pub rnr_retry: u8,
    /// RNR NAK timer code this QP asks senders to wait (RC).
    pub min_rnr_timer: u8,
    /// RDMA READs this QP may have outstanding as initiator (ORD).
    pub max_rd_atomic: u8,
    /// RDMA READs this QP serves concurrently as responder (IRD).
    pub max_dest_rd_atomic: u8,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            state: QpState::Reset,
            cur_state: QpState::Reset,
            pkey_index: 0,
            port: 1,
            qkey: QKey(0),
            access: Access::empty(),
            dest_gid: Gid::default(),
            path_mtu: PathMtu::Mtu1024,
            dest_qpn: Qpn::default(),
            rq_psn: Psn::default(),
            sq_psn: Psn::default(),
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 4,
            max_dest_rd_atomic: 4,
        }
    }
}

/// What connecting an RC QP needs (the CM's three modifies, RESET to RTS, in one verb):
/// `ChannelInterface::connect_rc` takes it.
#[derive(Clone, Copy, Debug)]
pub struct RcConnect {
    /// Inbound RDMA rights granted to the peer.
    pub access: Access,
    /// The peer's GID.
    pub dest_gid: Gid,
    /// The peer's QP.
    pub dest_qpn: Qpn,
    /// Path MTU.
    pub path_mtu: PathMtu,
    /// Our first send PSN (the peer's expected receive PSN).
    pub sq_psn: Psn,
    /// The peer's first send PSN.
    pub rq_psn: Psn,
    /// Local ACK timeout code (4.096 µs × 2^timeout).
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = forever).
    pub rnr_retry: u8,
    /// RNR NAK timer code we ask the peer to wait.
    pub min_rnr_timer: u8,
    /// RDMA READs outstanding as initiator.
    pub max_rd_atomic: u8,
    /// RDMA READs served at once as responder.
    pub max_dest_rd_atomic: u8,
    /// The QP's partition: an index in its port's P_Key table (0: the default partition
    /// unless the table says otherwise).
    pub pkey_index: u16,
    /// The path's flow label (0: none; a RoCEv2 device then derives the UDP source port
    /// from the QPNs).
    pub flow_label: u32,
    /// The path's hop limit (IP TTL on RoCEv2).
    pub hop_limit: u8,
    /// The path's traffic class (IP DSCP and ECN on RoCEv2).
    pub traffic_class: u8,
}

impl RcConnect {
    /// The hop limit a path gets unless its CM says otherwise (Linux's, 64).
    pub const HOP_LIMIT: u8 = 64;
}

/// Bytes every UD receive reserves ahead of the message for the GRH (IBTA 11.4.1.2: the
/// first 40 bytes of a UD receive buffer; on RoCEv2 over IPv4 the IPv4 header sits in the
/// last 20 of them).
pub const UD_GRH_LEN: usize = 40;
