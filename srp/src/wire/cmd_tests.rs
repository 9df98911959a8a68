//! The four wire tests for SRP_CMD over three shapes: direct data-in (what Linux ib_srp sends
//! for a registered READ), immediate data-out (SRP-2), and a 32-byte CDB with a partial
//! indirect list. Offsets: Linux `struct srp_cmd`, `srp_direct_buf`, `srp_indirect_buf`.

use super::*;
use crate::wire::desc::{DirectBuf, Indirect};
use ib_verbs::Rkey;
use wirekit::wire_repr::check;

/// READ(10) of 8 blocks at LBA 0x1000 into one registered 4 KiB buffer.
const READ10_DIRECT: [u8; 64] = [
    0x02, // 0: IU type SRP_CMD
    0x00, // 1: flags
    0, 0, 0,    // 2..4: reserved
    0x01, // 5: formats: data-out none, data-in direct
    0, 0, // 6..7: descriptor counts (0 for direct, as ib_srp)
    0, 0, 0, 0, 0, 0, 0, 0x05, // 8..15: tag 5
    0, 0, 0, 0, // 16..19: reserved
    0, 0, 0, 0, 0, 0, 0, 0,    // 20..27: LUN 0
    0,    // 28: reserved
    0x00, // 29: task attribute SIMPLE
    0,    // 30: reserved
    0x00, // 31: additional CDB length 0
    0x28, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x08, 0x00, // 32..41: READ(10)
    0, 0, 0, 0, 0, 0, // 42..47: CDB padding
    0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, // 48..55: data-in VA
    0x00, 0x00, 0x12, 0x34, // 56..59: R_Key
    0x00, 0x00, 0x10, 0x00, // 60..63: length 4096
];

fn read10_cdb() -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[..10].copy_from_slice(&[0x28, 0, 0, 0, 0x10, 0, 0, 0, 0x08, 0]);
    cdb
}

fn read10_direct() -> Cmd<'static> {
    Cmd {
        flags: SolicitFlags::empty(),
        tag: Tag(5),
        lun: Lun::ZERO,
        task_attr: TaskAttr::Simple,
        cdb: read10_cdb(),
        add_cdb: &[],
        data_out: DataDesc::None,
        data_in: DataDesc::Direct(DirectBuf::new(0x7f00_0000_1000, Rkey(0x1234), 4096)),
        imm_data: &[],
        remote_invalidate: false,
    }
}

#[test]
fn cmd_direct_decodes_known_bytes() {
    check::decodes(&READ10_DIRECT, &read10_direct());
}

#[test]
fn cmd_direct_emits_known_bytes() {
    check::emits(&read10_direct(), &READ10_DIRECT);
}

#[test]
fn cmd_direct_round_trips() {
    check::round_trips(&read10_direct(), &mut Vec::new());
}

#[test]
fn cmd_direct_truncated_errors() {
    check::truncation_errors::<Cmd<'_>>(&READ10_DIRECT);
}

/// The READ(10) above with this stack's REMOTE INVALIDATE request (byte 2, bit 0).
fn read10_invalidate_bytes() -> [u8; 64] {
    let mut b = READ10_DIRECT;
    b[2] = REMOTE_INVALIDATE; // 2: this stack's extension; 3..4 stay reserved
    b
}

fn read10_invalidate() -> Cmd<'static> {
    Cmd {
        remote_invalidate: true,
        ..read10_direct()
    }
}

#[test]
fn cmd_remote_invalidate_decodes_known_bytes() {
    check::decodes(&read10_invalidate_bytes(), &read10_invalidate());
}

#[test]
fn cmd_remote_invalidate_emits_known_bytes() {
    check::emits(&read10_invalidate(), &read10_invalidate_bytes());
}

#[test]
fn cmd_remote_invalidate_round_trips() {
    check::round_trips(&read10_invalidate(), &mut Vec::new());
}

#[test]
fn cmd_remote_invalidate_truncated_errors() {
    check::truncation_errors::<Cmd<'_>>(&read10_invalidate_bytes());
}

#[test]
fn other_reserved_bits_of_byte_2_are_ignored() {
    let mut b = READ10_DIRECT;
    b[2] = 0xfe;
    b[3] = 0xff;
    let c = Cmd::parse(&b).expect("reserved bits are ignored, as ib_srpt does");
    assert!(!c.remote_invalidate);
}

/// The 12-byte mode parameter list of the immediate-data vector.
const MODE_PARAMS: [u8; 12] = [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0x02, 0x00];

