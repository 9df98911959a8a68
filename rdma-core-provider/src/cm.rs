//! [`RdmaCm`]: the connection-manager seam over librdmacm — the kernel's CM, which owns
//! QP1 under rdma-core. Only the RDMA-CM form exists here (a service ID in the TCP port
//! space: `ib_srp ... dest=ip:port`); user space cannot reach the IB CM form since Linux
//! removed `ib_ucm`, so such a service is refused by name.
//!
//! Our QPs are our own (`id->qp` is NULL): librdmacm never touches them. Their attributes
//! come from `rdma_init_qp_attr` — the PSNs the kernel's CM put in the REQ and REP, the
//! path, the peer's QP — and the consumer connects them; the passive side may go to RTS
//! before `rdma_accept` (`cm_init_qp_rts_attr` allows it), the active side connects its
//! QP on the response and `rdma_establish` sends the RTU. The active side gets no
//! ESTABLISHED event in this mode: [`ConnectionManager::establish`] reports it itself.
//! Private data as the kernel's RDMA-CM hands it: a request's 56 bytes after the cma
//! header (always 56, zero-padded), a response's 196, a reject's 148 with the reject's
//! reason as the event's status (28, consumer defined, for `rdma_reject`). Facts observed
//! on Linux 6.1 rxe and read in rdma-core 44 (docs/protocol-notes.md, "rdma-core").

use crate::ca::RdmaCa;
use crate::ffi::cm::{CmEventRec, CmId, ConnParams, EventChannel};
use crate::ffi::types::*;
use access_layer::cm::{
    AcceptRequest, CmError, CmStats, ConnEvent, ConnId, ConnRequest, ConnState, ConnectRequest,
    ConnectionManager,
};
use access_layer::mad::cm::{CmRejReason, RdmaPortSpace};
use access_layer::mad::{CommId, ServiceId};
use ib_verbs::{Access, Gid, PKey, PathMtu, Psn, Qpn, RcConnect, Time};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// How long address and route resolution may take, ms.
const RESOLVE_MS: i32 = 2000;
/// Connection requests a listener queues.
const BACKLOG: i32 = 64;

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Active: resolving the address and route, the request not sent yet.
    Resolving,
    /// Active: the request is sent.
    Requested,
    /// Active: the response came.
    Responded,
    /// Passive: a request waits for the consumer.
    Received,
    /// Passive: accepted, waiting for the RTU.
    Accepted,
    /// Either side: connected.
    Established,
    /// We asked to disconnect.
    Disconnecting,
    /// Down; waiting for time-wait's end.
    TimeWait,
}

/// What an active connection sends once its route is resolved.
struct Pending {
    private_data: Vec<u8>,
    responder_resources: u8,
    initiator_depth: u8,
    retry_count: u8,
    rnr_retry_count: u8,
    qpn: Qpn,
}

struct Conn {
    id: CmId,
    phase: Phase,
    pending: Option<Pending>,
}

/// One port's connections through librdmacm. See the module doc.
pub struct RdmaCm {
    ca: Arc<RdmaCa>,
    channel: Arc<EventChannel>,
    listeners: HashMap<ServiceId, CmId>,
    conns: HashMap<ConnId, Conn>,
    by_id: HashMap<usize, ConnId>,
    next: u32,
    events: VecDeque<ConnEvent>,
    stats: CmStats,
}

fn provider(what: &str, e: &std::io::Error) -> CmError {
    CmError::Provider(format!("{what}: {e}"))
}

impl RdmaCm {
    /// A connection manager on `ca`'s device, its events ringing `ca`'s handler
    /// (`Event::CmReady`).
    pub(crate) fn new(ca: Arc<RdmaCa>) -> Result<RdmaCm, CmError> {
        let channel = EventChannel::create().map_err(|e| {
            CmError::Setup(format!(
                "rdma_create_event_channel: {e} (is the rdma_ucm module loaded?)"
            ))
        })?;
        ca.events
            .watch(channel.fd())
            .map_err(|e| CmError::Setup(format!("watching the CM's events: {e}")))?;
        Ok(RdmaCm {
            ca,
            channel,
            listeners: HashMap::new(),
            conns: HashMap::new(),
            by_id: HashMap::new(),
            next: 0,
            events: VecDeque::new(),
            stats: CmStats::default(),
        })
    }

