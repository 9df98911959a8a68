//! ServiceEntries (attribute 0x0012), up to 4 × {ServiceName (40 bytes), ServiceID} = 192 bytes,
//! and the attribute-modifier that selects them (IBTA Vol1 16.3.3.5; Linux
//! `struct ib_dm_svc_entries`; the SRP name form "SRP.T10:<id_ext>" from ib_srpt / srp_daemon).
#[allow(unused_imports)]
use crate::prelude::*;

use crate::mad::{MadError, ServiceId, read_fixed, write_fixed};
use wirekit::WireRepr;
use zerocopy::network_endian::U64;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of a service name.
pub const SERVICE_NAME_LEN: usize = 40;
/// Entries per MAD.
pub const ENTRIES_PER_MAD: usize = 4;
/// Prefix of an SRP service name.
pub const SRP_SERVICE_PREFIX: &str = "SRP.T10:";

/// One service entry as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ServiceEntryRaw {
    /// ServiceName, NUL-padded ASCII.
    pub name: [u8; SERVICE_NAME_LEN],
    /// ServiceID.
    pub service_id: U64,
}
const _: () = assert!(size_of::<ServiceEntryRaw>() == 48);

/// ServiceEntries as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ServiceEntriesRaw {
    /// The entries; those past `last - first` are zero.
    pub entries: [ServiceEntryRaw; ENTRIES_PER_MAD],
}
const _: () = assert!(size_of::<ServiceEntriesRaw>() == 192);

/// One service: a name and the CM service ID to connect to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceEntry {
    /// ServiceName, NUL-padded.
    pub name: [u8; SERVICE_NAME_LEN],
    /// ServiceID.
    pub service_id: ServiceId,
}

impl Default for ServiceEntry {
    fn default() -> Self {
        ServiceEntry {
            name: [0; SERVICE_NAME_LEN],
            service_id: ServiceId(0),
        }
    }
}

impl ServiceEntry {
    /// The SRP entry of a target port: name "SRP.T10:" + 16 lower-case hex digits of
    /// `id_ext` (ib_srpt's `"SRP.T10:%016llx"`) and `service_id`.
    pub fn srp(id_ext: u64, service_id: ServiceId) -> Self {
        let mut name = [0u8; SERVICE_NAME_LEN];
        let text = format!("{SRP_SERVICE_PREFIX}{id_ext:016x}");
        name[..text.len()].copy_from_slice(text.as_bytes());
        ServiceEntry { name, service_id }
    }

    /// The service name up to the first NUL, if it is UTF-8.
    pub fn name_str(&self) -> Option<&str> {
        super::nul_padded_str(&self.name)
    }

    /// The id_ext of an SRP service name ("SRP.T10:" then 16 hex digits of either case, then
    /// NULs), or `None` if this is not one.
    pub fn srp_id_ext(&self) -> Option<u64> {
        let rest = self.name.strip_prefix(SRP_SERVICE_PREFIX.as_bytes())?;
        let (digits, tail) = rest.split_at(16);
        if !tail.iter().all(|&b| b == 0) {
            return None;
        }
        digits.iter().try_fold(0u64, |acc, &c| {
            let d = char::from(c).to_digit(16)?;
            Some((acc << 4) | u64::from(d))
        })
    }
}

/// The validated ServiceEntries attribute: always 4 slots; the attribute modifier says how
/// many are meaningful ([`ServiceEntriesRange::count`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ServiceEntries {
    /// The entries.
    pub entries: [ServiceEntry; ENTRIES_PER_MAD],
}

impl ServiceEntries {
    /// Up to 4 entries, the rest zero.
    pub fn new(entries: &[ServiceEntry]) -> Result<Self, MadError> {
        let mut e = [ServiceEntry::default(); ENTRIES_PER_MAD];
        e.get_mut(..entries.len())
            .ok_or(MadError::BadField {
                what: "ServiceEntries",
                field: "count",
                value: entries.len() as u64,
                why: "a MAD holds at most 4 entries",
            })?
            .copy_from_slice(entries);
        Ok(ServiceEntries { entries: e })
    }
}

