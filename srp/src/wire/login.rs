//! Login: SRP_LOGIN_REQ (64 bytes in IB CM REQ private data; 56 bytes after the RDMA-CM
//! header), SRP_LOGIN_RSP (52 bytes in CM REP) and SRP_LOGIN_REJ (32 bytes in CM REJ with
//! reason 28, consumer defined). Layouts: SRP r16a, Linux `include/scsi/srp.h`.

use super::error::{expect_type, read_fixed, write_fixed};
use super::{IuType, PortId, Tag, WireError};
use bitflags::bitflags;
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

bitflags! {
    /// Data buffer descriptor formats (REQUIRED/SUPPORTED BUFFER FORMATS). Unknown bits are kept.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct BufFormats: u16 {
        /// DDBD: direct data buffer descriptors (one 16-byte descriptor).
        const DIRECT = 1 << 1;
        /// IDBD: indirect data buffer descriptors (a descriptor table).
        const INDIRECT = 1 << 2;
    }
}

wirekit::open_enum! {
    /// MULTI-CHANNEL ACTION, bits 1:0 of REQ FLAGS.
    pub enum MultiChannelAction(u8) {
        /// Terminate every other channel of this I_T nexus.
        Single = 0,
        /// Add an independent channel to the nexus.
        Multi = 1,
    }
}

bitflags! {
    /// REQ FLAGS above the multi-channel action bits. Unknown bits are kept.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct LoginReqFlags: u8 {
        /// LOSOLNT: solicited notification on SRP_T_LOGOUT.
        const LOSOLNT = 0x10;
        /// CRSOLNT: solicited notification on SRP_CRED_REQ.
        const CRSOLNT = 0x20;
        /// AESOLNT: solicited notification on SRP_AER_REQ.
        const AESOLNT = 0x40;
        /// IMMED REQUESTED (SRP-2): the initiator wants to send immediate data.
        const IMMED_REQUESTED = 0x80;
    }
}

const MCA_MASK: u8 = 0x03;

/// SRP_LOGIN_REQ as laid out in IB CM REQ private data (64 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct LoginReqHdr {
    /// 0x00.
    pub iu_type: u8,
    /// Reserved.
    pub reserved1: [u8; 7],
    /// Tag.
    pub tag: U64,
    /// REQUESTED MAX INITIATOR TO TARGET IU LENGTH.
    pub req_it_iu_len: U32,
    /// Reserved.
    pub reserved2: [u8; 4],
    /// REQUIRED BUFFER FORMATS.
    pub req_buf_fmt: U16,
    /// REQ FLAGS: multi-channel action in bits 1:0.
    pub req_flags: u8,
    /// Reserved.
    pub reserved3: u8,
    /// IMMEDIATE DATA OFFSET (SRP-2; reserved in r16a).
    pub imm_data_offset: U16,
    /// Reserved.
    pub reserved4: [u8; 2],
    /// INITIATOR PORT IDENTIFIER.
    pub initiator_port_id: [u8; 16],
    /// TARGET PORT IDENTIFIER.
    pub target_port_id: [u8; 16],
}
const _: () = assert!(size_of::<LoginReqHdr>() == 64);

/// SRP_LOGIN_REQ in the RDMA-CM form Linux uses (56 bytes: REQ private data is 92 bytes, the
/// RDMA-CM header takes 36). Not T10; same fields, reordered, reserved bytes dropped.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct LoginReqRdmaHdr {
    /// Tag.
    pub tag: U64,
    /// REQUIRED BUFFER FORMATS.
    pub req_buf_fmt: U16,
    /// REQ FLAGS.
    pub req_flags: u8,
    /// 0x00.
    pub iu_type: u8,
    /// REQUESTED MAX INITIATOR TO TARGET IU LENGTH.
    pub req_it_iu_len: U32,
    /// INITIATOR PORT IDENTIFIER.
    pub initiator_port_id: [u8; 16],
    /// TARGET PORT IDENTIFIER.
    pub target_port_id: [u8; 16],
    /// IMMEDIATE DATA OFFSET (zero from kernels before SRP-2 support, whose struct ended at 48).
    pub imm_data_offset: U16,
    /// Reserved.
    pub reserved: [u8; 6],
}
const _: () = assert!(size_of::<LoginReqRdmaHdr>() == 56);