/// MODE SELECT(6) with its 12-byte parameter list as immediate data at offset 68.
const MODE_SELECT_IMM: [u8; 80] = [
    0x02, // 0: IU type SRP_CMD
    0x00, // 1: flags
    0, 0, 0,    // 2..4: reserved
    0x30, // 5: formats: data-out immediate, data-in none
    0, 0, // 6..7: descriptor counts
    0, 0, 0, 0, 0, 0, 0, 0x06, // 8..15: tag 6
    0, 0, 0, 0, // 16..19: reserved
    0, 0x01, 0, 0, 0, 0, 0, 0,    // 20..27: LUN 1
    0,    // 28: reserved
    0x00, // 29: task attribute SIMPLE
    0,    // 30: reserved
    0x00, // 31: additional CDB length 0
    0x15, 0x10, 0x00, 0x00, 0x0c, 0x00, // 32..37: MODE SELECT(6), PF, 12 bytes
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // 38..47: CDB padding
    0x00, 0x00, 0x00, 0x0c, // 48..51: immediate descriptor: length 12
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // 52..67: gap up to the offset
    0, 0, 0, 8, // 68..71: mode parameter header: block descriptor length 8
    0, 0, 0, 0, 0, 0, 0x02, 0x00, // 72..79: block descriptor: block length 512
];

fn mode_select_imm() -> Cmd<'static> {
    let mut cdb = [0u8; 16];
    cdb[..6].copy_from_slice(&[0x15, 0x10, 0, 0, 0x0c, 0]);
    Cmd {
        flags: SolicitFlags::empty(),
        tag: Tag(6),
        lun: Lun([0, 1, 0, 0, 0, 0, 0, 0]),
        task_attr: TaskAttr::Simple,
        cdb,
        add_cdb: &[],
        data_out: DataDesc::Immediate,
        data_in: DataDesc::None,
        imm_data: &MODE_PARAMS,
        remote_invalidate: false,
    }
}

#[test]
fn cmd_immediate_decodes_known_bytes() {
    check::decodes(&MODE_SELECT_IMM, &mode_select_imm());
}

#[test]
fn cmd_immediate_emits_known_bytes() {
    check::emits(&mode_select_imm(), &MODE_SELECT_IMM);
}

#[test]
fn cmd_immediate_round_trips() {
    check::round_trips(&mode_select_imm(), &mut Vec::new());
}

#[test]
fn cmd_immediate_truncated_errors() {
    check::truncation_errors::<Cmd<'_>>(&MODE_SELECT_IMM);
}

#[test]
fn cmd_immediate_honours_the_negotiated_offset() {
    // ib_srpt allows offsets up to 80; at offset 52 the data follows the descriptor directly.
    let cmd = mode_select_imm();
    let mut buf = [0xa5u8; 64];
    assert_eq!(cmd.emit_with(&mut buf, 52), Ok(64));
    assert_eq!(&buf[52..], &MODE_PARAMS);
    assert_eq!(Cmd::parse_with(&buf, 52), Ok(cmd));
    // An offset inside the descriptors is refused both ways.
    assert!(matches!(
        cmd.emit_with(&mut [0u8; 80], 50),
        Err(WireError::BadField {
            field: "immediate data offset",
            ..
        })
    ));
    assert!(matches!(
        Cmd::parse_with(&MODE_SELECT_IMM, 50),
        Err(WireError::BadField {
            field: "immediate data offset",
            ..
        })
    ));
}

/// The first and second halves of a WRITE(32) CDB (opcode 7Fh, service action 000Bh).
const WRITE32_HEAD: [u8; 16] = [0x7f, 0, 0, 0, 0, 0, 0, 0x18, 0x00, 0x0b, 0, 0, 0, 0, 0, 0];
const WRITE32_TAIL: [u8; 16] = [0, 0, 0x20, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x03];

/// WRITE(32) of 3 blocks whose data-out is described by a 3-entry table of which only the
/// first 2 entries are inline (a partial list: the target must RDMA READ the table).
const WRITE32_PARTIAL: [u8; 116] = [
    0x02, // 0: IU type SRP_CMD
    0x04, // 1: flags: UCSOLNT
    0, 0, 0,    // 2..4: reserved
    0x20, // 5: formats: data-out indirect, data-in none
    0x02, // 6: data-out descriptor count: 2 inline
    0x00, // 7: data-in descriptor count
    0, 0, 0, 0, 0, 0, 0x01, 0x00, // 8..15: tag 0x100
    0, 0, 0, 0, // 16..19: reserved
    0x40, 0x2a, 0, 0, 0, 0, 0, 0,    // 20..27: LUN 42, flat space addressing
    0,    // 28: reserved
    0x02, // 29: task attribute ORDERED
    0,    // 30: reserved
    0x10, // 31: additional CDB length 16 (4 words << 2)
    0x7f, 0, 0, 0, 0, 0, 0, 0x18, 0x00, 0x0b, 0, 0, 0, 0, 0, 0, // 32..47: CDB bytes 0..15
    0, 0, 0x20, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x03, // 48..63: CDB bytes 16..31
    0x00, 0x00, 0x7f, 0x00, 0x00, 0x10, 0x00, 0x00, // 64..71: table VA
    0x00, 0x00, 0x56, 0x78, // 72..75: table R_Key
    0x00, 0x00, 0x00, 0x30, // 76..79: table length 48 = 3 descriptors
    0x00, 0x00, 0x06, 0x00, // 80..83: total length 1536
    0x00, 0x00, 0x7f, 0x00, 0x00, 0x20, 0x00, 0x00, // 84..91: descriptor 1 VA
    0x00, 0x00, 0x9a, 0xbc, // 92..95: descriptor 1 R_Key
    0x00, 0x00, 0x02, 0x00, // 96..99: descriptor 1 length 512
    0x00, 0x00, 0x7f, 0x00, 0x00, 0x30, 0x00, 0x00, // 100..107: descriptor 2 VA
    0x00, 0x00, 0x9a, 0xbc, // 108..111: descriptor 2 R_Key
    0x00, 0x00, 0x02, 0x00, // 112..115: descriptor 2 length 512
];

