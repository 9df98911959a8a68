//! ClassPortInfo (attribute 0x0001), 72 bytes, the same for every GSI class: CM, SA and DM
//! answer Get(ClassPortInfo) with it (IBTA Vol1 13.4.8.1, table 150; Linux
//! `struct ib_class_port_info`, where CapabilityMask2/RespTimeValue is `cap_mask2_resp_time`).
#[allow(unused_imports)]
use crate::prelude::*;

use super::{MadError, check_width, read_fixed, write_fixed};
use ib_verbs::{Gid, Lid, PKey, QKey, Qpn};
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Attribute ID of ClassPortInfo in every class.
pub const CLASS_PORT_INFO_ATTR: u16 = 0x0001;

/// ClassPortInfo as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ClassPortInfoRaw {
    /// BaseVersion.
    pub base_version: u8,
    /// ClassVersion.
    pub class_version: u8,
    /// CapabilityMask.
    pub capability_mask: U16,
    /// CapabilityMask2 (bits 31:5) and RespTimeValue (bits 4:0).
    pub cap_mask2_resp_time: U32,
    /// RedirectGID.
    pub redirect_gid: [u8; 16],
    /// RedirectTC (31:24), RedirectSL (23:20), RedirectFL (19:0).
    pub redirect_tc_sl_fl: U32,
    /// RedirectLID.
    pub redirect_lid: U16,
    /// RedirectP_Key.
    pub redirect_pkey: U16,
    /// Reserved (31:24), RedirectQP (23:0).
    pub redirect_qp: U32,
    /// RedirectQ_Key.
    pub redirect_qkey: U32,
    /// TrapGID.
    pub trap_gid: [u8; 16],
    /// TrapTC, TrapSL, TrapFL (as the redirect word).
    pub trap_tc_sl_fl: U32,
    /// TrapLID.
    pub trap_lid: U16,
    /// TrapP_Key.
    pub trap_pkey: U16,
    /// TrapHL (31:24), TrapQP (23:0).
    pub trap_hl_qp: U32,
    /// TrapQ_Key.
    pub trap_qkey: U32,
}
const _: () = assert!(size_of::<ClassPortInfoRaw>() == 72);

/// Where to redirect requests, or where to send traps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PortAddress {
    /// GID.
    pub gid: Gid,
    /// Traffic class.
    pub traffic_class: u8,
    /// Service level, 4 bits.
    pub sl: u8,
    /// Flow label, 20 bits.
    pub flow_label: u32,
    /// LID.
    pub lid: Lid,
    /// P_Key.
    pub pkey: PKey,
    /// Hop limit: TrapHL; reserved (0) for the redirect address.
    pub hop_limit: u8,
    /// QP.
    pub qpn: Qpn,
    /// Q_Key.
    pub qkey: QKey,
}

/// The validated ClassPortInfo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassPortInfo {
    /// BaseVersion (1).
    pub base_version: u8,
    /// ClassVersion of the answering class.
    pub class_version: u8,
    /// CapabilityMask (bit 0 IsTrapSupported, bit 1 IsNoticeSupported; SA bit 13 mask match).
    pub capability_mask: u16,
    /// CapabilityMask2, 27 bits.
    pub capability_mask2: u32,
    /// RespTimeValue, 5 bits: response time is 4.096 µs × 2^value.
    pub resp_time_value: u8,
    /// Redirect address.
    pub redirect: PortAddress,
    /// Trap address.
    pub trap: PortAddress,
}

impl ClassPortInfo {
    /// A port with no redirection and no trap address, as ib_srpt answers DM
    /// Get(ClassPortInfo): base 1, the class version, RespTimeValue `resp_time_value`.
    pub fn simple(class_version: u8, resp_time_value: u8) -> Self {
        let none = PortAddress {
            pkey: PKey(0),
            ..PortAddress::default()
        };
        ClassPortInfo {
            base_version: 1,
            class_version,
            capability_mask: 0,
            capability_mask2: 0,
            resp_time_value,
            redirect: none,
            trap: none,
        }
    }
}

fn tc_sl_fl(a: &PortAddress) -> u32 {
    (u32::from(a.traffic_class) << 24) | (u32::from(a.sl) << 20) | a.flow_label
}

fn address(gid: [u8; 16], tsf: u32, lid: u16, pkey: u16, hl_qp: u32, qkey: u32) -> PortAddress {
    PortAddress {
        gid: Gid(gid),
        traffic_class: (tsf >> 24) as u8,
        sl: ((tsf >> 20) & 0xf) as u8,
        flow_label: tsf & 0x000f_ffff,
        lid: Lid(lid),
        pkey: PKey(pkey),
        hop_limit: (hl_qp >> 24) as u8,
        qpn: Qpn::from_wire(hl_qp),
        qkey: QKey(qkey),
    }
}

