//! One rule per command, decided here and nowhere else: how the command meets a
//! reservation another I_T nexus holds (SPC-4 Table 53, SBC-4 Table 15), and whether, what
//! and how durably it writes. [`rule`] is an exhaustive match over [`Command`], so a new
//! command does not build until it is classified here.
//!
//! The engine applies both by construction (`mod.rs`, `dispatch_io`): the reservation check
//! runs before any handler from [`Rule::access`]; a command that writes its own LU gets the
//! LU's only door for writes to the medium (`MediumWrites` (`store.rs`)) made from
//! [`Rule::writes`], and the dispatcher — not the handler — flushes after it when
//! [`Durability`] says the data must be durable before the status (FUA, or the write cache
//! off). A copy's destinations get their door from `copy_target_writes`. So no handler
//! can write without a flush the rule asks for, and none can skip the reservation check.
//!
//! `srp-target/tests/write_rules.rs` checks each rule against what every command of the
//! supported table is seen to do to a recorded medium, and the crash-consistency workload
//! draws its mix from the commands this table says write.

use super::LogicalUnit;
use super::store::MediumWrites;
use scsi::Command;
use scsi::cdb::copy::{SA_EXTENDED_COPY_LID1, SA_POPULATE_TOKEN, SA_WRITE_USING_TOKEN};

/// How a command meets a reservation held by another I_T nexus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
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

/// When what a command wrote must be on stable storage before its status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// When the write cache is off (WCE=0): a command without an FUA bit (WRITE SAME,
    /// UNMAP, a copy's writes).
    WhenCacheOff,
    /// When its FUA bit is set (the value here) or the write cache is off.
    Fua(bool),
    /// Always: WRITE AND VERIFY verifies the medium, not a cache (SBC-4 5.43).
    Always,
}

impl Durability {
    /// Whether the data must be durable before the status, with write cache `wce`.
    pub fn durable(self, wce: bool) -> bool {
        match self {
            Durability::WhenCacheOff => !wce,
            Durability::Fua(fua) => fua || !wce,
            Durability::Always => true,
        }
    }
}

/// What a command writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// Nothing on any medium.
    Nothing,
    /// Blocks of its own LU, this durably.
    ThisLu(Durability),
    /// Blocks of the LUs its segments name (EXTENDED COPY), each durable as
    /// [`COPY_TARGET_DURABILITY`] says.
    CopyTargets,
}

/// A command's rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Against another nexus's reservation.
    pub access: Access,
    /// What it writes, how durably.
    pub writes: Writes,
}

impl Rule {
    /// Whether the command writes any medium.
    pub fn writes_medium(&self) -> bool {
        self.writes != Writes::Nothing
    }
}

/// A copy's writes to a destination are a WRITE without FUA to it.
pub const COPY_TARGET_DURABILITY: Durability = Durability::WhenCacheOff;

const fn reads() -> Rule {
    Rule {
        access: Access::Read,
        writes: Writes::Nothing,
    }
}

const fn always() -> Rule {
    Rule {
        access: Access::Always,
        writes: Writes::Nothing,
    }
}

const fn controls() -> Rule {
    Rule {
        access: Access::Write,
        writes: Writes::Nothing,
    }
}

const fn writes(d: Durability) -> Rule {
    Rule {
        access: Access::Write,
        writes: Writes::ThisLu(d),
    }
}

/// The rule for `cmd`.
pub fn rule(cmd: &Command) -> Rule {
    use Command as C;
    use Durability::{Always, Fua, WhenCacheOff};
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
        | C::Release(_) => always(),
        // SBC-3: START=1 with POWER CONDITION 0 is allowed; anything else conflicts (START=0
        // flushes: it writes nothing new).
        C::StartStopUnit(s) if s.start && s.power_condition == 0 => always(),
        C::StartStopUnit(_) => controls(),
        // SPC-4 Table 53: PREVENT 00b allowed, otherwise it conflicts.
        C::PreventAllowMediumRemoval { prevent: 0 } => always(),
        C::PreventAllowMediumRemoval { .. } => controls(),
        // SBC-4 Table 15: transfers from the medium (and its defect and provisioning
        // records) are allowed under Write Exclusive types; so are a copy's results and a
        // token of blocks read (their copy targets are checked apart).
        C::Read(_)
        | C::Verify(_)
        | C::PreFetch(_)
        | C::GetLbaStatus(_)
        | C::ReadDefectData(_)
        | C::CopyIn(_) => reads(),
        C::CopyOut(c) => match c.action {
            SA_POPULATE_TOKEN => reads(),
            SA_WRITE_USING_TOKEN => writes(COPY_TARGET_DURABILITY),
            SA_EXTENDED_COPY_LID1 => Rule {
                access: Access::Write,
                writes: Writes::CopyTargets,
            },
            // No other service action is routed; classified as the strictest.
            _ => Rule {
                access: Access::Write,
                writes: Writes::CopyTargets,
            },
        },
        C::Write(rw) => writes(Fua(rw.fua)),
        C::WriteAndVerify(_) => writes(Always),
        C::OrWrite(rw) => writes(Fua(rw.fua)),
        C::WriteAtomic(w) => writes(Fua(w.fua)),
        C::CompareAndWrite(c) => writes(Fua(c.fua)),
        C::WriteSame(_) | C::Unmap(_) => writes(WhenCacheOff),
        // SPC-4 Table 53: MODE SENSE conflicts like MODE SELECT; SYNCHRONIZE CACHE like a
        // write (it makes writes durable; it writes nothing new).
        C::SynchronizeCache(_) | C::ModeSense(_) | C::ModeSelect(_) => controls(),
    }
}

/// The rule for the command in `cdb`, if it is one of the supported table.
pub fn rule_of_cdb(cdb: &[u8]) -> Option<Rule> {
    super::parse(cdb).ok().map(|cmd| rule(&cmd))
}

/// The door to `dst`'s medium for a copy writing it (EXTENDED COPY's destinations).
pub(crate) fn copy_target_writes(dst: &LogicalUnit) -> MediumWrites<'_> {
    MediumWrites::new(dst, COPY_TARGET_DURABILITY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durability_per_cache_and_fua() {
        use Durability::*;
        // (durability, write cache on, durable)
        for (d, wce, want) in [
            (WhenCacheOff, true, false),
            (WhenCacheOff, false, true),
            (Fua(false), true, false),
            (Fua(true), true, true),
            (Fua(false), false, true),
            (Always, true, true),
            (Always, false, true),
        ] {
            assert_eq!(d.durable(wce), want, "{d:?} wce {wce}");
        }
    }
}
