//! One port's Communication Manager: connections by local communication ID, listens by
//! service ID, retransmission timers, and the MADs each transition sends.
#[allow(unused_imports)]
use crate::prelude::*;

use super::CmError;
use super::conn::{Action, Conn, ConnState, Input, Role};
use crate::mad::cm::rej::REJ_PRIVATE_DATA_LEN;
use crate::mad::cm::{
    CmDrep, CmDreq, CmMra, CmPath, CmRej, CmRejReason, CmRep, CmReq, CmRtu, MraMessage, RejMessage,
};
use crate::mad::{
    AnyMad, CmMessage, CommId, MadAddress, MadBody, MadBuf, MadOut, Method, Mtu, PrivateData,
    ServiceId, Tid, parse_any,
};
use ib_verbs::time::{Time, ack_timeout};

/// The longest CM response timeout a REQ may ask us to wait per try for its RTU (or DREP):
/// 21, 4.096 µs × 2^21 ≈ 8.6 s. Linux's RDMA-CM asks 20 (≈ 4.3 s); a REQ asking up to 31
/// (≈ 2.4 h per try) would keep a half-open connection for a day.
pub(crate) const MAX_PEER_RESPONSE_TIMEOUT: u8 = 21;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use core::time::Duration;
use ib_verbs::{Gid, Guid, Lid, Psn, QKey, Qpn};

/// A connection, named by our local communication ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub CommId);

/// What a CM endpoint is.
#[derive(Clone, Copy, Debug)]
pub struct CmConfig {
    /// Our CA GUID (in REQ and REP).
    pub local_ca_guid: Guid,
    /// Our port's GID (the path's local GID).
    pub local_gid: Gid,
    /// Our port, 1-based.
    pub port: u8,
    /// How long a closed connection keeps answering stale messages.
    pub time_wait: Duration,
    /// High 32 bits of every TID this endpoint allocates.
    pub agent_id: u32,
    /// The first local communication ID (0 counts as 1). A peer's CM keys connections by
    /// (CA GUID, communication ID) — Linux's `cm_insert_remote_id` takes a second REQ with
    /// a pair it knows for a duplicate and drops it — so endpoints that share a CA GUID (a
    /// host's adapters, a restarted daemon) must not number alike: drivers start each at a
    /// random value ([`super::random_comm_id`]), as Linux randomises its own.
    pub first_comm_id: u32,
}

/// What [`CmEndpoint::connect`] sends in the REQ.
#[derive(Clone, Debug)]
pub struct ConnectParams {
    /// The passive side's GSI.
    pub to: MadAddress,
    /// The service to connect to (an RDMA-CM one for `dest=ip:port` logins).
    pub service_id: ServiceId,
    /// Our RC QP.
    pub qpn: Qpn,
    /// The REQ's Starting PSN: the PSN we expect the passive side's first packet to carry,
    /// our receive PSN (as Linux reads it; [`super::QpPsns::active`]).
    pub receive_psn: Psn,
    /// RDMA READs we accept in flight (our IRD).
    pub responder_resources: u8,
    /// RDMA READs we will issue in flight (our ORD).
    pub initiator_depth: u8,
    /// Path MTU.
    pub mtu: Mtu,
    /// CM response timeout code, both directions: 4.096 µs × 2^code (RDMA-CM uses 20).
    pub response_timeout: u8,
    /// CM retransmissions before giving up (at most 15).
    pub max_retries: u8,
    /// Transport retry count for the QP.
    pub retry_count: u8,
    /// RNR retry count for the QP.
    pub rnr_retry_count: u8,
    /// Private data (at most 92 bytes; the RDMA-CM header first for RDMA-CM service IDs).
    pub private_data: Vec<u8>,
}

/// What [`CmEndpoint::accept`] sends in the REP.
#[derive(Clone, Debug)]
pub struct AcceptParams {
    /// Our RC QP.
    pub qpn: Qpn,
    /// The REP's Starting PSN: the PSN we expect the active side's first packet to carry,
    /// our receive PSN (as Linux reads it; [`super::QpPsns::passive`]).
    pub receive_psn: Psn,
    /// RDMA READs we accept in flight.
    pub responder_resources: u8,
    /// RDMA READs we will issue in flight.
    pub initiator_depth: u8,
    /// RNR retry count the peer should use towards us.
    pub rnr_retry_count: u8,
    /// Private data (at most 196 bytes: SRP_LOGIN_RSP for an SRP target).
    pub private_data: Vec<u8>,
}

