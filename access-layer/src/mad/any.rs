//! [`parse_any`]: a whole 256-byte MAD to a typed value, dispatched on (class, class
//! version, attribute). Attributes this crate does not model stay raw, so every MAD with a
//! valid common header parses. Used by the GSI agent and the `mad` fuzz target.
#[allow(unused_imports)]
use crate::prelude::*;

use super::class_port_info::ClassPortInfo;
use super::cm::{CM_CLASS_VERSION, CmAttr, CmDrep, CmDreq, CmMra, CmRej, CmRep, CmReq, CmRtu};
use super::common::{
    MAD_DATA_LEN, MAD_HEADER_LEN, MAD_LEN, Mad, MadBuf, MadHeader, MadStatus, Method, MgmtClass,
};
use super::dm::{
    DM_CLASS_VERSION, DM_DATA_LEN, DM_DATA_OFFSET, DmAttr, IocProfile, IouInfo, ServiceEntries,
};
use super::rmpp::{RMPP_HEADER_LEN, RmppHeader};
use super::sa::{PathRecord, SA_CLASS_VERSION, SA_DATA_LEN, SA_DATA_OFFSET, SaAttr, SaHeader};
use super::{MadError, Tid};
use wirekit::WireRepr;

/// A CM message (the CM data area), by attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmMessage {
    /// ConnectRequest.
    Req(CmReq),
    /// ConnectReply.
    Rep(CmRep),
    /// ConnectReject.
    Rej(CmRej),
    /// MessageReceiptAcknowledgement.
    Mra(CmMra),
    /// ReadyToUse.
    Rtu(CmRtu),
    /// DisconnectRequest.
    Dreq(CmDreq),
    /// DisconnectReply.
    Drep(CmDrep),
    /// ClassPortInfo (Get/GetResp).
    ClassPortInfo(ClassPortInfo),
}

impl CmMessage {
    /// The attribute ID.
    pub fn attr(&self) -> CmAttr {
        match self {
            CmMessage::Req(_) => CmAttr::Req,
            CmMessage::Rep(_) => CmAttr::Rep,
            CmMessage::Rej(_) => CmAttr::Rej,
            CmMessage::Mra(_) => CmAttr::Mra,
            CmMessage::Rtu(_) => CmAttr::Rtu,
            CmMessage::Dreq(_) => CmAttr::Dreq,
            CmMessage::Drep(_) => CmAttr::Drep,
            CmMessage::ClassPortInfo(_) => CmAttr::ClassPortInfo,
        }
    }

    /// The common header that carries this message: CM class 0x07 version 2, Method Send
    /// (GetResp for ClassPortInfo), attribute modifier 0.
    pub fn mad_header(&self, tid: Tid) -> MadHeader {
        let mut h = MadHeader::request(
            MgmtClass::Cm,
            CM_CLASS_VERSION,
            Method::Send,
            tid,
            self.attr().into(),
            0,
        );
        if let CmMessage::ClassPortInfo(_) = self {
            h.method = Method::Get;
            h.response = true;
        }
        h
    }

    fn parse(attr: CmAttr, data: &[u8]) -> Result<Option<Self>, MadError> {
        Ok(Some(match attr {
            CmAttr::Req => CmMessage::Req(CmReq::parse(data)?),
            CmAttr::Rep => CmMessage::Rep(CmRep::parse(data)?),
            CmAttr::Rej => CmMessage::Rej(CmRej::parse(data)?),
            CmAttr::Mra => CmMessage::Mra(CmMra::parse(data)?),
            CmAttr::Rtu => CmMessage::Rtu(CmRtu::parse(data)?),
            CmAttr::Dreq => CmMessage::Dreq(CmDreq::parse(data)?),
            CmAttr::Drep => CmMessage::Drep(CmDrep::parse(data)?),
            CmAttr::ClassPortInfo => CmMessage::ClassPortInfo(ClassPortInfo::parse(data)?),
            _ => return Ok(None),
        }))
    }

    fn emit(&self, out: &mut [u8]) -> Result<usize, MadError> {
        match self {
            CmMessage::Req(m) => m.emit(out),
            CmMessage::Rep(m) => m.emit(out),
            CmMessage::Rej(m) => m.emit(out),
            CmMessage::Mra(m) => m.emit(out),
            CmMessage::Rtu(m) => m.emit(out),
            CmMessage::Dreq(m) => m.emit(out),
            CmMessage::Drep(m) => m.emit(out),
            CmMessage::ClassPortInfo(m) => m.emit(out),
        }
    }
}

