//! `SenseCode` (sense key, ASC, ASCQ) and the named conditions a block target and an
//! initiator use, with their SPC-4 Annex D names.

use super::SenseKey;
use core::fmt;

/// The triple that identifies a CHECK CONDITION: sense key, ADDITIONAL SENSE CODE and
/// ADDITIONAL SENSE CODE QUALIFIER (SPC-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SenseCode {
    /// SENSE KEY.
    pub key: SenseKey,
    /// ADDITIONAL SENSE CODE.
    pub asc: u8,
    /// ADDITIONAL SENSE CODE QUALIFIER.
    pub ascq: u8,
}

macro_rules! sense_codes {
    ($( $(#[$m:meta])* $name:ident = ($key:ident, $asc:literal, $ascq:literal, $text:literal); )+) => {
        impl SenseCode {
            $( $(#[$m])* pub const $name: SenseCode =
                SenseCode { key: SenseKey::$key, asc: $asc, ascq: $ascq }; )+
        }

        /// SPC-4 Annex D names of the ASC/ASCQ pairs this crate names.
        const DESCRIPTIONS: &[(u8, u8, &str)] = &[ $( ($asc, $ascq, $text), )+ ];
    };
}

sense_codes! {
    /// 0/00/00: nothing to report.
    NO_SENSE = (NoSense, 0x00, 0x00, "NO ADDITIONAL SENSE INFORMATION");
    /// 2/04/00.
    LUN_NOT_READY = (NotReady, 0x04, 0x00, "LOGICAL UNIT NOT READY, CAUSE NOT REPORTABLE");
    /// 2/04/01.
    LUN_BECOMING_READY = (NotReady, 0x04, 0x01, "LOGICAL UNIT IS IN PROCESS OF BECOMING READY");
    /// 2/04/02: the initiator should send START STOP UNIT.
    LUN_NOT_READY_INIT_REQUIRED =
        (NotReady, 0x04, 0x02, "LOGICAL UNIT NOT READY, INITIALIZING COMMAND REQUIRED");
    /// 2/04/0A: ALUA transitioning.
    ALUA_TRANSITION = (NotReady, 0x04, 0x0A,
        "LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE TRANSITION");
    /// 2/04/0B: ALUA standby.
    ALUA_STANDBY = (NotReady, 0x04, 0x0B,
        "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE");
    /// 2/04/0C: ALUA unavailable.
    ALUA_UNAVAILABLE = (NotReady, 0x04, 0x0C,
        "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE");
    /// 2/3A/00.
    MEDIUM_NOT_PRESENT = (NotReady, 0x3A, 0x00, "MEDIUM NOT PRESENT");
    /// 3/0C/00.
    WRITE_ERROR = (MediumError, 0x0C, 0x00, "WRITE ERROR");
    /// 3/11/00.
    UNRECOVERED_READ_ERROR = (MediumError, 0x11, 0x00, "UNRECOVERED READ ERROR");
    /// 4/44/00: the catch-all for a backend failure.
    INTERNAL_TARGET_FAILURE = (HardwareError, 0x44, 0x00, "INTERNAL TARGET FAILURE");
    /// 5/1A/00.
    PARAMETER_LIST_LENGTH_ERROR = (IllegalRequest, 0x1A, 0x00, "PARAMETER LIST LENGTH ERROR");
    /// 5/20/00.
    INVALID_COMMAND_OPERATION_CODE =
        (IllegalRequest, 0x20, 0x00, "INVALID COMMAND OPERATION CODE");
    /// 5/21/00.
    LBA_OUT_OF_RANGE = (IllegalRequest, 0x21, 0x00, "LOGICAL BLOCK ADDRESS OUT OF RANGE");
    /// 5/24/00.
    INVALID_FIELD_IN_CDB = (IllegalRequest, 0x24, 0x00, "INVALID FIELD IN CDB");
    /// 5/25/00.
    LUN_NOT_SUPPORTED = (IllegalRequest, 0x25, 0x00, "LOGICAL UNIT NOT SUPPORTED");
    /// 5/26/00.
    INVALID_FIELD_IN_PARAMETER_LIST =
        (IllegalRequest, 0x26, 0x00, "INVALID FIELD IN PARAMETER LIST");
    /// 5/26/01.
    PARAMETER_NOT_SUPPORTED = (IllegalRequest, 0x26, 0x01, "PARAMETER NOT SUPPORTED");
    /// 5/26/02.
    PARAMETER_VALUE_INVALID = (IllegalRequest, 0x26, 0x02, "PARAMETER VALUE INVALID");
    /// 5/26/04: PR OUT RELEASE with a TYPE or SCOPE that does not match the reservation.
    INVALID_RELEASE_OF_PERSISTENT_RESERVATION =
        (IllegalRequest, 0x26, 0x04, "INVALID RELEASE OF PERSISTENT RESERVATION");
    /// 5/39/00: MODE SELECT with SP=1.
    SAVING_PARAMETERS_NOT_SUPPORTED =
        (IllegalRequest, 0x39, 0x00, "SAVING PARAMETERS NOT SUPPORTED");
    /// 5/55/04.
    INSUFFICIENT_REGISTRATION_RESOURCES =
        (IllegalRequest, 0x55, 0x04, "INSUFFICIENT REGISTRATION RESOURCES");
    /// 6/28/00.
    NOT_READY_TO_READY_CHANGE =
        (UnitAttention, 0x28, 0x00, "NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED");
    /// 6/29/00: the unit attention every LU reports first after a reset.
    POWER_ON_RESET = (UnitAttention, 0x29, 0x00, "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED");
    /// 6/29/01.
    POWER_ON_OCCURRED = (UnitAttention, 0x29, 0x01, "POWER ON OCCURRED");
    /// 6/29/03: after a LOGICAL UNIT RESET task management function.
    BUS_DEVICE_RESET_FUNCTION_OCCURRED =
        (UnitAttention, 0x29, 0x03, "BUS DEVICE RESET FUNCTION OCCURRED");
    /// 6/29/07.
    I_T_NEXUS_LOSS_OCCURRED = (UnitAttention, 0x29, 0x07, "I_T NEXUS LOSS OCCURRED");
    /// 6/2A/00.
    PARAMETERS_CHANGED = (UnitAttention, 0x2A, 0x00, "PARAMETERS CHANGED");
    /// 6/2A/01.
    MODE_PARAMETERS_CHANGED = (UnitAttention, 0x2A, 0x01, "MODE PARAMETERS CHANGED");
    /// 6/2A/03.
    RESERVATIONS_PREEMPTED = (UnitAttention, 0x2A, 0x03, "RESERVATIONS PREEMPTED");
    /// 6/2A/04.
    RESERVATIONS_RELEASED = (UnitAttention, 0x2A, 0x04, "RESERVATIONS RELEASED");
    /// 6/2A/05.
    REGISTRATIONS_PREEMPTED = (UnitAttention, 0x2A, 0x05, "REGISTRATIONS PREEMPTED");
    /// 6/2A/06.
    ASYMMETRIC_ACCESS_STATE_CHANGED =
        (UnitAttention, 0x2A, 0x06, "ASYMMETRIC ACCESS STATE CHANGED");
    /// 6/2A/09.
    CAPACITY_DATA_HAS_CHANGED = (UnitAttention, 0x2A, 0x09, "CAPACITY DATA HAS CHANGED");
    /// 6/2F/00: commands aborted by another I_T nexus (TAS=0, or CLEAR TASK SET).
    COMMANDS_CLEARED_BY_ANOTHER_INITIATOR =
        (UnitAttention, 0x2F, 0x00, "COMMANDS CLEARED BY ANOTHER INITIATOR");
    /// 6/3F/03.
    INQUIRY_DATA_HAS_CHANGED = (UnitAttention, 0x3F, 0x03, "INQUIRY DATA HAS CHANGED");
    /// 6/3F/0E.
    REPORTED_LUNS_DATA_HAS_CHANGED =
        (UnitAttention, 0x3F, 0x0E, "REPORTED LUNS DATA HAS CHANGED");
    /// 7/27/00.
    WRITE_PROTECTED = (DataProtect, 0x27, 0x00, "WRITE PROTECTED");
    /// 7/27/07: thin provisioning ran out of space.
    SPACE_ALLOCATION_FAILED_WRITE_PROTECT =
        (DataProtect, 0x27, 0x07, "SPACE ALLOCATION FAILED WRITE PROTECT");
    /// 5/00/16: a copy with this list identifier is still running.
    OPERATION_IN_PROGRESS = (IllegalRequest, 0x00, 0x16, "OPERATION IN PROGRESS");
    /// 5/26/06: EXTENDED COPY with more CSCD descriptors than the copy manager takes.
    TOO_MANY_TARGET_DESCRIPTORS = (IllegalRequest, 0x26, 0x06, "TOO MANY TARGET DESCRIPTORS");
    /// 5/26/07.
    UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE =
        (IllegalRequest, 0x26, 0x07, "UNSUPPORTED TARGET DESCRIPTOR TYPE CODE");
    /// 5/26/08.
    TOO_MANY_SEGMENT_DESCRIPTORS = (IllegalRequest, 0x26, 0x08, "TOO MANY SEGMENT DESCRIPTORS");
    /// 5/26/09.
    UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE =
        (IllegalRequest, 0x26, 0x09, "UNSUPPORTED SEGMENT DESCRIPTOR TYPE CODE");
    /// 5/23/01: a ROD token of a type this copy manager neither makes nor takes.
    UNSUPPORTED_TOKEN_TYPE = (IllegalRequest, 0x23, 0x01, "INVALID TOKEN OPERATION, UNSUPPORTED TOKEN TYPE");
    /// 5/23/04: WRITE USING TOKEN with a token this copy manager does not know.
    TOKEN_UNKNOWN = (IllegalRequest, 0x23, 0x04, "INVALID TOKEN OPERATION, TOKEN UNKNOWN");
    /// 5/23/06: a token whose source blocks were written since it was made.
    TOKEN_REVOKED = (IllegalRequest, 0x23, 0x06, "INVALID TOKEN OPERATION, TOKEN REVOKED");
    /// 5/23/07: a token past its inactivity timeout.
    TOKEN_EXPIRED = (IllegalRequest, 0x23, 0x07, "INVALID TOKEN OPERATION, TOKEN EXPIRED");
    /// 5/23/08: a token the copy manager retired to make room for newer ones.
    TOKEN_CANCELLED = (IllegalRequest, 0x23, 0x08, "INVALID TOKEN OPERATION, TOKEN CANCELLED");
    /// 5/23/09: a token deleted by a WRITE USING TOKEN with DEL_TKN.
    TOKEN_DELETED = (IllegalRequest, 0x23, 0x09, "INVALID TOKEN OPERATION, TOKEN DELETED");
    /// 5/23/0A.
    INVALID_TOKEN_LENGTH = (IllegalRequest, 0x23, 0x0A, "INVALID TOKEN OPERATION, INVALID TOKEN LENGTH");
    /// A/0D/01: a copy failed reading or writing a copy target.
    THIRD_PARTY_DEVICE_FAILURE = (CopyAborted, 0x0D, 0x01, "THIRD PARTY DEVICE FAILURE");
    /// A/0D/02: a CSCD descriptor names no logical unit this I_T nexus reaches (or an LBA
    /// outside one); initiators then copy by READ and WRITE themselves.
    COPY_TARGET_DEVICE_NOT_REACHABLE =
        (CopyAborted, 0x0D, 0x02, "COPY TARGET DEVICE NOT REACHABLE");
    /// A/0D/03.
    INCORRECT_COPY_TARGET_DEVICE_TYPE =
        (CopyAborted, 0x0D, 0x03, "INCORRECT COPY TARGET DEVICE TYPE");
    /// B/00/00: aborted, no further detail.
    ABORTED_COMMAND = (AbortedCommand, 0x00, 0x00, "NO ADDITIONAL SENSE INFORMATION");
    /// B/08/00.
    LUN_COMMUNICATION_FAILURE = (AbortedCommand, 0x08, 0x00, "LOGICAL UNIT COMMUNICATION FAILURE");
    /// B/0E/03: a malformed transport command IU (e.g. an SRP_CMD field).
    INVALID_FIELD_IN_COMMAND_IU =
        (AbortedCommand, 0x0E, 0x03, "INVALID FIELD IN COMMAND INFORMATION UNIT");
    /// B/4B/00: a data transfer failed (e.g. an RDMA error).
    DATA_PHASE_ERROR = (AbortedCommand, 0x4B, 0x00, "DATA PHASE ERROR");
    /// B/4E/00: a new command reused the tag of one in flight.
    OVERLAPPED_COMMANDS_ATTEMPTED = (AbortedCommand, 0x4E, 0x00, "OVERLAPPED COMMANDS ATTEMPTED");
    /// E/1D/00.
    MISCOMPARE_DURING_VERIFY = (Miscompare, 0x1D, 0x00, "MISCOMPARE DURING VERIFY OPERATION");
}

impl SenseCode {
    /// Builds a code from its three parts.
    pub const fn new(key: SenseKey, asc: u8, ascq: u8) -> SenseCode {
        SenseCode { key, asc, ascq }
    }

    /// The SPC-4 Annex D text of the ASC/ASCQ pair, for the pairs this crate names; `None`
    /// for others (print them as hex).
    pub fn description(self) -> Option<&'static str> {
        DESCRIPTIONS
            .iter()
            .find(|&&(asc, ascq, _)| asc == self.asc && ascq == self.ascq)
            .map(|&(_, _, text)| text)
    }
}

/// `KEY/ASC/ASCQ` in hex, then the SPC text when known:
/// `ILLEGAL REQUEST 5/24/00 INVALID FIELD IN CDB`.
impl fmt::Display for SenseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = u8::from(self.key);
        write!(
            f,
            "{} {key:X}/{:02X}/{:02X}",
            self.key.description(),
            self.asc,
            self.ascq
        )?;
        match self.description() {
            Some(text) => write!(f, " {text}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every named constant against SPC-4 table D.1 (ASC/ASCQ assignments), with the sense
    /// key SPC-4/SBC-3 prescribe for the condition, written out independently of the macro.
    #[rustfmt::skip]
    const SPC4: &[(SenseCode, u8, u8, u8, &str)] = &[
        (SenseCode::NO_SENSE,                          0x0, 0x00, 0x00, "NO ADDITIONAL SENSE INFORMATION"),
        (SenseCode::LUN_NOT_READY,                     0x2, 0x04, 0x00, "LOGICAL UNIT NOT READY, CAUSE NOT REPORTABLE"),
        (SenseCode::LUN_BECOMING_READY,                0x2, 0x04, 0x01, "LOGICAL UNIT IS IN PROCESS OF BECOMING READY"),
        (SenseCode::LUN_NOT_READY_INIT_REQUIRED,       0x2, 0x04, 0x02, "LOGICAL UNIT NOT READY, INITIALIZING COMMAND REQUIRED"),
        (SenseCode::ALUA_TRANSITION,                   0x2, 0x04, 0x0A, "LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE TRANSITION"),
        (SenseCode::ALUA_STANDBY,                      0x2, 0x04, 0x0B, "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE"),
        (SenseCode::ALUA_UNAVAILABLE,                  0x2, 0x04, 0x0C, "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE"),
        (SenseCode::MEDIUM_NOT_PRESENT,                0x2, 0x3A, 0x00, "MEDIUM NOT PRESENT"),
        (SenseCode::WRITE_ERROR,                       0x3, 0x0C, 0x00, "WRITE ERROR"),
        (SenseCode::UNRECOVERED_READ_ERROR,            0x3, 0x11, 0x00, "UNRECOVERED READ ERROR"),
        (SenseCode::INTERNAL_TARGET_FAILURE,           0x4, 0x44, 0x00, "INTERNAL TARGET FAILURE"),
        (SenseCode::PARAMETER_LIST_LENGTH_ERROR,       0x5, 0x1A, 0x00, "PARAMETER LIST LENGTH ERROR"),
        (SenseCode::INVALID_COMMAND_OPERATION_CODE,    0x5, 0x20, 0x00, "INVALID COMMAND OPERATION CODE"),
        (SenseCode::LBA_OUT_OF_RANGE,                  0x5, 0x21, 0x00, "LOGICAL BLOCK ADDRESS OUT OF RANGE"),
        (SenseCode::INVALID_FIELD_IN_CDB,              0x5, 0x24, 0x00, "INVALID FIELD IN CDB"),
        (SenseCode::LUN_NOT_SUPPORTED,                 0x5, 0x25, 0x00, "LOGICAL UNIT NOT SUPPORTED"),
        (SenseCode::INVALID_FIELD_IN_PARAMETER_LIST,   0x5, 0x26, 0x00, "INVALID FIELD IN PARAMETER LIST"),
        (SenseCode::PARAMETER_NOT_SUPPORTED,           0x5, 0x26, 0x01, "PARAMETER NOT SUPPORTED"),
        (SenseCode::PARAMETER_VALUE_INVALID,           0x5, 0x26, 0x02, "PARAMETER VALUE INVALID"),
        (SenseCode::INVALID_RELEASE_OF_PERSISTENT_RESERVATION, 0x5, 0x26, 0x04, "INVALID RELEASE OF PERSISTENT RESERVATION"),
        (SenseCode::SAVING_PARAMETERS_NOT_SUPPORTED,   0x5, 0x39, 0x00, "SAVING PARAMETERS NOT SUPPORTED"),
        (SenseCode::INSUFFICIENT_REGISTRATION_RESOURCES, 0x5, 0x55, 0x04, "INSUFFICIENT REGISTRATION RESOURCES"),
        (SenseCode::NOT_READY_TO_READY_CHANGE,         0x6, 0x28, 0x00, "NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED"),
        (SenseCode::POWER_ON_RESET,                    0x6, 0x29, 0x00, "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED"),
        (SenseCode::POWER_ON_OCCURRED,                 0x6, 0x29, 0x01, "POWER ON OCCURRED"),
        (SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED, 0x6, 0x29, 0x03, "BUS DEVICE RESET FUNCTION OCCURRED"),
        (SenseCode::I_T_NEXUS_LOSS_OCCURRED,           0x6, 0x29, 0x07, "I_T NEXUS LOSS OCCURRED"),
        (SenseCode::PARAMETERS_CHANGED,                0x6, 0x2A, 0x00, "PARAMETERS CHANGED"),
        (SenseCode::MODE_PARAMETERS_CHANGED,           0x6, 0x2A, 0x01, "MODE PARAMETERS CHANGED"),
        (SenseCode::RESERVATIONS_PREEMPTED,            0x6, 0x2A, 0x03, "RESERVATIONS PREEMPTED"),
        (SenseCode::RESERVATIONS_RELEASED,             0x6, 0x2A, 0x04, "RESERVATIONS RELEASED"),
        (SenseCode::REGISTRATIONS_PREEMPTED,           0x6, 0x2A, 0x05, "REGISTRATIONS PREEMPTED"),
        (SenseCode::ASYMMETRIC_ACCESS_STATE_CHANGED,   0x6, 0x2A, 0x06, "ASYMMETRIC ACCESS STATE CHANGED"),
        (SenseCode::CAPACITY_DATA_HAS_CHANGED,         0x6, 0x2A, 0x09, "CAPACITY DATA HAS CHANGED"),
        (SenseCode::COMMANDS_CLEARED_BY_ANOTHER_INITIATOR, 0x6, 0x2F, 0x00, "COMMANDS CLEARED BY ANOTHER INITIATOR"),
        (SenseCode::INQUIRY_DATA_HAS_CHANGED,          0x6, 0x3F, 0x03, "INQUIRY DATA HAS CHANGED"),
        (SenseCode::REPORTED_LUNS_DATA_HAS_CHANGED,    0x6, 0x3F, 0x0E, "REPORTED LUNS DATA HAS CHANGED"),
        (SenseCode::WRITE_PROTECTED,                   0x7, 0x27, 0x00, "WRITE PROTECTED"),
        (SenseCode::SPACE_ALLOCATION_FAILED_WRITE_PROTECT, 0x7, 0x27, 0x07, "SPACE ALLOCATION FAILED WRITE PROTECT"),
        (SenseCode::OPERATION_IN_PROGRESS,             0x5, 0x00, 0x16, "OPERATION IN PROGRESS"),
        (SenseCode::TOO_MANY_TARGET_DESCRIPTORS,       0x5, 0x26, 0x06, "TOO MANY TARGET DESCRIPTORS"),
        (SenseCode::UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE, 0x5, 0x26, 0x07, "UNSUPPORTED TARGET DESCRIPTOR TYPE CODE"),
        (SenseCode::TOO_MANY_SEGMENT_DESCRIPTORS,      0x5, 0x26, 0x08, "TOO MANY SEGMENT DESCRIPTORS"),
        (SenseCode::UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE, 0x5, 0x26, 0x09, "UNSUPPORTED SEGMENT DESCRIPTOR TYPE CODE"),
        (SenseCode::UNSUPPORTED_TOKEN_TYPE,            0x5, 0x23, 0x01, "INVALID TOKEN OPERATION, UNSUPPORTED TOKEN TYPE"),
        (SenseCode::TOKEN_UNKNOWN,                     0x5, 0x23, 0x04, "INVALID TOKEN OPERATION, TOKEN UNKNOWN"),
        (SenseCode::TOKEN_REVOKED,                     0x5, 0x23, 0x06, "INVALID TOKEN OPERATION, TOKEN REVOKED"),
        (SenseCode::TOKEN_EXPIRED,                     0x5, 0x23, 0x07, "INVALID TOKEN OPERATION, TOKEN EXPIRED"),
        (SenseCode::TOKEN_CANCELLED,                   0x5, 0x23, 0x08, "INVALID TOKEN OPERATION, TOKEN CANCELLED"),
        (SenseCode::TOKEN_DELETED,                     0x5, 0x23, 0x09, "INVALID TOKEN OPERATION, TOKEN DELETED"),
        (SenseCode::INVALID_TOKEN_LENGTH,              0x5, 0x23, 0x0A, "INVALID TOKEN OPERATION, INVALID TOKEN LENGTH"),
        (SenseCode::THIRD_PARTY_DEVICE_FAILURE,        0xA, 0x0D, 0x01, "THIRD PARTY DEVICE FAILURE"),
        (SenseCode::COPY_TARGET_DEVICE_NOT_REACHABLE,  0xA, 0x0D, 0x02, "COPY TARGET DEVICE NOT REACHABLE"),
        (SenseCode::INCORRECT_COPY_TARGET_DEVICE_TYPE, 0xA, 0x0D, 0x03, "INCORRECT COPY TARGET DEVICE TYPE"),
        (SenseCode::ABORTED_COMMAND,                   0xB, 0x00, 0x00, "NO ADDITIONAL SENSE INFORMATION"),
        (SenseCode::LUN_COMMUNICATION_FAILURE,         0xB, 0x08, 0x00, "LOGICAL UNIT COMMUNICATION FAILURE"),
        (SenseCode::INVALID_FIELD_IN_COMMAND_IU,       0xB, 0x0E, 0x03, "INVALID FIELD IN COMMAND INFORMATION UNIT"),
        (SenseCode::DATA_PHASE_ERROR,                  0xB, 0x4B, 0x00, "DATA PHASE ERROR"),
        (SenseCode::OVERLAPPED_COMMANDS_ATTEMPTED,     0xB, 0x4E, 0x00, "OVERLAPPED COMMANDS ATTEMPTED"),
        (SenseCode::MISCOMPARE_DURING_VERIFY,          0xE, 0x1D, 0x00, "MISCOMPARE DURING VERIFY OPERATION"),
    ];

    #[test]
    fn constants_match_spc4_annex_d() {
        for &(code, key, asc, ascq, text) in SPC4 {
            assert_eq!(u8::from(code.key), key, "{text}: sense key");
            assert_eq!((code.asc, code.ascq), (asc, ascq), "{text}: ASC/ASCQ");
            assert_eq!(code.description(), Some(text), "{asc:02X}/{ascq:02X}");
        }
        // Every constant of the macro is in the table above.
        assert_eq!(SPC4.len(), DESCRIPTIONS.len());
    }

    #[test]
    fn display_and_unknown_pairs() {
        assert_eq!(
            SenseCode::INVALID_FIELD_IN_CDB.to_string(),
            "ILLEGAL REQUEST 5/24/00 INVALID FIELD IN CDB"
        );
        let odd = SenseCode::new(SenseKey::IllegalRequest, 0x80, 0x01);
        assert_eq!(odd.description(), None);
        assert_eq!(odd.to_string(), "ILLEGAL REQUEST 5/80/01");
    }
}
