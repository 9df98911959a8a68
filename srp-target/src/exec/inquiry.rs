//! INQUIRY (SPC-4 6.6): standard data and the VPD pages 00h, 80h, 83h, 8Fh, B0h, B1h, B2h.

use super::provisioning::{MAX_UNMAP_BLOCKS, MAX_UNMAP_DESCRIPTORS, MAX_WRITE_SAME_BLOCKS};
use super::{Exec, LogicalUnit, Nexus, Sense, good_data};
use scsi::cdb::{Inquiry, VpdPage};

/// T10 VENDOR IDENTIFICATION of every LUN.
pub const VENDOR: &str = "SRPSTACK";
/// PRODUCT REVISION LEVEL.
pub const REVISION: &str = "0001";

/// The VPD pages we serve, in the order of page 00h.
const PAGES: [u8; 7] = [0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2];

/// `s` as an ASCII field of `len` bytes, space padded, cut when longer.
pub(crate) fn ascii_field(s: &str, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = s
        .bytes()
        .map(|b| if b.is_ascii_graphic() { b } else { b' ' })
        .take(len)
        .collect();
    v.resize(len, b' ');
    v
}

/// The version descriptors of the standard INQUIRY data (SPC-4 6.6.2, table 143): the
/// standards the device claims. SBC-4 is the command set served (GET LBA STATUS, WRITE
/// ATOMIC, the Block Limits page with its atomic fields); SBC-3, which it extends, stays
/// listed because initiators key on its descriptor (libiscsi's test suite reads 04C0h to
/// expect the Block Limits page).
pub const VERSION_DESCRIPTORS: [u16; 5] = [
    0x00a0, // SAM-5 (no version claimed)
    0x0460, // SPC-4 (no version claimed)
    0x0600, // SBC-4 (no version claimed)
    0x04c0, // SBC-3 (no version claimed)
    0x0955, // SRP T10/1415-D revision 16a
];

/// Standard INQUIRY data, 96 bytes (the version descriptors end at byte 75).
/// `peripheral` is byte 0: 00h for a direct-access block device, 7Fh for "no logical unit
/// here" (SPC-4: qualifier 011b, type 1Fh).
pub(crate) fn standard(peripheral: u8, product: &str) -> Vec<u8> {
    let mut d = vec![
        peripheral, 0x00, // not removable
        0x06, // VERSION: SPC-4
        0x12, // HISUP, RESPONSE DATA FORMAT 2
        91,   // ADDITIONAL LENGTH: 96 - 5
        0x18, // TPGS 01b: implicit ALUA (REPORT TARGET PORT GROUPS, no SET); 3PC: copy offload
        0x10, // MULTIP: reached through several target ports (one per IOC)
        0x02, // CMDQUE
    ];
    d.extend(ascii_field(VENDOR, 8));
    d.extend(ascii_field(product, 16));
    d.extend(ascii_field(REVISION, 4));
    d.resize(58, 0); // vendor specific 36..55, clocking/QAS/IUS 56, reserved 57
    for v in VERSION_DESCRIPTORS {
        d.extend_from_slice(&v.to_be_bytes());
    }
    d.resize(96, 0); // the other four descriptors and reserved bytes 74..95
    d
}

/// INQUIRY.
pub(crate) fn inquiry(lu: &LogicalUnit, nexus: &Nexus<'_>, q: &Inquiry, din: &mut Vec<u8>) -> Exec {
    let Some(page) = q.page else {
        *din = standard(0x00, lu.product());
        return good_data(din, q.alloc_len.into());
    };
    let body = match page {
        VpdPage::SupportedPages => PAGES.to_vec(),
        VpdPage::UnitSerialNumber => lu.identity().serial().as_bytes().to_vec(),
        VpdPage::DeviceIdentification => device_identification(lu, nexus),
        VpdPage::ThirdPartyCopy => super::copy::vpd::third_party_copy(lu),
        VpdPage::BlockLimits => block_limits(lu),
        VpdPage::BlockDeviceCharacteristics => block_device_characteristics(),
        VpdPage::LogicalBlockProvisioning => logical_block_provisioning(lu),
        // SPC-4: an unsupported page code is INVALID FIELD IN CDB at PAGE CODE.
        VpdPage::Unknown(_) => return Err(Sense::invalid_field_in_cdb(2, Some(7)).into()),
    };
    din.extend_from_slice(&[0x00, page.into()]);
    // Every page body here is well under 64 KiB.
    din.extend_from_slice(&(body.len() as u16).to_be_bytes());
    din.extend(body);
    good_data(din, q.alloc_len.into())
}

/// One designation descriptor: code set, PIV/association/type, the designator.
fn designator(code_set: u8, assoc_type: u8, id: &[u8]) -> Vec<u8> {
    let mut d = vec![code_set, assoc_type, 0, id.len() as u8];
    d.extend_from_slice(id);
    d
}

