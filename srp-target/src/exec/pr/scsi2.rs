//! The SCSI-2 logical unit reservation: RESERVE and RELEASE (6) and (10) (SPC-2 5.5.1,
//! 7.16, 7.21), and how it meets persistent reservations (SPC-4 5.13.3, with CRH=1).
//!
//! Windows Server 2003 clusters arbitrate their quorum disk with it: a node holds the disk
//! by RESERVE, renews it every few seconds, and a challenger breaks a dead node's hold by
//! a LOGICAL UNIT RESET (which releases it, SAM-5) before trying RESERVE itself.
//!
//! The reservation lives in the LU's [`PrState`] (one lock with persistent reservations, so
//! RESERVE and PERSISTENT RESERVE OUT are atomic with respect to each other):
//! - RESERVE from the holder, or with nothing held: this I_T nexus holds it. From another
//!   nexus while held: RESERVATION CONFLICT.
//! - RELEASE from the holder ends it; from anyone else it is GOOD and changes nothing.
//! - While another nexus holds it, every command conflicts except INQUIRY, REQUEST SENSE,
//!   REPORT LUNS, REPORT TARGET PORT GROUPS, RELEASE and PREVENT ALLOW MEDIUM REMOVAL with
//!   PREVENT 00b (SPC-2 5.5.1's list, less LOG SENSE, which we do not serve) — TEST UNIT
//!   READY included, which is how a cluster node learns another holds the disk.
//! - While it is held, PERSISTENT RESERVE IN and OUT conflict from every nexus, the
//!   holder's included (SPC-2 5.5.1: "all PERSISTENT RESERVE IN and all PERSISTENT RESERVE
//!   OUT commands shall conflict regardless of initiator or service action"; as LIO's
//!   target_scsi3_emulate_pr_in/out under DRF_SPC2_RESERVATIONS).
//! - It ends by RELEASE, a LOGICAL UNIT RESET, or the loss of the holder's I_T nexus (its
//!   last channel gone); it is not kept across a restart (SCSI-2 reservations are not).
//! - With persistent reservation registrations present (CRH=1, SPC-4 5.13.3): RESERVE and
//!   RELEASE from the persistent reservation holder, or from a registrant under a
//!   registrants-only or all-registrants type, are GOOD and change nothing; from anyone
//!   else, RESERVATION CONFLICT.

use super::super::{CmdOutput, Exec, LogicalUnit, Nexus};
use super::{ItNexus, PrState, reservation_conflict};
use scsi::Command;

/// What a RESERVE or RELEASE does, decided under the state's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// GOOD; the state is as it was.
    Unchanged,
    /// GOOD; the state changed.
    Changed,
    /// RESERVATION CONFLICT.
    Conflict,
}

impl PrState {
    /// CRH: RESERVE or RELEASE meeting persistent reservation registrations.
    fn crh(&self, n: ItNexus) -> Outcome {
        let registered_with_access =
            self.registration(n).is_some() && self.res.is_some_and(|r| r.kind.registrants_access());
        if self.is_holder(n) || registered_with_access {
            Outcome::Unchanged
        } else {
            Outcome::Conflict
        }
    }

    fn reserve(&mut self, n: ItNexus) -> Outcome {
        if !self.regs.is_empty() {
            return self.crh(n);
        }
        match self.scsi2 {
            Some(holder) if holder != n => Outcome::Conflict,
            Some(_) => Outcome::Unchanged,
            None => {
                self.scsi2 = Some(n);
                Outcome::Changed
            }
        }
    }

    fn release(&mut self, n: ItNexus) -> Outcome {
        if !self.regs.is_empty() {
            return self.crh(n);
        }
        if self.scsi2 == Some(n) {
            self.scsi2 = None;
            return Outcome::Changed;
        }
        Outcome::Unchanged
    }

    /// Whether the SCSI-2 reservation stops `cmd` from `n`: any command but the few SPC-2
    /// 5.5.1 lists from a nexus other than the holder, and PERSISTENT RESERVE IN/OUT from
    /// every nexus, the holder's included (SPC-2 5.5.1, as LIO).
    pub(crate) fn scsi2_conflicts(&self, n: ItNexus, cmd: &Command) -> bool {
        let Some(holder) = self.scsi2 else {
            return false;
        };
        use Command as C;
        if matches!(cmd, C::PersistentReserveIn(_) | C::PersistentReserveOut(_)) {
            return true;
        }
        if holder == n {
            return false;
        }
        !matches!(
            cmd,
            C::Inquiry(_)
                | C::RequestSense(_)
                | C::ReportLuns(_)
                | C::ReportTargetPortGroups(_)
                | C::Release(_)
                | C::PreventAllowMediumRemoval { prevent: 0 }
        )
    }
}

