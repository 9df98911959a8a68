//! SRP port identifiers and the I/O class that decides their byte order.

use core::fmt;
use ib_verbs::Guid;

wirekit::open_enum! {
    /// The IOClass an I/O controller advertises in its DM IOControllerProfile. For SRP it also
    /// fixes the byte order of the 16-byte port identifiers (ib_srp `srp_send_req`, WinOF
    /// `srp_init_connection`).
    pub enum IoClass(u16) {
        /// SRP r16a: identifiers are `extension ‖ GUID`.
        SrpR16a = 0x0100,
        /// SRP revision 10 drafts: identifiers are `GUID ‖ extension`.
        SrpRev10 = 0xff00,
    }
}

impl IoClass {
    /// Whether identifiers of this class put the GUID first (rev 10). Unknown classes are
    /// treated as r16a, the standard.
    fn guid_first(self) -> bool {
        self == IoClass::SrpRev10
    }
}

/// A 16-byte SRP initiator or target port identifier, exactly as on the wire.
///
/// r16a defines it as an 8-byte identifier extension and an 8-byte EUI-64: the initiator's is
/// `initiator_ext ‖ local port GUID`, the target's `id_ext ‖ IOC GUID` (Linux ib_srp).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PortId(pub [u8; 16]);

impl PortId {
    /// Builds an identifier from its extension and GUID in the order `io_class` requires.
    pub fn new(ext: u64, guid: Guid, io_class: IoClass) -> PortId {
        let (first, second) = if io_class.guid_first() {
            (guid.0, ext)
        } else {
            (ext, guid.0)
        };
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&first.to_be_bytes());
        b[8..].copy_from_slice(&second.to_be_bytes());
        PortId(b)
    }

    fn halves(self) -> (u64, u64) {
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(&self.0[..8]);
        b.copy_from_slice(&self.0[8..]);
        (u64::from_be_bytes(a), u64::from_be_bytes(b))
    }

    /// The identifier extension, read in the order `io_class` defines.
    pub fn ext(self, io_class: IoClass) -> u64 {
        let (a, b) = self.halves();
        if io_class.guid_first() { b } else { a }
    }

    /// The GUID, read in the order `io_class` defines.
    pub fn guid(self, io_class: IoClass) -> Guid {
        let (a, b) = self.halves();
        Guid(if io_class.guid_first() { a } else { b })
    }
}

/// `0x` and 32 hex digits, the form ib_srpt uses to name initiators.
impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = self.halves();
        write!(f, "0x{a:016x}{b:016x}")
    }
}

/// Why text is not a port identifier ([`PortId`]'s `FromStr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PortIdParseError {
    /// A character other than a hex digit (after an optional `0x`, colons ignored).
    #[error("not hexadecimal")]
    NotHex,
    /// Not 32 hex digits.
    #[error("{0} hex digits, not 32")]
    Digits(usize),
}

/// The [`Display`](fmt::Display) form back: `0x` (optional) and 32 hex digits, colons
/// allowed anywhere (`1122:3344:…`), as ACLs write them.
impl core::str::FromStr for PortId {
    type Err = PortIdParseError;

    fn from_str(text: &str) -> Result<PortId, PortIdParseError> {
        let body = text.strip_prefix("0x").unwrap_or(text);
        let mut bytes = [0u8; 16];
        let mut digits = 0usize;
        for c in body.chars().filter(|&c| c != ':') {
            let d = c.to_digit(16).ok_or(PortIdParseError::NotHex)?;
            if digits < 32 {
                bytes[digits / 2] |= (d as u8) << if digits % 2 == 0 { 4 } else { 0 };
            }
            digits += 1;
        }
        match digits {
            32 => Ok(PortId(bytes)),
            n => Err(PortIdParseError::Digits(n)),
        }
    }
}

impl fmt::Debug for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PortId({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r16a_puts_extension_first_rev10_guid_first() {
        let guid = Guid(0x0002_c903_0001_0a2b);
        let r16a = PortId::new(0x1122_3344_5566_7788, guid, IoClass::SrpR16a);
        assert_eq!(r16a.0[..8], 0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(r16a.0[8..], guid.0.to_be_bytes());
        let rev10 = PortId::new(0x1122_3344_5566_7788, guid, IoClass::SrpRev10);
        assert_eq!(rev10.0[..8], guid.0.to_be_bytes());
        assert_eq!(rev10.0[8..], 0x1122_3344_5566_7788u64.to_be_bytes());
        for (id, class) in [(r16a, IoClass::SrpR16a), (rev10, IoClass::SrpRev10)] {
            assert_eq!(id.ext(class), 0x1122_3344_5566_7788);
            assert_eq!(id.guid(class), guid);
        }
        assert_eq!(r16a.to_string(), "0x11223344556677880002c90300010a2b");
        assert_eq!(r16a.to_string().parse(), Ok(r16a), "Display parses back");
        assert_eq!("1122:3344:5566:7788:0002:c903:0001:0a2b".parse(), Ok(r16a));
        assert_eq!("0x12".parse::<PortId>(), Err(PortIdParseError::Digits(2)));
        assert_eq!("zz".parse::<PortId>(), Err(PortIdParseError::NotHex));
        assert_eq!(u16::from(IoClass::SrpR16a), 0x0100);
        assert_eq!(u16::from(IoClass::SrpRev10), 0xff00);
    }
}
