//! Persistent reservations (SPC-4 5.13): the per-LU state, who holds what, and the
//! conflict rule every command passes through before it runs.
//!
//! Registrations are per I_T nexus ([`ItNexus`]: initiator port identifier and relative
//! target port). The state sits in the [`LogicalUnit`] behind an `RwLock`: the conflict
//! check of every command reads it, PERSISTENT RESERVE OUT writes it, so a service action
//! is atomic with respect to every other command and to racing service actions.
//!
//! Files: `conflict` (which commands a reservation stops), `cdb_out` (PERSISTENT
//! RESERVE OUT), `cdb_in` (PERSISTENT RESERVE IN), `attention` (the unit attentions a
//! service action establishes, [`super::ua`]), `scsi2` (RESERVE/RELEASE, the SCSI-2
//! reservation, and how it meets persistent reservations).
//!
//! - APTPL (`persist`): on a LU with a state file (every LU of a daemon: `[target]
//!   state_dir`), APTPL=1 in a REGISTER makes the state persist through power loss; REPORT
//!   CAPABILITIES says PTPL_C=1 and PTPL_A as it stands. Without a state file APTPL=1 is
//!   INVALID FIELD IN PARAMETER LIST and PTPL_C=0.
//!
//! Not here (documented choices):
//! - SPEC_I_PT: INVALID FIELD IN PARAMETER LIST (SIP_C=0).
//! - REGISTER AND MOVE: not routed (the engine's table drops it), so INVALID FIELD IN CDB
//!   at the SERVICE ACTION and REPORT SUPPORTED OPERATION CODES says "not supported".
//! - PREEMPT AND ABORT behaves as PREEMPT and names the preempted I_T nexuses in
//!   [`super::CmdOutput::abort_nexuses`]; aborting their tasks is the transport's job
//!   ([`crate::io::settle_aborts`]).

pub(crate) mod attention;
pub(crate) mod cdb_in;
pub(crate) mod cdb_out;
pub(crate) mod conflict;
pub mod persist;
pub(crate) mod scsi2;
pub mod shared;

use super::{CmdOutput, LogicalUnit, Nexus};
use crate::lu::RelativePortId;
use scsi::Status;
use scsi::cdb::PrType;
use srp::wire::PortId;
use std::sync::{PoisonError, RwLockReadGuard, RwLockWriteGuard};

/// At most this many registrations per LU; past it REGISTER is INSUFFICIENT REGISTRATION
/// RESOURCES, so an initiator cannot grow the state without bound.
pub const MAX_REGISTRATIONS: usize = 1024;

/// An I_T nexus as persistent reservations name it (SPC-4 5.13.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItNexus {
    /// The SRP initiator port identifier.
    pub initiator: PortId,
    /// The target port the initiator reaches the LU through.
    pub port: RelativePortId,
}

/// A reservation TYPE this device server supports (SPC-4 Table 47); the CDB's open
/// [`PrType`] narrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResType {
    /// 1h: Write Exclusive.
    WriteExclusive = 0x1,
    /// 3h: Exclusive Access.
    ExclusiveAccess = 0x3,
    /// 5h: Write Exclusive - Registrants Only.
    WriteExclusiveRegistrantsOnly = 0x5,
    /// 6h: Exclusive Access - Registrants Only.
    ExclusiveAccessRegistrantsOnly = 0x6,
    /// 7h: Write Exclusive - All Registrants.
    WriteExclusiveAllRegistrants = 0x7,
    /// 8h: Exclusive Access - All Registrants.
    ExclusiveAccessAllRegistrants = 0x8,
}

impl ResType {
    /// The supported type `t` names, if any.
    pub fn from_pr(t: PrType) -> Option<ResType> {
        use ResType as R;
        Some(match t {
            PrType::WriteExclusive => R::WriteExclusive,
            PrType::ExclusiveAccess => R::ExclusiveAccess,
            PrType::WriteExclusiveRegistrantsOnly => R::WriteExclusiveRegistrantsOnly,
            PrType::ExclusiveAccessRegistrantsOnly => R::ExclusiveAccessRegistrantsOnly,
            PrType::WriteExclusiveAllRegistrants => R::WriteExclusiveAllRegistrants,
            PrType::ExclusiveAccessAllRegistrants => R::ExclusiveAccessAllRegistrants,
            PrType::Unknown(_) => return None,
        })
    }

    /// All-registrants types: every registered I_T nexus is a holder (SPC-4 5.13.10).
    pub fn all_registrants(self) -> bool {
        matches!(
            self,
            ResType::WriteExclusiveAllRegistrants | ResType::ExclusiveAccessAllRegistrants
        )
    }

    /// Registrants-only or all-registrants: registered I_T nexuses have full access.
    pub fn registrants_access(self) -> bool {
        !matches!(self, ResType::WriteExclusive | ResType::ExclusiveAccess)
    }

    /// Exclusive Access flavours: reads conflict too.
    pub fn exclusive_access(self) -> bool {
        matches!(
            self,
            ResType::ExclusiveAccess
                | ResType::ExclusiveAccessRegistrantsOnly
                | ResType::ExclusiveAccessAllRegistrants
        )
    }
}

