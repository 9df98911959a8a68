//! The device engine: one HCA's objects and protocol state, sans-IO.
//!
//! Inputs are verbs calls, received datagrams ([`Engine::handle_datagram`]) and the passage
//! of time ([`Engine::handle_timeout`]); outputs are datagrams to send
//! ([`Engine::poll_transmit`]), the next deadline ([`Engine::poll_timeout`]) and
//! asynchronous events ([`Engine::poll_event`]). A driver calls, in a loop: feed what
//! arrived, feed the time when the deadline passed, then drain transmits and events. The
//! engine owns no socket, thread or clock, so the same code runs on UDP sockets and in the
//! seeded simulator.

mod ctx;
mod slab;
mod stats;

pub(crate) use ctx::Ctx;
pub(crate) use slab::Slab;
pub use stats::Stats;

pub use ib_verbs::ca::{CqId, Event, QpId, Resources, SrqId};
pub use ib_verbs::qp::RcConnect;
pub(crate) use stats::StatsTable;

use crate::ids::{Gid, Guid, PKey, Qpn};
use crate::mem::MemBlock;
use crate::mr::{Access, MrError, MrKeys, MrTable, PdId};
use crate::qp::state::{QpAttrMask, QpState, QpType};
use crate::qp::{Qp, QpAttr, QpError, QpInit};
use crate::time::Time;
use crate::verbs::{ArmMode, Cq, RecvWr, SendWr, Srq, SrqFull, Wc};
use crate::wire::{IcrcContext, Kind, Packet, ROCE_V2_UDP_PORT, Transport, WireError};
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// A datagram to send: from port `port`'s address (UDP port 4791) to `dst`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Sending port, 1-based.
    pub port: u8,
    /// Destination address and UDP port.
    pub dst: SocketAddr,
    /// The UDP payload: BTH to ICRC.
    pub bytes: Vec<u8>,
}

/// Why a verb failed synchronously.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// No such object.
    #[error("no such {what} {id}")]
    NoSuch {
        /// Kind of object.
        what: &'static str,
        /// Its id.
        id: u64,
    },
    /// The object is still used by another.
    #[error("{what} {id} is in use by a QP")]
    InUse {
        /// Kind of object.
        what: &'static str,
        /// Its id.
        id: u64,
    },
    /// A QP verb failed.
    #[error(transparent)]
    Qp(#[from] QpError),
    /// A memory region verb failed.
    #[error(transparent)]
    Mr(#[from] MrError),
    /// A shared receive queue is full.
    #[error(transparent)]
    SrqFull(#[from] SrqFull),
    /// The port already has a GSI QP, or does not exist.
    #[error("port {0} does not exist or already has its GSI QP")]
    BadPort(u8),
    /// QP numbers are exhausted.
    #[error("no free QP numbers")]
    NoQpn,
    /// A P_Key table that is empty, longer than 64, or holds base 0 or a partition twice.
    #[error("invalid P_Key table ({len} entries): 1 to 64 distinct partitions, none 0")]
    BadPkeyTable {
        /// Its length.
        len: usize,
    },
}

/// One port: its address (and so its GID) and whether it is up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Port {
    /// The address the port sends from and receives on (UDP 4791).
    pub ip: IpAddr,
    /// Whether the port is active.
    pub active: bool,
}

impl Port {
    /// The port's GID (its address, IPv4-mapped when IPv4).
    pub fn gid(&self) -> Gid {
        Gid::from_ip(self.ip)
    }
}

/// First QP number handed out (rxe starts at 16 too; 0 and 1 are special).
const FIRST_QPN: u32 = 0x11;
/// Memory regions per device.
const MAX_MRS: u32 = 1 << 16;
/// UD QPs send datagrams up to the port MTU.
const PORT_MTU: usize = 4096;

/// One software HCA's state.
pub struct Engine {
    node_guid: Guid,
    ports: Vec<Port>,
    port_ips: Vec<IpAddr>,
    /// Each port's P_Key table ([`Engine::set_pkey_table`]); index 0 is the default
    /// partition (0xFFFF) until configured otherwise.
    pkey_tables: Vec<Vec<PKey>>,
    next_pd: u32,
    mrs: MrTable,
    cqs: Slab<Cq>,
    srqs: Slab<Srq>,
    qps: BTreeMap<QpId, Qp>,
    /// No later than every QP's next timer (None: no QP has one). Kept by [`Engine::note`]
    /// after each call that touched one QP, so a verb does not scan every QP; may be
    /// earlier than the truth (a timer since cancelled): [`Engine::handle_timeout`] then
    /// finds nothing due and recomputes it.
    timer_hint: Option<Time>,
    acks: ctx::AckBatch,
    next_qpn: u32,
    out: VecDeque<Transmit>,
    /// Sent datagrams' buffers, for the next packets (at most [`SPARE_BUFFERS`]).
    spare: Vec<Vec<u8>>,
    events: VecDeque<Event>,
    stats: StatsTable,
}

/// Datagram buffers the engine keeps for reuse: enough for the bursts of a busy device.
const SPARE_BUFFERS: usize = 1024;

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("node_guid", &self.node_guid)
            .field("ports", &self.ports)
            .field("qps", &self.qps.len())
            .field("stats", &self.stats)
            .finish()
    }
}

