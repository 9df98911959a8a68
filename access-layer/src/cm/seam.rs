//! The connection-manager seam: connections as a consumer sees them — listen, connect,
//! accept and reject with private data, establish, disconnect, and their events — whoever
//! carries them. Two implementations: the access layer's own CM over QP1
//! ([`crate::mads::MadService`], on providers that give QP1: the software HCA, the
//! simulator's devices) and rdma-core's (librdmacm: the kernel owns QP1 and the CM).
//!
//! # A consumer's calls
//! Passive side: [`ConnectionManager::listen`]; on [`ConnEvent::Request`] either
//! [`ConnectionManager::reject`], or create a QP, take its attributes from
//! [`ConnectionManager::qp_attrs`] (PSNs, path, the peer's QP; the consumer adds its own
//! policy: access rights, RDMA READ depths, timeouts), connect it
//! (`ChannelInterface::connect_rc`) and [`ConnectionManager::accept`]. The connection is
//! [`ConnEvent::Established`] when the RTU arrives (or [`ConnectionManager::notify_established`]
//! on the first traffic).
//!
//! Active side: create a QP, [`ConnectionManager::connect`]; on [`ConnEvent::Response`]
//! (the REP and its private data) connect the QP from [`ConnectionManager::qp_attrs`] and
//! [`ConnectionManager::establish`] (the RTU); or the connection ends
//! [`ConnEvent::Rejected`] / [`ConnEvent::TimedOut`].
//!
//! Either side: [`ConnectionManager::disconnect`]; [`ConnEvent::DisconnectRequested`] and
//! [`ConnEvent::Disconnected`] when the peer does; [`ConnEvent::Closed`] when the
//! connection is gone (its QP may be destroyed once it is disconnected).
//!
//! # Driving it
//! Sans-IO in shape: the consumer calls [`ConnectionManager::poll`] when its CA's event
//! handler rang (a MAD's CQ notification, or `Event::CmReady` from a provider's
//! CM) or a timer from [`ConnectionManager::poll_timeout`] is due, drains
//! [`ConnectionManager::poll_event`], and [`ConnectionManager::arm`]s before it sleeps.
//! Every call is non-blocking (allowed at dispatch level).
//!
//! Private data: what the consumer gives and gets is its own. For a service ID in the
//! RDMA-CM port space the CM adds the 36-byte cma header to a REQ and strips it from a
//! received one (56 bytes remain), as the kernel's RDMA-CM does for a librdmacm listener.
#[allow(unused_imports)]
use crate::prelude::*;

use super::{CmError, ConnId, ConnState};
use crate::dm::{DmAgent, DmClient};
use crate::mad::ServiceId;
use crate::mad::cm::CmRejReason;
use core::net::IpAddr;
use core::time::Duration;
use ib_verbs::{Gid, Guid, PKey, PathMtu, Qpn, RcConnect, Time};

/// What a connection manager is opened with, beyond its port.
#[derive(Clone, Copy, Debug)]
pub struct CmSetup {
    /// How long a closed connection keeps answering stale messages (IBA 12.9.8.5).
    pub time_wait: Duration,
    /// High 32 bits of every MAD TID the CM allocates (QP1 CMs).
    pub agent_id: u32,
    /// The first local communication ID (QP1 CMs; 0 counts as 1): drivers draw it from
    /// their fabric's randomness ([`crate::verbs::Fabric::random`]) — endpoints that share
    /// a CA GUID must not number alike.
    pub first_comm_id: u32,
}