/// One registered I_T nexus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Registration {
    pub(crate) nexus: ItNexus,
    pub(crate) key: u64,
    /// Registered by a REGISTER with ALL_TG_PT=1: one of a set, one per target port, that
    /// changes key and unregisters together (as LIO's ALL_TG_PT list).
    pub(crate) all_tg_pt: bool,
}

/// The persistent reservation, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reservation {
    /// The I_T nexus that reserved (for all-registrants types every registrant holds it).
    pub(crate) holder: ItNexus,
    pub(crate) kind: ResType,
}

/// A LU's persistent reservation state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PrState {
    /// PRGENERATION (SPC-4 6.15.2): wraps.
    pub(crate) generation: u32,
    /// In registration order (READ KEYS and READ FULL STATUS report them so).
    pub(crate) regs: Vec<Registration>,
    pub(crate) res: Option<Reservation>,
    /// PTPL_A: the last successful REGISTER had APTPL=1; the state is kept in the LU's
    /// state file ([`persist`]).
    pub(crate) ptpl: bool,
    /// The SCSI-2 reservation's holder (`scsi2`); never persisted.
    pub(crate) scsi2: Option<ItNexus>,
}

impl PrState {
    /// The registration of `n`.
    pub(crate) fn registration(&self, n: ItNexus) -> Option<&Registration> {
        self.regs.iter().find(|r| r.nexus == n)
    }

    /// Whether `n` is a reservation holder (SPC-4 5.13.10).
    pub(crate) fn is_holder(&self, n: ItNexus) -> bool {
        match self.res {
            None => false,
            Some(r) if r.kind.all_registrants() => self.registration(n).is_some(),
            Some(r) => r.holder == n,
        }
    }

    /// Removes every registration `gone` selects and returns their I_T nexuses; then drops
    /// a reservation whose holder went (SPC-4 5.13.11.3: for all-registrants types, only
    /// when the last registration goes).
    pub(crate) fn remove(&mut self, gone: impl Fn(&Registration) -> bool) -> Vec<ItNexus> {
        let mut removed = Vec::new();
        self.regs.retain(|r| {
            let g = gone(r);
            if g {
                removed.push(r.nexus);
            }
            !g
        });
        if let Some(r) = self.res {
            let lost = if r.kind.all_registrants() {
                self.regs.is_empty()
            } else {
                self.registration(r.holder).is_none()
            };
            if lost {
                self.res = None;
            }
        }
        removed
    }

    pub(crate) fn bump(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }
}

/// RESERVATION CONFLICT: no sense, no data (SAM-5 5.3.1).
pub(crate) fn reservation_conflict() -> CmdOutput {
    CmdOutput {
        status: Status::ReservationConflict,
        ..CmdOutput::good(0)
    }
}

impl Nexus<'_> {
    /// The I_T nexus persistent reservations know this one by.
    pub fn it_nexus(&self) -> ItNexus {
        ItNexus {
            initiator: self.initiator,
            port: self.port.relative_port,
        }
    }
}

impl LogicalUnit {
    /// The PR state for reading.
    pub(crate) fn pr_read(&self) -> RwLockReadGuard<'_, PrState> {
        // Service actions check everything before they change anything and never panic
        // midway, so a poisoned lock still guards a consistent state.
        self.pr.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The PR state for a service action.
    pub(crate) fn pr_write(&self) -> RwLockWriteGuard<'_, PrState> {
        self.pr.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The unit tests' nexuses.
#[cfg(test)]
impl ItNexus {
    /// Initiator port ID `[i; 16]` through relative target port `port`.
    pub(crate) fn test(i: u8, port: u16) -> ItNexus {
        ItNexus {
            initiator: PortId([i; 16]),
            port: RelativePortId(port),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(n: ItNexus, key: u64) -> Registration {
        Registration {
            nexus: n,
            key,
            all_tg_pt: false,
        }
    }

    #[test]
    fn removing_the_holder_releases_but_all_registrants_wait_for_the_last() {
        let (a, b) = (ItNexus::test(1, 1), ItNexus::test(2, 1));
        let mut s = PrState {
            regs: vec![reg(a, 1), reg(b, 2)],
            res: Some(Reservation {
                holder: a,
                kind: ResType::WriteExclusiveRegistrantsOnly,
            }),
            ..PrState::default()
        };
        assert!(s.is_holder(a) && !s.is_holder(b));
        assert_eq!(s.remove(|r| r.key == 1), vec![a]);
        assert_eq!(s.res, None);

        s.regs = vec![reg(a, 1), reg(b, 2)];
        s.res = Some(Reservation {
            holder: a,
            kind: ResType::ExclusiveAccessAllRegistrants,
        });
        assert!(s.is_holder(a) && s.is_holder(b));
        s.remove(|r| r.key == 1);
        assert!(s.res.is_some(), "b still holds it");
        s.remove(|_| true);
        assert_eq!(s.res, None);
    }

    #[test]
    fn type_codes() {
        for code in [1u8, 3, 5, 6, 7, 8] {
            let t = ResType::from_pr(PrType::from(code)).map(|t| t as u8);
            assert_eq!(t, Some(code));
        }
        for code in [0u8, 2, 4, 9, 15] {
            assert_eq!(ResType::from_pr(PrType::from(code)), None);
        }
    }
}
