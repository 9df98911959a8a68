//! IU type codes, tags, and a parser for "whatever IU this is".

use super::WireError;
use super::{aer, cmd, cred, login, logout, rsp, tsk_mgmt};
use wirekit::WireRepr;

wirekit::open_enum! {
    /// The IU type code in byte 0 of every IU (SRP r16a; Linux `include/scsi/srp.h`).
    /// 0x0x initiator requests, 0x4x initiator responses, 0x8x target requests, 0xCx target
    /// responses.
    pub enum IuType(u8) {
        /// SRP_LOGIN_REQ, I→T, carried in CM REQ private data.
        LoginReq = 0x00,
        /// SRP_TSK_MGMT, I→T.
        TskMgmt = 0x01,
        /// SRP_CMD, I→T.
        Cmd = 0x02,
        /// SRP_I_LOGOUT, I→T.
        ILogout = 0x03,
        /// SRP_CRED_RSP, I→T.
        CredRsp = 0x41,
        /// SRP_AER_RSP, I→T.
        AerRsp = 0x42,
        /// SRP_T_LOGOUT, T→I.
        TLogout = 0x80,
        /// SRP_CRED_REQ, T→I.
        CredReq = 0x81,
        /// SRP_AER_REQ, T→I.
        AerReq = 0x82,
        /// SRP_LOGIN_RSP, T→I, carried in CM REP private data.
        LoginRsp = 0xc0,
        /// SRP_RSP, T→I.
        Rsp = 0xc1,
        /// SRP_LOGIN_REJ, T→I, carried in CM REJ private data.
        LoginRej = 0xc2,
    }
}

/// An IU tag: 8 opaque bytes chosen by the requester and echoed by the responder.
///
/// Kept as the big-endian reading of those bytes; echoing it writes the same bytes back, so a
/// peer that stores host-endian values in its tags (Linux does) gets them back unchanged.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Tag(pub u64);

wirekit::debug_as_hex!(Tag);

impl core::fmt::Display for Tag {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}

bitflags::bitflags! {
    /// Byte 1 of SRP_CMD and SRP_TSK_MGMT: solicited notification on the response. Unknown
    /// bits are kept.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct SolicitFlags: u8 {
        /// SCSOLNT: solicited notification for successful completions.
        const SCSOLNT = 0x02;
        /// UCSOLNT: solicited notification for unsuccessful completions.
        const UCSOLNT = 0x04;
    }
}