/// What [`ConnectionManager::connect`] asks for.
#[derive(Clone, Debug)]
pub struct ConnectRequest {
    /// Our RC QP (created on the same device, in RESET).
    pub qpn: Qpn,
    /// The passive side's address (its GID: an IPv4-mapped or IPv6 address on RoCE).
    pub to: Gid,
    /// The service: an RDMA-CM one (`ServiceId::rdma_ip`) for `dest=ip:port` logins, any
    /// other for the native IB CM form.
    pub service_id: ServiceId,
    /// The partition: an index in the port's P_Key table.
    pub pkey_index: u16,
    /// RDMA READs we accept in flight (our IRD).
    pub responder_resources: u8,
    /// RDMA READs we issue in flight (our ORD).
    pub initiator_depth: u8,
    /// Path MTU we offer (the port's link MTU).
    pub mtu: PathMtu,
    /// CM response timeout code, both directions (4.096 µs × 2^code).
    pub response_timeout: u8,
    /// CM retransmissions before giving up (at most 15).
    pub max_retries: u8,
    /// Transport retry count the QPs use.
    pub retry_count: u8,
    /// RNR retry count the QPs use.
    pub rnr_retry_count: u8,
    /// Our private data (at most 92 bytes; 56 for an RDMA-CM service).
    pub private_data: Vec<u8>,
}

/// What [`ConnectionManager::accept`] answers with.
#[derive(Clone, Debug)]
pub struct AcceptRequest {
    /// Our RC QP, connected from [`ConnectionManager::qp_attrs`].
    pub qpn: Qpn,
    /// RDMA READs we accept in flight.
    pub responder_resources: u8,
    /// RDMA READs we will issue in flight.
    pub initiator_depth: u8,
    /// RNR retry count the peer should use towards us.
    pub rnr_retry_count: u8,
    /// Private data (at most 196 bytes: an SRP_LOGIN_RSP).
    pub private_data: Vec<u8>,
}

/// A connection request for a service we listen on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnRequest {
    /// The new connection.
    pub conn: ConnId,
    /// The service asked for.
    pub service_id: ServiceId,
    /// The requester's private data (for an RDMA-CM service, what follows the cma header).
    pub private_data: Vec<u8>,
    /// The requester's address (its port GID, checked against where the request came
    /// from).
    pub from: Gid,
    /// For an RDMA-CM service: the addresses the cma header named (source, destination)
    /// and the requester's source port.
    pub rdma_cm: Option<(IpAddr, IpAddr, u16)>,
    /// The requester's CA GUID, where the CM carries it (IB CM REQ).
    pub peer_ca_guid: Option<Guid>,
    /// The requester's QP.
    pub peer_qpn: Qpn,
    /// The partition it arrived on: an index in the port's P_Key table, and its P_Key.
    pub pkey_index: u16,
    /// See `pkey_index`.
    pub pkey: PKey,
    /// RDMA READs the requester accepts in flight (bounds our ORD).
    pub responder_resources: u8,
    /// RDMA READs the requester will issue (bounds our IRD).
    pub initiator_depth: u8,
    /// Transport and RNR retry counts the requester asks for.
    pub retry_count: u8,
    /// See `retry_count`.
    pub rnr_retry_count: u8,
    /// The path MTU the requester offered.
    pub path_mtu: PathMtu,
    /// The requester's local ACK timeout code.
    pub local_ack_timeout: u8,
}

/// What happened, for the consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnEvent {
    /// A request for a service we listen on: accept or reject it.
    Request(Box<ConnRequest>),
    /// The answer to our request (active side): connect the QP
    /// ([`ConnectionManager::qp_attrs`]) and [`ConnectionManager::establish`].
    Response {
        /// The connection.
        conn: ConnId,
        /// The REP's private data (an SRP_LOGIN_RSP).
        private_data: Vec<u8>,
    },
    /// The connection is established.
    Established {
        /// The connection.
        conn: ConnId,
    },
    /// The peer rejected the connection.
    Rejected {
        /// The connection.
        conn: ConnId,
        /// Why (`ConsumerDefined` carries the consumer's reject, an SRP_LOGIN_REJ).
        reason: CmRejReason,
        /// The reject's private data.
        private_data: Vec<u8>,
    },
    /// A request for a service nobody listens on (or on a path it may not use) was
    /// refused without a connection: reported so the refusal is not silent.
    Refused {
        /// Who sent it.
        from: Gid,
        /// The service it asked for.
        service_id: ServiceId,
        /// The reject reason sent.
        reason: CmRejReason,
    },
    /// The peer did not answer within the retries.
    TimedOut {
        /// The connection.
        conn: ConnId,
    },
    /// The peer asked to disconnect (answered).
    DisconnectRequested {
        /// The connection.
        conn: ConnId,
    },
    /// The connection is down (its QP may be destroyed).
    Disconnected {
        /// The connection.
        conn: ConnId,
    },
    /// The connection is gone.
    Closed {
        /// The connection.
        conn: ConnId,
    },
}