    fn local_ip(&self) -> IpAddr {
        self.ca.shared.dev.gid.to_ip()
    }

    fn new_conn(&mut self, id: CmId, phase: Phase, pending: Option<Pending>) -> ConnId {
        self.next = self.next.wrapping_add(1).max(1);
        let conn = ConnId(CommId(self.next));
        self.by_id.insert(id.addr(), conn);
        self.conns.insert(conn, Conn { id, phase, pending });
        conn
    }

    fn remove(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            self.by_id.remove(&c.id.addr());
        }
    }

    fn conn(&mut self, conn: ConnId) -> Result<&mut Conn, CmError> {
        self.conns.get_mut(&conn).ok_or(CmError::NoSuchConn(conn))
    }

    /// The TCP port of an RDMA-CM service, or the refusal of any other.
    fn rdma_port(service_id: ServiceId) -> Result<u16, CmError> {
        match service_id.rdma_ip_parts() {
            Some((RdmaPortSpace::Tcp, port)) => Ok(port),
            _ => Err(CmError::Unsupported(format!(
                "service {:#018x}: only the RDMA-CM login form is available under rdma-core \
                 (the kernel owns the IB CM; Linux removed ib_ucm)",
                service_id.0
            ))),
        }
    }

    /// One event from the channel.
    fn on_event(&mut self, ev: CmEventRec) {
        if ev.event == RDMA_CM_EVENT_CONNECT_REQUEST {
            return self.on_request(&ev);
        }
        let Some(&conn) = self.by_id.get(&ev.id) else {
            // A listener's own event (none is expected) or a destroyed id's.
            self.stats.unknown_events += 1;
            tracing::info!(
                event = ev.event,
                status = ev.status,
                "RDMA-CM event for no connection (counted)"
            );
            return;
        };
        match ev.event {
            RDMA_CM_EVENT_ADDR_RESOLVED => {
                let ok = self
                    .conns
                    .get(&conn)
                    .map(|c| c.id.resolve_route(RESOLVE_MS));
                if let Some(Err(e)) = ok {
                    self.fail(conn, &format!("rdma_resolve_route: {e}"));
                }
            }
            RDMA_CM_EVENT_ROUTE_RESOLVED => self.send_request(conn),
            RDMA_CM_EVENT_CONNECT_RESPONSE => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.phase = Phase::Responded;
                }
                self.events.push_back(ConnEvent::Response {
                    conn,
                    private_data: ev.private_data,
                });
            }
            RDMA_CM_EVENT_REJECTED => {
                self.remove(conn);
                let reason = CmRejReason::from(u16::try_from(ev.status).unwrap_or(0));
                self.events.push_back(ConnEvent::Rejected {
                    conn,
                    reason,
                    private_data: ev.private_data,
                });
            }
            RDMA_CM_EVENT_ADDR_ERROR
            | RDMA_CM_EVENT_ROUTE_ERROR
            | RDMA_CM_EVENT_CONNECT_ERROR
            | RDMA_CM_EVENT_UNREACHABLE => {
                let what = match ev.event {
                    RDMA_CM_EVENT_ADDR_ERROR => "address resolution failed",
                    RDMA_CM_EVENT_ROUTE_ERROR => "route resolution failed",
                    RDMA_CM_EVENT_UNREACHABLE => "the peer did not answer",
                    _ => "the connection failed",
                };
                self.fail(conn, &format!("{what} (status {})", ev.status));
            }
            RDMA_CM_EVENT_ESTABLISHED => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.phase = Phase::Established;
                }
                self.events.push_back(ConnEvent::Established { conn });
            }
            RDMA_CM_EVENT_DISCONNECTED | RDMA_CM_EVENT_DEVICE_REMOVAL => {
                let ours = self
                    .conns
                    .get(&conn)
                    .is_some_and(|c| c.phase == Phase::Disconnecting);
                if let Some(c) = self.conns.get_mut(&conn) {
                    if !ours {
                        // The peer's DREQ: our disconnect sends the DREP.
                        let _ = c.id.disconnect();
                    }
                    c.phase = Phase::TimeWait;
                }
                if !ours {
                    self.events
                        .push_back(ConnEvent::DisconnectRequested { conn });
                }
                self.events.push_back(ConnEvent::Disconnected { conn });
            }
            RDMA_CM_EVENT_TIMEWAIT_EXIT => {
                self.remove(conn);
                self.events.push_back(ConnEvent::Closed { conn });
            }
            other => {
                self.stats.unknown_events += 1;
                tracing::info!(event = other, "RDMA-CM event not used here (counted)");
            }
        }
    }

    /// An active connection ends before it was made: reported as a timeout (the consumer
    /// retries), with the reason logged.
    fn fail(&mut self, conn: ConnId, why: &str) {
        tracing::warn!(conn = conn.0.0, "RDMA-CM connection attempt: {why}");
        self.remove(conn);
        self.events.push_back(ConnEvent::TimedOut { conn });
    }

    fn send_request(&mut self, conn: ConnId) {
        let dev_ok = {
            let dev = &self.ca.shared.dev;
            self.conns
                .get(&conn)
                .is_some_and(|c| c.id.is_on(&dev.ctx, dev.port))
        };
        if !dev_ok {
            return self.fail(
                conn,
                "the route leaves through another RDMA device than this port's",
            );
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(p) = c.pending.take() else {
            return;
        };
        let r = c.id.connect(&ConnParams {
            private_data: &p.private_data,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            qp_num: p.qpn.get(),
        });
        match r {
            Ok(()) => c.phase = Phase::Requested,
            Err(e) => self.fail(conn, &format!("rdma_connect: {e}")),
        }
    }

    fn on_request(&mut self, ev: &CmEventRec) {
        let service = self
            .listeners
            .iter()
            .find(|(_, l)| l.addr() == ev.listen_id)
            .map(|(s, _)| *s);
        let Some(id) = CmId::adopt(ev.id, &self.channel) else {
            return;
        };
        let Some(service_id) = service else {
            // A request to a listener unlistened meanwhile: refused (dropping the id
            // rejects it).
            self.stats.unknown_events += 1;
            tracing::warn!("RDMA-CM request for a service no longer listened on: rejected");
            let _ = id.reject(&[]);
            return;
        };
        let (local, peer) = id.addrs();
        let (Some(local), Some(peer)) = (local, peer) else {
            let _ = id.reject(&[]);
            return;
        };
        // The path MTU and ACK timeout the kernel's CM derived from the REQ.
        let rtr = id.init_qp_attr(IBV_QPS_RTR).ok();
        let rts = id.init_qp_attr(IBV_QPS_RTS).ok();
        let pkey_index = id
            .init_qp_attr(IBV_QPS_INIT)
            .map_or(0, |(a, _)| a.pkey_index);
        // The REQ's P_Key as rdma-cm reports it; over RoCE it reports none (0: the kernel's
        // RoCE address has no P_Key) and the connection is on the P_Key the QP's index
        // names (the default partition, 0xFFFF, on rxe).
        let pkey = match id.pkey() {
            0 | 0x8000 => {
                let dev = &self.ca.shared.dev;
                dev.ctx.pkey(dev.port, pkey_index).unwrap_or(0xFFFF)
            }
            k => k,
        };
        let pkey = PKey(pkey);
        let conn = self.new_conn(id, Phase::Received, None);
        let req = ConnRequest {
            conn,
            service_id,
            private_data: ev.private_data.clone(),
            from: Gid::from_ip(peer.ip()),
            rdma_cm: Some((peer.ip(), local.ip(), peer.port())),
            peer_ca_guid: None,
            peer_qpn: Qpn::from_wire(ev.qp_num),
            pkey_index,
            pkey,
            responder_resources: ev.responder_resources,
            initiator_depth: ev.initiator_depth,
            retry_count: ev.retry_count,
            rnr_retry_count: ev.rnr_retry_count,
            path_mtu: rtr.map_or(PathMtu::Mtu1024, |(a, _)| {
                PathMtu::from(u8::try_from(a.path_mtu).unwrap_or(3))
            }),
            local_ack_timeout: rts.map_or(0, |(a, _)| a.timeout),
        };
        self.events.push_back(ConnEvent::Request(Box::new(req)));
    }
}