macro_rules! ctx {
    ($self:ident, $now:expr) => {
        Ctx {
            now: $now,
            mrs: &mut $self.mrs,
            cqs: &mut $self.cqs,
            srqs: &mut $self.srqs,
            out: &mut $self.out,
            spare: &mut $self.spare,
            events: &mut $self.events,
            port_ips: &$self.port_ips,
            pkey_tables: &$self.pkey_tables,
            stats: &mut $self.stats,
            acks: &mut $self.acks,
        }
    };
}

impl Engine {
    /// A device with `node_guid` and one port per address, all active.
    pub fn new(node_guid: Guid, port_addrs: &[IpAddr]) -> Self {
        Engine {
            node_guid,
            ports: port_addrs
                .iter()
                .map(|&ip| Port { ip, active: true })
                .collect(),
            port_ips: port_addrs.to_vec(),
            pkey_tables: vec![vec![PKey::DEFAULT]; port_addrs.len()],
            next_pd: 1,
            mrs: MrTable::new(MAX_MRS),
            cqs: Slab::default(),
            srqs: Slab::default(),
            qps: BTreeMap::new(),
            timer_hint: None,
            acks: ctx::AckBatch::default(),
            next_qpn: FIRST_QPN,
            out: VecDeque::new(),
            spare: Vec::new(),
            events: VecDeque::new(),
            stats: StatsTable::new(port_addrs.len()),
        }
    }

    /// Numbers the next QP from `qpn` on (24 bits; 0 and 1 are skipped). Devices that share
    /// a node GUID — one host's adapters presented as ports of one CA — must not hand out
    /// the same QPNs: a peer's CM takes a REQ with a (CA GUID, QPN) pair it already has a
    /// connection for as a stale connection, rejects it and disconnects the other (Linux
    /// `cm_insert_remote_qpn`).
    pub fn set_next_qpn(&mut self, qpn: u32) {
        self.next_qpn = (qpn & 0x00ff_ffff).max(FIRST_QPN);
    }

    /// Sets port `port`'s P_Key table (1-based port): what its QPs may be bound to
    /// (`pkey_index`) and which partitions its GSI (QP1) accepts MADs on. At most 64
    /// entries, none with base 0, none twice; the QPs already bound keep their P_Key.
    pub fn set_pkey_table(&mut self, port: u8, table: Vec<PKey>) -> Result<(), VerbsError> {
        let slot = self
            .pkey_tables
            .get_mut(usize::from(port).wrapping_sub(1))
            .ok_or(VerbsError::NoSuch {
                what: "port",
                id: port.into(),
            })?;
        let distinct: std::collections::BTreeSet<u16> = table.iter().map(|k| k.base()).collect();
        if table.is_empty()
            || table.len() > 64
            || table.iter().any(|k| k.base() == 0)
            || distinct.len() != table.len()
        {
            return Err(VerbsError::BadPkeyTable { len: table.len() });
        }
        *slot = table;
        Ok(())
    }

