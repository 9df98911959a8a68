//! Why an appliance did not start: every LUN that could not be opened, all at once.

use crate::backend::BackendError;
use core::fmt;
use thiserror::Error;

/// One failure while building the appliance from a valid configuration.
#[derive(Debug, Error)]
pub enum StartError {
    /// The LUN's backing store could not be opened or created.
    #[error("lun \"{lun}\": {source}")]
    Backend {
        /// The LUN's name.
        lun: String,
        /// What the backend said (names the path and the operation).
        source: BackendError,
    },
    /// The LUN's write log (`record_writes`) could not be created or continued.
    #[error("lun \"{lun}\": record_writes: {source}")]
    WriteLog {
        /// The LUN's name.
        lun: String,
        /// What went wrong (names the log file).
        source: crate::writelog::WriteLogError,
    },
    /// WRITE ATOMIC's intent log could not be opened, or its records not replayed onto the
    /// medium: the LU does not start with atomic writes possibly torn.
    #[error("lun \"{lun}\": WRITE ATOMIC's intent log: {reason}")]
    AtomicLog {
        /// The LUN.
        lun: String,
        /// What failed (opening the log, or replaying it onto the medium).
        reason: String,
    },
    /// The LUN's saved state (its saved mode page) is unreadable: it does not start on a
    /// guess.
    #[error("lun \"{lun}\": saved state: {reason}; repair or remove the file")]
    SavedState {
        /// The LUN's name.
        lun: String,
        /// What is wrong, naming the file.
        reason: String,
    },
    /// The LUN's `block_size` or `physical_block_size` does not fit its block device's
    /// geometry (appliance/geometry.rs).
    #[error("lun \"{lun}\": {why}")]
    Geometry {
        /// The LUN's name.
        lun: String,
        /// What disagrees, naming the device.
        why: String,
    },
    /// More IOCs than relative port numbers (65535).
    #[error("{0} IOCs: at most 65535 fit the relative target port space")]
    TooManyIocs(usize),
}

/// Every failure; the appliance starts only when there are none.
#[derive(Debug)]
pub struct StartErrors(pub Vec<StartError>);

impl fmt::Display for StartErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for StartErrors {}
