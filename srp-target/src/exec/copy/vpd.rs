//! The Third-party Copy VPD page (8Fh, SPC-4 7.8.17): what the copy manager serves, in
//! agreement with [`super::results`]' operating parameters and the opcode table.

use super::super::LogicalUnit;
use super::results::IMPLEMENTED_DESCRIPTORS;
use super::token::{
    DEFAULT_INACTIVITY_S, MAX_INACTIVITY_S, MAX_LIFETIME_S, MAX_RANGES, MAX_TOKEN_BYTES,
    ROD_TYPE_AUR, ROD_TYPE_ZERO,
};
use super::{
    MAX_CSCD_DESCRIPTORS, MAX_DESCRIPTOR_LIST_BYTES, MAX_SEGMENT_BYTES, MAX_SEGMENT_DESCRIPTORS,
    manager::TOTAL_CONCURRENT_COPIES,
};
use crate::exec::supported_opcodes;

/// One descriptor: TYPE, LENGTH (of the body), the body padded to a multiple of 4.
fn descriptor(out: &mut Vec<u8>, kind: u16, mut body: Vec<u8>) {
    while body.len() % 4 != 0 {
        body.push(0);
    }
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend(body);
}

/// The page body (after the 4-byte page header).
pub(crate) fn third_party_copy(lu: &LogicalUnit) -> Vec<u8> {
    let bs = u64::from(lu.block_bytes());
    let mut out = Vec::new();
    // 0000h Block Device ROD Token Limits (what Windows ODX reads).
    let mut b = vec![0u8; 32];
    b[6..8].copy_from_slice(&(MAX_RANGES as u16).to_be_bytes());
    b[8..12].copy_from_slice(&MAX_INACTIVITY_S.to_be_bytes());
    b[12..16].copy_from_slice(&DEFAULT_INACTIVITY_S.to_be_bytes());
    b[16..24].copy_from_slice(&(MAX_TOKEN_BYTES / bs).to_be_bytes());
    b[24..32].copy_from_slice(&(u64::from(super::OPTIMAL_TRANSFER_BYTES) / bs).to_be_bytes());
    descriptor(&mut out, 0x0000, b);
    // 0001h Supported Commands: the third-party copy commands of the opcode table.
    let mut cmds = Vec::new();
    for op in [0x83u8, 0x84] {
        let sas: Vec<u8> = supported_opcodes()
            .iter()
            .filter(|e| e.opcode == op)
            .filter_map(|e| e.service_action)
            .collect();
        cmds.push(op);
        cmds.push(sas.len() as u8);
        cmds.extend(sas);
    }
    let mut b = vec![cmds.len() as u8];
    b.extend(cmds);
    descriptor(&mut out, 0x0001, b);
    // 0004h Parameter Data.
    let mut b = vec![0u8; 28];
    b[4..6].copy_from_slice(&MAX_CSCD_DESCRIPTORS.to_be_bytes());
    b[6..8].copy_from_slice(&MAX_SEGMENT_DESCRIPTORS.to_be_bytes());
    b[8..12].copy_from_slice(&MAX_DESCRIPTOR_LIST_BYTES.to_be_bytes());
    descriptor(&mut out, 0x0004, b);
    // 0008h Supported Descriptors.
    let mut b = vec![IMPLEMENTED_DESCRIPTORS.len() as u8];
    b.extend(IMPLEMENTED_DESCRIPTORS);
    descriptor(&mut out, 0x0008, b);
    // 000Ch Supported CSCD Descriptor IDs: FFFFh, this LU.
    descriptor(&mut out, 0x000c, vec![0, 2, 0xff, 0xff]);
    // 0106h ROD Token Features: no remote tokens; lifetimes; one block ROD descriptor.
    let mut b = vec![0u8; 44];
    b[12..16].copy_from_slice(&1u32.to_be_bytes()); // MINIMUM TOKEN LIFETIME
    b[16..20].copy_from_slice(&MAX_LIFETIME_S.to_be_bytes()); // MAXIMUM TOKEN LIFETIME
    b[20..24].copy_from_slice(&MAX_INACTIVITY_S.to_be_bytes()); // MAXIMUM TOKEN INACTIVITY
    b[42..44].copy_from_slice(&48u16.to_be_bytes());
    let mut rod = vec![0u8; 48];
    rod[2..4].copy_from_slice(&0x2cu16.to_be_bytes());
    rod[6..8].copy_from_slice(&1u16.to_be_bytes()); // OPTIMAL BLOCK ROD LENGTH GRANULARITY
    rod[8..16].copy_from_slice(&MAX_TOKEN_BYTES.to_be_bytes()); // MAXIMUM BYTES IN BLOCK ROD
    let optimal = u64::from(super::OPTIMAL_TRANSFER_BYTES).to_be_bytes();
    rod[16..24].copy_from_slice(&optimal); // OPTIMAL BYTES IN BLOCK ROD TRANSFER
    rod[24..32].copy_from_slice(&MAX_TOKEN_BYTES.to_be_bytes()); // ... TO TOKEN PER SEGMENT
    rod[32..40].copy_from_slice(&optimal); // OPTIMAL BYTES FROM TOKEN PER SEGMENT
    b.extend(rod);
    descriptor(&mut out, 0x0106, b);
    // 0108h Supported ROD Token and ROD Types: access upon reference (made and taken),
    // the block device zero ROD (taken).
    let mut b = vec![0u8; 4];
    b[2..4].copy_from_slice(&128u16.to_be_bytes());
    for (rod_type, flags) in [(ROD_TYPE_AUR, 0x03u8), (ROD_TYPE_ZERO, 0x02)] {
        let mut e = vec![0u8; 64];
        e[..4].copy_from_slice(&rod_type.to_be_bytes());
        e[4] = flags; // TOKEN_IN (bit 1), TOKEN_OUT (bit 0)
        b.extend(e);
    }
    descriptor(&mut out, 0x0108, b);
    // 8001h General Copy Operations.
    let mut b = vec![0u8; 32];
    b[..4].copy_from_slice(&(TOTAL_CONCURRENT_COPIES as u32).to_be_bytes());
    b[4..8].copy_from_slice(&(TOTAL_CONCURRENT_COPIES as u32).to_be_bytes());
    b[8..12].copy_from_slice(&MAX_SEGMENT_BYTES.to_be_bytes());
    b[12] = lu.block_bytes().trailing_zeros() as u8; // DATA SEGMENT GRANULARITY
    b[13] = b[12]; // INLINE DATA GRANULARITY
    descriptor(&mut out, 0x8001, b);
    out
}