fn answer(outcome: Outcome) -> Exec {
    Ok(match outcome {
        Outcome::Conflict => reservation_conflict(),
        Outcome::Unchanged | Outcome::Changed => CmdOutput::good(0),
    })
}

/// RESERVE(6)/(10).
pub(crate) fn reserve(lu: &LogicalUnit, nexus: &Nexus<'_>) -> Exec {
    let n = nexus.it_nexus();
    let (st, _, outcome, published) =
        lu.pr_transact(|st| st.reserve(n), |o| *o != Outcome::Conflict)?;
    drop(st);
    lu.pr_publish(published, &[])?;
    if outcome == Outcome::Changed {
        tracing::info!(lu = %lu.identity().unique_name(), initiator = %n.initiator, port = n.port.0, "SCSI-2 reservation taken");
    }
    answer(outcome)
}

/// RELEASE(6)/(10).
pub(crate) fn release(lu: &LogicalUnit, nexus: &Nexus<'_>) -> Exec {
    let n = nexus.it_nexus();
    let (st, _, outcome, published) =
        lu.pr_transact(|st| st.release(n), |o| *o != Outcome::Conflict)?;
    drop(st);
    lu.pr_publish(published, &[])?;
    if outcome == Outcome::Changed {
        tracing::info!(lu = %lu.identity().unique_name(), initiator = %n.initiator, port = n.port.0, "SCSI-2 reservation released");
    }
    answer(outcome)
}

impl LogicalUnit {
    /// Ends the SCSI-2 reservation, if any (LOGICAL UNIT RESET).
    pub(crate) fn release_scsi2(&self, why: &'static str) {
        if self.pr_is_shared() {
            // Through the shared state, off the caller's thread (the serving loop).
            // The other appliances' nexuses are told of the reset too.
            let uas = [(
                crate::exec::ua::To::All,
                scsi::SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED,
            )];
            return self.in_background(why, move |lu| {
                if !lu.change_scsi2(|st| st.scsi2.take().is_some(), why, &uas) {
                    // Nothing held: the reset's unit attention is told all the same.
                    lu.pr_tell(&uas);
                }
            });
        }
        if let Some(holder) = self.pr_write().scsi2.take() {
            tracing::info!(lu = %self.identity().unique_name(), initiator = %holder.initiator, port = holder.port.0, "SCSI-2 reservation released by {why}");
        }
    }

    /// A SCSI-2 change to a shared state, published (logged either way).
    /// Whether there was something to release.
    fn change_scsi2(
        &self,
        change: impl FnMut(&mut super::PrState) -> bool,
        why: &str,
        uas: &[(crate::exec::ua::To, scsi::SenseCode)],
    ) -> bool {
        let lu = self.identity().unique_name();
        match self.pr_transact(change, |changed| *changed) {
            Ok((st, _, true, published)) => {
                drop(st);
                match self.pr_publish(published, uas) {
                    Ok(()) => tracing::info!(lu = %lu, "SCSI-2 reservation released by {why}"),
                    Err(_) => tracing::error!(lu = %lu,
                        "SCSI-2 reservation released by {why}, but not every other appliance confirmed it"),
                }
            }
            Ok(_) => return false,
            Err(_) => tracing::error!(lu = %lu,
                "SCSI-2 reservation: its release by {why} could not be stored; it stands"),
        }
        true
    }

    /// Runs `work` on this LU on a thread of its own (a shared change must not hold up the
    /// serving loop); logged if no thread can be had.
    fn in_background(&self, what: &'static str, work: impl FnOnce(&LogicalUnit) + Send + 'static) {
        let Some(me) = self.me.get().and_then(std::sync::Weak::upgrade) else {
            return work(self);
        };
        if let Err(e) = std::thread::Builder::new()
            .name("pr-change".into())
            .spawn(move || work(&me))
        {
            tracing::error!(lu = %self.identity().unique_name(), error = %e,
                "no thread for a shared reservation change ({what}): not made");
        }
    }

