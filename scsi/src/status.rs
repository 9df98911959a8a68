//! SAM status codes (SAM-5): the byte a target returns with every command.

wirekit::open_enum! {
    /// The STATUS byte of a completed command (SAM-5).
    pub enum Status(u8) {
        /// GOOD: the command completed without error.
        Good = 0x00,
        /// CHECK CONDITION: sense data describes what went wrong.
        CheckCondition = 0x02,
        /// CONDITION MET: a PRE-FETCH found the blocks already cached.
        ConditionMet = 0x04,
        /// BUSY: the logical unit cannot accept the command now.
        Busy = 0x08,
        /// RESERVATION CONFLICT: a reservation held by another I_T nexus forbids the command.
        ReservationConflict = 0x18,
        /// TASK SET FULL: the task set has no room for this command.
        TaskSetFull = 0x28,
        /// ACA ACTIVE: an auto contingent allegiance is in effect.
        AcaActive = 0x30,
        /// TASK ABORTED: the command was aborted by another I_T nexus (TAS=1).
        TaskAborted = 0x40,
    }
}

impl Status {
    /// The SAM-5 name of the status.
    pub fn description(self) -> &'static str {
        match self {
            Status::Good => "GOOD",
            Status::CheckCondition => "CHECK CONDITION",
            Status::ConditionMet => "CONDITION MET",
            Status::Busy => "BUSY",
            Status::ReservationConflict => "RESERVATION CONFLICT",
            Status::TaskSetFull => "TASK SET FULL",
            Status::AcaActive => "ACA ACTIVE",
            Status::TaskAborted => "TASK ABORTED",
            Status::Unknown(_) => "reserved or obsolete status",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SAM-5, code and name.
    const SAM5: [(u8, Status, &str); 8] = [
        (0x00, Status::Good, "GOOD"),
        (0x02, Status::CheckCondition, "CHECK CONDITION"),
        (0x04, Status::ConditionMet, "CONDITION MET"),
        (0x08, Status::Busy, "BUSY"),
        (0x18, Status::ReservationConflict, "RESERVATION CONFLICT"),
        (0x28, Status::TaskSetFull, "TASK SET FULL"),
        (0x30, Status::AcaActive, "ACA ACTIVE"),
        (0x40, Status::TaskAborted, "TASK ABORTED"),
    ];

    #[test]
    fn values_follow_sam5() {
        for (code, status, name) in SAM5 {
            assert_eq!(Status::from(code), status, "{name}");
            assert_eq!(u8::from(status), code, "{name}");
            assert_eq!(status.description(), name);
        }
    }

    #[test]
    fn obsolete_codes_survive() {
        // 0x10 INTERMEDIATE and 0x14 INTERMEDIATE-CONDITION MET are obsolete (SAM-5).
        assert_eq!(Status::from(0x10), Status::Unknown(0x10));
        assert_eq!(u8::from(Status::Unknown(0x14)), 0x14);
    }
}
