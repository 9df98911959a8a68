//! The SRP DSM: [`Dsm`] for SPC-3 logical units behind SRP targets, with MSDSM's error
//! rules (windows.md §4.2):
//! - failover: the path failed (fast I/O fail), the device is gone on that path (device
//!   loss), CHECK CONDITION with no sense (cause not reportable), LOGICAL UNIT NOT
//!   SUPPORTED on this path, NOT READY "target port in standby / unavailable state"
//!   (04/0B, 04/0C: ALUA), and a transport failure that persists past the retries;
//! - retry: unit attention, BUSY / TASK SET FULL, NOT READY "becoming ready" and ALUA
//!   "in transition" (04/0A), ABORTED COMMAND, a command timed out or reset by error
//!   recovery (bounded by [`SrpDsm::retries`]);
//! - surface: every other answer of the device (medium error, illegal request, data
//!   protect, reservation conflict, …): another path would get the same answer.
#[allow(unused_imports)]
use crate::prelude::*;

use crate::alua::{AluaState, supports_alua};
use crate::dsm::{Decline, Dsm, DsmIdentifier, Verdict};
use crate::identity::{identity, port_and_group};
use crate::outcome::{Outcome, TransportKind};
use core::time::Duration;

/// The SRP DSM.
#[derive(Debug, Clone)]
pub struct SrpDsm {
    /// Sends of one command on retryable answers before it is surfaced (or, for transport
    /// failures, failed over).
    pub retries: u32,
    /// The pause before a retry.
    pub retry_interval: Duration,
}

impl Default for SrpDsm {
    fn default() -> SrpDsm {
        SrpDsm {
            retries: 5,
            retry_interval: Duration::from_millis(20),
        }
    }
}

impl Dsm for SrpDsm {
    fn inquire(
        &self,
        inquiry: &[u8],
        vpd83: &[u8],
        nexus: Option<&str>,
    ) -> Result<DsmIdentifier, Decline> {
        if inquiry.len() < 36 {
            return Err(Decline::ShortInquiry(inquiry.len()));
        }
        let kind = inquiry[0] & 0x1f;
        if inquiry[0] >> 5 != 0 || kind != 0 {
            return Err(Decline::NotADisk(inquiry[0]));
        }
        let identity = identity(vpd83)
            .or_else(|| nexus.map(|n| format!("nexus.{n}")))
            .ok_or(Decline::NoIdentity)?;
        let (relative_port, port_group) = port_and_group(vpd83);
        Ok(DsmIdentifier {
            identity,
            alua: supports_alua(inquiry),
            relative_port,
            port_group,
        })
    }

    fn compare_devices(&self, a: &DsmIdentifier, b: &DsmIdentifier) -> bool {
        a.identity == b.identity
    }

    fn is_path_active(&self, usable: bool, alua: Option<AluaState>) -> bool {
        usable && alua.is_none_or(AluaState::serves_io)
    }

    fn tier(&self, alua: Option<AluaState>) -> u8 {
        match alua {
            Some(AluaState::ActiveNonOptimized) => 1,
            _ => 0,
        }
    }

    fn interpret_error(&self, outcome: &Outcome, tries: u32) -> Verdict {
        let retry = |v: Verdict| {
            if tries < self.retries {
                v
            } else {
                Verdict::Surface
            }
        };
        match outcome {
            Outcome::Good(_) => Verdict::Done,
            Outcome::Check {
                key: 0,
                asc: 0,
                ascq: 0,
            } => Verdict::Failover,
            Outcome::Check {
                key: 0x5,
                asc: 0x25,
                ascq: 0,
            } => Verdict::Failover,
            // ALUA: this port is standby or unavailable (SPC-4 5.15.2); another port serves.
            Outcome::Check {
                key: 0x2,
                asc: 0x04,
                ascq: 0x0b | 0x0c,
            } => Verdict::Failover,
            Outcome::Check { key: 0x6, .. } => retry(Verdict::Retry(Duration::ZERO)),
            Outcome::Check {
                key: 0x2,
                asc: 0x04,
                ascq: 0x01 | 0x0a,
            } => retry(Verdict::Retry(self.retry_interval * 5)),
            Outcome::Check { key: 0xb, .. } => retry(Verdict::Retry(self.retry_interval)),
            Outcome::Busy => retry(Verdict::Retry(self.retry_interval)),
            Outcome::Check { .. } | Outcome::ReservationConflict | Outcome::Status(_) => {
                Verdict::Surface
            }
            Outcome::Transport {
                kind: TransportKind::PathFailed,
                ..
            }
            | Outcome::NoDevice(_) => Verdict::Failover,
            Outcome::Transport { .. } if tries < self.retries => {
                Verdict::Retry(self.retry_interval)
            }
            Outcome::Transport { .. } => Verdict::Failover,
        }
    }