    /// Port `port`'s P_Key table (1-based), if the port exists.
    pub fn pkey_table(&self, port: u8) -> Option<&[PKey]> {
        self.pkey_tables
            .get(usize::from(port).wrapping_sub(1))
            .map(Vec::as_slice)
    }

    /// The node GUID.
    pub fn node_guid(&self) -> Guid {
        self.node_guid
    }

    /// The ports, 1-based in order.
    pub fn ports(&self) -> &[Port] {
        &self.ports
    }

    /// Counters, summed over the ports.
    pub fn stats(&self) -> Stats {
        self.stats.total()
    }

    /// Port `port`'s counters (1-based), if it exists.
    pub fn port_stats(&self, port: u8) -> Option<Stats> {
        self.stats.port(port)
    }

    /// Live objects now.
    pub fn resources(&self) -> Resources {
        Resources {
            qps: self.qps.len(),
            cqs: self.cqs.len(),
            srqs: self.srqs.len(),
            mrs: self.mrs.live(),
        }
    }

    /// Brings a port up or down; a down port drops traffic and its QPs' peers time out.
    pub fn set_port_active(&mut self, port: u8, active: bool) -> Result<(), VerbsError> {
        let p = self
            .ports
            .get_mut(usize::from(port).wrapping_sub(1))
            .ok_or(VerbsError::BadPort(port))?;
        if p.active != active {
            p.active = active;
            self.events.push_back(if active {
                Event::PortActive(port)
            } else {
                Event::PortDown(port)
            });
        }
        Ok(())
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&mut self) -> PdId {
        let pd = PdId(self.next_pd);
        self.next_pd += 1;
        pd
    }

    /// Registers `len` bytes of `block` from `offset` at I/O address `iova`.
    pub fn reg_mr(
        &mut self,
        pd: PdId,
        block: Arc<MemBlock>,
        offset: u64,
        len: u64,
        iova: u64,
        access: Access,
    ) -> Result<MrKeys, VerbsError> {
        Ok(self.mrs.reg_mr(pd, block, offset, len, iova, access)?)
    }

    /// Allocates a fast-registration memory region of up to `max_pages` pages.
    pub fn alloc_fast_reg_mr(&mut self, pd: PdId, max_pages: usize) -> Result<MrKeys, VerbsError> {
        Ok(self.mrs.alloc_fast_reg_mr(pd, max_pages)?)
    }

    /// Deregisters the memory region named by `keys`.
    pub fn dereg_mr(&mut self, keys: MrKeys) -> Result<(), VerbsError> {
        Ok(self.mrs.dereg(keys.index())?)
    }

    /// Creates a completion queue for `capacity` completions.
    pub fn create_cq(&mut self, capacity: usize) -> CqId {
        CqId(self.cqs.insert(Cq::new(capacity)))
    }

    /// Destroys a completion queue no QP uses.
    pub fn destroy_cq(&mut self, cq: CqId) -> Result<(), VerbsError> {
        if self
            .qps
            .values()
            .any(|q| q.init.send_cq == cq || q.init.recv_cq == cq)
        {
            return Err(VerbsError::InUse {
                what: "CQ",
                id: cq.0.into(),
            });
        }
        self.cqs.remove(cq.0).map(|_| ()).ok_or(VerbsError::NoSuch {
            what: "CQ",
            id: cq.0.into(),
        })
    }

    /// Moves up to `max` completions into `out`; returns how many.
    pub fn poll_cq(
        &mut self,
        cq: CqId,
        max: usize,
        out: &mut Vec<Wc>,
    ) -> Result<usize, VerbsError> {
        let q = self.cqs.get_mut(cq.0).ok_or(VerbsError::NoSuch {
            what: "CQ",
            id: cq.0.into(),
        })?;
        Ok(q.poll(max, out))
    }