/// SRP_LOGIN_REQ: an initiator asks to open an RDMA channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginReq {
    /// Tag (Linux sends 0).
    pub tag: Tag,
    /// Largest IU the initiator will send.
    pub req_it_iu_len: u32,
    /// Descriptor formats the initiator requires.
    pub req_buf_fmt: BufFormats,
    /// What to do with the nexus's other channels.
    pub multi_channel: MultiChannelAction,
    /// Solicited-notification and immediate-data requests.
    pub flags: LoginReqFlags,
    /// Where immediate data starts in an SRP_CMD (SRP-2; Linux ib_srp asks for 68).
    pub imm_data_offset: u16,
    /// The initiator port.
    pub initiator_port_id: PortId,
    /// The target port.
    pub target_port_id: PortId,
}

impl LoginReq {
    fn req_flags(&self) -> u8 {
        (u8::from(self.multi_channel) & MCA_MASK) | (self.flags.bits() & !MCA_MASK)
    }

    fn from_fields(
        tag: u64,
        it_iu: u32,
        fmt: u16,
        flags: u8,
        imm: u16,
        i: [u8; 16],
        t: [u8; 16],
    ) -> Self {
        LoginReq {
            tag: Tag(tag),
            req_it_iu_len: it_iu,
            req_buf_fmt: BufFormats::from_bits_retain(fmt),
            multi_channel: MultiChannelAction::from(flags & MCA_MASK),
            flags: LoginReqFlags::from_bits_retain(flags & !MCA_MASK),
            imm_data_offset: imm,
            initiator_port_id: PortId(i),
            target_port_id: PortId(t),
        }
    }

    /// Parses the RDMA-CM form (the private data after the 36-byte RDMA-CM header).
    pub fn parse_rdma_cm(buf: &[u8]) -> Result<Self, WireError> {
        LoginReqRdmaCm::parse(buf).map(|r| r.0)
    }

    /// Writes the RDMA-CM form (56 bytes).
    pub fn emit_rdma_cm(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        LoginReqRdmaCm(*self).emit(buf)
    }
}

impl<'a> WireRepr<'a> for LoginReq {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: LoginReqHdr = read_fixed("SRP_LOGIN_REQ", buf)?;
        expect_type("SRP_LOGIN_REQ", IuType::LoginReq.into(), h.iu_type)?;
        Ok(Self::from_fields(
            h.tag.get(),
            h.req_it_iu_len.get(),
            h.req_buf_fmt.get(),
            h.req_flags,
            h.imm_data_offset.get(),
            h.initiator_port_id,
            h.target_port_id,
        ))
    }

    fn buffer_len(&self) -> usize {
        size_of::<LoginReqHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = LoginReqHdr {
            iu_type: IuType::LoginReq.into(),
            reserved1: [0; 7],
            tag: U64::new(self.tag.0),
            req_it_iu_len: U32::new(self.req_it_iu_len),
            reserved2: [0; 4],
            req_buf_fmt: U16::new(self.req_buf_fmt.bits()),
            req_flags: self.req_flags(),
            reserved3: 0,
            imm_data_offset: U16::new(self.imm_data_offset),
            reserved4: [0; 2],
            initiator_port_id: self.initiator_port_id.0,
            target_port_id: self.target_port_id.0,
        };
        write_fixed("SRP_LOGIN_REQ", &h, buf)
    }
}

/// [`LoginReq`] read and written in the 56-byte RDMA-CM form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginReqRdmaCm(pub LoginReq);

