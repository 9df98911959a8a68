//! A connection request to a login decision, and an accepted login to a channel: the IOC
//! is found by the service ID (IB CM form) or by the login's target port ID (RDMA-CM form,
//! whose service ID names only the TCP port), the decision is the appliance's, and an
//! accepted channel gets its [`ChannelIo`] (QP, memory) before the reply names that QP.

use crate::appliance::{Appliance, Ioc};
use crate::io::{ChannelIo, ChannelIoConfig, Executor};
use crate::login::cm::{INITIATOR_DEPTH, RESPONDER_RESOURCES};
use crate::login::{
    ChannelId, CmAnswer, CmLogin, LoginDecision, LoginForm, LoginRefusal, NexusKey, NexusTable,
    parse_cm_login,
};
use access_layer::cm::ConnRequest;
use access_layer::verbs::ChannelInterface;
use access_layer::verbs::Doorbell;
use ib_verbs::PathMtu;
use ib_verbs::RcConnect;
use ib_verbs::mr::{Access, PdId};
use srp::wire::login::{LoginRej, LoginRejReason};
use std::sync::Arc;

/// What to do with a REQ.
#[derive(Debug)]
pub enum Outcome {
    /// Send the REP and run the channel.
    Accept {
        /// The channel.
        io: Box<ChannelIo>,
        /// How its QP connects to the initiator's.
        rc: RcConnect,
        /// The REP's private data and CM parameters.
        answer: CmAnswer,
        /// Its nexus.
        nexus: NexusKey,
        /// The IOC's name.
        ioc: String,
        /// Channels to end with T_LOGOUT (MULTI-CHANNEL ACTION single).
        terminate: Vec<ChannelId>,
        /// The form it arrived in.
        form: &'static str,
    },
    /// Send the REJ.
    Reject {
        /// The REJ's private data.
        answer: CmAnswer,
        /// The SRP_LOGIN_REJ reason.
        code: u32,
        /// Why.
        reason: String,
        /// The IOC, if one was found.
        ioc: Option<String>,
        /// The initiator, if the login parsed.
        initiator: Option<srp::wire::PortId>,
    },
}

/// Where the login's channel lives.
pub struct Place<'a> {
    /// The port's name.
    pub port: &'a str,
    /// Its channel adapter.
    pub ca: Arc<dyn ChannelInterface>,
    /// Its link's active MTU, if known.
    pub link_mtu: Option<PathMtu>,
    /// Its PD.
    pub pd: PdId,
    /// Backend execution.
    pub executor: &'a Arc<dyn Executor>,
    /// The serving loop's doorbell (backend results ring it).
    pub bell: &'a Arc<Doorbell>,
    /// Why the daemon cannot take another channel now ([`super::guards`]), if it cannot.
    pub full: Option<String>,
}

