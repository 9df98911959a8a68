//! The connection-manager seam over our own CM on QP1 ([`CmEndpoint`]): requests and
//! responses become [`ConnEvent`]s, the RDMA-CM header is added and stripped here, and the
//! QP attributes each side needs come from the REQ and REP (PSNs as Linux reads them,
//! [`QpPsns`]).
#[allow(unused_imports)]
use crate::prelude::*;

use super::{MadService, Ours};
use crate::cm::{
    AcceptParams, AcceptRequest, CmError, CmEvent, CmStats, ConnEvent, ConnId, ConnRequest,
    ConnState, ConnectParams, ConnectRequest, ConnectionManager, DeviceManagement, QpPsns,
};
use crate::mad::cm::{CmRejReason, CmaHeader};
use crate::mad::{MadAddress, Mtu, ServiceId};
use ib_verbs::{Access, PathMtu, Psn, RcConnect, Time};
use wirekit::WireRepr;

impl MadService {
    /// A CM event as the seam reports it.
    pub(super) fn translate(&mut self, ev: CmEvent) {
        let ev = match ev {
            CmEvent::ReqReceived { conn, from, req } => {
                let carries = req.service_id.carries_cma_header();
                let raw = &req.private_data.0[..];
                let (rdma_cm, private_data) = if carries {
                    // A malformed header leaves `rdma_cm` empty: the consumer refuses the
                    // login as malformed (its own reject, with its own private data).
                    let hdr = CmaHeader::parse(raw)
                        .ok()
                        .map(|h| (h.src, h.dst, h.src_port));
                    (hdr, CmaHeader::user_data(raw).to_vec())
                } else {
                    (None, raw.to_vec())
                };
                ConnEvent::Request(Box::new(ConnRequest {
                    conn,
                    service_id: req.service_id,
                    private_data,
                    from: from.gid,
                    rdma_cm,
                    peer_ca_guid: Some(req.local_ca_guid),
                    peer_qpn: req.local_qpn,
                    pkey_index: from.pkey_index,
                    pkey: req.pkey,
                    responder_resources: req.responder_resources,
                    initiator_depth: req.initiator_depth,
                    retry_count: req.retry_count,
                    rnr_retry_count: req.rnr_retry_count,
                    path_mtu: PathMtu::from(u8::from(req.path_mtu)),
                    local_ack_timeout: req.primary_path.local_ack_timeout,
                }))
            }
            CmEvent::RepReceived { conn, rep } => ConnEvent::Response {
                conn,
                private_data: rep.private_data.0.to_vec(),
            },
            CmEvent::Established { conn } => ConnEvent::Established { conn },
            CmEvent::Rejected {
                conn,
                reason,
                private_data,
            } => {
                self.ours.remove(&conn);
                ConnEvent::Rejected {
                    conn,
                    reason,
                    private_data: private_data.0.to_vec(),
                }
            }
            CmEvent::ReqRefused {
                from,
                service_id,
                reason,
            } => ConnEvent::Refused {
                from,
                service_id,
                reason,
            },
            CmEvent::TimedOut { conn } => {
                self.ours.remove(&conn);
                ConnEvent::TimedOut { conn }
            }
            CmEvent::DisconnectRequested { conn } => ConnEvent::DisconnectRequested { conn },
            CmEvent::Disconnected { conn } => ConnEvent::Disconnected { conn },
            CmEvent::Closed { conn } => {
                self.ours.remove(&conn);
                ConnEvent::Closed { conn }
            }
        };
        self.events.push_back(ev);
    }

    /// The path MTU of a connection: what was offered, never above our link's.
    fn bounded(&self, offered: Mtu) -> PathMtu {
        let mtu = match PathMtu::from(u8::from(offered)) {
            PathMtu::Unknown(_) => PathMtu::Mtu1024,
            m => m,
        };
        match self.link_mtu {
            Some(link) if mtu.bytes() > link.bytes() => link,
            _ => mtu,
        }
    }
}

/// A receive PSN of ours: any 24-bit value will do; spread them so connections differ.
fn psn_for(conn: ConnId) -> Psn {
    Psn::from_wire(conn.0.0.wrapping_mul(0x9e37) & 0xff_ffff)
}

impl ConnectionManager for MadService {
    fn listen(&mut self, service_id: ServiceId) -> Result<(), CmError> {
        self.cm.listen(service_id)
    }

    fn unlisten(&mut self, service_id: ServiceId) {
        self.cm.unlisten(service_id);
    }

    fn connect(&mut self, req: &ConnectRequest) -> Result<ConnId, CmError> {
        let private_data = if req.service_id.carries_cma_header() {
            // The cma header the passive side's RDMA-CM reads: our address and a source
            // port (the QPN's low bits: any value is valid), its address.
            let cma = CmaHeader {
                src_port: 0x8000 | (req.qpn.get() as u16 & 0x7fff),
                src: self.local_ip(),
                dst: req.to.to_ip(),
            };
            cma.req_private_data(&req.private_data)?.0.to_vec()
        } else {
            req.private_data.clone()
        };
        let rq_psn = Psn::from_wire(req.qpn.get().wrapping_mul(0x9e37) & 0xff_ffff);
        let to = MadAddress::gsi(self.port.attr().port, req.to).on_partition(req.pkey_index);
        let now = self.port.now();
        let conn = self.cm.connect(
            now,
            &ConnectParams {
                to,
                service_id: req.service_id,
                qpn: req.qpn,
                receive_psn: rq_psn,
                responder_resources: req.responder_resources,
                initiator_depth: req.initiator_depth,
                mtu: Mtu::from(u8::from(req.mtu)),
                response_timeout: req.response_timeout,
                max_retries: req.max_retries,
                retry_count: req.retry_count,
                rnr_retry_count: req.rnr_retry_count,
                private_data,
            },
        )?;
        self.ours.insert(
            conn,
            Ours {
                qpn: req.qpn,
                rq_psn,
                pkey_index: req.pkey_index,
            },
        );
        Ok(conn)
    }