impl Drop for RdmaCm {
    fn drop(&mut self) {
        self.ca.events.unwatch(self.channel.fd());
        // Ids go before the channel (each holds it); a connected one's DREQ is the
        // kernel's.
        self.conns.clear();
        self.listeners.clear();
    }
}

impl ConnectionManager for RdmaCm {
    fn listen(&mut self, service_id: ServiceId) -> Result<(), CmError> {
        let port = Self::rdma_port(service_id)?;
        if self.listeners.contains_key(&service_id) {
            return Err(CmError::AlreadyListening(service_id));
        }
        let id = CmId::create(&self.channel).map_err(|e| provider("rdma_create_id", &e))?;
        let addr = SocketAddr::new(self.local_ip(), port);
        id.bind(addr)
            .map_err(|e| provider(&format!("rdma_bind_addr {addr}"), &e))?;
        id.listen(BACKLOG)
            .map_err(|e| provider(&format!("rdma_listen {addr}"), &e))?;
        self.listeners.insert(service_id, id);
        Ok(())
    }

    fn unlisten(&mut self, service_id: ServiceId) {
        self.listeners.remove(&service_id);
    }

    fn connect(&mut self, req: &ConnectRequest) -> Result<ConnId, CmError> {
        let port = Self::rdma_port(req.service_id)?;
        if req.private_data.len() > 56 {
            return Err(CmError::PrivateDataTooLong {
                what: "RDMA-CM REQ",
                len: req.private_data.len(),
                max: 56,
            });
        }
        let id = CmId::create(&self.channel).map_err(|e| provider("rdma_create_id", &e))?;
        let src = SocketAddr::new(self.local_ip(), 0);
        let dst = SocketAddr::new(req.to.to_ip(), port);
        id.resolve_addr(src, dst, RESOLVE_MS)
            .map_err(|e| provider(&format!("rdma_resolve_addr {src} -> {dst}"), &e))?;
        let pending = Pending {
            private_data: req.private_data.clone(),
            responder_resources: req.responder_resources,
            initiator_depth: req.initiator_depth,
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
            qpn: req.qpn,
        };
        Ok(self.new_conn(id, Phase::Resolving, Some(pending)))
    }

