//! PERSISTENT RESERVE IN (SPC-4 6.15): READ KEYS, READ RESERVATION, REPORT CAPABILITIES,
//! READ FULL STATUS. Each is built whole, then cut to the ALLOCATION LENGTH; the length
//! fields always describe the whole list.

use super::PrState;
use crate::exec::{Exec, LogicalUnit, good_data};
use scsi::cdb::{PrIn, PrInAction};
use srp::wire::PortId;

/// REPORT CAPABILITIES byte 2: CRH (RESERVE/RELEASE meet persistent reservations by SPC-4
/// 5.13.3's compatible reservation handling, `scsi2.rs`), ATP_C (ALL_TG_PT supported),
/// PTPL_C (persistence through power loss, on a LU with a state file). SIP_C is 0: no
/// SPEC_I_PT.
const CRH: u8 = 0x10;
const ATP_C: u8 = 0x04;
const PTPL_C: u8 = 0x01;
/// Byte 3 bit 0: PTPL_A, persistence activated.
const PTPL_A: u8 = 0x01;
/// Byte 3: TMV (the type mask is valid), ALLOW COMMANDS 001b (TEST UNIT READY passes
/// Write Exclusive and Exclusive Access reservations; as LIO).
const TMV_ALLOW_COMMANDS: u8 = 0x80 | 0x10;
/// PERSISTENT RESERVATION TYPE MASK, byte 4: WR_EX_AR, EX_AC_RO, WR_EX_RO, EX_AC, WR_EX.
const TYPE_MASK_4: u8 = 0x80 | 0x40 | 0x20 | 0x08 | 0x02;
/// Byte 5: EX_AC_AR.
const TYPE_MASK_5: u8 = 0x01;
/// READ FULL STATUS descriptor byte 12: ALL_TG_PT (bit 1), R_HOLDER (bit 0).
const FS_ALL_TG_PT: u8 = 0x02;
const FS_R_HOLDER: u8 = 0x01;
/// TransportID byte 0 for SRP (SPC-4 7.6.4.5): FORMAT CODE 00b, PROTOCOL IDENTIFIER 4h.
const SRP_PROTOCOL_ID: u8 = 0x04;
/// An SRP TransportID is 24 bytes.
pub(crate) const SRP_TRANSPORT_ID_LEN: usize = 24;

/// PERSISTENT RESERVE IN.
pub(crate) fn pr_in(lu: &LogicalUnit, p: &PrIn, din: &mut Vec<u8>) -> Exec {
    let st = lu.pr_read();
    match p.action {
        PrInAction::ReadKeys => read_keys(&st, din),
        PrInAction::ReadReservation => read_reservation(&st, din),
        PrInAction::ReportCapabilities => report_capabilities(&st, lu.pr_file.is_some(), din),
        PrInAction::ReadFullStatus => read_full_status(&st, din),
    }
    drop(st);
    good_data(din, p.alloc_len.into())
}

/// PRGENERATION and ADDITIONAL LENGTH, then `body`.
fn with_header(st: &PrState, body: &[u8], din: &mut Vec<u8>) {
    din.extend(st.generation.to_be_bytes());
    din.extend(u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    din.extend(body);
}

/// READ KEYS (6.15.2): every registered key, one per registered I_T nexus.
fn read_keys(st: &PrState, din: &mut Vec<u8>) {
    let keys: Vec<u8> = st.regs.iter().flat_map(|r| r.key.to_be_bytes()).collect();
    with_header(st, &keys, din);
}

/// READ RESERVATION (6.15.3): the holder's key (0 under all-registrants types), SCOPE and
/// TYPE; no descriptor without a reservation.
fn read_reservation(st: &PrState, din: &mut Vec<u8>) {
    let mut body = Vec::new();
    if let Some(r) = st.res {
        let key = if r.kind.all_registrants() {
            0
        } else {
            st.registration(r.holder).map_or(0, |h| h.key)
        };
        body.extend(key.to_be_bytes());
        // Obsolete (4), reserved (1), SCOPE (LU_SCOPE) | TYPE, obsolete (2).
        body.extend([0, 0, 0, 0, 0, r.kind as u8, 0, 0]);
    }
    with_header(st, &body, din);
}

/// REPORT CAPABILITIES (6.15.4).
fn report_capabilities(st: &PrState, persists: bool, din: &mut Vec<u8>) {
    din.extend(8u16.to_be_bytes());
    let byte2 = CRH | ATP_C | if persists { PTPL_C } else { 0 };
    let byte3 = TMV_ALLOW_COMMANDS | if st.ptpl { PTPL_A } else { 0 };
    din.extend([byte2, byte3, TYPE_MASK_4, TYPE_MASK_5, 0, 0]);
}

/// The TransportID of an SRP initiator port (SPC-4 7.6.4.5).
pub(crate) fn srp_transport_id(id: PortId) -> [u8; SRP_TRANSPORT_ID_LEN] {
    let mut t = [0u8; SRP_TRANSPORT_ID_LEN];
    t[0] = SRP_PROTOCOL_ID;
    t[8..].copy_from_slice(&id.0);
    t
}

/// READ FULL STATUS (6.15.5): a descriptor per registered I_T nexus.
fn read_full_status(st: &PrState, din: &mut Vec<u8>) {
    let mut body = Vec::new();
    for r in &st.regs {
        let holder = st.is_holder(r.nexus);
        body.extend(r.key.to_be_bytes());
        body.extend([0; 4]);
        let mut flags = 0;
        if r.all_tg_pt {
            flags |= FS_ALL_TG_PT;
        }
        if holder {
            flags |= FS_R_HOLDER;
        }
        body.push(flags);
        // SCOPE | TYPE, meaningful only for a holder.
        body.push(match st.res {
            Some(res) if holder => res.kind as u8,
            _ => 0,
        });
        body.extend([0; 4]);
        body.extend(r.nexus.port.0.to_be_bytes());
        body.extend((SRP_TRANSPORT_ID_LEN as u32).to_be_bytes());
        body.extend(srp_transport_id(r.nexus.initiator));
    }
    with_header(st, &body, din);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srp_transport_id_layout() {
        let mut id = [0u8; 16];
        id[0] = 0xfe;
        id[15] = 0x01;
        let t = srp_transport_id(PortId(id));
        // FORMAT CODE 00b | PROTOCOL IDENTIFIER 4h, 7 reserved, then the 16-byte id.
        assert_eq!(t[0], 0x04);
        assert_eq!(&t[1..8], &[0; 7]);
        assert_eq!(&t[8..], &id);
    }
}
