//! One SCSI command through a port, waited on (the host's threads may block), and its
//! outcome classified ([`mpio::Outcome`]) for the multipath DSM to judge.
//!
//! Contract: [`execute`] submits an EXECUTE_SCSI SRB and waits at most the SRB's timeout
//! plus a margin (the port completes every accepted SRB; the margin only guards against a
//! port bug). The outcome separates what the device answered (GOOD, CHECK CONDITION with
//! its sense, BUSY, RESERVATION CONFLICT) from transport failures — SELECTION_TIMEOUT (the
//! channel's fast I/O fail) is a path failure, TIMEOUT and BUS_RESET are commands swept by
//! error recovery — and from the port giving up on the device (NO_DEVICE: device loss).
//! [`execute_retrying`] retries what a disk driver retries (unit attention, BUSY, becoming
//! ready, a reset), for the scan's commands; I/O retries are the DSM's.

use crate::adapter::HostAdapter;
use access_layer::verbs::Completion;
pub use mpio::{Outcome, TransportKind};
use srp_initiator_storport::port::{
    DataDirection, LuAddress, SrbData, SrbRequest, SrbResult, SrbStatus,
};
use std::time::Duration;

/// Sense bytes asked for (descriptor sense fits too).
const SENSE_LEN: u8 = 96;

/// What the scan's retry loop does with an outcome that is not GOOD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Send it again now.
    Now,
    /// Send it again after a short pause.
    After(Duration),
    /// Give up: report the error.
    No,
}

