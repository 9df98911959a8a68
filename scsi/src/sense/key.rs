//! The SENSE KEY (SPC-4): the coarse class of a CHECK CONDITION.

wirekit::open_enum! {
    /// SENSE KEY, a 4-bit field (SPC-4). `Unknown` holds 0xC (reserved) or a value
    /// above 0xF that a caller built; emit rejects the latter.
    pub enum SenseKey(u8) {
        /// NO SENSE: no specific sense key information (e.g. a progress indication).
        NoSense = 0x0,
        /// RECOVERED ERROR: the command completed after recovery.
        RecoveredError = 0x1,
        /// NOT READY: the logical unit is not accessible.
        NotReady = 0x2,
        /// MEDIUM ERROR: a flaw in the medium or the recorded data.
        MediumError = 0x3,
        /// HARDWARE ERROR: a non-recoverable hardware failure.
        HardwareError = 0x4,
        /// ILLEGAL REQUEST: an illegal parameter in the CDB or parameter data.
        IllegalRequest = 0x5,
        /// UNIT ATTENTION: a unit attention condition is reported.
        UnitAttention = 0x6,
        /// DATA PROTECT: the medium is protected against the operation.
        DataProtect = 0x7,
        /// BLANK CHECK: blank or formatted-to-end medium was encountered.
        BlankCheck = 0x8,
        /// VENDOR SPECIFIC.
        VendorSpecific = 0x9,
        /// COPY ABORTED: an EXTENDED COPY was aborted.
        CopyAborted = 0xA,
        /// ABORTED COMMAND: the device server aborted the command.
        AbortedCommand = 0xB,
        /// VOLUME OVERFLOW: a buffered device reached the end of the partition.
        VolumeOverflow = 0xD,
        /// MISCOMPARE: source data did not match the medium.
        Miscompare = 0xE,
        /// COMPLETED: the command completed (used with sense data returned with GOOD).
        Completed = 0xF,
    }
}

impl SenseKey {
    /// The SPC-4 name of the key.
    pub fn description(self) -> &'static str {
        match self {
            SenseKey::NoSense => "NO SENSE",
            SenseKey::RecoveredError => "RECOVERED ERROR",
            SenseKey::NotReady => "NOT READY",
            SenseKey::MediumError => "MEDIUM ERROR",
            SenseKey::HardwareError => "HARDWARE ERROR",
            SenseKey::IllegalRequest => "ILLEGAL REQUEST",
            SenseKey::UnitAttention => "UNIT ATTENTION",
            SenseKey::DataProtect => "DATA PROTECT",
            SenseKey::BlankCheck => "BLANK CHECK",
            SenseKey::VendorSpecific => "VENDOR SPECIFIC",
            SenseKey::CopyAborted => "COPY ABORTED",
            SenseKey::AbortedCommand => "ABORTED COMMAND",
            SenseKey::VolumeOverflow => "VOLUME OVERFLOW",
            SenseKey::Miscompare => "MISCOMPARE",
            SenseKey::Completed => "COMPLETED",
            SenseKey::Unknown(_) => "reserved",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_follow_spc4_table_49() {
        let table: [(u8, &str); 16] = [
            (0x0, "NO SENSE"),
            (0x1, "RECOVERED ERROR"),
            (0x2, "NOT READY"),
            (0x3, "MEDIUM ERROR"),
            (0x4, "HARDWARE ERROR"),
            (0x5, "ILLEGAL REQUEST"),
            (0x6, "UNIT ATTENTION"),
            (0x7, "DATA PROTECT"),
            (0x8, "BLANK CHECK"),
            (0x9, "VENDOR SPECIFIC"),
            (0xA, "COPY ABORTED"),
            (0xB, "ABORTED COMMAND"),
            (0xC, "reserved"),
            (0xD, "VOLUME OVERFLOW"),
            (0xE, "MISCOMPARE"),
            (0xF, "COMPLETED"),
        ];
        for (code, name) in table {
            let key = SenseKey::from(code);
            assert_eq!(key.description(), name);
            assert_eq!(u8::from(key), code);
            assert_eq!(key.is_known(), code != 0xC);
        }
    }
}