impl<'a> WireRepr<'a> for LoginReqRdmaCm {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: LoginReqRdmaHdr = read_fixed("SRP_LOGIN_REQ (RDMA-CM)", buf)?;
        expect_type(
            "SRP_LOGIN_REQ (RDMA-CM)",
            IuType::LoginReq.into(),
            h.iu_type,
        )?;
        Ok(LoginReqRdmaCm(LoginReq::from_fields(
            h.tag.get(),
            h.req_it_iu_len.get(),
            h.req_buf_fmt.get(),
            h.req_flags,
            h.imm_data_offset.get(),
            h.initiator_port_id,
            h.target_port_id,
        )))
    }

    fn buffer_len(&self) -> usize {
        size_of::<LoginReqRdmaHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let r = &self.0;
        let h = LoginReqRdmaHdr {
            tag: U64::new(r.tag.0),
            req_buf_fmt: U16::new(r.req_buf_fmt.bits()),
            req_flags: r.req_flags(),
            iu_type: IuType::LoginReq.into(),
            req_it_iu_len: U32::new(r.req_it_iu_len),
            initiator_port_id: r.initiator_port_id.0,
            target_port_id: r.target_port_id.0,
            imm_data_offset: U16::new(r.imm_data_offset),
            reserved: [0; 6],
        };
        write_fixed("SRP_LOGIN_REQ (RDMA-CM)", &h, buf)
    }
}

wirekit::open_enum! {
    /// MULTI-CHANNEL RESULT, bits 1:0 of RSP FLAGS.
    pub enum MultiChannelResult(u8) {
        /// There were no other channels.
        NoChannel = 0,
        /// Other channels of the nexus were terminated.
        Terminated = 1,
        /// Other channels of the nexus were kept.
        Maintained = 2,
    }
}

bitflags! {
    /// RSP FLAGS above the multi-channel result bits. Unknown bits are kept.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct LoginRspFlags: u8 {
        /// SOLNTSUP: the target supports solicited notification.
        const SOLNTSUP = 0x10;
        /// IMMED SUPP (SRP-2): the target accepts immediate data.
        const IMMED_SUPP = 0x80;
    }
}

/// SRP_LOGIN_RSP as laid out in CM REP private data (52 bytes, packed in Linux).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct LoginRspHdr {
    /// 0xC0.
    pub iu_type: u8,
    /// Reserved.
    pub reserved1: [u8; 3],
    /// REQUEST LIMIT DELTA: the initial credits.
    pub req_lim_delta: U32,
    /// Tag (echoes the login request's).
    pub tag: U64,
    /// MAX INITIATOR TO TARGET IU LENGTH.
    pub max_it_iu_len: U32,
    /// MAX TARGET TO INITIATOR IU LENGTH.
    pub max_ti_iu_len: U32,
    /// SUPPORTED BUFFER FORMATS.
    pub buf_fmt: U16,
    /// RSP FLAGS.
    pub rsp_flags: u8,
    /// Reserved.
    pub reserved2: [u8; 25],
}
const _: () = assert!(size_of::<LoginRspHdr>() == 52);

/// SRP_LOGIN_RSP: the target accepts a login.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginRsp {
    /// Initial credits.
    pub req_lim_delta: u32,
    /// Tag of the login request.
    pub tag: Tag,
    /// Largest IU the target accepts.
    pub max_it_iu_len: u32,
    /// Largest IU the target will send (ib_srpt echoes the request's `req_it_iu_len`).
    pub max_ti_iu_len: u32,
    /// Formats the target supports.
    pub buf_fmt: BufFormats,
    /// What happened to the nexus's other channels.
    pub multi_channel: MultiChannelResult,
    /// Solicited-notification and immediate-data support.
    pub flags: LoginRspFlags,
}

