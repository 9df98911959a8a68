//! A CM REQ to a login decision, and an accepted login to a channel: the IOC is found by
//! the service ID (IB CM form) or by the login's target port ID (RDMA-CM form, whose
//! service ID names only the TCP port), the decision is the appliance's, and an accepted
//! channel gets its [`ChannelIo`] (QP, memory) before the REP names that QP.

use crate::appliance::{Appliance, Ioc};
use crate::io::{ChannelIo, ChannelIoConfig, Executor};
use crate::login::cm::{INITIATOR_DEPTH, RESPONDER_RESOURCES};
use crate::login::{
    ChannelId, CmAnswer, CmLogin, LoginDecision, LoginForm, LoginRefusal, NexusKey, NexusTable,
    parse_cm_login,
};
use access_layer::cm::QpPsns;
use access_layer::mad::cm::CmReq;
use access_layer::verbs::ChannelInterface;
use access_layer::verbs::Doorbell;
use hca::engine::RcConnect;
use hca::mr::{Access, PdId};
use hca::wire::PathMtu;
use hca::{Gid, Psn};
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
        /// Our starting PSN.
        psn: Psn,
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
    /// The partition the REQ arrived on: an index in the port's P_Key table (the CM
    /// checked that the REQ's P_Key names it).
    pub pkey_index: u16,
}

/// Decides the REQ `req` that arrived on `place`; `id` names the channel if accepted.
pub fn handle_req(
    app: &Appliance,
    table: &NexusTable,
    place: &Place<'_>,
    req: &CmReq,
    id: ChannelId,
) -> Outcome {
    let formats = app.limits().formats;
    let login = match parse_cm_login(req.service_id, &req.private_data.0) {
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
    // The REQ's primary path names where it came from (the CM checked it against the
    // packet), and its P_Key the partition it came on (the CM checked that too).
    let from = req.primary_path.local_gid;
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
                Ok(io) => {
                    // Any 24-bit value will do; spread them so channels differ.
                    let psn = Psn::from_wire((id.0 as u32).wrapping_mul(0x9e37) & 0xff_ffff);
                    Outcome::Accept {
                        io: Box::new(io),
                        rc: rc_connect(req, psn, place.link_mtu, place.pkey_index),
                        answer,
                        psn,
                        nexus,
                        ioc: ioc.config().name.clone(),
                        terminate,
                        form,
                    }
                }
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
        luns,
        nexus,
    }
}

/// Our QP's attributes from the REQ (what the REP answered): the initiator's QPN, the
/// PSNs ([`QpPsns::passive`]: we send from the REQ's Starting PSN and receive from our
/// REP's `psn`), path MTU (the REQ's, as Linux's CM follows it, but never above what our
/// port's link carries, when that is known) and retry counts; RDMA READs in flight bounded
/// by its responder resources.
fn rc_connect(req: &CmReq, psn: Psn, port_mtu: Option<PathMtu>, pkey_index: u16) -> RcConnect {
    let psns = QpPsns::passive(req, psn);
    let mtu = match u8::from(req.path_mtu) {
        1 => PathMtu::Mtu256,
        2 => PathMtu::Mtu512,
        4 => PathMtu::Mtu2048,
        5 => PathMtu::Mtu4096,
        _ => PathMtu::Mtu1024,
    };
    let mtu = match port_mtu {
        Some(port) if mtu.bytes() > port.bytes() => port,
        _ => mtu,
    };
    let gid: Gid = req.primary_path.local_gid;
    RcConnect {
        access: Access::LOCAL_WRITE,
        dest_gid: gid,
        dest_qpn: req.local_qpn,
        path_mtu: mtu,
        sq_psn: psns.sq_psn,
        rq_psn: psns.rq_psn,
        timeout: ack_timeout(req.primary_path.local_ack_timeout),
        retry_cnt: req.retry_count,
        rnr_retry: req.rnr_retry_count,
        min_rnr_timer: 1,
        max_rd_atomic: req.responder_resources.clamp(1, INITIATOR_DEPTH),
        max_dest_rd_atomic: RESPONDER_RESOURCES,
        pkey_index,
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
    use access_layer::mad::cm::CmPath;
    use access_layer::mad::{CommId, Mtu, PrivateData, ServiceId};
    use hca::{Guid, Qpn};

    fn req(mtu: Mtu) -> CmReq {
        CmReq::rc(
            CommId(7),
            ServiceId(0x10),
            Guid(1),
            Qpn::new(0x11).expect("qpn"),
            Psn::from_wire(0x200),
            mtu,
            CmPath::default(),
            PrivateData::default(),
        )
    }

    #[test]
    fn the_path_mtu_follows_the_req_up_to_our_link() {
        let psn = Psn::from_wire(5);
        let at = |offered, port| rc_connect(&req(offered), psn, port, 0).path_mtu;
        let p4096 = Some(PathMtu::Mtu4096);
        assert_eq!(at(Mtu::Mtu4096, p4096), PathMtu::Mtu4096);
        assert_eq!(at(Mtu::Mtu1024, p4096), PathMtu::Mtu1024);
        assert_eq!(at(Mtu::Mtu2048, p4096), PathMtu::Mtu2048);
        // Our link carries less than the initiator's: we never send above it.
        assert_eq!(at(Mtu::Mtu4096, Some(PathMtu::Mtu1024)), PathMtu::Mtu1024);
        // Our link unknown: the REQ's as it is (rxe wants middle packets of exactly it).
        assert_eq!(at(Mtu::Mtu4096, None), PathMtu::Mtu4096);
    }

    #[test]
    fn the_ack_timeout_is_bounded_whatever_the_req_asks() {
        let psn = Psn::from_wire(5);
        let with = |t| {
            let mut r = req(Mtu::Mtu1024);
            r.primary_path.local_ack_timeout = t;
            rc_connect(&r, psn, None, 0).timeout
        };
        assert_eq!(with(14), 14); // Linux's, as asked
        assert_eq!(with(0), 18); // "infinite" refused
        assert_eq!(with(31), 20); // hours per try refused
    }
}