/// What happened, for the consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmEvent {
    /// A REQ for a service we listen on: accept, reject or MRA it.
    ReqReceived {
        /// The new connection.
        conn: ConnId,
        /// Who sent it.
        from: MadAddress,
        /// The REQ (QPN, PSN, path, private data…).
        req: CmReq,
    },
    /// The REP to our REQ: confirm (RTU) or reject it.
    RepReceived {
        /// The connection.
        conn: ConnId,
        /// The REP.
        rep: CmRep,
    },
    /// The connection is established (RTU sent, or received).
    Established {
        /// The connection.
        conn: ConnId,
    },
    /// The peer rejected the connection.
    Rejected {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CmRejReason,
        /// The REJ's private data (an SRP_LOGIN_REJ for reason 28).
        private_data: PrivateData<REJ_PRIVATE_DATA_LEN>,
    },
    /// A REQ for a service nobody listens on was rejected (invalid service ID) without a
    /// connection: reported so the refusal is not silent.
    ReqRefused {
        /// Who sent it.
        from: Gid,
        /// The service it asked for.
        service_id: ServiceId,
        /// The REJ reason sent.
        reason: CmRejReason,
    },
    /// The peer did not answer within the retries; a REJ (timeout) was sent.
    TimedOut {
        /// The connection.
        conn: ConnId,
    },
    /// The peer asked to disconnect (its DREQ was answered).
    DisconnectRequested {
        /// The connection.
        conn: ConnId,
    },
    /// The connection is down (time-wait entered).
    Disconnected {
        /// The connection.
        conn: ConnId,
    },
    /// Time-wait is over; the connection is gone.
    Closed {
        /// The connection.
        conn: ConnId,
    },
}

/// A port's Communication Manager.
#[derive(Debug)]
pub struct CmEndpoint {
    config: CmConfig,
    next_comm_id: u32,
    next_tid: u32,
    listens: BTreeSet<ServiceId>,
    conns: BTreeMap<CommId, Conn>,
    /// (peer GID, peer CA GUID, peer comm ID) → ours: recognises duplicate REQs.
    by_remote: BTreeMap<(Gid, Guid, CommId), CommId>,
    out: VecDeque<MadOut>,
    events: VecDeque<CmEvent>,
    /// The port's P_Key table, as the HCA has it ([`CmEndpoint::set_pkey_table`]).
    pkeys: Vec<ib_verbs::PKey>,
    /// Messages that matched no connection or did not parse.
    pub stray: u64,
}

fn private<const N: usize>(what: &'static str, bytes: &[u8]) -> Result<PrivateData<N>, CmError> {
    PrivateData::new(bytes).map_err(|_| CmError::PrivateDataTooLong {
        what,
        len: bytes.len(),
        max: N,
    })
}

impl CmEndpoint {
    /// A CM with no connections.
    pub fn new(config: CmConfig) -> Self {
        CmEndpoint {
            config,
            next_comm_id: config.first_comm_id.max(1),
            next_tid: 1,
            listens: BTreeSet::new(),
            conns: BTreeMap::new(),
            by_remote: BTreeMap::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            pkeys: vec![ib_verbs::PKey::DEFAULT],
            stray: 0,
        }
    }

    fn tid(&mut self) -> Tid {
        let t = Tid((u64::from(self.config.agent_id) << 32) | u64::from(self.next_tid));
        self.next_tid = self.next_tid.wrapping_add(1).max(1);
        t
    }