impl<'a> WireRepr<'a> for ClassPortInfo {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let r: ClassPortInfoRaw = read_fixed("ClassPortInfo", buf)?;
        let cm2 = r.cap_mask2_resp_time.get();
        // The redirect word's top byte is reserved: drop it.
        let redirect_qp = r.redirect_qp.get() & 0x00ff_ffff;
        Ok(ClassPortInfo {
            base_version: r.base_version,
            class_version: r.class_version,
            capability_mask: r.capability_mask.get(),
            capability_mask2: cm2 >> 5,
            resp_time_value: (cm2 & 0x1f) as u8,
            redirect: address(
                r.redirect_gid,
                r.redirect_tc_sl_fl.get(),
                r.redirect_lid.get(),
                r.redirect_pkey.get(),
                redirect_qp,
                r.redirect_qkey.get(),
            ),
            trap: address(
                r.trap_gid,
                r.trap_tc_sl_fl.get(),
                r.trap_lid.get(),
                r.trap_pkey.get(),
                r.trap_hl_qp.get(),
                r.trap_qkey.get(),
            ),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<ClassPortInfoRaw>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        const W: &str = "ClassPortInfo";
        check_width(W, "CapabilityMask2", self.capability_mask2.into(), 27)?;
        check_width(W, "RespTimeValue", self.resp_time_value.into(), 5)?;
        check_width(
            W,
            "Redirect reserved (hop limit)",
            self.redirect.hop_limit.into(),
            0,
        )?;
        for a in [&self.redirect, &self.trap] {
            check_width(W, "SL", a.sl.into(), 4)?;
            check_width(W, "FlowLabel", a.flow_label.into(), 20)?;
        }
        let r = ClassPortInfoRaw {
            base_version: self.base_version,
            class_version: self.class_version,
            capability_mask: U16::new(self.capability_mask),
            cap_mask2_resp_time: U32::new(
                (self.capability_mask2 << 5) | u32::from(self.resp_time_value),
            ),
            redirect_gid: self.redirect.gid.0,
            redirect_tc_sl_fl: U32::new(tc_sl_fl(&self.redirect)),
            redirect_lid: U16::new(self.redirect.lid.0),
            redirect_pkey: U16::new(self.redirect.pkey.0),
            redirect_qp: U32::new(self.redirect.qpn.get()),
            redirect_qkey: U32::new(self.redirect.qkey.0),
            trap_gid: self.trap.gid.0,
            trap_tc_sl_fl: U32::new(tc_sl_fl(&self.trap)),
            trap_lid: U16::new(self.trap.lid.0),
            trap_pkey: U16::new(self.trap.pkey.0),
            trap_hl_qp: U32::new((u32::from(self.trap.hop_limit) << 24) | self.trap.qpn.get()),
            trap_qkey: U32::new(self.trap.qkey.0),
        };
        write_fixed(W, &r, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;
    use wirekit::wire_repr::check;

    /// SA ClassPortInfo: traps supported, RespTimeValue 18, no redirect, trap to
    /// ::ffff:10.0.0.1 (layout: Linux `struct ib_class_port_info`, IBTA table 150).
    const CPI: [u8; 72] = [
        0x01, // BaseVersion
        0x02, // ClassVersion (SA)
        0x20, 0x01, // CapabilityMask: bit 13 (SA mask match) | bit 0 IsTrapSupported
        0x00, 0x00, 0x00, 0x32, // CapabilityMask2 1 (<<5) | RespTimeValue 18
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // RedirectGID
        0, 0, 0, 0, // RedirectTC / SL / FL
        0, 0, // RedirectLID
        0, 0, // RedirectP_Key
        0, 0, 0, 0, // reserved / RedirectQP
        0, 0, 0, 0, // RedirectQ_Key
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1, // TrapGID ::ffff:10.0.0.1
        0x12, 0x30, 0x00, 0x05, // TrapTC 0x12, TrapSL 3, TrapFL 5
        0xff, 0xff, // TrapLID permissive
        0xff, 0xff, // TrapP_Key default
        0x40, 0x00, 0x00, 0x01, // TrapHL 64, TrapQP 1
        0x80, 0x01, 0x00, 0x00, // TrapQ_Key GSI
    ];

    fn cpi() -> ClassPortInfo {
        ClassPortInfo {
            capability_mask: 0x2001,
            capability_mask2: 1,
            trap: PortAddress {
                gid: Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1)),
                traffic_class: 0x12,
                sl: 3,
                flow_label: 5,
                lid: Lid::PERMISSIVE,
                pkey: PKey::DEFAULT,
                hop_limit: 64,
                qpn: Qpn::GSI,
                qkey: QKey::GSI,
            },
            ..ClassPortInfo::simple(2, 18)
        }
    }

    #[test]
    fn class_port_info_decodes_known_bytes() {
        check::decodes(&CPI, &cpi());
    }

    #[test]
    fn class_port_info_emits_known_bytes() {
        check::emits(&cpi(), &CPI);
    }

    #[test]
    fn class_port_info_round_trips() {
        check::round_trips(&cpi(), &mut Vec::new());
        check::round_trips(&ClassPortInfo::simple(1, 20), &mut Vec::new());
    }

    #[test]
    fn class_port_info_truncated_errors() {
        check::truncation_errors::<ClassPortInfo>(&CPI);
    }

    #[test]
    fn class_port_info_refuses_wide_fields() {
        let mut c = cpi();
        c.trap.flow_label = 0x10_0000;
        assert!(c.emit(&mut [0u8; 72]).is_err());
    }
}