/// An SA attribute (the 200 bytes after the SA header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaAttribute<'a> {
    /// The first PathRecord (a GetTableResp may carry more: see
    /// [`SaHeader::attr_offset`]).
    PathRecord(PathRecord),
    /// ClassPortInfo.
    ClassPortInfo(ClassPortInfo),
    /// Any other attribute: the 200 data bytes.
    Raw(&'a [u8]),
}

/// A DM attribute (the 192 bytes after the 64-byte DM header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmAttribute<'a> {
    /// ClassPortInfo.
    ClassPortInfo(ClassPortInfo),
    /// IOUnitInfo.
    IouInfo(IouInfo),
    /// IOControllerProfile.
    IocProfile(IocProfile),
    /// ServiceEntries.
    ServiceEntries(ServiceEntries),
    /// Any other attribute: the 192 data bytes.
    Raw(&'a [u8]),
}

/// The class-specific part of a MAD.
// A CM message is ~300 bytes; a MAD is parsed and handled one at a time, so it stays inline
// rather than costing an allocation per MAD.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MadBody<'a> {
    /// CM (class 0x07, version 2), a modelled attribute.
    Cm(CmMessage),
    /// SA (class 0x03, version 2).
    Sa {
        /// RMPP header.
        rmpp: RmppHeader,
        /// SA header.
        sa: SaHeader,
        /// Attribute.
        attr: SaAttribute<'a>,
    },
    /// DM (class 0x06, version 1).
    Dm {
        /// RMPP header (inactive in DM).
        rmpp: RmppHeader,
        /// Attribute.
        attr: DmAttribute<'a>,
    },
    /// Any other class, version or CM attribute: the 232 data bytes.
    Raw(&'a [u8]),
}

/// A typed MAD: the common header and the class-specific body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnyMad<'a> {
    /// Common header.
    pub header: MadHeader,
    /// Body.
    pub body: MadBody<'a>,
}

/// Parses a 256-byte MAD (trailing bytes ignored) and dispatches on its class.
pub fn parse_any(buf: &[u8]) -> Result<AnyMad<'_>, MadError> {
    AnyMad::parse(buf)
}

fn sub(data: &[u8], from: usize, len: usize) -> &[u8] {
    // `data` is always the 232-byte data area, so these ranges exist; an empty slice would
    // only make the typed parser report truncation.
    data.get(from..from + len).unwrap_or(&[])
}

const SA_OFF: usize = SA_DATA_OFFSET - MAD_HEADER_LEN;
const DM_OFF: usize = DM_DATA_OFFSET - MAD_HEADER_LEN;

impl<'a> AnyMad<'a> {
    /// A CM MAD carrying `msg`.
    pub fn cm(tid: Tid, msg: CmMessage) -> Self {
        AnyMad {
            header: msg.mad_header(tid),
            body: MadBody::Cm(msg),
        }
    }

    /// The GetResp to the DM request `request`, with `status` and `attr`.
    pub fn dm_response(request: &MadHeader, status: MadStatus, attr: DmAttribute<'a>) -> Self {
        AnyMad {
            header: request.response_to(status),
            body: MadBody::Dm {
                rmpp: RmppHeader::INACTIVE,
                attr,
            },
        }
    }

    /// Emits into a fresh 256-byte buffer.
    pub fn to_buf(&self) -> Result<MadBuf, MadError> {
        let mut b = MadBuf::zeroed();
        self.emit(&mut b.0)?;
        Ok(b)
    }

    fn parse_body(
        header: &MadHeader,
        data: &'a [u8; MAD_DATA_LEN],
    ) -> Result<MadBody<'a>, MadError> {
        let d: &'a [u8] = data;
        Ok(match (header.mgmt_class, header.class_version) {
            (MgmtClass::Cm, CM_CLASS_VERSION) => {
                match CmMessage::parse(header.attr_id.into(), d)? {
                    Some(m) => MadBody::Cm(m),
                    None => MadBody::Raw(d),
                }
            }
            (MgmtClass::SubnAdm, SA_CLASS_VERSION) => {
                let rmpp = RmppHeader::parse(d)?;
                let sa = SaHeader::parse(sub(d, RMPP_HEADER_LEN, SA_OFF - RMPP_HEADER_LEN))?;
                let body = sub(d, SA_OFF, SA_DATA_LEN);
                let attr = match SaAttr::from(header.attr_id) {
                    SaAttr::PathRecord => SaAttribute::PathRecord(PathRecord::parse(body)?),
                    SaAttr::ClassPortInfo => {
                        SaAttribute::ClassPortInfo(ClassPortInfo::parse(body)?)
                    }
                    _ => SaAttribute::Raw(body),
                };
                MadBody::Sa { rmpp, sa, attr }
            }
            (MgmtClass::DeviceMgmt, DM_CLASS_VERSION) => {
                let rmpp = RmppHeader::parse(d)?;
                let body = sub(d, DM_OFF, DM_DATA_LEN);
                let attr = match DmAttr::from(header.attr_id) {
                    DmAttr::ClassPortInfo => {
                        DmAttribute::ClassPortInfo(ClassPortInfo::parse(body)?)
                    }
                    DmAttr::IouInfo => DmAttribute::IouInfo(IouInfo::parse(body)?),
                    DmAttr::IocProfile => DmAttribute::IocProfile(IocProfile::parse(body)?),
                    DmAttr::ServiceEntries => {
                        DmAttribute::ServiceEntries(ServiceEntries::parse(body)?)
                    }
                    _ => DmAttribute::Raw(body),
                };
                MadBody::Dm { rmpp, attr }
            }
            _ => MadBody::Raw(d),
        })
    }
}

