//! Stable LUN identity: the unit serial number (VPD 80h) and the NAA 6 designator (VPD 83h)
//! derived only from the LUN's configured unique name and the company ID.
//!
//! Multipath (dm-multipath, MPIO) groups paths by these values, so they must be identical
//! through every IOC that exports the LUN and across restarts: they are a pure function of
//! the name, with no randomness, time, host or port in them. The hash is FNV-1a 64, written
//! out here so that no library or compiler upgrade can change it; the test vectors pin it.

use core::fmt;

/// An IEEE company ID (OUI, 24 bits) for the NAA IEEE Registered Extended designator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Oui(u32);

impl Oui {
    /// The OUI `value`, or `None` if it does not fit 24 bits.
    pub const fn new(value: u32) -> Option<Oui> {
        if value <= 0x00ff_ffff {
            Some(Oui(value))
        } else {
            None
        }
    }

    /// The 24-bit value.
    pub const fn get(self) -> u32 {
        self.0
    }
}

/// Longest unit serial number we report (16 hex digits: 64 bits of the name's hash).
pub const SERIAL_LEN: usize = 16;

/// The identity of one LUN, the same wherever its unique name is exported.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LunIdentity {
    name: String,
    naa: [u8; 16],
    serial: String,
}

/// FNV-1a 64 of `domain`, a NUL, then `data` (domains keep the two hashes independent).
fn fnv1a64(domain: &str, data: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let bytes = domain.bytes().chain([0]).chain(data.bytes());
    bytes.fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

impl LunIdentity {
    /// Derives the identity of the LUN named `unique_name` (e.g. `"vol-0042"`; any stable,
    /// site-unique string) under company ID `oui`.
    ///
    /// NAA 6 (SPC-4 7.8.6.6.5): NAA 6h, the 24-bit OUI, a 36-bit VENDOR SPECIFIC IDENTIFIER
    /// and a 64-bit VENDOR SPECIFIC IDENTIFIER EXTENSION, together 100 bits of two
    /// independent hashes of the name. The serial number is the first hash in hex.
    pub fn derive(unique_name: &str, oui: Oui) -> LunIdentity {
        let id = fnv1a64("srp-target/naa-id", unique_name);
        let ext = fnv1a64("srp-target/naa-ext", unique_name);
        // 4 bits NAA | 24 bits OUI | 36 bits of id, then 64 bits of ext.
        let hi = (6u64 << 60) | (u64::from(oui.get()) << 36) | (id & 0x0000_000f_ffff_ffff);
        let mut naa = [0u8; 16];
        naa[..8].copy_from_slice(&hi.to_be_bytes());
        naa[8..].copy_from_slice(&ext.to_be_bytes());
        LunIdentity {
            name: unique_name.to_owned(),
            naa,
            serial: format!("{id:016x}"),
        }
    }

    /// The configured unique name.
    pub fn unique_name(&self) -> &str {
        &self.name
    }

    /// The 16-byte NAA IEEE Registered Extended designator.
    pub fn naa(&self) -> &[u8; 16] {
        &self.naa
    }

    /// The unit serial number (ASCII hex, [`SERIAL_LEN`] characters).
    pub fn serial(&self) -> &str {
        &self.serial
    }
}

impl fmt::Display for LunIdentity {
    /// `name (naa.6...)`, the form `lsscsi`/`multipath -ll` users recognise.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (naa.", self.name)?;
        for b in self.naa {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUI: Oui = match Oui::new(0x00_1405) {
        Some(o) => o,
        None => panic!(),
    };

    #[test]
    fn fnv_matches_reference_vectors() {
        // FNV-1a 64 reference: "" -> cbf29ce484222325, "a" -> af63dc4c8601ec8c. Our domain
        // separator makes "" + NUL + "a"; check the raw fold through an empty domain prefix.
        let raw = |s: &str| {
            s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })
        };
        assert_eq!(raw(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(raw("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64("", "a"), raw("\0a"));
    }

    #[test]
    fn same_name_same_identity_different_name_different() {
        let a = LunIdentity::derive("vol-0042", OUI);
        let b = LunIdentity::derive("vol-0042", OUI);
        let c = LunIdentity::derive("vol-0043", OUI);
        assert_eq!(a, b);
        assert_ne!(a.naa(), c.naa());
        assert_ne!(a.serial(), c.serial());
    }

    #[test]
    fn naa_layout_and_pinned_vector() {
        let a = LunIdentity::derive("vol-0042", OUI);
        let naa = a.naa();
        assert_eq!(naa[0] >> 4, 6, "NAA 6");
        // OUI 00-14-05 in the next 24 bits.
        let oui = (u32::from(naa[0] & 0x0f) << 20)
            | (u32::from(naa[1]) << 12)
            | (u32::from(naa[2]) << 4)
            | u32::from(naa[3] >> 4);
        assert_eq!(oui, 0x00_1405);
        assert_eq!(a.serial().len(), SERIAL_LEN);
        assert!(a.serial().bytes().all(|b| b.is_ascii_hexdigit()));
        // Pinned: a change here breaks every multipath map in the field.
        assert_eq!(
            a.serial(),
            format!("{:016x}", fnv1a64("srp-target/naa-id", "vol-0042"))
        );
        assert!(a.to_string().starts_with("vol-0042 (naa.6001405"));
    }

    #[test]
    fn oui_must_fit_24_bits() {
        assert!(Oui::new(0x0100_0000).is_none());
        assert_eq!(Oui::new(0xff_ffff).map(Oui::get), Some(0xff_ffff));
    }
}
