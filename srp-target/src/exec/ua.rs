//! Unit attention conditions (SAM-5; SPC-4 with the control page's UA_INTLCK_CTRL = 00b): a queue
//! per I_T nexus per logical unit.
//!
//! Established by: PERSISTENT RESERVE OUT (REGISTRATIONS PREEMPTED, RESERVATIONS PREEMPTED,
//! RESERVATIONS RELEASED, per the table in `pr::attention`), MODE SELECT that changes a mode
//! parameter (MODE PARAMETERS CHANGED, to every other I_T nexus), LOGICAL UNIT RESET
//! (BUS DEVICE RESET FUNCTION OCCURRED, to every I_T nexus), CLEAR TASK SET (COMMANDS
//! CLEARED BY ANOTHER INITIATOR, to every other I_T nexus that lost tasks; the transport
//! establishes it, `crate::io`), a configuration reload (`crate::reload`: REPORTED LUNS
//! DATA HAS CHANGED to every I_T nexus through a target port whose LUN table changed,
//! CAPACITY DATA HAS CHANGED to every I_T nexus of a grown LU, ASYMMETRIC ACCESS STATE
//! CHANGED to every I_T nexus when a port group's state changes or groups come and go).
//!
//! Reported on the next command of that I_T nexus to this LU, oldest first, as CHECK
//! CONDITION / UNIT ATTENTION, which clears it; the command is not executed. REQUEST SENSE
//! returns it as its sense data (GOOD) and clears it. INQUIRY and REPORT LUNS neither report
//! nor clear it.
//!
//! "Every I_T nexus" means every nexus that has sent this LU a command (or that PR names):
//! the LU learns nexuses as they use it. There is no POWER ON / RESET unit attention on a
//! nexus's first command (Linux would retry it; the target has no prior state to announce).
//! Bounds: at most [`MAX_PENDING`] conditions per nexus (a repeated condition is kept once;
//! past the bound new ones are dropped, the oldest are what matter) and [`MAX_NEXUSES`]
//! nexuses per LU (past it, new nexuses get no unit attentions).

use super::pr::ItNexus;
use super::{Exec, LogicalUnit, Nexus, Stop, parse, request_sense_data};
use scsi::{Command, Sense, SenseCode};
use std::collections::{BTreeMap, VecDeque};
use std::sync::PoisonError;

/// Unit attention conditions kept per I_T nexus.
pub const MAX_PENDING: usize = 16;

/// I_T nexuses a LU keeps unit attentions for.
pub const MAX_NEXUSES: usize = 4096;

/// INQUIRY, REPORT LUNS, REQUEST SENSE: the commands SPC-4 exempts.
const INQUIRY: u8 = 0x12;
const REPORT_LUNS: u8 = 0xa0;
const REQUEST_SENSE: u8 = 0x03;

/// Who a new condition goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum To {
    /// This I_T nexus.
    One(ItNexus),
    /// Every known I_T nexus but this one.
    AllBut(ItNexus),
    /// Every known I_T nexus.
    All,
    /// Every known I_T nexus through this target port (a reload changed its LUN table).
    Port(crate::lu::RelativePortId),
}

/// The pending unit attentions of one LU.
#[derive(Debug, Default)]
pub(crate) struct UaState {
    by_nexus: BTreeMap<ItNexus, VecDeque<SenseCode>>,
}

impl UaState {
    /// Learns `n` (it now receives conditions sent to every nexus); false past the bound.
    fn know(&mut self, n: ItNexus) -> bool {
        if self.by_nexus.contains_key(&n) {
            return true;
        }
        if self.by_nexus.len() >= MAX_NEXUSES {
            return false;
        }
        self.by_nexus.insert(n, VecDeque::new());
        true
    }

    /// Establishes `code` for `to`.
    pub(crate) fn establish(&mut self, to: To, code: SenseCode) {
        if let To::One(n) = to {
            if !self.know(n) {
                return;
            }
        }
        for (n, q) in self.by_nexus.iter_mut() {
            let hit = match to {
                To::One(m) => *n == m,
                To::AllBut(m) => *n != m,
                To::All => true,
                To::Port(p) => n.port == p,
            };
            if hit && !q.contains(&code) && q.len() < MAX_PENDING {
                q.push_back(code);
            }
        }
    }

    /// The oldest condition of `n`, cleared.
    fn take(&mut self, n: ItNexus) -> Option<SenseCode> {
        self.by_nexus.get_mut(&n)?.pop_front()
    }

