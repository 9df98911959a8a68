//! One SCSI command through a port, waited on (the host's threads may block), and its
//! outcome classified the way a disk class driver decides what to do next.
//!
//! Contract: [`execute`] submits an EXECUTE_SCSI SRB and waits at most the SRB's timeout
//! plus a margin (the port completes every accepted SRB; the margin only guards against a
//! port bug). [`Outcome`] separates what the device answered (GOOD, CHECK CONDITION with
//! its sense, BUSY, RESERVATION CONFLICT) from transport failures, and the port giving up
//! on the device for good (NO_DEVICE: device loss). [`Outcome::retry`] is the retry policy:
//! unit attentions, BUSY / TASK SET FULL, "becoming ready" and aborted/reset commands are
//! retried (bounded, by the caller); media errors, invalid requests, fast-I/O-fail and
//! device loss are not.

use access_layer::verbs::Completion;
use srp_initiator_storport::port::{
    DataDirection, LuAddress, Port, SrbRequest, SrbResult, SrbStatus,
};
use srp_initiator_storport::srp::SrpMiniport;
use std::fmt;
use std::time::Duration;

/// Sense bytes asked for (descriptor sense fits too).
const SENSE_LEN: u8 = 96;

/// What became of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// GOOD: the data (a read's, trimmed to what was transferred).
    Good(Vec<u8>),
    /// CHECK CONDITION: sense key, ASC, ASCQ (0, 0, 0 if the target sent no sense).
    Check {
        /// Sense key.
        key: u8,
        /// Additional sense code.
        asc: u8,
        /// Its qualifier.
        ascq: u8,
    },
    /// BUSY or TASK SET FULL: try again shortly.
    Busy,
    /// RESERVATION CONFLICT.
    ReservationConflict,
    /// Another SCSI status.
    Status(u8),
    /// The command did not complete on the transport (timeout, abort, reset, fast I/O
    /// fail): the SRB status.
    Transport(SrbStatus),
    /// The port gave up on the device (device loss) or refused the request.
    NoDevice(String),
}

/// What the caller should do with an outcome that is not [`Outcome::Good`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Send it again now.
    Now,
    /// Send it again after a short pause.
    After(Duration),
    /// Give up: report the error.
    No,
}

impl Outcome {
    /// The retry policy (see the module contract).
    pub fn retry(&self) -> Retry {
        match self {
            Outcome::Good(_) => Retry::No,
            // UNIT ATTENTION: reported once per nexus; the command did not run.
            Outcome::Check { key: 0x6, .. } => Retry::Now,
            // NOT READY, becoming ready / in process of becoming ready.
            Outcome::Check {
                key: 0x2,
                asc: 0x04,
                ascq: 0x01,
            } => Retry::After(Duration::from_millis(100)),
            // ABORTED COMMAND: the target gave up on it, not on the data.
            Outcome::Check { key: 0xb, .. } => Retry::After(Duration::from_millis(10)),
            Outcome::Busy => Retry::After(Duration::from_millis(20)),
            // Timed out and aborted, or swept by a LUN/channel reset: the core already
            // escalated; the command may run again.
            Outcome::Transport(s)
                if [SrbStatus::TIMEOUT, SrbStatus::BUS_RESET, SrbStatus::ABORTED]
                    .contains(&s.code()) =>
            {
                Retry::After(Duration::from_millis(10))
            }
            _ => Retry::No,
        }
    }

    /// Whether the device is gone for good.
    pub fn is_gone(&self) -> bool {
        matches!(self, Outcome::NoDevice(_))
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Good(d) => write!(f, "GOOD ({} bytes)", d.len()),
            Outcome::Check { key, asc, ascq } => write!(
                f,
                "CHECK CONDITION {}",
                scsi::sense::SenseCode::new(scsi::sense::SenseKey::from(*key), *asc, *ascq)
            ),
            Outcome::Busy => f.write_str("BUSY"),
            Outcome::ReservationConflict => f.write_str("RESERVATION CONFLICT"),
            Outcome::Status(s) => write!(f, "SCSI status {s:#04x}"),
            Outcome::Transport(s) => {
                write!(
                    f,
                    "transport: SRB status {}",
                    s.code().name().unwrap_or("?")
                )
            }
            Outcome::NoDevice(why) => write!(f, "device gone: {why}"),
        }
    }
}

/// The (key, ASC, ASCQ) of fixed (0x70/0x71) or descriptor (0x72/0x73) sense.
pub fn sense_triple(sense: &[u8]) -> Option<(u8, u8, u8)> {
    match sense.first().map(|b| b & 0x7f) {
        Some(0x70 | 0x71) if sense.len() >= 14 => Some((sense[2] & 0x0f, sense[12], sense[13])),
        Some(0x72 | 0x73) if sense.len() >= 4 => Some((sense[1] & 0x0f, sense[2], sense[3])),
        _ => None,
    }
}

fn classify(r: SrbResult, direction: DataDirection) -> Outcome {
    let code = r.status.code();
    if code == SrbStatus::SUCCESS || (code == SrbStatus::DATA_OVERRUN && r.scsi_status == 0) {
        let mut data = r.data;
        if direction == DataDirection::In {
            data.truncate(r.data_transfer_length);
        }
        return Outcome::Good(data);
    }
    if code == SrbStatus::ERROR {
        return match r.scsi_status {
            0x02 => {
                let (key, asc, ascq) = if r.status.autosense_valid() {
                    sense_triple(&r.sense).unwrap_or((0, 0, 0))
                } else {
                    (0, 0, 0)
                };
                Outcome::Check { key, asc, ascq }
            }
            0x08 | 0x28 => Outcome::Busy,
            0x18 => Outcome::ReservationConflict,
            s => Outcome::Status(s),
        };
    }
    if [
        SrbStatus::NO_DEVICE,
        SrbStatus::NO_HBA,
        SrbStatus::INVALID_LUN,
    ]
    .contains(&code)
    {
        return Outcome::NoDevice(format!("SRB status {}", code.name().unwrap_or("?")));
    }
    Outcome::Transport(r.status)
}