    fn comm_id(&mut self) -> CommId {
        loop {
            let id = CommId(self.next_comm_id);
            self.next_comm_id = self.next_comm_id.wrapping_add(1).max(1);
            if !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    fn emit(&mut self, to: MadAddress, tid: Tid, msg: CmMessage) -> Result<MadBuf, CmError> {
        let mad = AnyMad::cm(tid, msg).to_buf()?;
        self.out.push_back(MadOut {
            to,
            mad: mad.clone(),
        });
        Ok(mad)
    }

    /// Accepts REQs for `service_id`.
    pub fn listen(&mut self, service_id: ServiceId) -> Result<(), CmError> {
        if !self.listens.insert(service_id) {
            return Err(CmError::AlreadyListening(service_id));
        }
        Ok(())
    }

    /// Stops accepting REQs for `service_id` (connections already made stay).
    pub fn unlisten(&mut self, service_id: ServiceId) {
        self.listens.remove(&service_id);
    }

    /// The state of a connection (`Closed` once it is gone).
    pub fn state(&self, conn: ConnId) -> ConnState {
        self.conns
            .get(&conn.0)
            .map_or(ConnState::Closed, |c| c.state)
    }

    /// The REQ and REP a connection was made with (the QP attributes each side chose).
    pub fn exchange(&self, conn: ConnId) -> Option<(Option<&CmReq>, Option<&CmRep>)> {
        self.conns
            .get(&conn.0)
            .map(|c| (c.req.as_ref(), c.rep.as_ref()))
    }

    /// The service a connection is for.
    pub fn service_id(&self, conn: ConnId) -> Option<ServiceId> {
        self.conns.get(&conn.0).map(|c| c.service_id)
    }

    /// The peer of a connection.
    pub fn peer(&self, conn: ConnId) -> Option<MadAddress> {
        self.conns.get(&conn.0).map(|c| c.peer)
    }

    /// Connections that exist (in any state but closed).
    pub fn connections(&self) -> impl Iterator<Item = (ConnId, ConnState, Role)> + '_ {
        self.conns
            .values()
            .map(|c| (ConnId(c.local_id), c.state, c.role))
    }

    /// Sends a REQ.
    pub fn connect(&mut self, now: Time, p: &ConnectParams) -> Result<ConnId, CmError> {
        let pd = private("REQ", &p.private_data)?;
        let local_id = self.comm_id();
        let path = CmPath {
            local_lid: Lid::PERMISSIVE,
            remote_lid: Lid::PERMISSIVE,
            local_gid: self.config.local_gid,
            remote_gid: p.to.gid,
            flow_label: 0,
            packet_rate: 0,
            traffic_class: 0,
            hop_limit: 64,
            sl: 0,
            subnet_local: false,
            local_ack_timeout: 14,
        };
        let pkey = *self
            .pkeys
            .get(usize::from(p.to.pkey_index))
            .ok_or(CmError::NoSuchPartition(p.to.pkey_index))?;
        let mut req = CmReq::rc(
            local_id,
            p.service_id,
            self.config.local_ca_guid,
            p.qpn,
            p.receive_psn,
            p.mtu,
            path,
            pd,
        );
        req.pkey = pkey;
        req.responder_resources = p.responder_resources;
        req.initiator_depth = p.initiator_depth;
        req.remote_cm_response_timeout = p.response_timeout.min(31);
        req.local_cm_response_timeout = p.response_timeout.min(31);
        req.max_cm_retries = p.max_retries.min(15);
        req.retry_count = p.retry_count.min(7);
        req.rnr_retry_count = p.rnr_retry_count.min(7);
        let tid = self.tid();
        let sent = self.emit(p.to, tid, CmMessage::Req(req))?;
        let timeout = ack_timeout(req.remote_cm_response_timeout).unwrap_or(Duration::from_secs(1));
        self.conns.insert(
            local_id,
            Conn {
                role: Role::Active,
                state: ConnState::ReqSent,
                local_id,
                remote_id: CommId(0),
                peer: p.to,
                service_id: p.service_id,
                tid,
                last_sent: Some(sent),
                final_sent: None,
                retries_left: req.max_cm_retries,
                max_retries: req.max_cm_retries,
                timeout,
                timer: Some(now + timeout),
                peer_qpn: Qpn::default(),
                req: Some(req),
                rep: None,
            },
        );
        Ok(ConnId(local_id))
    }

    fn conn_in(
        &mut self,
        conn: ConnId,
        states: &[ConnState],
        what: &'static str,
    ) -> Result<&mut Conn, CmError> {
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(CmError::NoSuchConn(conn))?;
        if !states.contains(&c.state) {
            return Err(CmError::WrongState {
                conn,
                state: c.state,
                what,
            });
        }
        Ok(c)
    }

    /// The port's P_Key table (index → P_Key, as given to the HCA with
    /// `Engine::set_pkey_table`): the REQs it sends carry the P_Key of the partition they
    /// go out on, and a REQ received must name the partition it arrived on.
    pub fn set_pkey_table(&mut self, table: Vec<ib_verbs::PKey>) {
        self.pkeys = table;
    }

    /// Answers a REQ with a REP.
    pub fn accept(&mut self, now: Time, conn: ConnId, p: &AcceptParams) -> Result<(), CmError> {
        let pd = private("REP", &p.private_data)?;
        let ca = self.config.local_ca_guid;
        let c = self.conn_in(conn, &[ConnState::ReqReceived], "accept")?;
        let rep = CmRep {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            local_qkey: QKey(0),
            local_qpn: p.qpn,
            local_eecn: 0,
            starting_psn: p.receive_psn,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            target_ack_delay: 0,
            failover_accepted: 0,
            e2e_flow_control: true,
            rnr_retry_count: p.rnr_retry_count.min(7),
            srq: false,
            local_ca_guid: ca,
            private_data: pd,
        };
        let (to, tid) = (c.peer, c.tid);
        let sent = self.emit(to, tid, CmMessage::Rep(rep))?;
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.rep = Some(rep);
            c.last_sent = Some(sent);
            c.state = ConnState::RepSent;
            c.retries_left = c.max_retries;
            c.timer = Some(now + c.timeout);
        }
        Ok(())
    }