fn copy_raw(what: &'static str, raw: &[u8], out: &mut [u8]) -> Result<(), MadError> {
    if raw.len() != out.len() {
        return Err(MadError::BadField {
            what,
            field: "raw data length",
            value: raw.len() as u64,
            why: "must fill the class data area exactly",
        });
    }
    out.copy_from_slice(raw);
    Ok(())
}

impl<'a> WireRepr<'a> for AnyMad<'a> {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let mad = Mad::parse(buf)?;
        let body = AnyMad::parse_body(&mad.header, mad.data)?;
        Ok(AnyMad {
            header: mad.header,
            body,
        })
    }

    fn buffer_len(&self) -> usize {
        MAD_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        let have = buf.len();
        let out = buf.get_mut(..MAD_LEN).ok_or(MadError::BufferTooSmall {
            what: "MAD",
            need: MAD_LEN,
            have,
        })?;
        self.header.emit(out)?;
        let data = &mut out[MAD_HEADER_LEN..];
        data.fill(0);
        match &self.body {
            MadBody::Cm(m) => {
                m.emit(data)?;
            }
            MadBody::Sa { rmpp, sa, attr } => {
                rmpp.emit(data)?;
                sa.emit(&mut data[RMPP_HEADER_LEN..])?;
                let body = &mut data[SA_OFF..];
                match attr {
                    SaAttribute::PathRecord(p) => p.emit(body).map(drop)?,
                    SaAttribute::ClassPortInfo(c) => c.emit(body).map(drop)?,
                    SaAttribute::Raw(r) => copy_raw("SA MAD", r, body)?,
                }
            }
            MadBody::Dm { rmpp, attr } => {
                rmpp.emit(data)?;
                let body = &mut data[DM_OFF..];
                match attr {
                    DmAttribute::ClassPortInfo(c) => c.emit(body).map(drop)?,
                    DmAttribute::IouInfo(i) => i.emit(body).map(drop)?,
                    DmAttribute::IocProfile(p) => p.emit(body).map(drop)?,
                    DmAttribute::ServiceEntries(s) => s.emit(body).map(drop)?,
                    DmAttribute::Raw(r) => copy_raw("DM MAD", r, body)?,
                }
            }
            MadBody::Raw(r) => copy_raw("MAD", r, data)?,
        }
        Ok(MAD_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::cm::req::tests::{REQ, req};
    use crate::mad::dm::{IoClass, ServiceEntry};
    use crate::mad::sa::tests::{PATH, path};
    use crate::mad::{ServiceId, common::MadStatus};
    use ib_verbs::Guid;
    use wirekit::wire_repr::check;

    fn cm_req_mad() -> [u8; 256] {
        let mut b = [0u8; 256];
        b[..24].copy_from_slice(&[
            0x01, 0x07, 0x02, 0x03, // base 1, CM, class version 2, Send
            0x00, 0x00, 0x00, 0x00, // status, class specific
            0x00, 0x00, 0x00, 0x01, 0x12, 0x34, 0x56,
            0x78, // TID (Linux: hi_tid 1 | local id)
            0x00, 0x10, 0x00, 0x00, // REQ, reserved
            0x00, 0x00, 0x00, 0x00, // attribute modifier
        ]);
        b[24..].copy_from_slice(&REQ);
        b
    }

    #[test]
    fn cm_req_mad_dispatches_and_round_trips() {
        let bytes = cm_req_mad();
        let want = AnyMad::cm(Tid(0x0000_0001_1234_5678), CmMessage::Req(req()));
        check::decodes(&bytes, &want);
        check::emits(&want, &bytes);
        check::round_trips(&want, &mut Vec::new());
        check::truncation_errors::<AnyMad<'_>>(&bytes);
    }

    #[test]
    fn sa_path_record_mad_dispatches() {
        let mut bytes = [0u8; 256];
        bytes[..4].copy_from_slice(&[0x01, 0x03, 0x02, 0x81]); // SA GetResp
        bytes[16..18].copy_from_slice(&[0x00, 0x35]); // PathRecord
        bytes[36 + 9] = 0x08; // SA header AttributeOffset 8
        bytes[56..120].copy_from_slice(&PATH);
        let m = parse_any(&bytes).expect("valid SA MAD");
        let MadBody::Sa {
            sa,
            attr: SaAttribute::PathRecord(p),
            ..
        } = m.body
        else {
            panic!("not a PathRecord: {m:?}");
        };
        assert_eq!(sa.attr_offset, 8);
        assert_eq!(p, path());
        check::emits(&m, &bytes);
    }

    #[test]
    fn dm_ioc_profile_answer_builds_and_parses() {
        let get = MadHeader::request(
            MgmtClass::DeviceMgmt,
            1,
            Method::Get,
            Tid(9),
            DmAttr::IocProfile.into(),
            1,
        );
        let profile = IocProfile::srp(
            Guid(0x0002_c903_0001_0a2b),
            128,
            4,
            4096,
            1 << 24,
            "Rust SRP target",
        )
        .expect("profile");
        let rsp = AnyMad::dm_response(&get, MadStatus::Success, DmAttribute::IocProfile(profile));
        let buf = rsp.to_buf().expect("emit");
        assert_eq!(buf.0[3], 0x81, "GetResp");
        assert_eq!(
            &buf.0[64 + 28..64 + 30],
            &[0x01, 0x00],
            "IOClass at DM data + 28"
        );
        let back = parse_any(buf.as_bytes()).expect("parse");
        assert_eq!(back, rsp);
        let MadBody::Dm {
            attr: DmAttribute::IocProfile(p),
            ..
        } = back.body
        else {
            panic!("not a profile")
        };
        assert_eq!(p.io_class, IoClass::Srp);

        let se = ServiceEntries::new(&[ServiceEntry::srp(1, ServiceId(1))]).expect("one");
        let no_ioc = AnyMad::dm_response(
            &get,
            crate::mad::dm::DmStatus::NoIoc.into(),
            DmAttribute::ServiceEntries(se),
        );
        assert_eq!(&no_ioc.to_buf().expect("emit").0[4..6], &[0x01, 0x00]);
    }

    #[test]
    fn unknown_classes_and_attributes_stay_raw() {
        let mut bytes = cm_req_mad();
        bytes[17] = 0x19; // CM LAP: not modelled
        assert!(matches!(parse_any(&bytes).map(|m| m.body), Ok(MadBody::Raw(d)) if d.len() == 232));
        bytes[1] = 0x04; // PerfMgmt
        let m = parse_any(&bytes).expect("raw");
        check::emits(&m, &bytes);
        bytes[1] = 0x06; // DM DiagCode: raw DM attribute
        bytes[2] = 0x01;
        bytes[17] = 0x24;
        assert!(
            matches!(parse_any(&bytes).map(|m| m.body), Ok(MadBody::Dm { attr: DmAttribute::Raw(d), .. }) if d.len() == 192)
        );
    }

    #[test]
    fn short_or_bad_mads_error() {
        assert!(parse_any(&[]).is_err());
        assert!(parse_any(&cm_req_mad()[..255]).is_err());
        let mut b = cm_req_mad();
        b[0] = 2;
        assert!(parse_any(&b).is_err());
    }

    /// Random MADs of every modelled (class, attribute): whatever parses re-emits to bytes
    /// that parse to the same value (a deterministic stand-in for the fuzz target).
    #[test]
    fn random_mads_round_trip() {
        let kinds: [(u8, u8, u16); 14] = [
            (0x07, 2, 0x0001),
            (0x07, 2, 0x0010),
            (0x07, 2, 0x0011),
            (0x07, 2, 0x0012),
            (0x07, 2, 0x0013),
            (0x07, 2, 0x0014),
            (0x07, 2, 0x0015),
            (0x07, 2, 0x0016),
            (0x03, 2, 0x0035),
            (0x03, 2, 0x0001),
            (0x06, 1, 0x0010),
            (0x06, 1, 0x0011),
            (0x06, 1, 0x0012),
            (0x06, 1, 0x0001),
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut parsed = 0;
        for i in 0..5000 {
            let mut b = [0u8; 256];
            for byte in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *byte = x as u8;
            }
            let (class, version, attr) = kinds[i % kinds.len()];
            b[0] = 1;
            b[1] = class;
            b[2] = version;
            b[16..18].copy_from_slice(&attr.to_be_bytes());
            if let Ok(m) = parse_any(&b) {
                parsed += 1;
                check::round_trips(&m, &mut Vec::new());
            }
        }
        assert!(parsed > 4000, "only {parsed} of 5000 parsed");
    }
}
