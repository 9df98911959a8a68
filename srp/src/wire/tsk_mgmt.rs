//! SRP_TSK_MGMT: a task management request, 48 bytes (SRP r16a; Linux `struct srp_tsk_mgmt`).
//! The target answers with an SRP_RSP carrying 4 bytes of response data ([`super::rsp`]).

use super::error::{expect_type, read_fixed, write_fixed};
use super::{IuType, SolicitFlags, Tag, WireError};
use scsi::Lun;
use wirekit::WireRepr;
use zerocopy::network_endian::U64;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

wirekit::open_enum! {
    /// TASK MANAGEMENT FUNCTION codes (SRP r16a; ib_srpt; WinOF also names 0x20 "restricted",
    /// which stays `Unknown`).
    pub enum TaskMgmtFunction(u8) {
        /// ABORT TASK: abort the task named by `task_tag`.
        AbortTask = 0x01,
        /// ABORT TASK SET: abort every task of this initiator on the LUN.
        AbortTaskSet = 0x02,
        /// CLEAR TASK SET: abort every task on the LUN.
        ClearTaskSet = 0x04,
        /// LOGICAL UNIT RESET.
        LogicalUnitReset = 0x08,
        /// CLEAR ACA.
        ClearAca = 0x40,
    }
}

/// SRP_TSK_MGMT as laid out on the wire. The LUN is only 4-byte aligned, as srp.h notes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct TskMgmtHdr {
    /// 0x01.
    pub iu_type: u8,
    /// SCSOLNT / UCSOLNT.
    pub flags: u8,
    /// Reserved.
    pub reserved1: [u8; 6],
    /// Tag of this request.
    pub tag: U64,
    /// Reserved.
    pub reserved2: [u8; 4],
    /// LUN.
    pub lun: [u8; 8],
    /// Reserved.
    pub reserved3: [u8; 2],
    /// TASK MANAGEMENT FUNCTION.
    pub function: u8,
    /// Reserved.
    pub reserved4: u8,
    /// TAG OF TASK TO BE MANAGED (ABORT TASK).
    pub task_tag: U64,
    /// Reserved.
    pub reserved5: [u8; 8],
}
const _: () = assert!(size_of::<TskMgmtHdr>() == 48);

/// SRP_TSK_MGMT: abort, clear or reset tasks on a LUN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TskMgmt {
    /// Solicited notification requests.
    pub flags: SolicitFlags,
    /// Tag of this request (Linux sets bit 31 to tell TMF tags from command tags).
    pub tag: Tag,
    /// The LUN.
    pub lun: Lun,
    /// What to do.
    pub function: TaskMgmtFunction,
    /// The task to abort (ABORT TASK); ignored otherwise.
    pub task_tag: Tag,
}

impl<'a> WireRepr<'a> for TskMgmt {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: TskMgmtHdr = read_fixed("SRP_TSK_MGMT", buf)?;
        expect_type("SRP_TSK_MGMT", IuType::TskMgmt.into(), h.iu_type)?;
        Ok(TskMgmt {
            flags: SolicitFlags::from_bits_retain(h.flags),
            tag: Tag(h.tag.get()),
            lun: Lun(h.lun),
            function: h.function.into(),
            task_tag: Tag(h.task_tag.get()),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<TskMgmtHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = TskMgmtHdr {
            iu_type: IuType::TskMgmt.into(),
            flags: self.flags.bits(),
            reserved1: [0; 6],
            tag: U64::new(self.tag.0),
            reserved2: [0; 4],
            lun: self.lun.0,
            reserved3: [0; 2],
            function: self.function.into(),
            reserved4: 0,
            task_tag: U64::new(self.task_tag.0),
            reserved5: [0; 8],
        };
        write_fixed("SRP_TSK_MGMT", &h, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// ABORT TASK of tag 0x11 on LUN 2, as ib_srp's `srp_send_tsk_mgmt` builds it.
    const TSK_MGMT: [u8; 48] = [
        0x01, // 0: IU type SRP_TSK_MGMT
        0x00, // 1: flags
        0, 0, 0, 0, 0, 0, // 2..7: reserved
        0, 0, 0, 0, 0x80, 0, 0, 0x07, // 8..15: tag (bit 31 = TMF tag, as Linux)
        0, 0, 0, 0, // 16..19: reserved
        0x00, 0x02, 0, 0, 0, 0, 0, 0, // 20..27: LUN 2
        0, 0,    // 28..29: reserved
        0x01, // 30: function ABORT TASK
        0,    // 31: reserved
        0, 0, 0, 0, 0, 0, 0, 0x11, // 32..39: tag of task to be managed
        0, 0, 0, 0, 0, 0, 0, 0, // 40..47: reserved
    ];

    fn tsk_mgmt() -> TskMgmt {
        TskMgmt {
            flags: SolicitFlags::empty(),
            tag: Tag(0x8000_0007),
            lun: Lun([0, 2, 0, 0, 0, 0, 0, 0]),
            function: TaskMgmtFunction::AbortTask,
            task_tag: Tag(0x11),
        }
    }

    #[test]
    fn tsk_mgmt_decodes_known_bytes() {
        check::decodes(&TSK_MGMT, &tsk_mgmt());
    }

    #[test]
    fn tsk_mgmt_emits_known_bytes() {
        check::emits(&tsk_mgmt(), &TSK_MGMT);
    }

    #[test]
    fn tsk_mgmt_round_trips() {
        check::round_trips(&tsk_mgmt(), &mut Vec::new());
        let other = TskMgmt {
            flags: SolicitFlags::SCSOLNT | SolicitFlags::UCSOLNT,
            function: TaskMgmtFunction::Unknown(0x20),
            ..tsk_mgmt()
        };
        check::round_trips(&other, &mut Vec::new());
    }

    #[test]
    fn tsk_mgmt_truncated_errors() {
        check::truncation_errors::<TskMgmt>(&TSK_MGMT);
    }

    #[test]
    fn function_codes_match_srp() {
        let table = [
            (TaskMgmtFunction::AbortTask, 0x01),
            (TaskMgmtFunction::AbortTaskSet, 0x02),
            (TaskMgmtFunction::ClearTaskSet, 0x04),
            (TaskMgmtFunction::LogicalUnitReset, 0x08),
            (TaskMgmtFunction::ClearAca, 0x40),
        ];
        for (f, code) in table {
            assert_eq!(u8::from(f), code);
            assert_eq!(TaskMgmtFunction::from(code), f);
        }
    }
}