    /// Rejects a REQ (passive) or a REP (active), with `reason` and private data (an
    /// SRP_LOGIN_REJ with [`CmRejReason::ConsumerDefined`]).
    pub fn reject(
        &mut self,
        conn: ConnId,
        reason: CmRejReason,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let pd = private("REJ", private_data)?;
        let c = self.conn_in(
            conn,
            &[ConnState::ReqReceived, ConnState::RepReceived],
            "reject",
        )?;
        let message = if c.state == ConnState::ReqReceived {
            RejMessage::Req
        } else {
            RejMessage::Rep
        };
        let rej = CmRej::new(c.local_id, c.remote_id, message, reason, pd);
        let (to, tid) = (c.peer, c.tid);
        self.emit(to, tid, CmMessage::Rej(rej))?;
        self.remove(conn.0);
        Ok(())
    }

    /// Tells the passive side to wait longer for our REP (4.096 µs × 2^`service_timeout`).
    pub fn send_mra(&mut self, conn: ConnId, service_timeout: u8) -> Result<(), CmError> {
        let c = self.conn_in(conn, &[ConnState::ReqReceived], "send an MRA")?;
        let mra = CmMra {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            message_mraed: MraMessage::Req,
            service_timeout: service_timeout.min(31),
            private_data: PrivateData::default(),
        };
        let (to, tid) = (c.peer, c.tid);
        self.emit(to, tid, CmMessage::Mra(mra))?;
        Ok(())
    }

