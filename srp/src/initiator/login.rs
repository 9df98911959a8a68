//! Login: the SRP_LOGIN_REQ an initiator sends (IB CM or RDMA-CM form), what it makes of the
//! SRP_LOGIN_RSP (the negotiated window, IU sizes, immediate data), and which SRP_LOGIN_REJ
//! reasons are worth retrying.
//!
//! The RDMA-CM form is the 56 bytes that follow the 36-byte cma header (version, IP version,
//! port, source and destination addresses) in the REQ private data; the driver prefixes that
//! header with `access_layer::mad::cm::cma`, since only it knows the addresses and `srp` sits
//! below the access layer.

use super::InitiatorError;
use super::alloc::vec;
use super::alloc::vec::Vec;
use crate::wire::cmd::DEFAULT_IMM_DATA_OFFSET;
use crate::wire::login::{
    BufFormats, LoginRej, LoginRejReason, LoginReq, LoginReqFlags, LoginRsp, LoginRspFlags,
    MultiChannelAction, MultiChannelResult,
};
use crate::wire::{PortId, Tag};
use wirekit::WireRepr;

/// Which connection manager carries the login.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginForm {
    /// IB CM REQ private data: the 64-byte T10 layout (used with DM discovery).
    IbCm,
    /// RDMA-CM (Linux ib_srp over RoCE, `dest=ip:port`): the 56-byte form after the cma header.
    RdmaCm,
}

/// What the initiator asks for at login.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginParams {
    /// IB CM or RDMA-CM.
    pub form: LoginForm,
    /// INITIATOR PORT IDENTIFIER.
    pub initiator_port_id: PortId,
    /// TARGET PORT IDENTIFIER.
    pub target_port_id: PortId,
    /// REQUESTED MAX INITIATOR TO TARGET IU LENGTH (ib_srp: 68 + 8192 with immediate data).
    pub req_it_iu_len: u32,
    /// REQUIRED BUFFER FORMATS.
    pub buf_fmts: BufFormats,
    /// The first channel of the I_T nexus logs in SINGLE (the target drops stale channels of
    /// an earlier login), the others MULTI.
    pub first_channel: bool,
    /// Ask for SRP-2 immediate data.
    pub want_imm_data: bool,
    /// Where immediate data starts in an SRP_CMD.
    pub imm_data_offset: u16,
    /// The largest write sent as immediate data (ib_srp `max_imm_data`, 8192).
    pub max_imm_data: u32,
}

impl LoginParams {
    /// ib_srp's defaults between the two given ports.
    pub fn new(form: LoginForm, initiator_port_id: PortId, target_port_id: PortId) -> Self {
        LoginParams {
            form,
            initiator_port_id,
            target_port_id,
            req_it_iu_len: u32::from(DEFAULT_IMM_DATA_OFFSET) + 8192,
            buf_fmts: BufFormats::DIRECT | BufFormats::INDIRECT,
            first_channel: true,
            want_imm_data: true,
            imm_data_offset: DEFAULT_IMM_DATA_OFFSET,
            max_imm_data: 8192,
        }
    }

    /// The SRP_LOGIN_REQ with `tag`.
    pub fn request(&self, tag: Tag) -> LoginReq {
        LoginReq {
            tag,
            req_it_iu_len: self.req_it_iu_len,
            req_buf_fmt: self.buf_fmts,
            multi_channel: if self.first_channel {
                MultiChannelAction::Single
            } else {
                MultiChannelAction::Multi
            },
            flags: if self.want_imm_data {
                LoginReqFlags::IMMED_REQUESTED
            } else {
                LoginReqFlags::empty()
            },
            imm_data_offset: if self.want_imm_data {
                self.imm_data_offset
            } else {
                0
            },
            initiator_port_id: self.initiator_port_id,
            target_port_id: self.target_port_id,
        }
    }

    /// The CM private data carrying the request in this form.
    pub fn private_data(&self, tag: Tag) -> Vec<u8> {
        let req = self.request(tag);
        let (mut buf, r) = match self.form {
            LoginForm::IbCm => {
                let mut b = vec![0; req.buffer_len()];
                let r = req.emit(&mut b);
                (b, r)
            }
            LoginForm::RdmaCm => {
                let mut b = vec![0; 56];
                let r = req.emit_rdma_cm(&mut b);
                (b, r)
            }
        };
        // Both layouts are fixed-size and the buffers are sized for them.
        debug_assert!(r.is_ok(), "{r:?}");
        buf.truncate(r.unwrap_or(0));
        buf
    }
}