    /// The conditions pending for `n`, oldest first.
    pub(crate) fn pending(&self, n: ItNexus) -> Vec<SenseCode> {
        self.by_nexus
            .get(&n)
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }
}

impl LogicalUnit {
    /// Establishes `code` for `to` on this LU.
    pub(crate) fn unit_attention(&self, to: To, code: SenseCode) {
        // A queue of plain values: a panic elsewhere cannot leave it half-updated.
        let mut ua = self.ua.lock().unwrap_or_else(PoisonError::into_inner);
        ua.establish(to, code);
    }

    /// The unit attentions pending for `nexus` on this LU, oldest first (for the control
    /// socket and tests; reading them clears nothing).
    pub fn pending_unit_attentions(&self, nexus: &Nexus<'_>) -> Vec<SenseCode> {
        let ua = self.ua.lock().unwrap_or_else(PoisonError::into_inner);
        ua.pending(nexus.it_nexus())
    }

    /// A LOGICAL UNIT RESET was performed through `by`: BUS DEVICE RESET FUNCTION OCCURRED
    /// for every I_T nexus, `by` included (SAM-5), and a SCSI-2 reservation ends (SPC-2
    /// 5.5.1; persistent reservations stay). The transport aborts the tasks.
    pub fn logical_unit_reset(&self, by: &Nexus<'_>) {
        self.release_scsi2("a LOGICAL UNIT RESET");
        let mut ua = self.ua.lock().unwrap_or_else(PoisonError::into_inner);
        ua.know(by.it_nexus());
        ua.establish(To::All, SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED);
    }

    /// The answer to `cdb` if a unit attention stops it: CHECK CONDITION with the oldest
    /// condition, or REQUEST SENSE's data; `None` lets the command run. Learns the nexus.
    pub(crate) fn check_unit_attention(
        &self,
        nexus: &Nexus<'_>,
        cdb: &[u8],
        din: &mut Vec<u8>,
    ) -> Option<Exec> {
        let n = nexus.it_nexus();
        let op = *cdb.first()?;
        let request_sense = match op {
            INQUIRY | REPORT_LUNS => {
                self.ua
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .know(n);
                return None;
            }
            // A REQUEST SENSE that does not parse is refused by the usual path, and clears
            // nothing.
            REQUEST_SENSE => match parse(cdb) {
                Ok(Command::RequestSense(r)) => Some(r),
                _ => return None,
            },
            _ => None,
        };
        let code = {
            let mut ua = self.ua.lock().unwrap_or_else(PoisonError::into_inner);
            ua.know(n);
            ua.take(n)?
        };
        Some(match request_sense {
            Some(r) => request_sense_data(&Sense::new(code), r.desc, din, r.alloc_len),
            None => Err(Stop::Check(Sense::new(code))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nexus(i: u8) -> ItNexus {
        ItNexus::test(i, 1)
    }

    #[test]
    fn queues_per_nexus_oldest_first_deduplicated_and_bounded() {
        let mut s = UaState::default();
        let (a, b, c) = (nexus(1), nexus(2), nexus(3));
        assert!(s.know(a) && s.know(b));
        s.establish(To::AllBut(a), SenseCode::MODE_PARAMETERS_CHANGED);
        s.establish(To::One(c), SenseCode::REGISTRATIONS_PREEMPTED);
        s.establish(To::All, SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED);
        s.establish(To::All, SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED);
        assert_eq!(
            s.pending(a),
            vec![SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED]
        );
        assert_eq!(s.take(b), Some(SenseCode::MODE_PARAMETERS_CHANGED));
        assert_eq!(
            s.take(b),
            Some(SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED)
        );
        assert_eq!(s.take(b), None);
        assert_eq!(s.take(c), Some(SenseCode::REGISTRATIONS_PREEMPTED));
        assert_eq!(s.take(nexus(9)), None, "unknown nexus");

        for k in 0..=MAX_PENDING {
            s.establish(
                To::One(a),
                SenseCode::new(scsi::SenseKey::UnitAttention, 0x2a, k as u8),
            );
        }
        assert_eq!(s.pending(a).len(), MAX_PENDING);
        assert_eq!(
            s.pending(a)[0],
            SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED
        );

        let mut s = UaState::default();
        for k in 0..MAX_NEXUSES {
            assert!(s.know(ItNexus::test(0, k as u16)));
        }
        assert!(!s.know(nexus(1)), "past the bound");
        s.establish(To::One(nexus(1)), SenseCode::REGISTRATIONS_PREEMPTED);
        assert!(s.pending(nexus(1)).is_empty());
    }
}
