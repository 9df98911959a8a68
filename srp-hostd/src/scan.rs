//! A login's LUNs: REPORT LUNS on LUN 0, then for each LUN the port can address INQUIRY
//! (a direct-access device, connected), VPD page 0x83 (the identity multipath keys on) and
//! READ CAPACITY(16) (falling back to READ CAPACITY(10)).
//!
//! Contract: [`scan`] returns the disks found, in LUN order, and one line per LUN it skipped
//! and why (beyond the port's LUN range, declined by the DSM — not a connected disk, no
//! logical-unit designator —, no capacity), apart from the LUNs listed whose probe did not
//! complete ([`ScanResult::unreachable`]: not evidence of a LUN gone). Identities are the DSM's
//! ([`mpio::identity`]: MSDSM's ranking, named as Linux names WWIDs).

use crate::adapter::HostAdapter;
use crate::command::{Outcome, execute_retrying};
use mpio::{Dsm, DsmIdentifier};
use scsi::Lun;
use scsi::cdb::{Command, Inquiry, ReadCapacity16, ReportLuns, SelectReport, VpdPage};
use srp_initiator_storport::port::{DataDirection, LuAddress};
use std::time::Duration;
use wirekit::WireRepr;

/// Tries per scan command (unit attentions after a login are expected).
const TRIES: u32 = 6;

/// One LUN found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LunInfo {
    /// The LUN number.
    pub lun: u32,
    /// The port address it is reached at.
    pub address: LuAddress,
    /// VPD 0x83's best designator, named (`naa.…`): the multipath grouping key.
    pub identity: String,
    /// What the DSM claimed the device as.
    pub id: DsmIdentifier,
    /// INQUIRY vendor, product, revision (trimmed).
    pub vendor: String,
    /// INQUIRY product identification.
    pub product: String,
    /// INQUIRY product revision level.
    pub revision: String,
    /// Logical block length.
    pub block_size: u32,
    /// Capacity in blocks.
    pub blocks: u64,
}

/// What a scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanResult {
    /// The disks.
    pub luns: Vec<LunInfo>,
    /// LUNs passed over, with the reason.
    pub skipped: Vec<String>,
    /// LUNs REPORT LUNS lists whose probe did not complete (a command failed: the target
    /// may be going away mid-scan). Not evidence that the LUN is gone: a disk already
    /// holding such a LUN keeps its path until a later scan settles it.
    pub unreachable: Vec<u32>,
}

impl ScanResult {
    /// Whether a disk holding `lun` with `identity` stays: its LUN was found with the same
    /// identity, or is listed but could not be probed this time (never removed on a
    /// transient failure: a target going away mid-scan is device loss's to judge).
    pub fn keeps(&self, lun: u32, identity: &str) -> bool {
        self.unreachable.contains(&lun)
            || self
                .luns
                .iter()
                .any(|l| l.lun == lun && l.identity == identity)
    }
}

/// Why one LUN was not made a disk.
enum Skip {
    /// A property of the LUN: not a disk we can use.
    Declined(String),
    /// A command did not complete with good status: nothing is known.
    Unreachable(String),
}

/// Why a scan failed as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// REPORT LUNS failed.
    #[error("REPORT LUNS failed: {0}")]
    ReportLuns(String),
}

/// The CDB bytes of `c`.
pub fn cdb(c: Command) -> Vec<u8> {
    let mut b = vec![0; c.buffer_len()];
    // Every command built here fits its CDB: an error would be a bug in this file.
    let n = c.emit(&mut b).unwrap_or(0);
    b.truncate(n);
    b
}

fn run_in(port: &HostAdapter, lu: LuAddress, c: Command, len: usize, timeout: Duration) -> Outcome {
    execute_retrying(
        port,
        lu,
        &cdb(c),
        DataDirection::In,
        &vec![0; len],
        timeout,
        TRIES,
    )
}

/// The LUN numbers in REPORT LUNS parameter data (single-level and flat addressing).
pub fn parse_report_luns(data: &[u8]) -> Vec<u32> {
    let Some(head) = data.get(..4) else {
        return Vec::new();
    };
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let list = data.get(8..).unwrap_or_default();
    list.chunks_exact(8)
        .take(len / 8)
        .filter_map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            Lun(b).number().ok()
        })
        .collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_owned()
}

/// Scans the LUNs of `port` (target 0 of bus 0) that are below `max_luns`. `target_port`
/// names the SRP target port (its identifier in hex): with the LUN, the identity of an LU
/// whose VPD 0x83 names none.
pub fn scan(
    port: &HostAdapter,
    dsm: &dyn Dsm,
    max_luns: u8,
    timeout: Duration,
    target_port: &str,
) -> Result<ScanResult, ScanError> {
    let lun0 = LuAddress::new(0, 0, 0);
    let report = Command::ReportLuns(ReportLuns {
        select: SelectReport::from(0),
        alloc_len: 16 + 8 * 256,
    });
    let luns = match run_in(port, lun0, report, 16 + 8 * 256, timeout) {
        Outcome::Good(d) => parse_report_luns(&d),
        other => return Err(ScanError::ReportLuns(other.to_string())),
    };
    let mut out = ScanResult::default();
    for n in luns {
        let Some(lun) = u8::try_from(n).ok().filter(|l| *l < max_luns) else {
            out.skipped
                .push(format!("LUN {n}: beyond max_luns {max_luns}"));
            continue;
        };
        let address = LuAddress::new(0, 0, lun);
        match probe(port, dsm, address, timeout, target_port) {
            Ok(info) => out.luns.push(info),
            Err(Skip::Declined(why)) => out.skipped.push(format!("LUN {n}: {why}")),
            Err(Skip::Unreachable(why)) => {
                out.skipped.push(format!("LUN {n}: {why}"));
                out.unreachable.push(n);
            }
        }
    }
    Ok(out)
}