/// Any SRP IU, chosen by its type byte. Login IUs here are the 64-byte IB CM form; the
/// 56-byte RDMA-CM login request has its type byte at offset 11 and is parsed by
/// [`login::LoginReq::parse_rdma_cm`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyIu<'a> {
    /// SRP_LOGIN_REQ.
    LoginReq(login::LoginReq),
    /// SRP_LOGIN_RSP.
    LoginRsp(login::LoginRsp),
    /// SRP_LOGIN_REJ.
    LoginRej(login::LoginRej),
    /// SRP_I_LOGOUT.
    ILogout(logout::ILogout),
    /// SRP_T_LOGOUT.
    TLogout(logout::TLogout),
    /// SRP_TSK_MGMT.
    TskMgmt(tsk_mgmt::TskMgmt),
    /// SRP_CMD.
    Cmd(cmd::Cmd<'a>),
    /// SRP_RSP.
    Rsp(rsp::Rsp<'a>),
    /// SRP_CRED_REQ.
    CredReq(cred::CredReq),
    /// SRP_CRED_RSP.
    CredRsp(cred::CredRsp),
    /// SRP_AER_REQ.
    AerReq(aer::AerReq<'a>),
    /// SRP_AER_RSP.
    AerRsp(aer::AerRsp),
}

impl<'a> AnyIu<'a> {
    /// The IU type of this IU.
    pub fn iu_type(&self) -> IuType {
        match self {
            AnyIu::LoginReq(_) => IuType::LoginReq,
            AnyIu::LoginRsp(_) => IuType::LoginRsp,
            AnyIu::LoginRej(_) => IuType::LoginRej,
            AnyIu::ILogout(_) => IuType::ILogout,
            AnyIu::TLogout(_) => IuType::TLogout,
            AnyIu::TskMgmt(_) => IuType::TskMgmt,
            AnyIu::Cmd(_) => IuType::Cmd,
            AnyIu::Rsp(_) => IuType::Rsp,
            AnyIu::CredReq(_) => IuType::CredReq,
            AnyIu::CredRsp(_) => IuType::CredRsp,
            AnyIu::AerReq(_) => IuType::AerReq,
            AnyIu::AerRsp(_) => IuType::AerRsp,
        }
    }

    /// The tag of this IU.
    pub fn tag(&self) -> Tag {
        match self {
            AnyIu::LoginReq(x) => x.tag,
            AnyIu::LoginRsp(x) => x.tag,
            AnyIu::LoginRej(x) => x.tag,
            AnyIu::ILogout(x) => x.tag,
            AnyIu::TLogout(x) => x.tag,
            AnyIu::TskMgmt(x) => x.tag,
            AnyIu::Cmd(x) => x.tag,
            AnyIu::Rsp(x) => x.tag,
            AnyIu::CredReq(x) => x.tag,
            AnyIu::CredRsp(x) => x.tag,
            AnyIu::AerReq(x) => x.tag,
            AnyIu::AerRsp(x) => x.tag,
        }
    }
}

impl<'a> WireRepr<'a> for AnyIu<'a> {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let Some(&code) = buf.first() else {
            return Err(WireError::Truncated {
                iu: "SRP IU",
                need: 1,
                have: 0,
            });
        };
        Ok(match IuType::from(code) {
            IuType::LoginReq => AnyIu::LoginReq(login::LoginReq::parse(buf)?),
            IuType::LoginRsp => AnyIu::LoginRsp(login::LoginRsp::parse(buf)?),
            IuType::LoginRej => AnyIu::LoginRej(login::LoginRej::parse(buf)?),
            IuType::ILogout => AnyIu::ILogout(logout::ILogout::parse(buf)?),
            IuType::TLogout => AnyIu::TLogout(logout::TLogout::parse(buf)?),
            IuType::TskMgmt => AnyIu::TskMgmt(tsk_mgmt::TskMgmt::parse(buf)?),
            IuType::Cmd => AnyIu::Cmd(cmd::Cmd::parse(buf)?),
            IuType::Rsp => AnyIu::Rsp(rsp::Rsp::parse(buf)?),
            IuType::CredReq => AnyIu::CredReq(cred::CredReq::parse(buf)?),
            IuType::CredRsp => AnyIu::CredRsp(cred::CredRsp::parse(buf)?),
            IuType::AerReq => AnyIu::AerReq(aer::AerReq::parse(buf)?),
            IuType::AerRsp => AnyIu::AerRsp(aer::AerRsp::parse(buf)?),
            IuType::Unknown(got) => {
                return Err(WireError::BadField {
                    iu: "SRP IU",
                    field: "IU type",
                    value: u64::from(got),
                    why: "not an SRP IU type code",
                });
            }
        })
    }

    fn buffer_len(&self) -> usize {
        match self {
            AnyIu::LoginReq(x) => x.buffer_len(),
            AnyIu::LoginRsp(x) => x.buffer_len(),
            AnyIu::LoginRej(x) => x.buffer_len(),
            AnyIu::ILogout(x) => x.buffer_len(),
            AnyIu::TLogout(x) => x.buffer_len(),
            AnyIu::TskMgmt(x) => x.buffer_len(),
            AnyIu::Cmd(x) => x.buffer_len(),
            AnyIu::Rsp(x) => x.buffer_len(),
            AnyIu::CredReq(x) => x.buffer_len(),
            AnyIu::CredRsp(x) => x.buffer_len(),
            AnyIu::AerReq(x) => x.buffer_len(),
            AnyIu::AerRsp(x) => x.buffer_len(),
        }
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        match self {
            AnyIu::LoginReq(x) => x.emit(buf),
            AnyIu::LoginRsp(x) => x.emit(buf),
            AnyIu::LoginRej(x) => x.emit(buf),
            AnyIu::ILogout(x) => x.emit(buf),
            AnyIu::TLogout(x) => x.emit(buf),
            AnyIu::TskMgmt(x) => x.emit(buf),
            AnyIu::Cmd(x) => x.emit(buf),
            AnyIu::Rsp(x) => x.emit(buf),
            AnyIu::CredReq(x) => x.emit(buf),
            AnyIu::CredRsp(x) => x.emit(buf),
            AnyIu::AerReq(x) => x.emit(buf),
            AnyIu::AerRsp(x) => x.emit(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iu_codes_match_linux_srp_h() {
        let table: [(IuType, u8); 12] = [
            (IuType::LoginReq, 0x00),
            (IuType::TskMgmt, 0x01),
            (IuType::Cmd, 0x02),
            (IuType::ILogout, 0x03),
            (IuType::CredRsp, 0x41),
            (IuType::AerRsp, 0x42),
            (IuType::TLogout, 0x80),
            (IuType::CredReq, 0x81),
            (IuType::AerReq, 0x82),
            (IuType::LoginRsp, 0xc0),
            (IuType::Rsp, 0xc1),
            (IuType::LoginRej, 0xc2),
        ];
        for (t, code) in table {
            assert_eq!(u8::from(t), code);
            assert_eq!(IuType::from(code), t);
        }
    }

    #[test]
    fn unknown_type_is_a_clear_error() {
        let err = AnyIu::parse(&[0x55; 64]).expect_err("0x55 is no IU");
        assert!(matches!(
            err,
            WireError::BadField {
                field: "IU type",
                value: 0x55,
                ..
            }
        ));
        assert!(AnyIu::parse(&[]).is_err());
    }

    #[test]
    fn any_iu_dispatches_and_round_trips() {
        let iu = AnyIu::CredRsp(cred::CredRsp { tag: Tag(7) });
        let mut buf = [0u8; 16];
        assert_eq!(iu.emit(&mut buf), Ok(16));
        let back = AnyIu::parse(&buf).expect("parse");
        assert_eq!(back.iu_type(), IuType::CredRsp);
        assert_eq!(back.tag(), Tag(7));
        assert_eq!(back, iu);
    }
}