    fn qp_attrs(&mut self, conn: ConnId) -> Result<RcConnect, CmError> {
        let c = self.conn(conn)?;
        let get = |state| {
            c.id.init_qp_attr(state)
                .map(|(a, _)| a)
                .map_err(|e| provider("rdma_init_qp_attr", &e))
        };
        // INIT on the active side before the request would carry no access (rdma-core's
        // own QPs redo INIT here too); on either side now it carries the CM's.
        let init = get(IBV_QPS_INIT)?;
        let rtr = get(IBV_QPS_RTR)?;
        let rts = get(IBV_QPS_RTS)?;
        Ok(RcConnect {
            access: Access::from_bits_truncate(init.qp_access_flags),
            dest_gid: Gid(rtr.ah_attr.grh.dgid.raw),
            dest_qpn: Qpn::from_wire(rtr.dest_qp_num),
            path_mtu: PathMtu::from(u8::try_from(rtr.path_mtu).unwrap_or(3)),
            sq_psn: Psn::from_wire(rts.sq_psn),
            rq_psn: Psn::from_wire(rtr.rq_psn),
            timeout: rts.timeout,
            retry_cnt: rts.retry_cnt,
            rnr_retry: rts.rnr_retry,
            min_rnr_timer: rtr.min_rnr_timer,
            max_rd_atomic: rts.max_rd_atomic,
            max_dest_rd_atomic: rtr.max_dest_rd_atomic,
            pkey_index: init.pkey_index,
            flow_label: rtr.ah_attr.grh.flow_label,
            hop_limit: rtr.ah_attr.grh.hop_limit,
            traffic_class: rtr.ah_attr.grh.traffic_class,
        })
    }