    /// Arms a completion queue's next notification.
    pub fn req_notify_cq(&mut self, cq: CqId, mode: ArmMode) -> Result<(), VerbsError> {
        let q = self.cqs.get_mut(cq.0).ok_or(VerbsError::NoSuch {
            what: "CQ",
            id: cq.0.into(),
        })?;
        q.arm(mode);
        Ok(())
    }

    /// Creates a shared receive queue.
    pub fn create_srq(&mut self, max_wr: usize) -> SrqId {
        SrqId(self.srqs.insert(Srq::new(max_wr)))
    }

    /// Posts a receive to a shared receive queue.
    pub fn post_srq_recv(&mut self, srq: SrqId, wr: RecvWr) -> Result<(), VerbsError> {
        let q = self.srqs.get_mut(srq.0).ok_or(VerbsError::NoSuch {
            what: "SRQ",
            id: srq.0.into(),
        })?;
        Ok(q.post(wr)?)
    }

    /// Arms a shared receive queue's limit event.
    pub fn srq_set_limit(&mut self, srq: SrqId, limit: usize) -> Result<(), VerbsError> {
        let q = self.srqs.get_mut(srq.0).ok_or(VerbsError::NoSuch {
            what: "SRQ",
            id: srq.0.into(),
        })?;
        q.set_limit(limit);
        Ok(())
    }

    fn check_qp_init(&self, init: &QpInit) -> Result<(), VerbsError> {
        for cq in [init.send_cq, init.recv_cq] {
            if self.cqs.get(cq.0).is_none() {
                return Err(VerbsError::NoSuch {
                    what: "CQ",
                    id: cq.0.into(),
                });
            }
        }
        if let Some(srq) = init.srq {
            if self.srqs.get(srq.0).is_none() {
                return Err(VerbsError::NoSuch {
                    what: "SRQ",
                    id: srq.0.into(),
                });
            }
        }
        Ok(())
    }

    /// Creates a QP (in RESET).
    pub fn create_qp(&mut self, init: QpInit) -> Result<QpId, VerbsError> {
        self.check_qp_init(&init)?;
        let mut tries = 0u32;
        let qpn = loop {
            let candidate = Qpn::from_wire(self.next_qpn);
            self.next_qpn = if self.next_qpn >= 0x00ff_ffff {
                FIRST_QPN
            } else {
                self.next_qpn + 1
            };
            if !self.qps.contains_key(&QpId::Qp(candidate)) {
                break candidate;
            }
            tries += 1;
            if tries > 0x00ff_ffff {
                return Err(VerbsError::NoQpn);
            }
        };
        let mut qp = Qp::new(qpn, init);
        if init.qp_type == QpType::Ud {
            qp.mtu = PORT_MTU;
        }
        self.qps.insert(QpId::Qp(qpn), qp);
        Ok(QpId::Qp(qpn))
    }

    /// Creates a port's GSI QP (QP1, UD, Q_Key 0x80010000 once modified to INIT).
    pub fn create_gsi_qp(&mut self, port: u8, init: QpInit) -> Result<QpId, VerbsError> {
        self.check_qp_init(&init)?;
        let id = QpId::Gsi(port);
        if usize::from(port).wrapping_sub(1) >= self.ports.len() || self.qps.contains_key(&id) {
            return Err(VerbsError::BadPort(port));
        }
        let mut qp = Qp::new(
            Qpn::GSI,
            QpInit {
                qp_type: QpType::Ud,
                ..init
            },
        );
        qp.mtu = PORT_MTU;
        qp.port = port;
        self.qps.insert(id, qp);
        Ok(id)
    }

    fn qp_mut(&mut self, id: QpId) -> Result<&mut Qp, VerbsError> {
        let what = "QP";
        let n = match id {
            QpId::Qp(q) => q.get().into(),
            QpId::Gsi(p) => p.into(),
        };
        self.qps
            .get_mut(&id)
            .ok_or(VerbsError::NoSuch { what, id: n })
    }