    fn qp_attrs(&mut self, conn: ConnId) -> Result<RcConnect, CmError> {
        let state = self.cm.state(conn);
        let Some((Some(req), rep)) = self.cm.exchange(conn) else {
            return Err(CmError::NoSuchConn(conn));
        };
        let (req, rep) = (*req, rep.copied());
        match (state, rep) {
            // Passive: from the REQ; our receive PSN is the one the REP will offer.
            (ConnState::ReqReceived, _) => {
                let ours = *self.ours.entry(conn).or_insert(Ours {
                    qpn: ib_verbs::Qpn::default(),
                    rq_psn: psn_for(conn),
                    pkey_index: 0,
                });
                let psns = QpPsns::passive(&req, ours.rq_psn);
                let pkey_index = self.cm.peer(conn).map_or(ours.pkey_index, |p| p.pkey_index);
                Ok(RcConnect {
                    access: Access::LOCAL_WRITE,
                    dest_gid: req.primary_path.local_gid,
                    dest_qpn: req.local_qpn,
                    path_mtu: self.bounded(req.path_mtu),
                    sq_psn: psns.sq_psn,
                    rq_psn: psns.rq_psn,
                    timeout: req.primary_path.local_ack_timeout,
                    retry_cnt: req.retry_count,
                    rnr_retry: req.rnr_retry_count,
                    min_rnr_timer: 1,
                    max_rd_atomic: req.responder_resources,
                    max_dest_rd_atomic: req.initiator_depth,
                    pkey_index,
                    flow_label: 0,
                    hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
                    traffic_class: 0,
                })
            }
            // Active: from our REQ and the REP.
            (ConnState::RepReceived, Some(rep)) => {
                let ours = *self.ours.get(&conn).ok_or(CmError::NoSuchConn(conn))?;
                let psns = QpPsns::active(ours.rq_psn, &rep);
                Ok(RcConnect {
                    access: Access::LOCAL_WRITE,
                    dest_gid: req.primary_path.remote_gid,
                    dest_qpn: rep.local_qpn,
                    // What our REQ offered: the passive side follows the REQ.
                    path_mtu: self.bounded(req.path_mtu),
                    sq_psn: psns.sq_psn,
                    rq_psn: psns.rq_psn,
                    timeout: req.primary_path.local_ack_timeout,
                    retry_cnt: req.retry_count,
                    rnr_retry: rep.rnr_retry_count,
                    min_rnr_timer: 1,
                    max_rd_atomic: rep.responder_resources.min(req.initiator_depth),
                    max_dest_rd_atomic: req.responder_resources,
                    pkey_index: ours.pkey_index,
                    flow_label: 0,
                    hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
                    traffic_class: 0,
                })
            }
            (state, _) => Err(CmError::WrongState {
                conn,
                state,
                what: "take the QP attributes",
            }),
        }
    }

    fn accept(&mut self, conn: ConnId, accept: &AcceptRequest) -> Result<(), CmError> {
        let rq_psn = self.ours.get(&conn).map_or(psn_for(conn), |o| o.rq_psn);
        let now = self.port.now();
        self.cm.accept(
            now,
            conn,
            &AcceptParams {
                qpn: accept.qpn,
                receive_psn: rq_psn,
                responder_resources: accept.responder_resources,
                initiator_depth: accept.initiator_depth,
                rnr_retry_count: accept.rnr_retry_count,
                private_data: accept.private_data.clone(),
            },
        )?;
        if let Some(o) = self.ours.get_mut(&conn) {
            o.qpn = accept.qpn;
        }
        self.transmit();
        Ok(())
    }

    fn establish(&mut self, conn: ConnId) -> Result<(), CmError> {
        self.cm.confirm(conn)?;
        self.transmit();
        Ok(())
    }

    fn reject(
        &mut self,
        conn: ConnId,
        reason: CmRejReason,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        self.cm.reject(conn, reason, private_data)?;
        self.ours.remove(&conn);
        self.transmit();
        Ok(())
    }

    fn notify_established(&mut self, conn: ConnId) -> Result<(), CmError> {
        self.cm.notify_established(conn)
    }

    fn disconnect(&mut self, conn: ConnId) -> Result<(), CmError> {
        let now = self.port.now();
        self.cm.disconnect(now, conn)?;
        self.transmit();
        Ok(())
    }

    fn abandon(&mut self, conn: ConnId) -> Result<(), CmError> {
        self.ours.remove(&conn);
        self.cm.abandon(conn)
    }

    fn state(&self, conn: ConnId) -> ConnState {
        self.cm.state(conn)
    }

    fn poll(&mut self, now: Time) -> usize {
        self.pump(now)
    }

    fn poll_event(&mut self) -> Option<ConnEvent> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.next_timer()
    }

    fn arm(&mut self) {
        // A port whose QP1 cannot be armed any more (a CA closed under it) is noticed by
        // the consumer's own verbs; the arm is best effort, as a CQ's.
        let _ = self.gsi.arm();
    }

    fn stats(&self) -> CmStats {
        CmStats {
            stray: self.cm.stray,
            unknown_events: self.unknown_events,
        }
    }

    fn device_management(&mut self) -> Option<&mut DeviceManagement> {
        Some(&mut self.dm)
    }
}
