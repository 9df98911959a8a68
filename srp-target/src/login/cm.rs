//! The CM side of a login: the SRP_LOGIN_REQ out of a CM REQ's private data in either form,
//! and the decision back as what the CM sends (REP with the SRP_LOGIN_RSP, or REJ reason 28,
//! consumer defined, with the SRP_LOGIN_REJ).
//!
//! Forms: a REQ to a service ID in the RDMA-CM TCP/UDP port space carries the 36-byte cma
//! header and then the 56-byte RDMA-CM login (Linux ib_srp with `dest=ip:port`); any other
//! service ID carries the 64-byte login itself (native IB CM, after DM discovery).

use super::decide::LoginDecision;
use access_layer::cm::AcceptRequest;
use access_layer::mad::ServiceId;
use access_layer::mad::cm::{CmRejReason, CmaHeader};
use ib_verbs::Qpn;
use srp::wire::login::{BufFormats, LoginRej, LoginRejReason, LoginReq};
use srp::wire::{Tag, WireError};
use std::net::IpAddr;
use thiserror::Error;
use wirekit::WireRepr;

/// RDMA READs we accept in flight and issue in flight, and the RNR retry count we ask the
/// initiator to use: ib_srpt's REP values.
pub const RESPONDER_RESOURCES: u8 = 4;
/// See [`RESPONDER_RESOURCES`].
pub const INITIATOR_DEPTH: u8 = 4;
/// See [`RESPONDER_RESOURCES`].
pub const RNR_RETRY_COUNT: u8 = 7;

/// Which form a login arrived in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginForm {
    /// Native IB CM: the 64-byte SRP_LOGIN_REQ is the private data.
    IbCm,
    /// RDMA-CM: the cma header (addresses, source port), then the 56-byte login.
    RdmaCm(CmaHeader),
}

/// A login out of a CM REQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmLogin {
    /// The form it arrived in.
    pub form: LoginForm,
    /// The request.
    pub req: LoginReq,
}

/// Why a CM REQ's private data is not a login.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CmLoginError {
    /// The cma header of an RDMA-CM REQ is missing or malformed.
    #[error("RDMA-CM header: {0}")]
    Cma(&'static str),
    /// The SRP_LOGIN_REQ is malformed.
    #[error("SRP_LOGIN_REQ: {0}")]
    Login(WireError),
}

/// Parses the login in a connection request to `service_id`: `private_data` is the
/// requester's own (for an RDMA-CM service, what followed the cma header, whose addresses
/// and source port the connection manager gives as `rdma_cm`; `None` there when the header
/// did not parse).
pub fn parse_cm_login(
    service_id: ServiceId,
    rdma_cm: Option<(IpAddr, IpAddr, u16)>,
    private_data: &[u8],
) -> Result<CmLogin, CmLoginError> {
    if service_id.carries_cma_header() {
        let (src, dst, src_port) =
            rdma_cm.ok_or(CmLoginError::Cma("missing or malformed cma header"))?;
        let req = LoginReq::parse_rdma_cm(private_data).map_err(CmLoginError::Login)?;
        Ok(CmLogin {
            form: LoginForm::RdmaCm(CmaHeader { src_port, src, dst }),
            req,
        })
    } else {
        let req = LoginReq::parse(private_data).map_err(CmLoginError::Login)?;
        Ok(CmLogin {
            form: LoginForm::IbCm,
            req,
        })
    }
}

/// What to tell the CM about a REQ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmAnswer {
    /// Accept: send a REP whose private data is `private_data` (the SRP_LOGIN_RSP).
    Accept {
        /// The SRP_LOGIN_RSP bytes.
        private_data: Vec<u8>,
    },
    /// Reject: send a REJ with `reason` and `private_data` (the SRP_LOGIN_REJ).
    Reject {
        /// CM REJ reason (28, consumer defined).
        reason: CmRejReason,
        /// The SRP_LOGIN_REJ bytes.
        private_data: Vec<u8>,
    },
}

impl CmAnswer {
    /// The answer carrying `decision`.
    pub fn from_decision(decision: &LoginDecision) -> CmAnswer {
        match decision {
            LoginDecision::Accept { rsp, .. } => CmAnswer::Accept {
                private_data: emit(rsp),
            },
            LoginDecision::Reject { rej, .. } => reject(rej),
        }
    }

    /// The answer to private data that is not a login: SRP_LOGIN_REJ "unable to establish
    /// RDMA channel, no reason specified", offering `formats`.
    pub fn malformed(formats: BufFormats) -> CmAnswer {
        reject(&LoginRej {
            reason: LoginRejReason::Unspecified,
            tag: Tag(0),
            buf_fmt: formats,
        })
    }

    /// For an accept: the CM parameters of our side (our QP `qpn`), with ib_srpt's values.
    pub fn accept_params(&self, qpn: Qpn) -> Option<AcceptRequest> {
        match self {
            CmAnswer::Accept { private_data } => Some(AcceptRequest {
                qpn,
                responder_resources: RESPONDER_RESOURCES,
                initiator_depth: INITIATOR_DEPTH,
                rnr_retry_count: RNR_RETRY_COUNT,
                private_data: private_data.clone(),
            }),
            CmAnswer::Reject { .. } => None,
        }
    }
}

fn emit<'a, T: WireRepr<'a, Error = WireError>>(t: &T) -> Vec<u8> {
    let mut buf = vec![0u8; t.buffer_len()];
    // A buffer of exactly `buffer_len` bytes always holds the IU.
    let n = t.emit(&mut buf).unwrap_or(0);
    buf.truncate(n);
    buf
}

fn reject(rej: &LoginRej) -> CmAnswer {
    CmAnswer::Reject {
        reason: CmRejReason::ConsumerDefined,
        private_data: emit(rej),
    }
}

#[cfg(test)]
#[path = "cm_tests.rs"]
mod tests;
