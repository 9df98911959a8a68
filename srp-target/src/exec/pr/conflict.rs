//! Whether a persistent reservation stops a command, by its access class: SPC-4 Table 53
//! ("SPC commands that are allowed in the presence of various reservations") and SBC-3
//! Table 13. Each command's class is its rule (`exec/rules.rs`).

use super::{ItNexus, PrState};
use crate::exec::rules::Access;
use scsi::Command;

impl PrState {
    /// Whether `cmd`, of access class `access` (its rule), from `n` is a RESERVATION
    /// CONFLICT: the SCSI-2 reservation of another nexus first (`scsi2.rs`), then the
    /// persistent reservation.
    pub(crate) fn conflicts_with(&self, n: ItNexus, cmd: &Command, access: Access) -> bool {
        self.scsi2_conflicts(n, cmd) || self.conflicts(n, access)
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