    fn path_verify_cdb(&self) -> Vec<u8> {
        vec![0; 6]
    }

    fn path_verified(&self, outcome: &Outcome) -> bool {
        // A unit attention proves the path works as well as GOOD does.
        matches!(outcome, Outcome::Good(_) | Outcome::Check { key: 0x6, .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(key: u8, asc: u8, ascq: u8) -> Outcome {
        Outcome::Check { key, asc, ascq }
    }

    #[test]
    fn errors_fail_over_retry_or_surface_as_msdsm() {
        let d = SrpDsm::default();
        let path_failed = Outcome::Transport {
            kind: TransportKind::PathFailed,
            detail: "SELECTION_TIMEOUT".into(),
        };
        assert_eq!(d.interpret_error(&path_failed, 0), Verdict::Failover);
        assert_eq!(
            d.interpret_error(&Outcome::NoDevice("lost".into()), 0),
            Verdict::Failover
        );
        assert_eq!(d.interpret_error(&check(0, 0, 0), 0), Verdict::Failover);
        assert_eq!(
            d.interpret_error(&check(6, 0x29, 0), 0),
            Verdict::Retry(Duration::ZERO)
        );
        assert_eq!(
            d.interpret_error(&check(6, 0x29, 0), 5),
            Verdict::Surface,
            "bounded"
        );
        assert!(matches!(
            d.interpret_error(&check(2, 4, 0x0a), 0),
            Verdict::Retry(_)
        ));
        assert_eq!(
            d.interpret_error(&check(2, 4, 0x0b), 0),
            Verdict::Failover,
            "port standby"
        );
        assert_eq!(
            d.interpret_error(&check(2, 4, 0x0c), 0),
            Verdict::Failover,
            "unavailable"
        );
        assert!(matches!(
            d.interpret_error(&Outcome::Busy, 1),
            Verdict::Retry(_)
        ));
        assert_eq!(
            d.interpret_error(&check(3, 0x11, 0), 0),
            Verdict::Surface,
            "medium error"
        );
        assert_eq!(
            d.interpret_error(&Outcome::ReservationConflict, 0),
            Verdict::Surface
        );
        let timeout = Outcome::Transport {
            kind: TransportKind::Timeout,
            detail: "TIMEOUT".into(),
        };
        assert!(matches!(d.interpret_error(&timeout, 0), Verdict::Retry(_)));
        assert_eq!(d.interpret_error(&timeout, 5), Verdict::Failover);
        assert_eq!(d.interpret_error(&Outcome::Good(vec![]), 0), Verdict::Done);
    }

    #[test]
    fn claims_disks_with_an_identity() {
        let d = SrpDsm::default();
        let mut inq = vec![0u8; 36];
        inq[5] = 0x10;
        let mut vpd = vec![0, 0x83, 0, 20, 1, 0x03, 0, 16];
        vpd.extend([0x60; 16]);
        let id = d.inquire(&inq, &vpd, Some("x")).expect("claimed");
        assert!(id.identity.starts_with("naa.6060"));
        assert!(id.alua);
        assert!(d.compare_devices(&id, &id.clone()));
        assert_eq!(
            d.inquire(&inq, &[0, 0x83, 0, 0], None),
            Err(Decline::NoIdentity)
        );
        // No LU designator: the target port and LUN name it.
        assert_eq!(
            d.inquire(&inq, &[0, 0x83, 0, 0], Some("0x1234-lun0"))
                .map(|i| i.identity),
            Ok("nexus.0x1234-lun0".to_owned())
        );
        inq[0] = 0x05;
        assert_eq!(d.inquire(&inq, &vpd, None), Err(Decline::NotADisk(5)));
        assert_eq!(
            d.inquire(&[0; 8], &vpd, None),
            Err(Decline::ShortInquiry(8))
        );
        assert!(!d.is_path_active(true, Some(AluaState::Standby)));
        assert!(d.is_path_active(true, None));
        assert_eq!(d.tier(Some(AluaState::ActiveNonOptimized)), 1);
    }
}
