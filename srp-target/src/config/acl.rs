//! Per-IOC access control: which initiators may log in.
//!
//! Entries name an SRP initiator port identifier (all 128 bits, the form ib_srpt ACLs use:
//! `0x` and 32 hex digits, colons allowed) or, with `guid:`, only its GUID half, which Linux
//! ib_srp fills with the local port GUID (`initiator_ext ‖ port GUID`, r16a order). A GUID
//! entry therefore admits that HCA port whatever `initiator_ext` it logs in with.
//!
//! An entry may also name where the login comes from — the REQ's source address, which the
//! CM has checked against the packet: `addr:<IP>` admits any initiator port ID from that
//! address, and `<port ID or guid:...>@<IP>` admits that identifier only from there, so a
//! host that claims it from elsewhere is refused.

use super::error::ConfigErrorKind as E;
use ib_verbs::Guid;
use srp::wire::{IoClass, PortId, PortIdParseError};
use std::net::IpAddr;

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
    /// Any initiator port identifier logging in from this address (`addr:<IP>`).
    Address(IpAddr),
    /// This initiator port identifier, from this address only (`<port ID>@<IP>`).
    PortIdFrom(PortId, IpAddr),
    /// A port identifier with this GUID half, from this address only (`guid:<GUID>@<IP>`).
    GuidFrom(Guid, IpAddr),
}

impl AclEntry {
    /// Whether `initiator` (as received in SRP_LOGIN_REQ), logging in from `from` (when
    /// known), matches this entry. Our IOCs advertise IOClass 0x0100 (r16a), so initiators
    /// put the GUID second. An entry that names an address never matches an unknown one.
    pub fn matches_from(&self, initiator: PortId, from: Option<IpAddr>) -> bool {
        let guid_is = |g: Guid| initiator.guid(IoClass::SrpR16a) == g;
        match *self {
            AclEntry::PortId(id) => id == initiator,
            AclEntry::Guid(guid) => guid_is(guid),
            AclEntry::Address(a) => from == Some(a),
            AclEntry::PortIdFrom(id, a) => id == initiator && from == Some(a),
            AclEntry::GuidFrom(guid, a) => guid_is(guid) && from == Some(a),
        }
    }

    /// [`AclEntry::matches_from`] with the address unknown.
    pub fn matches(&self, initiator: PortId) -> bool {
        self.matches_from(initiator, None)
    }
}

impl Acl {
    /// Whether `initiator`, logging in from `from` (when known), may log in.
    pub fn allows_from(&self, initiator: PortId, from: Option<IpAddr>) -> bool {
        match self {
            Acl::Any => true,
            Acl::Only(entries) => entries.iter().any(|e| e.matches_from(initiator, from)),
        }
    }

    /// [`Acl::allows_from`] with the address unknown (entries naming one do not match).
    pub fn allows(&self, initiator: PortId) -> bool {
        self.allows_from(initiator, None)
    }
}

/// Parses one `allow` entry other than `"any"`.
pub(super) fn entry(text: &str) -> Result<AclEntry, E> {
    let bad = |why| E::BadInitiator {
        text: text.to_owned(),
        why,
    };
    let address = |a: &str| {
        a.parse::<IpAddr>().map_err(|_| {
            bad("expected an IP address after \"addr:\" or \"@\", as \"addr:192.0.2.20\"")
        })
    };
    if let Some(a) = text.strip_prefix("addr:") {
        return address(a).map(AclEntry::Address);
    }
    if let Some((who, a)) = text.rsplit_once('@') {
        let a = address(a)?;
        return match identity(who)
            .map_err(|_| bad("expected a port ID or \"guid:...\" before \"@\""))?
        {
            AclEntry::PortId(p) => Ok(AclEntry::PortIdFrom(p, a)),
            AclEntry::Guid(g) => Ok(AclEntry::GuidFrom(g, a)),
            _ => Err(bad("expected a port ID or \"guid:...\" before \"@\"")),
        };
    }
    identity(text)
}

/// A port ID or `guid:` entry (no address).
fn identity(text: &str) -> Result<AclEntry, E> {
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
    match text.parse::<PortId>() {
        Ok(p) => Ok(AclEntry::PortId(p)),
        Err(PortIdParseError::Digits(16)) => Err(bad(
            "16 hex digits is a GUID; write \"guid:...\" to match a port GUID",
        )),
        Err(PortIdParseError::NotHex) => Err(bad("not hexadecimal")),
        Err(PortIdParseError::Digits(_)) => Err(bad(
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
            "addr:",
            "addr:not-an-ip",
            "guid:0002:c903:0001:0a2b@",
            "guid:0002:c903:0001:0a2b@host.example",
            "addr:192.0.2.1@192.0.2.2",
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

    #[test]
    fn entries_bound_to_an_address() {
        let guid = Guid(0x0002_c903_0001_0a2b);
        let id = PortId::new(0, guid, IoClass::SrpR16a);
        let here: IpAddr = "192.0.2.20".parse().expect("ip");
        let there: IpAddr = "192.0.2.66".parse().expect("ip");
        let parse = |t: &str| entry(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(parse("addr:192.0.2.20"), AclEntry::Address(here));
        assert_eq!(
            parse("guid:0002:c903:0001:0a2b@192.0.2.20"),
            AclEntry::GuidFrom(guid, here)
        );
        assert_eq!(
            parse("0x00000000000000000002c90300010a2b@192.0.2.20"),
            AclEntry::PortIdFrom(id, here)
        );
        assert_eq!(
            parse("addr:2001:db8::1"),
            AclEntry::Address("2001:db8::1".parse().expect("v6"))
        );
        for e in [
            parse("addr:192.0.2.20"),
            parse("guid:0002:c903:0001:0a2b@192.0.2.20"),
            parse("0x00000000000000000002c90300010a2b@192.0.2.20"),
        ] {
            let acl = Acl::Only(vec![e]);
            assert!(acl.allows_from(id, Some(here)), "{e:?} from here");
            assert!(!acl.allows_from(id, Some(there)), "{e:?} from elsewhere");
            assert!(!acl.allows(id), "{e:?}: an unknown address never matches");
        }
        // addr: admits any identifier from there; the bound forms only theirs.
        let other = PortId::new(0, Guid(7), IoClass::SrpR16a);
        assert!(Acl::Only(vec![parse("addr:192.0.2.20")]).allows_from(other, Some(here)));
        assert!(
            !Acl::Only(vec![parse("guid:0002:c903:0001:0a2b@192.0.2.20")])
                .allows_from(other, Some(here))
        );
    }
}