/// Decides the request `req` that arrived on `place`; `base` is how its QP connects as
/// the connection manager says (PSNs, path, the initiator's QP); `id` names the channel
/// if accepted.
pub fn handle_req(
    app: &Appliance,
    table: &NexusTable,
    place: &Place<'_>,
    req: &ConnRequest,
    base: RcConnect,
    id: ChannelId,
) -> Outcome {
    let formats = app.limits().formats;
    let login = match parse_cm_login(req.service_id, req.rdma_cm, &req.private_data) {
        Ok(l) => l,
        Err(e) => {
            return reject(
                CmAnswer::malformed(formats),
                LoginRejReason::Unspecified,
                format!("malformed login: {e}"),
                None,
                None,
            );
        }
    };
    if let Some(why) = &place.full {
        return reject(
            resources_rej(login.req.tag, formats),
            LoginRejReason::InsufficientResources,
            format!("refused: {why}"),
            None,
            Some(login.req.initiator_port_id),
        );
    }
    let (form, found) = match login.form {
        LoginForm::RdmaCm(_) => (
            "RDMA-CM",
            app.ioc_for_target(login.req.target_port_id).map(|(_, i)| i),
        ),
        LoginForm::IbCm => (
            "IB CM",
            app.iocs()
                .iter()
                .find(|i| i.config().service_id == req.service_id),
        ),
    };
    let reachable = found.filter(|i| i.config().ports.iter().any(|p| p == place.port));
    let Some(ioc) = reachable else {
        let refusal = LoginRefusal::WrongTarget {
            requested: login.req.target_port_id,
            ours: login.req.target_port_id,
        };
        return reject(
            CmAnswer::from_decision(&LoginDecision::Reject {
                rej: LoginRej {
                    reason: refusal.reason(),
                    tag: login.req.tag,
                    buf_fmt: formats,
                },
                refusal,
            }),
            LoginRejReason::UnableToAssociate,
            format!(
                "no IOC with target port {} on port {}",
                login.req.target_port_id, place.port
            ),
            None,
            Some(login.req.initiator_port_id),
        );
    };
    let nexus = NexusKey {
        initiator: login.req.initiator_port_id,
        target: ioc.config().target_port_id(),
    };
    // The request names where it came from (the CM checked it against the packet), and
    // its P_Key the partition it came on (the CM checked that too).
    let from = req.from;
    let decision = app.decide_login_at(
        ioc,
        &login.req,
        table.channels(&nexus),
        Some(from.to_ip()),
        table.has_channel_from_elsewhere(&nexus, from),
        req.pkey,
    );
    let answer = CmAnswer::from_decision(&decision);
    match decision {
        LoginDecision::Reject { rej, refusal } => reject(
            answer,
            rej.reason,
            refusal.to_string(),
            Some(ioc.config().name.clone()),
            Some(login.req.initiator_port_id),
        ),
        LoginDecision::Accept {
            negotiated,
            terminate,
            ..
        } => {
            let config = channel_config(app, ioc, &login, negotiated, id);
            match ChannelIo::new(
                place.ca.clone(),
                place.pd,
                config,
                place.executor.clone(),
                Some(place.bell.clone()),
            ) {
                Ok(io) => Outcome::Accept {
                    io: Box::new(io),
                    rc: rc_connect(req, base, place.link_mtu),
                    answer,
                    nexus,
                    ioc: ioc.config().name.clone(),
                    terminate,
                    form,
                },
                Err(e) => reject(
                    resources_rej(login.req.tag, formats),
                    LoginRejReason::InsufficientResources,
                    format!("cannot create the channel: {e}"),
                    Some(ioc.config().name.clone()),
                    Some(login.req.initiator_port_id),
                ),
            }
        }
    }
}

fn reject(
    answer: CmAnswer,
    code: LoginRejReason,
    reason: String,
    ioc: Option<String>,
    initiator: Option<srp::wire::PortId>,
) -> Outcome {
    Outcome::Reject {
        answer,
        code: u32::from(code),
        reason,
        ioc,
        initiator,
    }
}

/// The REJ for a login we decided to accept but could not set up.
fn resources_rej(tag: srp::wire::Tag, formats: srp::wire::login::BufFormats) -> CmAnswer {
    let refusal = LoginRefusal::Disabled; // InsufficientResources, as ib_srpt
    CmAnswer::from_decision(&LoginDecision::Reject {
        rej: LoginRej {
            reason: LoginRejReason::InsufficientResources,
            tag,
            buf_fmt: formats,
        },
        refusal,
    })
}

fn channel_config(
    app: &Appliance,
    ioc: &Ioc,
    login: &CmLogin,
    negotiated: crate::login::Negotiated,
    id: ChannelId,
) -> ChannelIoConfig {
    let limits = app.limits();
    let (luns, nexus) = app.exports_for(ioc, login.req.initiator_port_id);
    ChannelIoConfig {
        id,
        negotiated,
        login_flags: login.req.flags,
        max_transfer: limits.max_transfer,
        max_table_entries: limits.max_table_entries,
        send_queue_depth: crate::io::verbs::MAX_SEND_WR,
        luns,
        nexus,
    }
}

/// Our QP's attributes: the connection manager's `base` (the initiator's QP, the PSNs
/// both ways as Linux reads them, the path and partition) with our policy on top — path
/// MTU never above what our port's link carries, when that is known; inbound access
/// local write only (we RDMA READ and WRITE the initiator's memory, it touches none of
/// ours); the ACK timeout bounded; RDMA READs in flight bounded by the initiator's
/// responder resources and ours, as ib_srpt.
fn rc_connect(req: &ConnRequest, base: RcConnect, port_mtu: Option<PathMtu>) -> RcConnect {
    let mtu = match port_mtu {
        Some(port) if base.path_mtu.bytes() > port.bytes() => port,
        _ => base.path_mtu,
    };
    RcConnect {
        access: Access::LOCAL_WRITE,
        path_mtu: mtu,
        timeout: ack_timeout(req.local_ack_timeout),
        retry_cnt: req.retry_count,
        rnr_retry: req.rnr_retry_count,
        min_rnr_timer: 1,
        max_rd_atomic: req.responder_resources.clamp(1, INITIATOR_DEPTH),
        max_dest_rd_atomic: RESPONDER_RESOURCES,
        ..base
    }
}

