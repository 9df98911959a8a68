//! A logical unit's identity from VPD page 0x83, ranked as MSDSM ranks designators
//! (`DsmpParseDeviceID`): designators associated with the logical unit (association 0)
//! only; SCSI name string (type 8) over NAA (3) over EUI-64 (2) over T10 vendor ID (1) over
//! vendor specific (0); on equal type the longer wins. A T10 vendor ID designator with no
//! vendor-specific part (LIO without a unit serial sends just `LIO-ORG `) names a vendor,
//! not a logical unit, and is passed over: two such LUs must not become one disk. Named as
//! Linux names WWIDs, so the name is also a safe file name: `naa.` + hex, `eui.` + hex,
//! `t10.` + text, `name.` + text, `vs.` + hex.
#[allow(unused_imports)]
use crate::prelude::*;

/// One designator of VPD page 0x83.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Designator {
    /// CODE SET (1 binary, 2 ASCII, 3 UTF-8).
    pub code_set: u8,
    /// ASSOCIATION (0 logical unit, 1 target port, 2 target device).
    pub association: u8,
    /// DESIGNATOR TYPE.
    pub kind: u8,
    /// The designator's bytes.
    pub value: Vec<u8>,
}

/// The designators of VPD page 0x83 data (a truncated list yields those complete).
pub fn designators(page: &[u8]) -> Vec<Designator> {
    let Some(len) = page
        .get(2..4)
        .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
    else {
        return Vec::new();
    };
    let end = (4 + len).min(page.len());
    let mut rest = page.get(4..end).unwrap_or_default();
    let mut out = Vec::new();
    while rest.len() >= 4 {
        let dlen = rest[3] as usize;
        let Some(value) = rest.get(4..4 + dlen) else {
            break;
        };
        out.push(Designator {
            code_set: rest[0] & 0x0f,
            association: (rest[1] >> 4) & 0x3,
            kind: rest[1] & 0x0f,
            value: value.to_vec(),
        });
        rest = &rest[4 + dlen..];
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .trim_matches(|c: char| c == '\0' || c.is_whitespace())
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '/' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The rank of a designator type (higher is better); `None` for types that do not name
/// a logical unit.
fn rank(kind: u8) -> Option<u8> {
    match kind {
        8 => Some(5),
        3 => Some(4),
        2 => Some(3),
        1 => Some(2),
        0 => Some(1),
        _ => None,
    }
}

/// The best logical-unit identity in VPD page 0x83 data, named; `None` if it has none.
pub fn identity(page: &[u8]) -> Option<String> {
    designators(page)
        .into_iter()
        .filter(|d| d.association == 0 && !d.value.is_empty())
        .filter(|d| {
            d.kind != 1
                || d.value
                    .iter()
                    .skip(8)
                    .any(|b| !b.is_ascii_whitespace() && *b != 0)
        })
        .filter_map(|d| rank(d.kind).map(|r| (r, d.value.len(), d)))
        .max_by_key(|(r, len, _)| (*r, *len))
        .map(|(_, _, d)| match d.kind {
            8 => format!("name.{}", text(&d.value)),
            3 => format!("naa.{}", hex(&d.value)),
            2 => format!("eui.{}", hex(&d.value)),
            1 => format!("t10.{}", text(&d.value)),
            _ => format!("vs.{}", hex(&d.value)),
        })
}

/// The RELATIVE TARGET PORT (type 4) and TARGET PORT GROUP (type 5) designators of the
/// port the page was read through, if present.
pub fn port_and_group(page: &[u8]) -> (Option<u16>, Option<u16>) {
    let mut port = None;
    let mut group = None;
    for d in designators(page) {
        let v = d.value.get(2..4).map(|b| u16::from_be_bytes([b[0], b[1]]));
        match (d.association, d.kind) {
            (1, 4) => port = v,
            (1, 5) => group = v,
            _ => {}
        }
    }
    (port, group)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(entries: &[(u8, u8, &[u8])]) -> Vec<u8> {
        let mut p = vec![0, 0x83, 0, 0];
        for &(code_set, assoc_kind, v) in entries {
            p.extend([code_set, assoc_kind, 0, v.len() as u8]);
            p.extend(v);
        }
        let len = (p.len() - 4) as u16;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        p
    }

    #[test]
    fn naa_of_the_lu_wins_over_vendor_id_and_port_designators() {
        let naa = [
            0x60, 0x01, 0x40, 0x51, 0x23, 0x45, 0x67, 0x89, 0, 0, 0, 0, 0, 0, 0, 1,
        ];
        let p = page(&[
            (2, 0x01, b"LIO-ORG disk"),
            (1, 0x12, &[1, 2, 3, 4, 5, 6, 7, 8]), // EUI-64 of the target port
            (1, 0x03, &naa),
            (1, 0x14, &[0, 0, 0, 2]), // relative target port 2
            (1, 0x15, &[0, 0, 0, 7]), // target port group 7
        ]);
        assert_eq!(
            identity(&p).as_deref(),
            Some("naa.60014051234567890000000000000001")
        );
        assert_eq!(port_and_group(&p), (Some(2), Some(7)));
    }

    #[test]
    fn ranking_types_and_lengths() {
        let p = page(&[(1, 0x02, &[1; 8]), (1, 0x02, &[2; 12])]);
        assert_eq!(
            identity(&p).as_deref(),
            Some(format!("eui.{}", "02".repeat(12)).as_str())
        );
        let p = page(&[(2, 0x01, b"MY DISK "), (3, 0x08, b"iqn.x/y")]);
        assert_eq!(identity(&p).as_deref(), Some("name.iqn.x_y"));
        // T10 vendor ID: 8 bytes of vendor, then the vendor-specific identifier.
        let p = page(&[(2, 0x01, b"ACME    DISK 42 ")]);
        assert_eq!(identity(&p).as_deref(), Some("t10.ACME____DISK_42"));
        assert_eq!(
            identity(&page(&[(1, 0x13, &[1; 8])])),
            None,
            "port designators only"
        );
        assert_eq!(identity(&[0, 0x83]), None, "truncated header");
        // LIO without a unit serial: the vendor alone, padded (SPC-4 7.8.6.4 wants a
        // vendor-specific identifier after it).
        assert_eq!(identity(&page(&[(2, 0x01, b"LIO-ORG ")])), None);
        assert_eq!(identity(&page(&[(2, 0x01, b"LIO-ORG     ")])), None);
        let mut cut = page(&[(1, 0x03, &[0x60; 16])]);
        cut.truncate(10);
        assert_eq!(identity(&cut), None, "truncated designator");
    }
}