    /// The QP's number.
    pub fn qp_num(&self, id: QpId) -> Option<Qpn> {
        self.qps.get(&id).map(|q| q.qpn())
    }

    /// The QP's state.
    pub fn qp_state(&self, id: QpId) -> Option<QpState> {
        self.qps.get(&id).map(|q| q.state())
    }

    /// Modifies a QP's state and attributes.
    pub fn modify_qp(
        &mut self,
        now: Time,
        id: QpId,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<(), VerbsError> {
        let mut ctx = ctx!(self, now);
        let qp = self
            .qps
            .get_mut(&id)
            .ok_or(VerbsError::NoSuch { what: "QP", id: 0 })?;
        let r = qp.modify(attr, mask, &mut ctx);
        self.note(id);
        Ok(r?)
    }

    /// Lowers the timer hint to `id`'s next timer, if it has one.
    fn note(&mut self, id: QpId) {
        if let Some(t) = self.qps.get(&id).and_then(Qp::next_timeout) {
            self.timer_hint = Some(self.timer_hint.map_or(t, |h| h.min(t)));
        }
    }

    /// Brings an RC QP from RESET to RTS, connected to `peer` (what the CM does with the
    /// attributes of a REQ and REP): RESET→INIT→RTR→RTS with the IBTA-required attributes.
    pub fn connect_rc(&mut self, now: Time, id: QpId, peer: &RcConnect) -> Result<(), VerbsError> {
        let mut a = QpAttr {
            state: QpState::Init,
            access: peer.access,
            ..QpAttr::default()
        };
        a.pkey_index = peer.pkey_index;
        let m = QpAttrMask::STATE
            | QpAttrMask::PKEY_INDEX
            | QpAttrMask::PORT
            | QpAttrMask::ACCESS_FLAGS;
        self.modify_qp(now, id, &a, m)?;
        a.state = QpState::Rtr;
        a.dest_gid = peer.dest_gid;
        a.dest_qpn = peer.dest_qpn;
        a.path_mtu = peer.path_mtu;
        a.rq_psn = peer.rq_psn;
        a.min_rnr_timer = peer.min_rnr_timer;
        a.max_dest_rd_atomic = peer.max_dest_rd_atomic;
        let m = QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER;
        self.modify_qp(now, id, &a, m)?;
        a.state = QpState::Rts;
        a.sq_psn = peer.sq_psn;
        a.timeout = peer.timeout;
        a.retry_cnt = peer.retry_cnt;
        a.rnr_retry = peer.rnr_retry;
        a.max_rd_atomic = peer.max_rd_atomic;
        let m = QpAttrMask::STATE
            | QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::SQ_PSN
            | QpAttrMask::MAX_QP_RD_ATOMIC;
        self.modify_qp(now, id, &a, m)
    }

    /// Destroys a QP; whatever it had outstanding is flushed to its CQs first.
    pub fn destroy_qp(&mut self, now: Time, id: QpId) -> Result<(), VerbsError> {
        self.qp_mut(id)?;
        let mut ctx = ctx!(self, now);
        if let Some(mut qp) = self.qps.remove(&id) {
            if qp.state() != QpState::Err {
                qp.enter_error(&mut ctx);
            }
        }
        Ok(())
    }

    /// Posts a send work request.
    pub fn post_send(&mut self, now: Time, id: QpId, wr: SendWr) -> Result<(), VerbsError> {
        let mut ctx = ctx!(self, now);
        let qp = self
            .qps
            .get_mut(&id)
            .ok_or(VerbsError::NoSuch { what: "QP", id: 0 })?;
        let r = qp.post_send(wr, &mut ctx);
        self.note(id);
        Ok(r?)
    }

    /// Posts a chain of send work requests (`ibv_post_send` with a linked list): all are
    /// queued, then the send queue starts once. On an error, the requests before it stay
    /// posted and the index of the one refused comes back with the error.
    pub fn post_send_list(
        &mut self,
        now: Time,
        id: QpId,
        wrs: impl IntoIterator<Item = SendWr>,
    ) -> Result<(), (usize, VerbsError)> {
        let mut ctx = ctx!(self, now);
        let qp = self
            .qps
            .get_mut(&id)
            .ok_or((0, VerbsError::NoSuch { what: "QP", id: 0 }))?;
        let mut result = Ok(());
        for (i, wr) in wrs.into_iter().enumerate() {
            if let Err(e) = qp.queue_send(wr, &mut ctx) {
                result = Err((i, e.into()));
                break;
            }
        }
        qp.pump(&mut ctx);
        self.note(id);
        result
    }

    /// Posts a receive work request.
    pub fn post_recv(&mut self, now: Time, id: QpId, wr: RecvWr) -> Result<(), VerbsError> {
        let mut ctx = ctx!(self, now);
        let qp = self
            .qps
            .get_mut(&id)
            .ok_or(VerbsError::NoSuch { what: "QP", id: 0 })?;
        let r = qp.post_recv(wr, &mut ctx);
        self.note(id);
        Ok(r?)
    }

    /// A datagram arrived on `port` (1-based) from `src`. Its ICRC is checked without
    /// knowing the IPv4 ID it was sent with ([`Packet::parse_received`]): ID 0 for our own
    /// traffic, 0, 1, 2, … for the segments of a GSO send, a hashed one from Linux rxe.
    /// Every drop is counted under its reason in the port's [`Stats`].
    pub fn handle_datagram(&mut self, now: Time, port: u8, src: SocketAddr, data: &[u8]) {
        let stats = self.stats.at(port);
        stats.rx_packets += 1;
        let Some(p) = self.ports.get(usize::from(port).wrapping_sub(1)).copied() else {
            stats.malformed += 1;
            return;
        };
        if !p.active {
            stats.port_down_drops += 1;
            return;
        }
        let icrc = IcrcContext::new(src.ip(), p.ip, src.port());
        let pkt = match Packet::parse_received(data, &icrc) {
            Ok((pkt, ipv4_id)) => {
                if ipv4_id != 0 {
                    stats.ipv4_id_nonzero += 1;
                }
                pkt
            }
            Err(WireError::BadIcrc { .. }) => {
                stats.icrc_errors += 1;
                return;
            }
            Err(_) => {
                stats.malformed += 1;
                return;
            }
        };
        let Some(info) = pkt.bth.opcode.info() else {
            stats.malformed += 1;
            return;
        };
        let dest = pkt.bth.dest_qp;
        let id = if dest == Qpn::GSI {
            QpId::Gsi(port)
        } else {
            QpId::Qp(dest)
        };
        let mut ctx = ctx!(self, now);
        let Some(qp) = self.qps.get_mut(&id) else {
            ctx.stats.at(port).unknown_qp += 1;
            return;
        };
        if qp.port != port {
            ctx.stats.at(port).wrong_transport += 1;
            return;
        }
        // QP1 takes MADs on every partition of its port's table (the index goes in the
        // completion); any other QP only its own partition, membership respected.
        let pkey_index = if id == QpId::Gsi(port) {
            ctx.pkey_tables
                .get(usize::from(port) - 1)
                .and_then(|t| t.iter().position(|k| pkt.bth.pkey.matches(*k)))
                .map(|i| i as u16)
        } else {
            pkt.bth.pkey.matches(qp.pkey).then_some(qp.pkey_index)
        };
        let Some(pkey_index) = pkey_index else {
            ctx.stats.at(port).pkey_mismatch += 1;
            return;
        };
        match (qp.init.qp_type, info.transport) {
            (QpType::Rc, Transport::Rc) => {
                if qp.dest_gid.to_ip() != src.ip() {
                    ctx.stats.at(port).wrong_peer += 1;
                    return;
                }
                if !matches!(qp.state(), QpState::Rtr | QpState::Rts | QpState::Sqd) {
                    ctx.stats.at(port).wrong_state += 1;
                    return;
                }
                match info.kind {
                    Kind::Ack | Kind::ReadResponse | Kind::AtomicAck => {
                        qp.rc_handle_response(&pkt, &mut ctx)
                    }
                    _ => qp.rc_handle_request(&pkt, &mut ctx),
                }
                qp.pump(&mut ctx);
            }
            (QpType::Ud, Transport::Ud) => {
                qp.ud_receive(&pkt, src.ip(), p.ip, pkey_index, &mut ctx)
            }
            _ => ctx.stats.at(port).wrong_transport += 1,
        }
        self.note(id);
    }

    /// A batch of datagrams that arrived together on `port` (one receive system call's
    /// worth), each as [`Engine::handle_datagram`], with the ACKs they ask for coalesced:
    /// each RC QP sends one, for the newest request, at the end of the batch (before any
    /// other packet it sends meanwhile: a NAK or a read response goes after the held ACK).
    pub fn handle_datagrams<'d>(
        &mut self,
        now: Time,
        port: u8,
        datagrams: impl IntoIterator<Item = (SocketAddr, &'d [u8])>,
    ) {
        self.acks.batching = true;
        for (src, data) in datagrams {
            self.handle_datagram(now, port, src, data);
        }
        self.acks.batching = false;
        let mut due = std::mem::take(&mut self.acks.due);
        for &qpn in &due {
            let mut ctx = ctx!(self, now);
            if let Some(qp) = self.qps.get_mut(&QpId::Qp(qpn)) {
                // A QP that failed in the batch sends nothing more (its ACK is gone too).
                if matches!(qp.state(), QpState::Rtr | QpState::Rts | QpState::Sqd) {
                    qp.flush_ack(&mut ctx);
                } else {
                    qp.drop_pending_ack();
                }
            }
        }
        due.clear();
        self.acks.due = due;
    }

    /// Time passed: fires the timers that are due.
    pub fn handle_timeout(&mut self, now: Time) {
        let mut ctx = ctx!(self, now);
        for qp in self.qps.values_mut() {
            if qp.next_timeout().is_some_and(|t| t <= now) {
                qp.rc_handle_timeout(&mut ctx);
            }
        }
        self.timer_hint = self.qps.values().filter_map(Qp::next_timeout).min();
    }

    /// Hands back a sent datagram's buffer ([`Transmit::bytes`]) for the next packet to be
    /// built in: with it the steady state allocates no buffer per packet.
    pub fn recycle(&mut self, bytes: Vec<u8>) {
        if self.spare.len() < SPARE_BUFFERS && bytes.capacity() > 0 {
            self.spare.push(bytes);
        }
    }

    /// The next datagram to send.
    ///
    /// A down port sends nothing: its datagrams are dropped here (counted in
    /// [`Stats::port_down_drops`]), as a link that is down carries nothing either way.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        while let Some(t) = self.out.pop_front() {
            let up = self
                .ports
                .get(usize::from(t.port).wrapping_sub(1))
                .is_some_and(|p| p.active);
            if up {
                return Some(t);
            }
            self.stats.at(t.port).port_down_drops += 1;
        }
        None
    }

    /// The earliest deadline at which [`Engine::handle_timeout`] must be called.
    ///
    /// O(1): a hint no later than the earliest QP timer (it may be earlier, when a timer was
    /// cancelled since; [`Engine::handle_timeout`] at that time fires nothing and
    /// recomputes it).
    pub fn poll_timeout(&self) -> Option<Time> {
        self.timer_hint
    }

    /// The next asynchronous event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The UDP port every RoCEv2 datagram goes to.
    pub const UDP_PORT: u16 = ROCE_V2_UDP_PORT;
}

#[cfg(test)]
#[path = "ack_tests.rs"]
mod ack_tests;
#[cfg(test)]
#[path = "resources_tests.rs"]
mod resources_tests;
#[cfg(test)]
#[path = "test_peer.rs"]
mod test_peer;
#[cfg(test)]
#[path = "timer_tests.rs"]
mod timer_tests;
