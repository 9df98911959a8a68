//! Per-IOC access control: which initiators may log in.
//!
//! Entries name an SRP initiator port identifier (all 128 bits, the form ib_srpt ACLs use:
//! `0x` and 32 hex digits, colons allowed) or, with `guid:`, only its GUID half, which Linux
//! ib_srp fills with the local port GUID (`initiator_ext ‖ port GUID`, r16a order). A GUID
//! entry therefore admits that HCA port whatever `initiator_ext` it logs in with.

use super::error::ConfigErrorKind as E;
use hca::Guid;
use srp::wire::{IoClass, PortId};

/// Who may log in to an IOC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acl {
    /// `allow = ["any"]`: every initiator.
    Any,
    /// Only initiators matching one of the entries (never empty).
    Only(Vec<AclEntry>),
}

/// One allowed initiator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AclEntry {
    /// Exactly this initiator port identifier.
    PortId(PortId),
    /// Any initiator port identifier whose GUID half (the low 64 bits, r16a) is this GUID.
    Guid(Guid),
}

impl AclEntry {
    /// Whether `initiator` (as received in SRP_LOGIN_REQ) matches this entry. Our IOCs
    /// advertise IOClass 0x0100 (r16a), so initiators put the GUID second.
    pub fn matches(&self, initiator: PortId) -> bool {
        match *self {
            AclEntry::PortId(id) => id == initiator,
            AclEntry::Guid(guid) => initiator.guid(IoClass::SrpR16a) == guid,
        }
    }
}

impl Acl {
    /// Whether `initiator` may log in.
    pub fn allows(&self, initiator: PortId) -> bool {
        match self {
            Acl::Any => true,
            Acl::Only(entries) => entries.iter().any(|e| e.matches(initiator)),
        }
    }
}

/// Parses one `allow` entry other than `"any"`.
pub(super) fn entry(text: &str) -> Result<AclEntry, E> {
    let bad = |why| E::BadInitiator {
        text: text.to_owned(),
        why,
    };
    if let Some(g) = text.strip_prefix("guid:") {
        return g
            .parse::<Guid>()
            .map(AclEntry::Guid)
            .map_err(|_| bad("expected guid: and 16 hex digits, as \"guid:0x0002c90300a1b2c3\""));
    }
    let body = text.strip_prefix("0x").unwrap_or(text);
    let mut bytes = [0u8; 16];
    let mut digits = 0usize;
    for c in body.chars().filter(|&c| c != ':') {
        let d = c.to_digit(16).ok_or_else(|| bad("not hexadecimal"))?;
        if digits < 32 {
            bytes[digits / 2] |= (d as u8) << if digits % 2 == 0 { 4 } else { 0 };
        }
        digits += 1;
    }
    match digits {
        32 => Ok(AclEntry::PortId(PortId(bytes))),
        16 => Err(bad(
            "16 hex digits is a GUID; write \"guid:...\" to match a port GUID",
        )),
        _ => Err(bad(
            "expected an initiator port ID of 32 hex digits (\"0x\" and colons allowed), \"guid:\" and a GUID, or \"any\"",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ids_and_guids() {
        let id = entry("0x11223344556677880002c90300010a2b");
        let colons = entry("1122:3344:5566:7788:0002:c903:0001:0a2b");
        assert_eq!(id.as_ref().ok(), colons.as_ref().ok());
        let Ok(AclEntry::PortId(p)) = id else {
            panic!("{id:?}")
        };
        assert_eq!(p.to_string(), "0x11223344556677880002c90300010a2b");
        assert_eq!(
            entry("guid:0002:c903:0001:0a2b").ok(),
            Some(AclEntry::Guid(Guid(0x0002_c903_0001_0a2b)))
        );
        for bad in [
            "0x1234",
            "0002:c903:0001:0a2b",
            "guid:12",
            "zz",
            "0x11223344556677880002c90300010a2b00",
        ] {
            assert!(entry(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn guid_entries_match_any_extension() {
        let guid = Guid(0x0002_c903_0001_0a2b);
        let acl = Acl::Only(vec![AclEntry::Guid(guid)]);
        assert!(acl.allows(PortId::new(0, guid, IoClass::SrpR16a)));
        assert!(acl.allows(PortId::new(0x77, guid, IoClass::SrpR16a)));
        assert!(!acl.allows(PortId::new(0, Guid(1), IoClass::SrpR16a)));
        let exact = PortId::new(5, guid, IoClass::SrpR16a);
        let acl = Acl::Only(vec![AclEntry::PortId(exact)]);
        assert!(acl.allows(exact));
        assert!(!acl.allows(PortId::new(6, guid, IoClass::SrpR16a)));
        assert!(Acl::Any.allows(PortId::default()));
    }
}