impl<'a> WireRepr<'a> for LoginRsp {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: LoginRspHdr = read_fixed("SRP_LOGIN_RSP", buf)?;
        expect_type("SRP_LOGIN_RSP", IuType::LoginRsp.into(), h.iu_type)?;
        Ok(LoginRsp {
            req_lim_delta: h.req_lim_delta.get(),
            tag: Tag(h.tag.get()),
            max_it_iu_len: h.max_it_iu_len.get(),
            max_ti_iu_len: h.max_ti_iu_len.get(),
            buf_fmt: BufFormats::from_bits_retain(h.buf_fmt.get()),
            multi_channel: MultiChannelResult::from(h.rsp_flags & MCA_MASK),
            flags: LoginRspFlags::from_bits_retain(h.rsp_flags & !MCA_MASK),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<LoginRspHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = LoginRspHdr {
            iu_type: IuType::LoginRsp.into(),
            reserved1: [0; 3],
            req_lim_delta: U32::new(self.req_lim_delta),
            tag: U64::new(self.tag.0),
            max_it_iu_len: U32::new(self.max_it_iu_len),
            max_ti_iu_len: U32::new(self.max_ti_iu_len),
            buf_fmt: U16::new(self.buf_fmt.bits()),
            rsp_flags: (u8::from(self.multi_channel) & MCA_MASK) | (self.flags.bits() & !MCA_MASK),
            reserved2: [0; 25],
        };
        write_fixed("SRP_LOGIN_RSP", &h, buf)
    }
}

wirekit::open_enum! {
    /// SRP_LOGIN_REJ reasons (SRP r16a; Linux `enum srp_login_rej_reason`; 0x00010006 is
    /// missing from the 2005 WinOF list).
    pub enum LoginRejReason(u32) {
        /// Unable to establish RDMA channel, no reason specified.
        Unspecified = 0x0001_0000,
        /// Insufficient RDMA channel resources.
        InsufficientResources = 0x0001_0001,
        /// Requested maximum initiator to target IU length too large.
        ItIuLenTooLarge = 0x0001_0002,
        /// Unable to associate the RDMA channel with the specified I_T nexus.
        UnableToAssociate = 0x0001_0003,
        /// One or more requested data buffer descriptor formats are not supported.
        UnsupportedBufFormat = 0x0001_0004,
        /// The target port does not support multiple RDMA channels per I_T nexus.
        NoMultiChannel = 0x0001_0005,
        /// RDMA channel limit reached for this initiator.
        ChannelLimitReached = 0x0001_0006,
    }
}

impl LoginRejReason {
    /// Whether the code is in the range SRP defines (iPXE: `(r & 0xfffffff0) == 0x00010000`).
    pub fn is_srp_defined(self) -> bool {
        (u32::from(self) & 0xffff_fff0) == 0x0001_0000
    }
}

/// SRP_LOGIN_REJ as laid out in CM REJ private data (32 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct LoginRejHdr {
    /// 0xC2.
    pub iu_type: u8,
    /// Reserved.
    pub reserved1: [u8; 3],
    /// REASON.
    pub reason: U32,
    /// Tag.
    pub tag: U64,
    /// Reserved.
    pub reserved2: [u8; 8],
    /// SUPPORTED BUFFER FORMATS.
    pub buf_fmt: U16,
    /// Reserved.
    pub reserved3: [u8; 6],
}
const _: () = assert!(size_of::<LoginRejHdr>() == 32);

/// SRP_LOGIN_REJ: the target refuses a login.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginRej {
    /// Why.
    pub reason: LoginRejReason,
    /// Tag of the login request.
    pub tag: Tag,
    /// Formats the target supports (so the initiator can retry with those).
    pub buf_fmt: BufFormats,
}

impl<'a> WireRepr<'a> for LoginRej {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: LoginRejHdr = read_fixed("SRP_LOGIN_REJ", buf)?;
        expect_type("SRP_LOGIN_REJ", IuType::LoginRej.into(), h.iu_type)?;
        Ok(LoginRej {
            reason: h.reason.get().into(),
            tag: Tag(h.tag.get()),
            buf_fmt: BufFormats::from_bits_retain(h.buf_fmt.get()),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<LoginRejHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = LoginRejHdr {
            iu_type: IuType::LoginRej.into(),
            reserved1: [0; 3],
            reason: U32::new(self.reason.into()),
            tag: U64::new(self.tag.0),
            reserved2: [0; 8],
            buf_fmt: U16::new(self.buf_fmt.bits()),
            reserved3: [0; 6],
        };
        write_fixed("SRP_LOGIN_REJ", &h, buf)
    }
}

#[cfg(test)]
#[path = "login_tests.rs"]
mod tests;