/// The RC ACK timeout code our QP uses, from the REQ's: as asked, but never "infinite" (0)
/// nor above 20 (4.096 µs × 2^20 ≈ 4.3 s per try): the REQ is the initiator's word, and a
/// channel whose peer is gone must fail its retries (an idle probe's, or a response's) in
/// bounded time — 8 tries at most, ≈ 34 s — rather than hold its memory for hours. Linux
/// asks 14–19 over RoCE.
fn ack_timeout(asked: u8) -> u8 {
    match asked {
        0 => 18,
        t => t.min(20),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use access_layer::cm::ConnId;
    use access_layer::mad::{CommId, ServiceId};
    use ib_verbs::{Gid, PKey, Psn, Qpn};

    fn req() -> ConnRequest {
        ConnRequest {
            conn: ConnId(CommId(7)),
            service_id: ServiceId(0x10),
            private_data: Vec::new(),
            from: Gid::default(),
            rdma_cm: None,
            peer_ca_guid: None,
            peer_qpn: Qpn::new(0x11).expect("qpn"),
            pkey_index: 0,
            pkey: PKey::DEFAULT,
            responder_resources: 8,
            initiator_depth: 8,
            retry_count: 7,
            rnr_retry_count: 7,
            path_mtu: PathMtu::Mtu4096,
            local_ack_timeout: 14,
        }
    }

    fn base(mtu: PathMtu) -> RcConnect {
        RcConnect {
            access: Access::REMOTE_WRITE,
            dest_gid: Gid::default(),
            dest_qpn: Qpn::new(0x11).expect("qpn"),
            path_mtu: mtu,
            sq_psn: Psn::from_wire(1),
            rq_psn: Psn::from_wire(2),
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            min_rnr_timer: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            pkey_index: 3,
            flow_label: 0,
            hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
            traffic_class: 0,
        }
    }

    #[test]
    fn the_path_mtu_follows_the_req_up_to_our_link() {
        let at = |offered, port| rc_connect(&req(), base(offered), port).path_mtu;
        let p4096 = Some(PathMtu::Mtu4096);
        assert_eq!(at(PathMtu::Mtu4096, p4096), PathMtu::Mtu4096);
        assert_eq!(at(PathMtu::Mtu1024, p4096), PathMtu::Mtu1024);
        assert_eq!(at(PathMtu::Mtu2048, p4096), PathMtu::Mtu2048);
        // Our link carries less than the initiator's: we never send above it.
        assert_eq!(
            at(PathMtu::Mtu4096, Some(PathMtu::Mtu1024)),
            PathMtu::Mtu1024
        );
        // Our link unknown: the REQ's as it is (rxe wants middle packets of exactly it).
        assert_eq!(at(PathMtu::Mtu4096, None), PathMtu::Mtu4096);
    }

    #[test]
    fn our_policy_goes_on_top_of_the_connection_managers_attributes() {
        let rc = rc_connect(&req(), base(PathMtu::Mtu1024), None);
        // The CM's: the peer's QP, the PSNs, the partition.
        assert_eq!(rc.dest_qpn, Qpn::new(0x11).expect("qpn"));
        assert_eq!(
            (rc.sq_psn, rc.rq_psn),
            (Psn::from_wire(1), Psn::from_wire(2))
        );
        assert_eq!(rc.pkey_index, 3);
        // Ours: no inbound RDMA, READs bounded both ways as ib_srpt.
        assert_eq!(rc.access, Access::LOCAL_WRITE);
        assert_eq!((rc.max_rd_atomic, rc.max_dest_rd_atomic), (4, 4));
    }

    #[test]
    fn the_ack_timeout_is_bounded_whatever_the_req_asks() {
        let with = |t| {
            let mut r = req();
            r.local_ack_timeout = t;
            rc_connect(&r, base(PathMtu::Mtu1024), None).timeout
        };
        assert_eq!(with(14), 14); // Linux's, as asked
        assert_eq!(with(0), 18); // "infinite" refused
        assert_eq!(with(31), 20); // hours per try refused
    }
}