/// What a LOGIN_RSP granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// REQUEST LIMIT DELTA: the initial credits, and the command window less one.
    pub window: u32,
    /// Largest IU the target accepts.
    pub max_it_iu_len: u32,
    /// Largest IU the target sends (sizes the receive buffers).
    pub max_ti_iu_len: u32,
    /// Descriptor formats the target supports.
    pub buf_fmts: BufFormats,
    /// Immediate data asked for and granted (IMMED SUPP).
    pub imm_data: bool,
    /// Where immediate data starts.
    pub imm_data_offset: u16,
    /// The largest immediate write: min(max_imm_data, max_it_iu_len − offset), 0 without.
    pub max_imm_len: u32,
    /// What happened to the nexus's other channels.
    pub multi_channel: MultiChannelResult,
}

/// The smallest SRP_CMD with one direct descriptor.
const MIN_IT_IU_LEN: u32 = 64;

impl Negotiated {
    /// Checks a LOGIN_RSP against the request it answers.
    pub fn from_rsp(
        params: &LoginParams,
        sent_tag: Tag,
        rsp: &LoginRsp,
    ) -> Result<Negotiated, InitiatorError> {
        let bad = InitiatorError::BadLoginResponse;
        if rsp.tag != sent_tag {
            return Err(bad("tag does not echo the login request"));
        }
        if rsp.req_lim_delta < 2 {
            // ib_srp: can_queue = req_lim − 1; one credit stays for task management.
            return Err(bad("request limit below 2 leaves no credit for commands"));
        }
        if rsp.max_it_iu_len < MIN_IT_IU_LEN {
            return Err(bad("max initiator-to-target IU length below one SRP_CMD"));
        }
        let imm_data = params.want_imm_data && rsp.flags.contains(LoginRspFlags::IMMED_SUPP);
        let max_imm_len = if imm_data {
            rsp.max_it_iu_len
                .saturating_sub(u32::from(params.imm_data_offset))
                .min(params.max_imm_data)
        } else {
            0
        };
        Ok(Negotiated {
            window: rsp.req_lim_delta,
            max_it_iu_len: rsp.max_it_iu_len.min(params.req_it_iu_len),
            max_ti_iu_len: rsp.max_ti_iu_len,
            buf_fmts: rsp.buf_fmt,
            imm_data,
            imm_data_offset: params.imm_data_offset,
            max_imm_len,
            multi_channel: rsp.multi_channel,
        })
    }
}

/// What to do after an SRP_LOGIN_REJ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectAdvice {
    /// A transient condition (resources, channel limit): try again after the reconnect delay.
    RetryLater,
    /// The target listed formats we can live with: try again requiring only those (as the
    /// 2005 miniport did, falling back to direct descriptors).
    RetryWithFormats(BufFormats),
    /// Configuration is wrong (IU length, multi-channel, formats we cannot use); trying
    /// again cannot succeed until someone changes something.
    GiveUp,
}

impl RejectAdvice {
    /// Classifies a reject of a login made with `params`.
    pub fn for_reject(params: &LoginParams, rej: &LoginRej) -> RejectAdvice {
        match rej.reason {
            LoginRejReason::Unspecified
            | LoginRejReason::InsufficientResources
            | LoginRejReason::UnableToAssociate
            | LoginRejReason::ChannelLimitReached => RejectAdvice::RetryLater,
            LoginRejReason::UnsupportedBufFormat => {
                let both = params.buf_fmts & rej.buf_fmt;
                if both.is_empty() || both == params.buf_fmts {
                    RejectAdvice::GiveUp
                } else {
                    RejectAdvice::RetryWithFormats(both)
                }
            }
            LoginRejReason::ItIuLenTooLarge
            | LoginRejReason::NoMultiChannel
            | LoginRejReason::Unknown(_) => RejectAdvice::GiveUp,
        }
    }

    /// Whether another attempt can succeed without a configuration change.
    pub fn retryable(self) -> bool {
        self != RejectAdvice::GiveUp
    }
}
