//! Which commands a persistent reservation stops: SPC-4 Table 53 ("SPC commands that are
//! allowed in the presence of various reservations") and SBC-3 Table 13, for the commands
//! this engine runs.

use super::{ItNexus, PrState};
use scsi::Command;

/// How a command meets a reservation held by another I_T nexus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Allowed whatever the reservation (INQUIRY, REPORT LUNS, TEST UNIT READY, READ
    /// CAPACITY, PERSISTENT RESERVE IN/OUT, ...). PR OUT has its own key rules.
    Always,
    /// Allowed under Write Exclusive types, conflicts under Exclusive Access types (READ,
    /// VERIFY): a transfer from the medium.
    Read,
    /// Conflicts unless the sender is a registrant under a registrants-only or
    /// all-registrants type (WRITE, SYNCHRONIZE CACHE, MODE SENSE/SELECT, ...).
    Write,
}

/// The row of the tables for `cmd`.
pub(crate) fn access(cmd: &Command) -> Access {
    use Command as C;
    match cmd {
        C::TestUnitReady
        | C::RequestSense(_)
        | C::Inquiry(_)
        | C::ReadCapacity10
        | C::ReadCapacity16(_)
        | C::ReportLuns(_)
        | C::ReportSupportedOpcodes(_)
        | C::ReportTargetPortGroups(_)
        | C::PersistentReserveIn(_)
        | C::PersistentReserveOut(_)
        // RESERVE and RELEASE meet persistent reservations by their own rules (scsi2.rs).
        | C::Reserve(_)
        | C::Release(_) => Access::Always,
        // SBC-3: START=1 with POWER CONDITION 0 is allowed; anything else conflicts.
        C::StartStopUnit(s) if s.start && s.power_condition == 0 => Access::Always,
        // SPC-4 Table 53: PREVENT 00b allowed, otherwise it conflicts.
        C::PreventAllowMediumRemoval { prevent: 0 } => Access::Always,
        // SBC-4 Table 15: transfers from the medium (and its defect and provisioning
        // records) are allowed under Write Exclusive types.
        C::Read(_)
        | C::Verify(_)
        | C::PreFetch(_)
        | C::GetLbaStatus(_)
        | C::ReadDefectData(_)
        // A copy's results; a token of blocks read (its copy targets are checked apart).
        | C::CopyIn(_) => Access::Read,
        C::CopyOut(c) if c.action == scsi::cdb::copy::SA_POPULATE_TOKEN => Access::Read,
        // SPC-4 Table 53: MODE SENSE conflicts like MODE SELECT.
        C::StartStopUnit(_)
        | C::PreventAllowMediumRemoval { .. }
        | C::Write(_)
        | C::WriteAndVerify(_)
        | C::OrWrite(_)
        | C::WriteAtomic(_)
        | C::CopyOut(_)
        | C::CompareAndWrite(_)
        | C::SynchronizeCache(_)
        | C::WriteSame(_)
        | C::Unmap(_)
        | C::ModeSense(_)
        | C::ModeSelect(_) => Access::Write,
    }
}

impl PrState {
    /// Whether `cmd` from `n` is a RESERVATION CONFLICT: the SCSI-2 reservation of
    /// another nexus first (`scsi2.rs`), then the persistent reservation.
    pub(crate) fn conflicts_with(&self, n: ItNexus, cmd: &Command) -> bool {
        self.scsi2_conflicts(n, cmd) || self.conflicts(n, access(cmd))
    }

    /// Whether `access` from `n` is a RESERVATION CONFLICT under the persistent reservation.
    pub(crate) fn conflicts(&self, n: ItNexus, access: Access) -> bool {
        let Some(res) = self.res else {
            return false;
        };
        if access == Access::Always || self.is_holder(n) {
            return false;
        }
        // Registrants have full access under registrants-only and all-registrants types.
        if res.kind.registrants_access() && self.registration(n).is_some() {
            return false;
        }
        match access {
            Access::Always => false,
            Access::Read => res.kind.exclusive_access(),
            Access::Write => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Registration, ResType, Reservation};
    use super::*;

    #[test]
    fn table_per_type() {
        let n = |i: u8| ItNexus::test(i, 1);
        let (holder, member, stranger) = (n(1), n(2), n(3));
        let regs = [holder, member]
            .iter()
            .map(|&nexus| Registration {
                nexus,
                key: 7,
                all_tg_pt: false,
            })
            .collect();
        // (type, member may read, member may write, stranger may read, stranger may write)
        let table = [
            (ResType::WriteExclusive, true, false, true, false),
            (ResType::ExclusiveAccess, false, false, false, false),
            (
                ResType::WriteExclusiveRegistrantsOnly,
                true,
                true,
                true,
                false,
            ),
            (
                ResType::ExclusiveAccessRegistrantsOnly,
                true,
                true,
                false,
                false,
            ),
            (
                ResType::WriteExclusiveAllRegistrants,
                true,
                true,
                true,
                false,
            ),
            (
                ResType::ExclusiveAccessAllRegistrants,
                true,
                true,
                false,
                false,
            ),
        ];
        let mut s = PrState {
            regs,
            ..PrState::default()
        };
        for (kind, mr, mw, sr, sw) in table {
            s.res = Some(Reservation { holder, kind });
            let ok = |n, a| !s.conflicts(n, a);
            assert!(
                ok(holder, Access::Read) && ok(holder, Access::Write),
                "{kind:?}"
            );
            assert_eq!(
                (ok(member, Access::Read), ok(member, Access::Write)),
                (mr, mw),
                "{kind:?}"
            );
            assert_eq!(
                (ok(stranger, Access::Read), ok(stranger, Access::Write)),
                (sr, sw),
                "{kind:?}"
            );
            assert!(ok(stranger, Access::Always));
        }
    }
}
