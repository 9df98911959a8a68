//! The IUs an initiator sends, built from the input: well-formed SRP_CMD (every descriptor
//! form), SRP_TSK_MGMT, SRP_CRED_RSP, SRP_AER_RSP and SRP_I_LOGOUT, sometimes damaged
//! afterwards (a byte flipped, the tail cut), so that the parsers' edges are reached from
//! valid IUs as well as from raw bytes.

use crate::input::Input;
use hca::Rkey;
use scsi::Lun;
use srp::wire::aer::AerRsp;
use srp::wire::cmd::{Cmd, TaskAttr};
use srp::wire::cred::CredRsp;
use srp::wire::desc::{DataDesc, DirectBuf, Indirect};
use srp::wire::logout::ILogout;
use srp::wire::tsk_mgmt::{TaskMgmtFunction, TskMgmt};
use srp::wire::{SolicitFlags, Tag};
use wirekit::WireRepr;

/// A tag: mostly from a small set, so that duplicates and aborts of live tags happen;
/// sometimes one of `live`; sometimes anything.
pub fn tag(input: &mut Input<'_>, live: &[Tag]) -> Tag {
    match input.below(8) {
        0..=3 => Tag(u64::from(input.u8() % 12)),
        4 | 5 if !live.is_empty() => live[input.below(live.len())],
        _ => Tag(input.u64()),
    }
}

/// LUN 0, LUN 1 or any eight bytes.
pub fn lun(input: &mut Input<'_>) -> Lun {
    match input.below(4) {
        0 | 1 => Lun([0; 8]),
        2 => Lun([0, 1, 0, 0, 0, 0, 0, 0]),
        _ => Lun(input.u64().to_be_bytes()),
    }
}

/// A transfer length: small, around the channel's limit, or anything.
fn len(input: &mut Input<'_>) -> u32 {
    match input.below(4) {
        0 => u32::from(input.u16() % 8192),
        1 => (1 << 16) - 512 + u32::from(input.u16() % 1024),
        2 => 0,
        _ => input.u32(),
    }
}

fn direct(input: &mut Input<'_>) -> DirectBuf {
    DirectBuf::new(input.u64(), Rkey(input.u32()), len(input))
}

/// One direction's descriptor; its inline list lives in `list`.
fn desc<'a>(input: &mut Input<'_>, list: &'a mut Vec<DirectBuf>, out: bool) -> DataDesc<'a> {
    match input.below(if out { 5 } else { 4 }) {
        0 => DataDesc::None,
        1 | 2 => DataDesc::Direct(direct(input)),
        3 => {
            // Whole or partial inline list; table length a multiple of 16 or not; total
            // consistent or not.
            let n = input.below(5);
            list.extend((0..n).map(|_| direct(input)));
            let entries = n + input.below(3);
            let mut table_len = (entries * 16) as u32;
            if input.below(8) == 0 {
                table_len += 1 + u32::from(input.u8() % 15);
            }
            let sum: u64 = list.iter().map(|d| u64::from(d.len())).sum();
            let total_len = if input.below(4) == 0 {
                input.u32()
            } else {
                sum.min(u64::from(u32::MAX)) as u32
            };
            DataDesc::Indirect(Indirect {
                table: DirectBuf::new(input.u64(), Rkey(input.u32()), table_len),
                total_len,
                inline: list,
            })
        }
        _ => DataDesc::Immediate,
    }
}

/// An SRP_CMD, emitted with immediate data at `imm_offset` (the channel's, or another).
pub fn cmd(input: &mut Input<'_>, live: &[Tag], imm_offset: u16) -> Option<Vec<u8>> {
    let mut cdb = [0u8; 16];
    cdb.copy_from_slice(&input.u64().to_be_bytes().repeat(2));
    let add_cdb_len = 4 * input.below(3);
    let add_cdb = input.bytes(add_cdb_len).to_vec();
    let (mut out_list, mut in_list) = (Vec::new(), Vec::new());
    let tag = tag(input, live);
    let lun = lun(input);
    let task_attr = input.pick(&[
        TaskAttr::Simple,
        TaskAttr::HeadOfQueue,
        TaskAttr::Ordered,
        TaskAttr::Aca,
    ]);
    let data_out = desc(input, &mut out_list, true);
    let data_in = desc(input, &mut in_list, false);
    let imm_len = if data_out == DataDesc::Immediate {
        usize::from(input.u8())
    } else {
        0
    };
    let imm_data = input.bytes(imm_len).to_vec();
    let c = Cmd {
        flags: SolicitFlags::from_bits_retain(input.u8() & 0x03),
        tag,
        lun,
        task_attr,
        cdb,
        add_cdb: &add_cdb,
        data_out,
        data_in,
        imm_data: &imm_data,
        remote_invalidate: input.bool(),
    };
    let mut buf = vec![0u8; c.buffer_len_with(imm_offset)];
    c.emit_with(&mut buf, imm_offset).ok()?;
    Some(buf)
}

/// An SRP_TSK_MGMT, usually naming a live tag.
pub fn tmf(input: &mut Input<'_>, live: &[Tag]) -> Vec<u8> {
    let function = match input.below(7) {
        0 | 1 => TaskMgmtFunction::AbortTask,
        2 => TaskMgmtFunction::AbortTaskSet,
        3 => TaskMgmtFunction::ClearTaskSet,
        4 => TaskMgmtFunction::LogicalUnitReset,
        5 => TaskMgmtFunction::ClearAca,
        _ => TaskMgmtFunction::from(input.u8()),
    };
    let t = TskMgmt {
        flags: SolicitFlags::empty(),
        tag: tag(input, live),
        lun: lun(input),
        function,
        task_tag: tag(input, live),
    };
    emit(&t)
}

/// The responses and the logout an initiator sends.
pub fn small(input: &mut Input<'_>) -> Vec<u8> {
    let tag = Tag(u64::from(input.u8()));
    match input.below(3) {
        0 => emit(&CredRsp { tag }),
        1 => emit(&AerRsp { tag }),
        _ => emit(&ILogout { tag }),
    }
}

fn emit<'a>(v: &impl WireRepr<'a>) -> Vec<u8> {
    let mut buf = vec![0u8; v.buffer_len()];
    let n = v.emit(&mut buf).unwrap_or(0);
    buf.truncate(n);
    buf
}

/// Sometimes damages `iu`: flips a byte, cuts the tail, or appends junk.
pub fn damage(input: &mut Input<'_>, mut iu: Vec<u8>) -> Vec<u8> {
    match input.below(8) {
        0 if !iu.is_empty() => {
            let at = usize::from(input.u16()) % iu.len();
            iu[at] ^= input.u8() | 1;
        }
        1 => iu.truncate(usize::from(input.u16()) % (iu.len() + 1)),
        2 => {
            let n = usize::from(input.u8() % 32);
            iu.extend_from_slice(input.bytes(n));
        }
        _ => {}
    }
    iu
}