/// The scan's retry policy (see the module contract).
pub fn retry(outcome: &Outcome) -> Retry {
    match outcome {
        // UNIT ATTENTION: reported once per nexus; the command did not run.
        Outcome::Check { key: 0x6, .. } => Retry::Now,
        // NOT READY, becoming ready.
        Outcome::Check {
            key: 0x2,
            asc: 0x04,
            ascq: 0x01,
        } => Retry::After(Duration::from_millis(100)),
        // ABORTED COMMAND: the target gave up on it, not on the data.
        Outcome::Check { key: 0xb, .. } => Retry::After(Duration::from_millis(10)),
        Outcome::Busy => Retry::After(Duration::from_millis(20)),
        Outcome::Transport {
            kind: TransportKind::Timeout | TransportKind::Reset,
            ..
        } => Retry::After(Duration::from_millis(10)),
        _ => Retry::No,
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

/// The outcome of `r` with its data copied out (a read's, cut to what came): what a
/// caller that does not wait (the whole-stack simulator) makes of a completed request.
pub fn classify(r: SrbResult, direction: DataDirection) -> Outcome {
    match judge(&r) {
        Outcome::Good(_) if direction == DataDirection::In => {
            let mut data = vec![0; r.data_transfer_length.min(r.data.len())];
            match r.data.read(0, &mut data) {
                Ok(()) => Outcome::Good(data),
                Err(e) => Outcome::Transport {
                    kind: TransportKind::Other,
                    detail: format!("read data: {e}"),
                },
            }
        }
        other => other,
    }
}

/// The outcome of `r`'s status; GOOD carries no data (the caller takes it from the buffer).
fn judge(r: &SrbResult) -> Outcome {
    let code = r.status.code();
    if code == SrbStatus::SUCCESS || (code == SrbStatus::DATA_OVERRUN && r.scsi_status == 0) {
        return Outcome::Good(Vec::new());
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
    let name = code.name().unwrap_or("?");
    if [
        SrbStatus::NO_DEVICE,
        SrbStatus::NO_HBA,
        SrbStatus::INVALID_LUN,
    ]
    .contains(&code)
    {
        return Outcome::NoDevice(format!("SRB status {name}"));
    }
    let kind = if code == SrbStatus::SELECTION_TIMEOUT {
        TransportKind::PathFailed
    } else if code == SrbStatus::TIMEOUT || code == SrbStatus::ABORTED {
        TransportKind::Timeout
    } else if code == SrbStatus::BUS_RESET {
        TransportKind::Reset
    } else {
        TransportKind::Other
    };
    Outcome::Transport {
        kind,
        detail: format!("SRB status {name}"),
    }
}

/// Whatever takes an SRB and completes it once: a login's [`HostAdapter`] (either driver
/// model), or an emulated StorPort port driven directly (the simulator, benchmarks).
pub trait SrbPort {
    /// Hands `req` to the port; why not, if it refused.
    fn submit_srb(&self, req: SrbRequest) -> Result<Completion<SrbResult>, String>;
}

impl SrbPort for HostAdapter {
    fn submit_srb(&self, req: SrbRequest) -> Result<Completion<SrbResult>, String> {
        self.submit(req)
    }
}

impl<M: srp_initiator_storport::port::Miniport> SrbPort for srp_initiator_storport::port::Port<M> {
    fn submit_srb(&self, req: SrbRequest) -> Result<Completion<SrbResult>, String> {
        self.submit(req).map_err(|e| e.to_string())
    }
}

impl<T: SrbPort + ?Sized> SrbPort for std::sync::Arc<T> {
    fn submit_srb(&self, req: SrbRequest) -> Result<Completion<SrbResult>, String> {
        (**self).submit_srb(req)
    }
}

/// Submits `cdb` for `lu`: `data` is the bytes to write (`Out`) or a buffer of the
/// transfer length (`In`) — pages of the port's system memory for the data path, bytes
/// the port copies in for control commands; `timeout` is the SRB's TimeOutValue. Wait
/// with [`finish`] or [`finish_read`].
pub fn submit(
    port: &impl SrbPort,
    lu: LuAddress,
    cdb: &[u8],
    direction: DataDirection,
    data: impl Into<SrbData>,
    timeout: Duration,
) -> Result<Completion<SrbResult>, Outcome> {
    let mut req = SrbRequest::scsi(lu, cdb, direction, data).with_timeout(timeout);
    req.sense_len = SENSE_LEN;
    port.submit_srb(req)
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

/// Waits for a read [`submit`] made with `timeout`, its data copied straight from the
/// SRB's pages into `out` (a read that brought less than `out` is a failure).
pub fn finish_read(
    completion: &Completion<SrbResult>,
    timeout: Duration,
    out: &mut [u8],
) -> Outcome {
    match completion.wait_timeout(timeout + Duration::from_secs(30)) {
        Ok(r) => classify_read(&r, out),
        Err(e) => Outcome::NoDevice(format!("the request never completed: {e}")),
    }
}

/// The outcome of a completed read whose data goes straight from the SRB's pages into
/// `out` (a read that brought less than `out` is a failure).
pub fn classify_read(r: &SrbResult, out: &mut [u8]) -> Outcome {
    match judge(r) {
        Outcome::Good(_) if r.data_transfer_length < out.len() => Outcome::Transport {
            kind: TransportKind::Other,
            detail: format!(
                "short read: {} of {} bytes",
                r.data_transfer_length,
                out.len()
            ),
        },
        Outcome::Good(d) => match r.data.read(0, out) {
            Ok(()) => Outcome::Good(d),
            Err(e) => Outcome::Transport {
                kind: TransportKind::Other,
                detail: format!("read data: {e}"),
            },
        },
        other => other,
    }
}

/// The READ(16) or WRITE(16) CDB of `blocks` blocks at `lba` (built on the stack).
pub fn rw_cdb(read: bool, lba: u64, blocks: u32, fua: bool) -> scsi::CdbBytes {
    use scsi::cdb::{Command, ReadWrite, RwCdb};
    use wirekit::WireRepr;
    let rw = ReadWrite {
        cdb: RwCdb::Sixteen,
        lba: scsi::Lba(lba),
        blocks: scsi::BlockCount(blocks),
        dpo: false,
        fua,
    };
    let c = if read {
        Command::Read(rw)
    } else {
        Command::Write(rw)
    };
    let mut b = [0u8; 16];
    // A READ(16)/WRITE(16) always fits its 16 bytes.
    let n = c.emit(&mut b).unwrap_or(0);
    b[..n].into()
}

/// Runs `cdb` on `lu` and waits ([`submit`] then [`finish`]).
pub fn execute(
    port: &impl SrbPort,
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
    port: &impl SrbPort,
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
        match retry(&last) {
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
            data: srp_initiator_storport::port::SystemMemory::new(1)
                .alloc_from(&data)
                .expect("fits"),
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
        assert_eq!(retry(&ua), Retry::Now);
        fixed[2] = 0x3;
        fixed[12] = 0x11;
        let medium = classify(
            result(SrbStatus::ERROR.with_autosense(), 2, fixed, vec![], 0),
            DataDirection::None,
        );
        assert_eq!(
            retry(&medium),
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
        assert!(matches!(
            ff,
            Outcome::Transport {
                kind: TransportKind::PathFailed,
                ..
            }
        ));
        assert_eq!(
            retry(&ff),
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
        assert!(matches!(retry(&reset), Retry::After(_)));
    }
}