    /// Answers a REP with an RTU: the connection is established.
    pub fn confirm(&mut self, conn: ConnId) -> Result<(), CmError> {
        let c = self.conn_in(conn, &[ConnState::RepReceived], "confirm")?;
        let rtu = CmRtu {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            private_data: PrivateData::default(),
        };
        let (to, tid) = (c.peer, c.tid);
        let sent = self.emit(to, tid, CmMessage::Rtu(rtu))?;
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.final_sent = Some(sent);
            c.state = ConnState::Established;
            c.timer = None;
        }
        self.events.push_back(CmEvent::Established { conn });
        Ok(())
    }

    /// Passive side: traffic arrived on the QP before the RTU, which proves the peer got
    /// our REP (IBTA "communication established"): the connection is established.
    pub fn notify_established(&mut self, conn: ConnId) -> Result<(), CmError> {
        let c = self.conn_in(conn, &[ConnState::RepSent], "mark established")?;
        c.state = ConnState::Established;
        c.timer = None;
        self.events.push_back(CmEvent::Established { conn });
        Ok(())
    }

    /// Sends a DREQ.
    pub fn disconnect(&mut self, now: Time, conn: ConnId) -> Result<(), CmError> {
        let c = self.conn_in(
            conn,
            &[ConnState::Established, ConnState::RepSent],
            "disconnect",
        )?;
        let dreq = CmDreq {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            remote_qpn: c.peer_qpn,
            private_data: PrivateData::default(),
        };
        let to = c.peer;
        let tid = self.tid();
        let sent = self.emit(to, tid, CmMessage::Dreq(dreq))?;
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.last_sent = Some(sent);
            c.state = ConnState::DreqSent;
            c.retries_left = c.max_retries;
            c.timer = Some(now + c.timeout);
        }
        Ok(())
    }

    /// Forgets a connection without sending anything, as if this side had died: no DREQ,
    /// no time-wait. Its peer finds out by its own timeouts; a later MAD for it is treated
    /// as one for an unknown connection. For failover drills that kill a controller.
    pub fn abandon(&mut self, conn: ConnId) -> Result<(), CmError> {
        if !self.conns.contains_key(&conn.0) {
            return Err(CmError::NoSuchConn(conn));
        }
        self.remove(conn.0);
        self.events.push_back(CmEvent::Closed { conn });
        Ok(())
    }

    fn remove(&mut self, id: CommId) {
        if let Some(c) = self.conns.remove(&id) {
            if let Some(req) = &c.req {
                if c.role == Role::Passive {
                    self.by_remote
                        .remove(&(c.peer.gid, req.local_ca_guid, req.local_comm_id));
                }
            }
        }
    }

    /// A CM MAD arrived from `from`.
    pub fn handle_mad(&mut self, now: Time, from: MadAddress, bytes: &[u8]) {
        let Ok(any) = parse_any(bytes) else {
            self.stray += 1;
            return;
        };
        let (MadBody::Cm(msg), Method::Send) = (any.body, any.header.method) else {
            self.stray += 1;
            return;
        };
        let tid = any.header.tid;
        let (to_id, input) = match msg {
            CmMessage::Req(req) => return self.on_req(from, tid, req),
            CmMessage::Rep(rep) => (rep.remote_comm_id, Input::Rep),
            CmMessage::Rtu(rtu) => (rtu.remote_comm_id, Input::Rtu),
            CmMessage::Rej(rej) => (rej.remote_comm_id, Input::Rej),
            CmMessage::Mra(mra) => (mra.remote_comm_id, Input::Mra),
            CmMessage::Dreq(dreq) => (dreq.remote_comm_id, Input::Dreq),
            CmMessage::Drep(drep) => (drep.remote_comm_id, Input::Drep),
            CmMessage::ClassPortInfo(_) => return,
        };
        let mut to_id = to_id;
        if let (CmMessage::Rej(rej), true) = (&msg, to_id.0 == 0) {
            // A REJ sent before the rejecter learned our ID (its REQ timed out, or it rejects
            // our REP unseen) names only its own ID: find the connection through that.
            if let Some(c) = self
                .conns
                .values()
                .find(|c| c.peer.gid == from.gid && c.remote_id == rej.local_comm_id)
            {
                to_id = c.local_id;
            }
        }
        let known = self
            .conns
            .get(&to_id)
            .is_some_and(|c| c.peer.gid == from.gid);
        if !known {
            self.stray += 1;
            self.answer_stray(from, tid, &msg);
            return;
        }
        let Some(c) = self.conns.get(&to_id) else {
            return;
        };
        let action = c.on(input);
        self.apply(now, to_id, action, from, tid, Some(&msg));
    }

    /// Messages for no connection of ours: a REP is rejected (the peer then closes), a DREQ
    /// is answered (the peer then completes its disconnect), the rest is dropped.
    fn answer_stray(&mut self, from: MadAddress, tid: Tid, msg: &CmMessage) {
        match msg {
            CmMessage::Rep(rep) => {
                let rej = CmRej::new(
                    CommId(0),
                    rep.local_comm_id,
                    RejMessage::Rep,
                    CmRejReason::InvalidCommId,
                    PrivateData::default(),
                );
                let _ = self.emit(from, tid, CmMessage::Rej(rej));
            }
            CmMessage::Dreq(dreq) => {
                let drep = CmDrep {
                    local_comm_id: CommId(0),
                    remote_comm_id: dreq.local_comm_id,
                    private_data: PrivateData::default(),
                };
                let _ = self.emit(from, tid, CmMessage::Drep(drep));
            }
            _ => {}
        }
    }

    fn on_req(&mut self, from: MadAddress, tid: Tid, req: CmReq) {
        let key = (from.gid, req.local_ca_guid, req.local_comm_id);
        if let Some(&ours) = self.by_remote.get(&key) {
            if let Some(c) = self.conns.get(&ours) {
                let action = c.on(Input::DupReq);
                if action == Action::Resend {
                    if let Some(m) = c.last_sent.clone() {
                        self.out.push_back(MadOut { to: c.peer, mad: m });
                    }
                }
                return;
            }
        }
        if !self.listens.contains(&req.service_id) {
            return self.refuse_req(from, tid, &req, CmRejReason::InvalidServiceId);
        }
        // The REQ's primary path names the requester's port GID, which the connection's QP
        // will send to. It must be the address the REQ came from: otherwise anyone could
        // log in under another host's address (and its initiator port ID), and the target
        // would aim the channel at a port that never asked. Linux's REQ names its own
        // address there (cm_linux_psn.rs pins a capture). Refused as Linux's CM refuses a
        // path it cannot use: REJ reason 12, primary remote port GID rejected.
        if req.primary_path.local_gid != from.gid {
            return self.refuse_req(from, tid, &req, CmRejReason::InvalidGid);
        }
        // The connection's partition is the REQ's P_Key: it must be the partition the REQ
        // arrived on (the HCA matched the packet's P_Key against the port's table), or the
        // connection would live on a partition the requester is not in. Refused as Linux's
        // CM refuses a path whose P_Key its port does not have: REJ reason 12.
        let arrived = self.pkeys.get(usize::from(from.pkey_index));
        if arrived.is_none_or(|k| k.base() != req.pkey.base()) {
            return self.refuse_req(from, tid, &req, CmRejReason::InvalidGid);
        }
        let local_id = self.comm_id();
        // How long the requester says it takes to answer our REP, capped: the REQ is the
        // peer's word, and a connection waiting for an RTU holds the consumer's resources.
        let code = req.local_cm_response_timeout.min(MAX_PEER_RESPONSE_TIMEOUT);
        let timeout = ack_timeout(code).unwrap_or(Duration::from_secs(1));
        self.conns.insert(
            local_id,
            Conn {
                role: Role::Passive,
                state: ConnState::ReqReceived,
                local_id,
                remote_id: req.local_comm_id,
                peer: from,
                service_id: req.service_id,
                tid,
                last_sent: None,
                final_sent: None,
                retries_left: req.max_cm_retries,
                max_retries: req.max_cm_retries,
                timeout,
                timer: None,
                peer_qpn: req.local_qpn,
                req: Some(req),
                rep: None,
            },
        );
        self.by_remote.insert(key, local_id);
        self.events.push_back(CmEvent::ReqReceived {
            conn: ConnId(local_id),
            from,
            req,
        });
    }

    /// Answers a REQ that never became a connection with a REJ for `reason`, and reports it.
    fn refuse_req(&mut self, from: MadAddress, tid: Tid, req: &CmReq, reason: CmRejReason) {
        let rej = CmRej::new(
            CommId(0),
            req.local_comm_id,
            RejMessage::Req,
            reason,
            PrivateData::default(),
        );
        let _ = self.emit(from, tid, CmMessage::Rej(rej));
        self.events.push_back(CmEvent::ReqRefused {
            from: from.gid,
            service_id: req.service_id,
            reason,
        });
    }

    /// Carries out a transition's action for the connection `id`.
    /// `msg` is the message that caused it (`None` for a timer).
    fn apply(
        &mut self,
        now: Time,
        id: CommId,
        action: Action,
        from: MadAddress,
        tid: Tid,
        msg: Option<&CmMessage>,
    ) {
        let time_wait = self.config.time_wait;
        let conn = ConnId(id);
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        match action {
            Action::Ignore => {}
            Action::Resend => {
                // A timer retransmission spends a retry; answering a duplicate does not.
                if msg.is_none() {
                    c.retries_left = c.retries_left.saturating_sub(1);
                }
                c.timer = Some(now + c.timeout);
                if let Some(m) = c.last_sent.clone() {
                    let to = c.peer;
                    self.out.push_back(MadOut { to, mad: m });
                }
            }
            Action::GiveUp => {
                let (local, remote, to, ctid) = (c.local_id, c.remote_id, c.peer, c.tid);
                let message = if c.role == Role::Active {
                    RejMessage::Other
                } else {
                    RejMessage::Rep
                };
                let rej = CmRej::new(
                    local,
                    remote,
                    message,
                    CmRejReason::Timeout,
                    PrivateData::default(),
                );
                let _ = self.emit(to, ctid, CmMessage::Rej(rej));
                self.remove(id);
                self.events.push_back(CmEvent::TimedOut { conn });
            }
            Action::GiveUpDisconnect | Action::Disconnected => {
                c.state = ConnState::TimeWait;
                c.timer = Some(now + time_wait);
                self.events.push_back(CmEvent::Disconnected { conn });
            }
            Action::RepArrived => {
                let Some(CmMessage::Rep(rep)) = msg else {
                    return;
                };
                c.remote_id = rep.local_comm_id;
                c.peer_qpn = rep.local_qpn;
                c.rep = Some(*rep);
                c.state = ConnState::RepReceived;
                c.timer = None;
                self.events
                    .push_back(CmEvent::RepReceived { conn, rep: *rep });
            }
            Action::Establish => {
                c.state = ConnState::Established;
                c.timer = None;
                self.events.push_back(CmEvent::Established { conn });
            }
            Action::Rejected => {
                let Some(CmMessage::Rej(rej)) = msg else {
                    return;
                };
                let event = CmEvent::Rejected {
                    conn,
                    reason: rej.reason,
                    private_data: rej.private_data,
                };
                self.remove(id);
                self.events.push_back(event);
            }
            Action::Extend => {
                let Some(CmMessage::Mra(mra)) = msg else {
                    return;
                };
                c.state = ConnState::MraReceived;
                let extra = ack_timeout(mra.service_timeout).unwrap_or_default();
                c.timer = Some(now + extra + c.timeout);
            }
            Action::AnswerDreq => {
                let drep = CmDrep {
                    local_comm_id: c.local_id,
                    remote_comm_id: c.remote_id,
                    private_data: PrivateData::default(),
                };
                let mad = AnyMad::cm(tid, CmMessage::Drep(drep)).to_buf();
                c.state = ConnState::TimeWait;
                c.timer = Some(now + time_wait);
                if let Ok(mad) = mad {
                    c.final_sent = Some(mad.clone());
                    self.out.push_back(MadOut { to: from, mad });
                }
                self.events.push_back(CmEvent::DisconnectRequested { conn });
                self.events.push_back(CmEvent::Disconnected { conn });
            }
            Action::Remove => {
                self.remove(id);
                self.events.push_back(CmEvent::Closed { conn });
            }
            Action::ResendRtu | Action::ResendDrep => {
                if let Some(m) = c.final_sent.clone() {
                    self.out.push_back(MadOut { to: from, mad: m });
                }
            }
        }
    }

    /// Time passed: retransmits, gives up, and ends time-waits that are due.
    pub fn handle_timeout(&mut self, now: Time) {
        let due: Vec<CommId> = self
            .conns
            .values()
            .filter(|c| c.timer.is_some_and(|t| t <= now))
            .map(|c| c.local_id)
            .collect();
        for id in due {
            let Some(c) = self.conns.get(&id) else {
                continue;
            };
            let (action, peer, tid) = (c.on(Input::Timeout), c.peer, c.tid);
            self.apply(now, id, action, peer, tid, None);
        }
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<MadOut> {
        self.out.pop_front()
    }

    /// The next event for the consumer.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }

    /// When [`CmEndpoint::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.conns.values().filter_map(|c| c.timer).min()
    }
}