/// INQUIRY, VPD 0x83 (claimed by the DSM) and READ CAPACITY of one LUN.
fn probe(
    port: &HostAdapter,
    dsm: &dyn Dsm,
    address: LuAddress,
    timeout: Duration,
    target_port: &str,
) -> Result<LunInfo, Skip> {
    use Skip::{Declined, Unreachable};
    let std_inq = Command::Inquiry(Inquiry {
        page: None,
        alloc_len: 96,
    });
    let inq = match run_in(port, address, std_inq, 96, timeout) {
        Outcome::Good(d) if d.len() >= 36 => d,
        Outcome::Good(d) => return Err(Declined(format!("INQUIRY data of {} bytes", d.len()))),
        other => return Err(Unreachable(format!("INQUIRY: {other}"))),
    };
    let vpd = Command::Inquiry(Inquiry {
        page: Some(VpdPage::from(0x83)),
        alloc_len: 512,
    });
    let vpd = match run_in(port, address, vpd, 512, timeout) {
        Outcome::Good(d) => d,
        other => return Err(Unreachable(format!("VPD page 0x83: {other}"))),
    };
    let nexus = format!("{target_port}-lun{}", address.lun);
    let id = dsm
        .inquire(&inq, &vpd, Some(&nexus))
        .map_err(|e| Declined(e.to_string()))?;
    if id.identity.starts_with("nexus.") {
        tracing::info!(
            lun = address.lun,
            identity = %id.identity,
            "no logical-unit designator in VPD page 0x83: named by its target port and LUN"
        );
    }
    let rc16 = Command::ReadCapacity16(ReadCapacity16 { alloc_len: 32 });
    let (blocks, block_size) = match run_in(port, address, rc16, 32, timeout) {
        Outcome::Good(d) if d.len() >= 12 => {
            let last = u64::from_be_bytes(d[..8].try_into().unwrap_or_default());
            let bs = u32::from_be_bytes(d[8..12].try_into().unwrap_or_default());
            (last.saturating_add(1), bs)
        }
        _ => match run_in(port, address, Command::ReadCapacity10, 8, timeout) {
            Outcome::Good(d) if d.len() >= 8 => {
                let last = u32::from_be_bytes(d[..4].try_into().unwrap_or_default());
                let bs = u32::from_be_bytes(d[4..8].try_into().unwrap_or_default());
                (u64::from(last) + 1, bs)
            }
            other => return Err(Unreachable(format!("READ CAPACITY: {other}"))),
        },
    };
    if !block_size.is_power_of_two() || block_size < 512 || blocks == 0 {
        return Err(Declined(format!(
            "unusable geometry: {blocks} blocks of {block_size} bytes"
        )));
    }
    Ok(LunInfo {
        lun: u32::from(address.lun),
        address,
        identity: id.identity.clone(),
        id,
        vendor: text(&inq[8..16]),
        product: text(&inq[16..32]),
        revision: text(&inq[32..36]),
        block_size,
        blocks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_luns_data_single_level() {
        let mut d = vec![0, 0, 0, 24, 0, 0, 0, 0];
        d.extend([0, 0, 0, 0, 0, 0, 0, 0]);
        d.extend([0, 3, 0, 0, 0, 0, 0, 0]);
        d.extend([0x41, 0x00, 0, 0, 0, 0, 0, 0]); // flat space 256
        d.extend([0, 9, 0, 0, 0, 0, 0, 0]); // beyond LUN LIST LENGTH
        assert_eq!(parse_report_luns(&d), vec![0, 3, 256]);
        assert!(parse_report_luns(&[0, 0]).is_empty());
    }

    fn lun(n: u32, identity: &str) -> LunInfo {
        LunInfo {
            lun: n,
            address: LuAddress::new(0, 0, n as u8),
            identity: identity.into(),
            id: DsmIdentifier {
                identity: identity.into(),
                alua: false,
                relative_port: None,
                port_group: None,
            },
            vendor: String::new(),
            product: String::new(),
            revision: String::new(),
            block_size: 512,
            blocks: 8,
        }
    }

    #[test]
    fn a_disk_is_gone_only_when_its_lun_is_absent_or_changed_not_when_unprobed() {
        let found = ScanResult {
            luns: vec![lun(0, "naa.1")],
            skipped: vec!["LUN 1: INQUIRY: transport error".into()],
            unreachable: vec![1],
        };
        assert!(found.keeps(0, "naa.1"));
        assert!(!found.keeps(0, "naa.2"), "another LU at the same LUN");
        assert!(found.keeps(1, "naa.9"), "listed but unprobed: kept");
        assert!(!found.keeps(2, "naa.3"), "not listed: gone");
    }
}
