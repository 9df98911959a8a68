//! The login decision: the checks ib_srpt makes (in its order, with its reject reasons, so a
//! Linux initiator sees what it expects) plus the ones it skips (required buffer formats,
//! ACLs before any resource is spent, a channel limit per nexus).
//!
//! Order: IU length → IOC enabled → target port identifier → buffer formats → ACL →
//! multi-channel action. The first failing check decides the reason.

use super::nexus::ChannelId;
use srp::wire::PortId;
use srp::wire::login::{
    BufFormats, LoginRej, LoginRejReason, LoginReq, LoginReqFlags, LoginRsp, LoginRspFlags,
    MultiChannelAction, MultiChannelResult,
};
use thiserror::Error;

/// Smallest IU an initiator may ask to send: an SRP_CMD with a 16-byte CDB and one direct
/// descriptor (ib_srpt's lower bound).
pub const MIN_IT_IU_LEN: u32 = 64;

/// Smallest IMMEDIATE DATA OFFSET we honour: the end of the fixed SRP_CMD header.
pub const MIN_IMM_DATA_OFFSET: u16 = 48;

/// What an IOC offers and requires, from the configuration and the channel's resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginPolicy {
    /// `id_ext ‖ IOC GUID`: the only target port identifier this IOC answers to.
    pub target_port_id: PortId,
    /// Whether the IOC (or the port the request came in on) is enabled.
    pub enabled: bool,
    /// Largest IU we receive (the size of our receive buffers).
    pub max_it_iu_len: u32,
    /// Largest IU we send (SRP_RSP with sense, AER, CRED_REQ); ib_srp sizes its receive
    /// buffers by it.
    pub max_ti_iu_len: u32,
    /// Credits granted at login (receive buffers posted per channel).
    pub window: u32,
    /// Descriptor formats we support.
    pub formats: BufFormats,
    /// Whether we accept immediate data.
    pub immediate: bool,
    /// Channels one I_T nexus may hold.
    pub max_channels_per_nexus: usize,
}

/// The parameters a channel runs with after an accepted login.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Largest IU the initiator sends (its request, within our limit).
    pub it_iu_len: u32,
    /// Largest IU we send.
    pub ti_iu_len: u32,
    /// Descriptor formats in use.
    pub formats: BufFormats,
    /// Where immediate data starts in an SRP_CMD, if immediate data was granted.
    pub imm_data_offset: Option<u16>,
    /// Credits granted.
    pub window: u32,
}

/// Why a login was refused; [`LoginRefusal::reason`] is the code that goes on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum LoginRefusal {
    /// REQUESTED MAXIMUM INITIATOR TO TARGET IU LENGTH out of range.
    #[error("requested initiator-to-target IU length {requested} is outside {min}..={max}")]
    ItIuLen {
        /// What was asked.
        requested: u32,
        /// [`MIN_IT_IU_LEN`].
        min: u32,
        /// Our receive buffer size.
        max: u32,
    },
    /// The IOC or port is administratively disabled.
    #[error("the I/O controller is disabled")]
    Disabled,
    /// The TARGET PORT IDENTIFIER names another IOC.
    #[error("target port identifier {requested} is not this I/O controller's ({ours})")]
    WrongTarget {
        /// What was asked.
        requested: PortId,
        /// Ours.
        ours: PortId,
    },
    /// The initiator requires a descriptor format we do not support.
    #[error("required buffer formats {required:#06x} exceed the supported {supported:#06x}")]
    BufFormats {
        /// REQUIRED BUFFER FORMATS.
        required: u16,
        /// Ours.
        supported: u16,
    },
    /// The IOC's access list does not admit this initiator.
    #[error("initiator port {0} is not admitted by the I/O controller's access list")]
    Denied(PortId),
    /// MULTI-CHANNEL ACTION multi on a nexus already at its channel limit.
    #[error("the I_T nexus already has {0} channels (the limit)")]
    ChannelLimit(usize),
    /// The I_T nexus has channels that logged in from another address, and the IOC does
    /// not let a login join or replace them from elsewhere (`nexus_from_any_address`).
    #[error(
        "initiator port {0} already has channels from another address; a login from here \
         may not join or replace them"
    )]
    NexusElsewhere(PortId),
    /// The login came on a partition the IOC is not exported on.
    #[error("the login came on partition {0:#06x}, which the I/O controller is not exported on")]
    WrongPartition(u16),
}

impl LoginRefusal {
    /// The SRP_LOGIN_REJ REASON. `Disabled` and `WrongTarget` use ib_srpt's codes. `Denied`
    /// is "unable to associate RDMA channel with the specified I_T nexus", the defined code
    /// that says what happened; LIO reports the same case as 0x00010006.
    pub fn reason(&self) -> LoginRejReason {
        match self {
            LoginRefusal::ItIuLen { .. } => LoginRejReason::ItIuLenTooLarge,
            LoginRefusal::Disabled => LoginRejReason::InsufficientResources,
            LoginRefusal::WrongTarget { .. }
            | LoginRefusal::Denied(_)
            | LoginRefusal::NexusElsewhere(_)
            | LoginRefusal::WrongPartition(_) => LoginRejReason::UnableToAssociate,
            LoginRefusal::BufFormats { .. } => LoginRejReason::UnsupportedBufFormat,
            LoginRefusal::ChannelLimit(_) => LoginRejReason::ChannelLimitReached,
        }
    }
}

