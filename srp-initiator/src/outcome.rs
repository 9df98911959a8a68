//! How a channel-core [`Outcome`] becomes an SRB status (windows.md §2.4; not the 2005
//! mapping of §1.9): GOOD is SUCCESS; any other SCSI status is `SRB_STATUS_ERROR` with
//! `ScsiStatus` set and, when the target sent sense, the sense copied with
//! `SRB_STATUS_AUTOSENSE_VALID`; a residual lowers `DataTransferLength` and, on GOOD, gives
//! `SRB_STATUS_DATA_OVERRUN` (StorPort's code for under- and overrun). Transport outcomes:
//! ABORT after a timeout and a channel reset → TIMEOUT; LUN reset → BUS_RESET;
//! fast_io_fail → SELECTION_TIMEOUT (a path failure to MPIO); the port lost → NO_DEVICE.

use srp::initiator::Outcome;
use srp::wire::rsp::Residual;
use win_port::{Srb, SrbStatus};

/// Sets the SRB's status, SCSI status, sense and transfer length from `outcome`.
pub(crate) fn apply<X>(srb: &Srb<X>, outcome: &Outcome) {
    let r = match outcome {
        Outcome::Done(r) => r,
        Outcome::Aborted | Outcome::TimedOut => return srb.set_status(SrbStatus::TIMEOUT),
        Outcome::Reset => return srb.set_status(SrbStatus::BUS_RESET),
        Outcome::TransportFailFast => return srb.set_status(SrbStatus::SELECTION_TIMEOUT),
        Outcome::NoConnect => return srb.set_status(SrbStatus::NO_DEVICE),
    };
    let residual = match srb.direction() {
        win_port::DataDirection::In => r.data_in_residual,
        win_port::DataDirection::Out => r.data_out_residual,
        win_port::DataDirection::None => Residual::None,
    };
    let short = match residual {
        Residual::Underflow(n) => {
            let len = srb.data_transfer_length();
            srb.set_data_transfer_length(len.saturating_sub(n as usize));
            true
        }
        Residual::Overflow(_) => true,
        Residual::None => false,
    };
    let status = u8::from(r.status);
    srb.set_scsi_status(status);
    if status == 0 {
        srb.set_status(if short {
            SrbStatus::DATA_OVERRUN
        } else {
            SrbStatus::SUCCESS
        });
    } else {
        srb.set_status(SrbStatus::ERROR);
        if !r.sense.is_empty() {
            srb.set_sense(&r.sense);
        }
    }
}