    fn accept(&mut self, conn: ConnId, accept: &AcceptRequest) -> Result<(), CmError> {
        if accept.private_data.len() > 196 {
            return Err(CmError::PrivateDataTooLong {
                what: "REP",
                len: accept.private_data.len(),
                max: 196,
            });
        }
        let c = self.conn(conn)?;
        c.id.accept(&ConnParams {
            private_data: &accept.private_data,
            responder_resources: accept.responder_resources,
            initiator_depth: accept.initiator_depth,
            retry_count: 7,
            rnr_retry_count: accept.rnr_retry_count,
            qp_num: accept.qpn.get(),
        })
        .map_err(|e| provider("rdma_accept", &e))?;
        c.phase = Phase::Accepted;
        Ok(())
    }

    fn establish(&mut self, conn: ConnId) -> Result<(), CmError> {
        let c = self.conn(conn)?;
        c.id.establish()
            .map_err(|e| provider("rdma_establish", &e))?;
        c.phase = Phase::Established;
        // No ESTABLISHED event reaches the active side of an own-QP connection.
        self.events.push_back(ConnEvent::Established { conn });
        Ok(())
    }

    fn reject(
        &mut self,
        conn: ConnId,
        reason: CmRejReason,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        if reason != CmRejReason::ConsumerDefined {
            tracing::debug!(?reason, "librdmacm rejects as consumer defined only");
        }
        let data = &private_data[..private_data.len().min(148)];
        let c = self.conn(conn)?;
        let r = c.id.reject(data).map_err(|e| provider("rdma_reject", &e));
        self.remove(conn);
        r
    }

    fn notify_established(&mut self, conn: ConnId) -> Result<(), CmError> {
        // The kernel sees the first packet itself (its COMM_EST); nothing to tell.
        self.conn(conn).map(|_| ())
    }

    fn disconnect(&mut self, conn: ConnId) -> Result<(), CmError> {
        let c = self.conn(conn)?;
        c.id.disconnect()
            .map_err(|e| provider("rdma_disconnect", &e))?;
        c.phase = Phase::Disconnecting;
        Ok(())
    }

    fn abandon(&mut self, conn: ConnId) -> Result<(), CmError> {
        // Destroying a connected id makes the kernel's CM send a DREQ: under rdma-core a
        // dropped connection still says goodbye.
        if !self.conns.contains_key(&conn) {
            return Err(CmError::NoSuchConn(conn));
        }
        self.remove(conn);
        self.events.push_back(ConnEvent::Closed { conn });
        Ok(())
    }

    fn state(&self, conn: ConnId) -> ConnState {
        match self.conns.get(&conn).map(|c| c.phase) {
            None => ConnState::Closed,
            Some(Phase::Resolving | Phase::Requested) => ConnState::ReqSent,
            Some(Phase::Responded) => ConnState::RepReceived,
            Some(Phase::Received) => ConnState::ReqReceived,
            Some(Phase::Accepted) => ConnState::RepSent,
            Some(Phase::Established) => ConnState::Established,
            Some(Phase::Disconnecting) => ConnState::DreqSent,
            Some(Phase::TimeWait) => ConnState::TimeWait,
        }
    }

    fn poll(&mut self, _now: Time) -> usize {
        let mut n = 0;
        while let Some(ev) = self.channel.next_event() {
            n += 1;
            self.on_event(ev);
        }
        n
    }

    fn poll_event(&mut self) -> Option<ConnEvent> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Time> {
        // The kernel's CM keeps the timers.
        None
    }

    fn arm(&mut self) {
        // The event channel is watched edge-triggered by the device's event thread.
    }

    fn stats(&self) -> CmStats {
        self.stats
    }
}