const WRITE32_INLINE: [DirectBuf; 2] = [
    DirectBuf::new_const(0x7f00_0020_0000, 0x9abc, 512),
    DirectBuf::new_const(0x7f00_0030_0000, 0x9abc, 512),
];

fn write32_partial() -> Cmd<'static> {
    Cmd {
        flags: SolicitFlags::UCSOLNT,
        tag: Tag(0x100),
        lun: Lun([0x40, 42, 0, 0, 0, 0, 0, 0]),
        task_attr: TaskAttr::Ordered,
        cdb: WRITE32_HEAD,
        add_cdb: &WRITE32_TAIL,
        data_out: DataDesc::Indirect(Indirect {
            table: DirectBuf::new(0x7f00_0010_0000, Rkey(0x5678), 48),
            total_len: 1536,
            inline: &WRITE32_INLINE,
        }),
        data_in: DataDesc::None,
        imm_data: &[],
        remote_invalidate: false,
    }
}

#[test]
fn cmd_indirect_decodes_known_bytes() {
    check::decodes(&WRITE32_PARTIAL, &write32_partial());
    let cmd = Cmd::parse(&WRITE32_PARTIAL).expect("parse");
    let DataDesc::Indirect(ind) = cmd.data_out else {
        panic!("indirect expected")
    };
    assert!(ind.is_partial());
    assert_eq!(ind.table_entries(), 3);
    assert_eq!(cmd.cdb_bytes().count(), 32);
}

#[test]
fn cmd_indirect_emits_known_bytes() {
    check::emits(&write32_partial(), &WRITE32_PARTIAL);
}

#[test]
fn cmd_indirect_round_trips() {
    check::round_trips(&write32_partial(), &mut Vec::new());
}

#[test]
fn cmd_indirect_truncated_errors() {
    check::truncation_errors::<Cmd<'_>>(&WRITE32_PARTIAL);
}

#[test]
fn aca_is_read_in_both_codings_and_written_as_0x04() {
    let mut b = READ10_DIRECT;
    b[29] = 0x08; // iPXE's ACA
    assert_eq!(Cmd::parse(&b).map(|c| c.task_attr), Ok(TaskAttr::Aca));
    b[29] = 0x04; // Linux ib_srpt's and WinOF's ACA
    let cmd = Cmd::parse(&b).expect("parse");
    assert_eq!(cmd.task_attr, TaskAttr::Aca);
    let mut out = [0u8; 64];
    assert_eq!(cmd.emit(&mut out), Ok(64));
    assert_eq!(out[29], 0x04);
}

#[test]
fn malformed_commands_get_named_errors() {
    let mut b = READ10_DIRECT;
    b[5] = 0x03; // immediate data-in
    assert!(matches!(
        Cmd::parse(&b),
        Err(WireError::BadField {
            field: "data-in format",
            ..
        })
    ));
    b[5] = 0x07; // unknown format
    assert!(matches!(
        Cmd::parse(&b),
        Err(WireError::BadField {
            field: "buffer descriptor format",
            ..
        })
    ));
    let mut b = WRITE32_PARTIAL;
    b[6] = 4; // more inline descriptors than the table holds
    assert!(Cmd::parse(&b).is_err());
    let bad = Cmd {
        add_cdb: &[1, 2, 3],
        ..read10_direct()
    };
    assert!(matches!(
        bad.emit(&mut [0u8; 128]),
        Err(WireError::BadField {
            field: "additional CDB length",
            ..
        })
    ));
    let stray = Cmd {
        imm_data: &[1, 2],
        ..read10_direct()
    };
    assert!(matches!(
        stray.emit(&mut [0u8; 128]),
        Err(WireError::BadField {
            field: "immediate data",
            ..
        })
    ));
}

#[test]
fn bidirectional_descriptors_keep_their_order() {
    let cmd = Cmd {
        data_out: DataDesc::Direct(DirectBuf::new(0x1000, Rkey(1), 512)),
        ..read10_direct()
    };
    let mut buf = Vec::new();
    check::round_trips(&cmd, &mut buf);
    assert_eq!(buf[5], 0x11);
    assert_eq!(&buf[48..56], &0x1000u64.to_be_bytes()); // data-out first
}