    /// The I_T nexus `nexus` is gone (its last channel closed): a SCSI-2 reservation it
    /// held ends (SPC-2 5.5.1). Persistent reservations stay (that is what they are for).
    pub fn it_nexus_lost(&self, nexus: &Nexus<'_>) {
        let n = nexus.it_nexus();
        if self.pr_is_shared() {
            if self.pr_read().scsi2 == Some(n) {
                self.in_background("its I_T nexus going", move |lu| {
                    let _ = lu.change_scsi2(
                        |st| st.scsi2 == Some(n) && st.scsi2.take().is_some(),
                        "its I_T nexus going",
                        &[],
                    );
                });
            }
            return;
        }
        let mut st = self.pr_write();
        if st.scsi2 == Some(n) {
            st.scsi2 = None;
            drop(st);
            tracing::info!(lu = %self.identity().unique_name(), initiator = %n.initiator, port = n.port.0, "SCSI-2 reservation released: its I_T nexus is gone");
        }
    }

    /// The I_T nexus holding the SCSI-2 reservation, if any (control socket, tests).
    pub fn scsi2_holder(&self) -> Option<ItNexus> {
        self.pr_read().scsi2
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Registration, ResType, Reservation};
    use super::*;
    use scsi::cdb::ReserveCdb;
    use wirekit::WireRepr;

    #[test]
    fn reserve_release_without_registrations() {
        let (a, b) = (ItNexus::test(1, 1), ItNexus::test(2, 1));
        let mut s = PrState::default();
        assert_eq!(s.reserve(a), Outcome::Changed);
        assert_eq!(s.reserve(a), Outcome::Unchanged);
        assert_eq!(s.reserve(b), Outcome::Conflict);
        // The same initiator through another target port is another I_T nexus.
        assert_eq!(s.reserve(ItNexus::test(1, 2)), Outcome::Conflict);
        assert!(s.scsi2_conflicts(b, &Command::TestUnitReady));
        assert!(!s.scsi2_conflicts(a, &Command::TestUnitReady));
        assert!(!s.scsi2_conflicts(b, &Command::Release(ReserveCdb::Six)));
        assert!(!s.scsi2_conflicts(b, &Command::PreventAllowMediumRemoval { prevent: 0 }));
        assert!(s.scsi2_conflicts(b, &Command::PreventAllowMediumRemoval { prevent: 1 }));
        // PERSISTENT RESERVE IN/OUT conflict for the holder too (SPC-2 5.5.1).
        let read_keys = Command::parse(&[0x5e, 0, 0, 0, 0, 0, 0, 0, 8, 0]).expect("PR IN");
        let register = Command::parse(&[0x5f, 0, 0, 0, 0, 0, 0, 0, 24, 0]).expect("PR OUT");
        for n in [a, b] {
            assert!(s.scsi2_conflicts(n, &read_keys));
            assert!(s.scsi2_conflicts(n, &register));
        }
        assert_eq!(s.release(b), Outcome::Unchanged);
        assert_eq!(s.scsi2, Some(a));
        assert_eq!(s.release(a), Outcome::Changed);
        assert!(!s.scsi2_conflicts(a, &read_keys), "nothing held");
        assert_eq!(s.reserve(b), Outcome::Changed);
    }

    #[test]
    fn crh_with_registrations() {
        let (holder, member, stranger) = (
            ItNexus::test(1, 1),
            ItNexus::test(2, 1),
            ItNexus::test(3, 1),
        );
        let reg = |nexus| Registration {
            nexus,
            key: 9,
            all_tg_pt: false,
        };
        let mut s = PrState {
            regs: vec![reg(holder), reg(member)],
            ..PrState::default()
        };
        // Registered, no reservation: everyone conflicts (SPC-2 5.5.1).
        for n in [holder, member, stranger] {
            assert_eq!(s.reserve(n), Outcome::Conflict);
            assert_eq!(s.release(n), Outcome::Conflict);
        }
        s.res = Some(Reservation {
            holder,
            kind: ResType::WriteExclusive,
        });
        assert_eq!(s.reserve(holder), Outcome::Unchanged);
        assert_eq!(s.release(holder), Outcome::Unchanged);
        assert_eq!(s.reserve(member), Outcome::Conflict);
        s.res = Some(Reservation {
            holder,
            kind: ResType::WriteExclusiveRegistrantsOnly,
        });
        assert_eq!(s.reserve(member), Outcome::Unchanged);
        assert_eq!(s.release(member), Outcome::Unchanged);
        assert_eq!(s.reserve(stranger), Outcome::Conflict);
        assert_eq!(s.scsi2, None);
    }
}