/// VPD 83h: the LUN's NAA 6 and T10 vendor ID designators (identical through every port),
/// then the port's relative target port and target port group designators, which Linux
/// scsi_dh_alua and Windows MPIO read to map paths to groups.
fn device_identification(lu: &LogicalUnit, nexus: &Nexus<'_>) -> Vec<u8> {
    const BINARY: u8 = 0x01;
    const ASCII: u8 = 0x02;
    // Association 00b (logical unit) / 01b (target port), designator type in bits 3:0.
    const LU_T10: u8 = 0x01;
    const LU_NAA: u8 = 0x03;
    const PORT_RELATIVE: u8 = 0x14;
    const PORT_GROUP: u8 = 0x15;
    let mut t10 = ascii_field(VENDOR, 8);
    t10.extend_from_slice(lu.identity().serial().as_bytes());
    let rel = nexus.port.relative_port.0.to_be_bytes();
    let tpg = nexus.port.group.0.to_be_bytes();
    let mut v = designator(BINARY, LU_NAA, lu.identity().naa());
    v.extend(designator(ASCII, LU_T10, &t10));
    v.extend(designator(BINARY, PORT_RELATIVE, &[0, 0, rel[0], rel[1]]));
    v.extend(designator(BINARY, PORT_GROUP, &[0, 0, tpg[0], tpg[1]]));
    v
}

/// UGAVALID: the UNMAP GRANULARITY ALIGNMENT field is valid (VPD B0h byte 32 bit 7).
const UGAVALID: u32 = 1 << 31;

/// VPD B0h (SBC-4 6.6.4), 60 bytes after the header.
fn block_limits(lu: &LogicalUnit) -> Vec<u8> {
    let mut b = vec![0u8; 0x3c];
    // Offsets below are the page's byte numbers minus the 4-byte header.
    b[0] = 0x01; // WSNZ: WRITE SAME with 0 blocks is rejected
    b[1] = lu.backend().max_compare_and_write_blocks();
    // OPTIMAL TRANSFER LENGTH GRANULARITY: a physical block (at most 2^15 logical ones).
    let per_physical = lu.blocks_per_physical();
    b[2..4].copy_from_slice(&(per_physical as u16).to_be_bytes());
    let max = lu.max_transfer_blocks();
    b[4..8].copy_from_slice(&max.to_be_bytes()); // MAXIMUM TRANSFER LENGTH
    b[8..12].copy_from_slice(&max.to_be_bytes()); // OPTIMAL TRANSFER LENGTH
    if lu.backend().supports_unmap() {
        b[16..20].copy_from_slice(&MAX_UNMAP_BLOCKS.to_be_bytes());
        b[20..24].copy_from_slice(&MAX_UNMAP_DESCRIPTORS.to_be_bytes());
        // OPTIMAL UNMAP GRANULARITY and its alignment: the device's discard unit, the
        // file's filesystem block, or a physical block (geometry.rs); UGAVALID.
        let (gran, align) = lu.unmap_granularity();
        b[24..28].copy_from_slice(&gran.to_be_bytes());
        b[28..32].copy_from_slice(&(UGAVALID | (align & !UGAVALID)).to_be_bytes());
    }
    b[32..40].copy_from_slice(&u64::from(MAX_WRITE_SAME_BLOCKS).to_be_bytes());
    // WRITE ATOMIC(16) (writes.rs): MAXIMUM ATOMIC TRANSFER LENGTH, ATOMIC ALIGNMENT, ATOMIC
    // TRANSFER LENGTH GRANULARITY; no atomic boundaries (both boundary fields 0).
    b[40..44].copy_from_slice(&lu.max_atomic_blocks().to_be_bytes());
    let g = lu.atomic_granularity();
    b[44..48].copy_from_slice(&g.to_be_bytes());
    b[48..52].copy_from_slice(&g.to_be_bytes());
    b
}

/// VPD B1h (SBC-3 6.6.2): non-rotating medium.
fn block_device_characteristics() -> Vec<u8> {
    let mut b = vec![0u8; 0x3c];
    b[0..2].copy_from_slice(&1u16.to_be_bytes()); // MEDIUM ROTATION RATE: non-rotating
    b
}

/// VPD B2h (SBC-3 6.6.4): LBPU, LBPWS, LBPWS10, LBPRZ; thin provisioned.
fn logical_block_provisioning(lu: &LogicalUnit) -> Vec<u8> {
    const LBPU: u8 = 0x80;
    const LBPWS: u8 = 0x40;
    const LBPWS10: u8 = 0x20;
    const LBPRZ: u8 = 0x04;
    const THIN: u8 = 0x02;
    if lu.backend().supports_unmap() {
        vec![0, LBPU | LBPWS | LBPWS10 | LBPRZ, THIN, 0]
    } else {
        vec![0; 4]
    }
}