/// Submits `cdb` for `lu`: `data` is the bytes to write (`Out`) or a buffer of the
/// transfer length (`In`); `timeout` is the SRB's TimeOutValue. Wait with [`finish`].
pub fn submit(
    port: &Port<SrpMiniport>,
    lu: LuAddress,
    cdb: &[u8],
    direction: DataDirection,
    data: Vec<u8>,
    timeout: Duration,
) -> Result<Completion<SrbResult>, Outcome> {
    let mut req = SrbRequest::scsi(lu, cdb, direction, data).with_timeout(timeout);
    req.sense_len = SENSE_LEN;
    port.submit(req)
        .map_err(|e| Outcome::NoDevice(format!("the port refused the request: {e}")))
}

/// Waits for a request [`submit`] made with the same `direction` and `timeout`.
pub fn finish(
    completion: &Completion<SrbResult>,
    direction: DataDirection,
    timeout: Duration,
) -> Outcome {
    // The port times the SRB out into a bus reset; the margin covers the reset itself.
    match completion.wait_timeout(timeout + Duration::from_secs(30)) {
        Ok(r) => classify(r, direction),
        Err(e) => Outcome::NoDevice(format!("the request never completed: {e}")),
    }
}

/// Runs `cdb` on `lu` and waits ([`submit`] then [`finish`]).
pub fn execute(
    port: &Port<SrpMiniport>,
    lu: LuAddress,
    cdb: &[u8],
    direction: DataDirection,
    data: Vec<u8>,
    timeout: Duration,
) -> Outcome {
    match submit(port, lu, cdb, direction, data, timeout) {
        Ok(c) => finish(&c, direction, timeout),
        Err(o) => o,
    }
}

/// [`execute`] with the retry policy, at most `tries` times.
pub fn execute_retrying(
    port: &Port<SrpMiniport>,
    lu: LuAddress,
    cdb: &[u8],
    direction: DataDirection,
    data: &[u8],
    timeout: Duration,
    tries: u32,
) -> Outcome {
    let mut last = Outcome::Status(0xff);
    for _ in 0..tries.max(1) {
        last = execute(port, lu, cdb, direction, data.to_vec(), timeout);
        match last.retry() {
            Retry::No => return last,
            Retry::Now => {}
            Retry::After(d) => std::thread::sleep(d),
        }
        if matches!(last, Outcome::Good(_)) {
            return last;
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(
        status: SrbStatus,
        scsi_status: u8,
        sense: Vec<u8>,
        data: Vec<u8>,
        len: usize,
    ) -> SrbResult {
        SrbResult {
            id: srp_initiator_storport::port::SrbId(1),
            status,
            scsi_status,
            sense,
            data,
            data_transfer_length: len,
        }
    }

    #[test]
    fn statuses_classify_and_retry_as_a_disk_driver_would() {
        let good = classify(
            result(SrbStatus::SUCCESS, 0, vec![], vec![1, 2, 3, 4], 4),
            DataDirection::In,
        );
        assert_eq!(good, Outcome::Good(vec![1, 2, 3, 4]));
        let short = classify(
            result(SrbStatus::DATA_OVERRUN, 0, vec![], vec![1, 2, 3, 4], 2),
            DataDirection::In,
        );
        assert_eq!(short, Outcome::Good(vec![1, 2]));
        let mut fixed = vec![0u8; 18];
        fixed[0] = 0x70;
        fixed[2] = 0x6;
        fixed[12] = 0x29;
        let ua = classify(
            result(
                SrbStatus::ERROR.with_autosense(),
                2,
                fixed.clone(),
                vec![],
                0,
            ),
            DataDirection::None,
        );
        assert_eq!(
            ua,
            Outcome::Check {
                key: 6,
                asc: 0x29,
                ascq: 0
            }
        );
        assert_eq!(ua.retry(), Retry::Now);
        fixed[2] = 0x3;
        fixed[12] = 0x11;
        let medium = classify(
            result(SrbStatus::ERROR.with_autosense(), 2, fixed, vec![], 0),
            DataDirection::None,
        );
        assert_eq!(
            medium.retry(),
            Retry::No,
            "a medium error is the device's answer"
        );
        let desc = vec![0x72, 0x5, 0x24, 0x00, 0, 0, 0, 0];
        assert_eq!(sense_triple(&desc), Some((5, 0x24, 0)));
        assert_eq!(
            classify(
                result(SrbStatus::ERROR, 0x28, vec![], vec![], 0),
                DataDirection::None
            ),
            Outcome::Busy
        );
        let ff = classify(
            result(SrbStatus::SELECTION_TIMEOUT, 0, vec![], vec![], 0),
            DataDirection::None,
        );
        assert_eq!(
            ff.retry(),
            Retry::No,
            "fast I/O fail is reported, not retried"
        );
        let gone = classify(
            result(SrbStatus::NO_DEVICE, 0, vec![], vec![], 0),
            DataDirection::None,
        );
        assert!(gone.is_gone());
        let reset = classify(
            result(SrbStatus::BUS_RESET, 0, vec![], vec![], 0),
            DataDirection::None,
        );
        assert!(matches!(reset.retry(), Retry::After(_)));
    }
}
