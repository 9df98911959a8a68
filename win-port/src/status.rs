//! SRB status codes (srb.h; windows.md §2.4): the low six bits are the status, the two high
//! bits are flags (`SRB_STATUS_QUEUE_FROZEN`, `SRB_STATUS_AUTOSENSE_VALID`). An open code:
//! values without a name survive as they are.

use core::fmt;

/// An SRB status byte, flags included.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SrbStatus(pub u8);

macro_rules! srb_statuses {
    ($($name:ident = $value:literal,)*) => {
        impl SrbStatus {
            $(
                #[doc = concat!("`SRB_STATUS_", stringify!($name), "`")]
                pub const $name: SrbStatus = SrbStatus($value);
            )*

            /// The srb.h name of the status code (flags stripped), if it has one.
            pub fn name(self) -> Option<&'static str> {
                match self.code().0 {
                    $($value => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

srb_statuses! {
    PENDING = 0x00,
    SUCCESS = 0x01,
    ABORTED = 0x02,
    ABORT_FAILED = 0x03,
    ERROR = 0x04,
    BUSY = 0x05,
    INVALID_REQUEST = 0x06,
    INVALID_PATH_ID = 0x07,
    NO_DEVICE = 0x08,
    TIMEOUT = 0x09,
    SELECTION_TIMEOUT = 0x0a,
    COMMAND_TIMEOUT = 0x0b,
    MESSAGE_REJECTED = 0x0d,
    BUS_RESET = 0x0e,
    PARITY_ERROR = 0x0f,
    REQUEST_SENSE_FAILED = 0x10,
    NO_HBA = 0x11,
    DATA_OVERRUN = 0x12,
    UNEXPECTED_BUS_FREE = 0x13,
    PHASE_SEQUENCE_FAILURE = 0x14,
    BAD_SRB_BLOCK_LENGTH = 0x15,
    REQUEST_FLUSHED = 0x16,
    INVALID_LUN = 0x20,
    INVALID_TARGET_ID = 0x21,
    BAD_FUNCTION = 0x22,
    ERROR_RECOVERY = 0x23,
    NOT_POWERED = 0x24,
    LINK_DOWN = 0x25,
    INSUFFICIENT_RESOURCES = 0x26,
    THROTTLED_REQUEST = 0x27,
    INTERNAL_ERROR = 0x30,
}

impl SrbStatus {
    /// `SRB_STATUS_QUEUE_FROZEN`.
    pub const QUEUE_FROZEN_FLAG: u8 = 0x40;
    /// `SRB_STATUS_AUTOSENSE_VALID`: the sense buffer holds the command's sense data.
    pub const AUTOSENSE_VALID_FLAG: u8 = 0x80;

    /// `SRB_STATUS(x)`: the code without the flags.
    pub fn code(self) -> SrbStatus {
        SrbStatus(self.0 & 0x3f)
    }

    /// Whether `SRB_STATUS_AUTOSENSE_VALID` is set.
    pub fn autosense_valid(self) -> bool {
        self.0 & Self::AUTOSENSE_VALID_FLAG != 0
    }

    /// The same status with `SRB_STATUS_AUTOSENSE_VALID` set.
    pub fn with_autosense(self) -> SrbStatus {
        SrbStatus(self.0 | Self::AUTOSENSE_VALID_FLAG)
    }
}

impl fmt::Debug for SrbStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}")?,
            None => write!(f, "{:#04x}", self.code().0)?,
        }
        if self.0 & Self::QUEUE_FROZEN_FLAG != 0 {
            write!(f, "|QUEUE_FROZEN")?;
        }
        if self.autosense_valid() {
            write!(f, "|AUTOSENSE_VALID")?;
        }
        Ok(())
    }
}

impl fmt::Display for SrbStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_srb_h_and_flags_strip() {
        assert_eq!(SrbStatus::BUS_RESET.0, 0x0e);
        assert_eq!(SrbStatus::INTERNAL_ERROR.0, 0x30);
        let s = SrbStatus(0x84);
        assert_eq!(s.code(), SrbStatus::ERROR);
        assert!(s.autosense_valid());
        assert_eq!(format!("{s:?}"), "ERROR|AUTOSENSE_VALID");
        assert_eq!(SrbStatus(0x3c).name(), None, "open: unknown codes survive");
        assert_eq!(format!("{:?}", SrbStatus(0x3c)), "0x3c");
    }
}