/// Counters of a connection manager.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmStats {
    /// Messages that matched no connection or did not parse (QP1 CMs).
    pub stray: u64,
    /// Events the provider reported that the seam does not know (counted, logged).
    pub unknown_events: u64,
}

/// One port's connections. See the module doc.
pub trait ConnectionManager: Send {
    /// Accepts requests for `service_id`. A provider that cannot carry a form (rdma-core:
    /// an IB CM service ID) refuses with [`CmError::Unsupported`].
    fn listen(&mut self, service_id: ServiceId) -> Result<(), CmError>;

    /// Stops accepting requests for `service_id` (connections already made stay).
    fn unlisten(&mut self, service_id: ServiceId);

    /// Sends a connection request from our QP `req.qpn`.
    fn connect(&mut self, req: &ConnectRequest) -> Result<ConnId, CmError>;

    /// The attributes that connect our QP of `conn` to the peer's (its QP, the PSNs both
    /// ways, the path and its MTU — never above our link's —, the partition, the peer's
    /// retry counts and RDMA READ depth), after a [`ConnEvent::Request`] (passive) or a
    /// [`ConnEvent::Response`] (active). The consumer sets its own policy on top (access
    /// rights, READ depths, timeouts) before `connect_rc`.
    fn qp_attrs(&mut self, conn: ConnId) -> Result<RcConnect, CmError>;

    /// Answers a request: our QP is connected (at least RTR); the reply goes out.
    fn accept(&mut self, conn: ConnId, accept: &AcceptRequest) -> Result<(), CmError>;

    /// Active side: our QP is connected; the connection is established (the RTU).
    fn establish(&mut self, conn: ConnId) -> Result<(), CmError>;

    /// Rejects a request (passive) or a response (active) with `reason` and private data.
    /// Under rdma-core the reason is always `ConsumerDefined` (what librdmacm sends).
    fn reject(
        &mut self,
        conn: ConnId,
        reason: CmRejReason,
        private_data: &[u8],
    ) -> Result<(), CmError>;

    /// Passive side: traffic arrived on the QP before the RTU, which proves the peer got
    /// our reply: the connection is established.
    fn notify_established(&mut self, conn: ConnId) -> Result<(), CmError>;

    /// Sends a disconnect request.
    fn disconnect(&mut self, conn: ConnId) -> Result<(), CmError>;

    /// Forgets a connection without a word to the peer, as if this side had died (the
    /// failover drills' "kill"); the peer finds out by its own timeouts.
    fn abandon(&mut self, conn: ConnId) -> Result<(), CmError>;

    /// A connection's state (`Closed` once it is gone).
    fn state(&self, conn: ConnId) -> ConnState;

    /// Moves what arrived and fires due timers; how much happened.
    fn poll(&mut self, now: Time) -> usize;

    /// The next event.
    fn poll_event(&mut self) -> Option<ConnEvent>;

    /// When [`ConnectionManager::poll`] must next run without an outside event.
    fn poll_timeout(&self) -> Option<Time>;

    /// Arms the next notification (the CA's event handler rings when something arrives).
    fn arm(&mut self);

    /// Counters.
    fn stats(&self) -> CmStats;

    /// Device Management on this port — agents answering for our I/O controllers, and a
    /// client sweeping others' — where the CM carries MADs (QP1). `None` under rdma-core:
    /// there the kernel owns QP1, and hosts find targets by configured address and IDs.
    fn device_management(&mut self) -> Option<&mut DeviceManagement> {
        None
    }
}

/// Device Management on a port with QP1: what the MAD service routes DM MADs to.
#[derive(Debug, Default)]
pub struct DeviceManagement {
    /// Agents answering for our I/O controllers, one per partition of the port's P_Key
    /// table, in table order (a target's).
    pub agents: Vec<DmAgent>,
    /// A client sweeping other I/O units (a host's discovery, an adapter's IOC watch).
    pub client: Option<DmClient>,
}