/// The answer to one SRP_LOGIN_REQ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoginDecision {
    /// Send `rsp` in the CM REP, run the channel with `negotiated`, then close `terminate`
    /// (the nexus's other channels, for MULTI-CHANNEL ACTION single).
    Accept {
        /// The SRP_LOGIN_RSP.
        rsp: LoginRsp,
        /// The channel's parameters.
        negotiated: Negotiated,
        /// Channels to close.
        terminate: Vec<ChannelId>,
    },
    /// Send `rej` in the CM REJ.
    Reject {
        /// The SRP_LOGIN_REJ.
        rej: LoginRej,
        /// Why, for the log and counters.
        refusal: LoginRefusal,
    },
}

/// What the transport knows of a login besides its IU.
#[derive(Clone, Copy, Debug)]
pub struct LoginFacts<'a> {
    /// Whether the IOC's access list admits the initiator (from where it logged in).
    pub acl_admits: bool,
    /// The live channels of the request's I_T nexus.
    pub nexus_channels: &'a [ChannelId],
    /// The nexus has channels that logged in from another address, and the IOC keeps a
    /// nexus on one address (`nexus_from_any_address` off).
    pub nexus_elsewhere: bool,
    /// The P_Key of the partition the login came on, if the IOC is not exported on it.
    pub wrong_partition: Option<u16>,
}

/// Decides `req` under `policy`, given whether the ACL admits the initiator and the nexus's
/// live channels (nothing known of addresses and partitions: [`decide_with`]).
pub fn decide(
    req: &LoginReq,
    policy: &LoginPolicy,
    acl_admits: bool,
    nexus_channels: &[ChannelId],
) -> LoginDecision {
    decide_with(
        req,
        policy,
        &LoginFacts {
            acl_admits,
            nexus_channels,
            nexus_elsewhere: false,
            wrong_partition: None,
        },
    )
}

/// Decides `req` under `policy` and what the transport knows of it (`facts`). Refusals in
/// order: IU length, IOC disabled, another target port, another partition, descriptor
/// formats, the ACL, a nexus bound to another address, the nexus's channel limit.
pub fn decide_with(req: &LoginReq, policy: &LoginPolicy, facts: &LoginFacts<'_>) -> LoginDecision {
    let nexus_channels = facts.nexus_channels;
    match check(req, policy, facts) {
        Ok(()) => accept(req, policy, nexus_channels),
        Err(refusal) => LoginDecision::Reject {
            rej: LoginRej {
                reason: refusal.reason(),
                tag: req.tag,
                buf_fmt: policy.formats,
            },
            refusal,
        },
    }
}

fn check(req: &LoginReq, policy: &LoginPolicy, facts: &LoginFacts<'_>) -> Result<(), LoginRefusal> {
    let (acl_admits, nexus_channels) = (facts.acl_admits, facts.nexus_channels);
    if !(MIN_IT_IU_LEN..=policy.max_it_iu_len).contains(&req.req_it_iu_len) {
        return Err(LoginRefusal::ItIuLen {
            requested: req.req_it_iu_len,
            min: MIN_IT_IU_LEN,
            max: policy.max_it_iu_len,
        });
    }
    if !policy.enabled {
        return Err(LoginRefusal::Disabled);
    }
    if req.target_port_id != policy.target_port_id {
        return Err(LoginRefusal::WrongTarget {
            requested: req.target_port_id,
            ours: policy.target_port_id,
        });
    }
    if let Some(pkey) = facts.wrong_partition {
        return Err(LoginRefusal::WrongPartition(pkey));
    }
    if !policy.formats.contains(req.req_buf_fmt) {
        return Err(LoginRefusal::BufFormats {
            required: req.req_buf_fmt.bits(),
            supported: policy.formats.bits(),
        });
    }
    if !acl_admits {
        return Err(LoginRefusal::Denied(req.initiator_port_id));
    }
    if facts.nexus_elsewhere {
        return Err(LoginRefusal::NexusElsewhere(req.initiator_port_id));
    }
    if req.multi_channel != MultiChannelAction::Single
        && nexus_channels.len() >= policy.max_channels_per_nexus
    {
        return Err(LoginRefusal::ChannelLimit(nexus_channels.len()));
    }
    Ok(())
}

fn accept(req: &LoginReq, policy: &LoginPolicy, nexus_channels: &[ChannelId]) -> LoginDecision {
    let imm_data_offset = (policy.immediate
        && req.flags.contains(LoginReqFlags::IMMED_REQUESTED)
        && req.imm_data_offset >= MIN_IMM_DATA_OFFSET
        && u32::from(req.imm_data_offset) < req.req_it_iu_len)
        .then_some(req.imm_data_offset);
    let single = req.multi_channel == MultiChannelAction::Single;
    let multi_channel = match (single, nexus_channels.is_empty()) {
        (_, true) => MultiChannelResult::NoChannel,
        (true, false) => MultiChannelResult::Terminated,
        (false, false) => MultiChannelResult::Maintained,
    };
    let negotiated = Negotiated {
        it_iu_len: req.req_it_iu_len,
        ti_iu_len: policy.max_ti_iu_len,
        formats: policy.formats,
        imm_data_offset,
        window: policy.window,
    };
    let mut flags = LoginRspFlags::empty();
    if imm_data_offset.is_some() {
        flags |= LoginRspFlags::IMMED_SUPP;
    }
    LoginDecision::Accept {
        rsp: LoginRsp {
            req_lim_delta: policy.window,
            tag: req.tag,
            max_it_iu_len: negotiated.it_iu_len,
            max_ti_iu_len: negotiated.ti_iu_len,
            buf_fmt: policy.formats,
            multi_channel,
            flags,
        },
        negotiated,
        terminate: if single {
            nexus_channels.to_vec()
        } else {
            Vec::new()
        },
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