impl<'a> WireRepr<'a> for ServiceEntries {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let r: ServiceEntriesRaw = read_fixed("ServiceEntries", buf)?;
        Ok(ServiceEntries {
            entries: r.entries.map(|e| ServiceEntry {
                name: e.name,
                service_id: ServiceId(e.service_id.get()),
            }),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<ServiceEntriesRaw>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        let r = ServiceEntriesRaw {
            entries: self.entries.map(|e| ServiceEntryRaw {
                name: e.name,
                service_id: U64::new(e.service_id.0),
            }),
        };
        write_fixed("ServiceEntries", &r, buf)
    }
}

/// The ServiceEntries attribute modifier: `slot << 16 | last << 8 | first` (entries
/// numbered from 0, at most 4 per MAD; ib_srpt `srpt_get_svc_entries`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceEntriesRange {
    /// IOC slot, 1-based.
    pub slot: u16,
    /// First entry.
    pub first: u8,
    /// Last entry (inclusive).
    pub last: u8,
}

impl ServiceEntriesRange {
    /// The modifier.
    pub fn to_attr_mod(self) -> u32 {
        (u32::from(self.slot) << 16) | (u32::from(self.last) << 8) | u32::from(self.first)
    }

    /// The fields of a modifier (not validated: see [`ServiceEntriesRange::count`]).
    pub fn from_attr_mod(attr_mod: u32) -> Self {
        ServiceEntriesRange {
            slot: (attr_mod >> 16) as u16,
            first: attr_mod as u8,
            last: (attr_mod >> 8) as u8,
        }
    }

    /// Entries requested, or `None` if `last < first` or the range spans more than 4.
    pub fn count(self) -> Option<usize> {
        let n = usize::from(self.last.checked_sub(self.first)?) + 1;
        (n <= ENTRIES_PER_MAD).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// ib_srpt's single entry: "SRP.T10:0002c90300010a2b", service ID = the GUID.
    fn entries_bytes() -> [u8; 192] {
        let mut b = [0u8; 192];
        b[..24].copy_from_slice(b"SRP.T10:0002c90300010a2b"); // ServiceName, NUL-padded to 40
        b[40..48].copy_from_slice(&[0x00, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x0a, 0x2b]); // ServiceID
        // entries 1..3: zero
        b
    }

    fn entries() -> ServiceEntries {
        ServiceEntries::new(&[ServiceEntry::srp(
            0x0002_c903_0001_0a2b,
            ServiceId(0x0002_c903_0001_0a2b),
        )])
        .expect("one entry")
    }

    #[test]
    fn service_entries_decodes_known_bytes() {
        check::decodes(&entries_bytes(), &entries());
    }

    #[test]
    fn service_entries_emits_known_bytes() {
        check::emits(&entries(), &entries_bytes());
    }

    #[test]
    fn service_entries_round_trips() {
        check::round_trips(&entries(), &mut Vec::new());
        let four =
            ServiceEntries::new(&[ServiceEntry::srp(u64::MAX, ServiceId(7)); 4]).expect("four");
        check::round_trips(&four, &mut Vec::new());
    }

    #[test]
    fn service_entries_truncated_errors() {
        check::truncation_errors::<ServiceEntries>(&entries_bytes());
    }

    #[test]
    fn srp_names_parse_in_either_case() {
        let e = entries().entries[0];
        assert_eq!(e.srp_id_ext(), Some(0x0002_c903_0001_0a2b));
        let mut upper = ServiceEntry::default();
        upper.name[..24].copy_from_slice(b"SRP.T10:0002C90300010A2B"); // ib_srp's %016llX
        assert_eq!(upper.srp_id_ext(), Some(0x0002_c903_0001_0a2b));
        let mut other = upper;
        other.name[..4].copy_from_slice(b"NFS.");
        assert_eq!(other.srp_id_ext(), None);
        let mut bad = upper;
        bad.name[23] = b'g';
        assert_eq!(bad.srp_id_ext(), None);
        let mut long = upper;
        long.name[24] = b'0';
        assert_eq!(long.srp_id_ext(), None);
        assert!(ServiceEntries::new(&[ServiceEntry::default(); 5]).is_err());
    }

    #[test]
    fn attribute_modifier_packs_slot_last_first() {
        let r = ServiceEntriesRange {
            slot: 1,
            first: 4,
            last: 7,
        };
        assert_eq!(r.to_attr_mod(), 0x0001_0704);
        assert_eq!(ServiceEntriesRange::from_attr_mod(0x0001_0704), r);
        assert_eq!(r.count(), Some(4));
        assert_eq!(
            ServiceEntriesRange {
                slot: 1,
                first: 0,
                last: 4
            }
            .count(),
            None
        );
        assert_eq!(
            ServiceEntriesRange {
                slot: 1,
                first: 2,
                last: 1
            }
            .count(),
            None
        );
    }
}
