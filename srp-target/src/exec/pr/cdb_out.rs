//! PERSISTENT RESERVE OUT (SPC-4 6.16, 5.13.7-5.13.11): REGISTER, REGISTER AND IGNORE
//! EXISTING KEY, RESERVE, RELEASE, CLEAR, PREEMPT, PREEMPT AND ABORT.
//!
//! Order of checks (as LIO's target_scsi3_emulate_pr_out): the parameter list (length,
//! SPEC_I_PT, APTPL), the CDB's SCOPE and TYPE, then under the lock the sender's key, then
//! the service action. A service action checks everything before it changes anything.
//!
//! PRGENERATION moves on every REGISTER, REGISTER AND IGNORE EXISTING KEY, CLEAR, PREEMPT
//! and PREEMPT AND ABORT that completes with GOOD, never on RESERVE or RELEASE (SPC-4
//! 6.15.2).

use super::{
    ItNexus, MAX_REGISTRATIONS, PrState, Registration, ResType, Reservation, reservation_conflict,
};
use crate::exec::{CmdOutput, Exec, LogicalUnit, Nexus, Stop, data_out};
use scsi::cdb::{PrOut, PrOutAction, PrScope};
use scsi::{Sense, SenseCode};

/// The basic parameter list is 24 bytes (SPC-4 6.16.3).
pub(crate) const PARAM_LEN: usize = 24;
/// Parameter list byte 20: SPEC_I_PT (bit 3), ALL_TG_PT (bit 2), APTPL (bit 0).
const FLAGS_BYTE: u16 = 20;
const SPEC_I_PT: u8 = 0x08;
const ALL_TG_PT: u8 = 0x04;
const APTPL: u8 = 0x01;
/// Parameter list byte of the SERVICE ACTION RESERVATION KEY.
const SA_KEY_BYTE: u16 = 8;

/// The basic PERSISTENT RESERVE OUT parameter list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParamList {
    /// RESERVATION KEY: the sender's registered key.
    pub(crate) key: u64,
    /// SERVICE ACTION RESERVATION KEY: the new key, or the key to preempt.
    pub(crate) sa_key: u64,
    pub(crate) all_tg_pt: bool,
    pub(crate) aptpl: bool,
}

impl ParamList {
    /// Decodes the 24 bytes. SPEC_I_PT (initiator ports named in the list) is not
    /// supported: INVALID FIELD IN PARAMETER LIST at its bit.
    pub(crate) fn parse(b: &[u8; PARAM_LEN]) -> Result<ParamList, Sense> {
        let u64_at = |at: usize| {
            let mut k = [0u8; 8];
            k.copy_from_slice(&b[at..at + 8]);
            u64::from_be_bytes(k)
        };
        let flags = b[usize::from(FLAGS_BYTE)];
        if flags & SPEC_I_PT != 0 {
            return Err(Sense::invalid_field_in_parameter_list(FLAGS_BYTE, Some(3)));
        }
        Ok(ParamList {
            key: u64_at(0),
            sa_key: u64_at(8),
            all_tg_pt: flags & ALL_TG_PT != 0,
            aptpl: flags & APTPL != 0,
        })
    }
}

/// Why a service action was refused.
enum Refuse {
    /// RESERVATION CONFLICT.
    Conflict,
    /// CHECK CONDITION.
    Check(Sense),
}

impl From<SenseCode> for Refuse {
    fn from(c: SenseCode) -> Refuse {
        Refuse::Check(Sense::new(c))
    }
}

/// A service action's result: the I_T nexuses whose registrations it removed.
type Done = Result<Vec<ItNexus>, Refuse>;

/// PERSISTENT RESERVE OUT.
pub(crate) fn pr_out(lu: &LogicalUnit, nexus: &Nexus<'_>, p: &PrOut, dout: &[u8]) -> Exec {
    use PrOutAction as A;
    let len = usize::try_from(p.param_len).unwrap_or(usize::MAX);
    if len < PARAM_LEN {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    let mut raw = [0u8; PARAM_LEN];
    raw.copy_from_slice(data_out(dout, PARAM_LEN)?);
    let params = ParamList::parse(&raw)?;
    // Past SPEC_I_PT (which would allow a longer list), anything but 24 is wrong.
    if len != PARAM_LEN {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    let registering = matches!(p.action, A::Register | A::RegisterAndIgnoreExistingKey);
    if registering && params.aptpl && lu.pr_file.is_none() && !lu.pr_is_shared() {
        // No state file to keep it in: not kept across power loss (PTPL_C=0).
        return Err(Sense::invalid_field_in_parameter_list(FLAGS_BYTE, Some(0)).into());
    }
    let kind = match p.action {
        A::Reserve | A::Preempt | A::PreemptAndAbort => Some(checked_type(p)?),
        _ => None,
    };
    let me = nexus.it_nexus();
    // Run (again, on a lost race with another appliance sharing the state) on the state
    // under the PR lock; kept only when it succeeded (`shared.rs`).
    let (mut st, before, r, published) = lu.pr_transact(
        |st| {
            let r = match (p.action, kind) {
                (A::Register, _) => register(st, nexus, &params, false),
                (A::RegisterAndIgnoreExistingKey, _) => register(st, nexus, &params, true),
                (A::Reserve, Some(kind)) => reserve(st, me, &params, kind),
                (A::Release, _) => release(st, me, &params, p),
                (A::Clear, _) => clear(st, me, &params),
                (A::Preempt | A::PreemptAndAbort, Some(kind)) => preempt(st, me, &params, kind),
                // Not routed (see the module doc of `pr`); answered as the parser would.
                (A::RegisterAndMove, _) | (A::Reserve | A::Preempt | A::PreemptAndAbort, None) => {
                    Err(Refuse::Check(Sense::invalid_field_in_cdb(1, Some(4))))
                }
            };
            // The last successful REGISTER's APTPL decides whether the state persists.
            match r {
                Ok(gone) if registering => {
                    st.ptpl = params.aptpl;
                    Ok(gone)
                }
                other => other,
            }
        },
        Result::is_ok,
    )?;
    // Persisted before GOOD (APTPL): a state that cannot be written is not acknowledged.
    // A shared state is as durable as the store that holds it.
    let r = match (r, &lu.pr_file) {
        (Ok(gone), Some(path)) if !lu.pr_is_shared() => {
            match super::persist::store(path, &before, &st) {
                Ok(()) => Ok(gone),
                Err(e) => {
                    tracing::error!(
                        lun = %lu.identity().unique_name(),
                        file = %path.display(),
                        error = %e,
                        "PERSISTENT RESERVE OUT: the reservation state could not be saved; undone"
                    );
                    *st = before.clone();
                    Err(Refuse::Check(Sense::new(
                        SenseCode::INTERNAL_TARGET_FAILURE,
                    )))
                }
            }
        }
        (r, _) => r,
    };
    // Established under the PR lock, so no command of a nexus told sees the new state
    // without its unit attention.
    let uas = match &r {
        Ok(gone) => super::attention::attentions(p.action, &before, &st, me, gone),
        Err(_) => Vec::new(),
    };
    for (to, code) in &uas {
        lu.unit_attention(*to, *code);
    }
    drop(st);
    // Every other appliance sharing the state has it (or is fenced) before GOOD.
    if r.is_ok() {
        lu.pr_publish(published, &uas)?;
    }
    match r {
        Ok(gone) => Ok(CmdOutput {
            data_out_len: PARAM_LEN,
            abort_nexuses: if p.action == A::PreemptAndAbort {
                gone
            } else {
                Vec::new()
            },
            ..CmdOutput::good(0)
        }),
        Err(Refuse::Conflict) => Ok(reservation_conflict()),
        Err(Refuse::Check(s)) => Err(Stop::Check(s)),
    }
}

/// SCOPE must be LU_SCOPE and TYPE one we support: INVALID FIELD IN CDB byte 2 otherwise.
fn checked_type(p: &PrOut) -> Result<ResType, Stop> {
    if p.scope != PrScope::LogicalUnit {
        return Err(Sense::invalid_field_in_cdb(2, Some(7)).into());
    }
    ResType::from_pr(p.pr_type).ok_or_else(|| Sense::invalid_field_in_cdb(2, Some(3)).into())
}

/// The sender's registration, which must carry RESERVATION KEY: RESERVATION CONFLICT
/// otherwise (SPC-4 5.13.11.1, for every service action but the two REGISTERs).
fn sender(st: &PrState, me: ItNexus, params: &ParamList) -> Result<Registration, Refuse> {
    match st.registration(me) {
        Some(r) if r.key == params.key => Ok(*r),
        _ => Err(Refuse::Conflict),
    }
}

/// Every relative target port of the target, the sender's first (ALL_TG_PT=1).
fn all_ports(nexus: &Nexus<'_>) -> Vec<crate::lu::RelativePortId> {
    let mut ports = vec![nexus.port.relative_port];
    for p in nexus.groups.iter().flat_map(|g| g.ports.iter()) {
        if !ports.contains(p) {
            ports.push(*p);
        }
    }
    ports
}

/// REGISTER and REGISTER AND IGNORE EXISTING KEY (SPC-4 5.13.7, Tables 48 and 49).
fn register(st: &mut PrState, nexus: &Nexus<'_>, params: &ParamList, ignore_key: bool) -> Done {
    let me = nexus.it_nexus();
    let mut gone = Vec::new();
    match st.registration(me).copied() {
        None => {
            if !ignore_key && params.key != 0 {
                return Err(Refuse::Conflict);
            }
            // SERVICE ACTION RESERVATION KEY 0 from an unregistered nexus: nothing to do.
            if params.sa_key != 0 {
                let ports = if params.all_tg_pt {
                    all_ports(nexus)
                } else {
                    vec![me.port]
                };
                // A port on which this initiator already holds its own registration keeps it.
                let new: Vec<Registration> = ports
                    .into_iter()
                    .map(|port| ItNexus { port, ..me })
                    .filter(|n| st.registration(*n).is_none())
                    .map(|nexus| Registration {
                        nexus,
                        key: params.sa_key,
                        all_tg_pt: params.all_tg_pt,
                    })
                    .collect();
                if st.regs.len() + new.len() > MAX_REGISTRATIONS {
                    return Err(SenseCode::INSUFFICIENT_REGISTRATION_RESOURCES.into());
                }
                st.regs.extend(new);
            }
        }
        Some(mine) => {
            if !ignore_key && params.key != mine.key {
                return Err(Refuse::Conflict);
            }
            // An ALL_TG_PT registration changes and goes with its siblings (as LIO).
            let group = |r: &Registration| {
                r.nexus == me
                    || (mine.all_tg_pt
                        && r.all_tg_pt
                        && r.nexus.initiator == me.initiator
                        && r.key == mine.key)
            };
            if params.sa_key == 0 {
                gone = st.remove(group);
            } else {
                for r in st.regs.iter_mut().filter(|r| group(r)) {
                    r.key = params.sa_key;
                }
            }
        }
    }
    st.bump();
    Ok(gone)
}

/// RESERVE (SPC-4 5.13.9).
fn reserve(st: &mut PrState, me: ItNexus, params: &ParamList, kind: ResType) -> Done {
    sender(st, me, params)?;
    match st.res {
        None => {
            st.res = Some(Reservation { holder: me, kind });
            Ok(Vec::new())
        }
        // The holder reserving again with the same type: nothing changes.
        Some(r) if st.is_holder(me) && r.kind == kind => Ok(Vec::new()),
        // Another holder, or the holder asking for a different type.
        Some(_) => Err(Refuse::Conflict),
    }
}

/// RELEASE (SPC-4 5.13.11.2): only a holder releases; from anyone else it is GOOD and
/// changes nothing.
fn release(st: &mut PrState, me: ItNexus, params: &ParamList, p: &PrOut) -> Done {
    sender(st, me, params)?;
    match st.res {
        Some(r) if st.is_holder(me) => {
            if p.scope != PrScope::LogicalUnit || ResType::from_pr(p.pr_type) != Some(r.kind) {
                return Err(SenseCode::INVALID_RELEASE_OF_PERSISTENT_RESERVATION.into());
            }
            st.res = None;
            Ok(Vec::new())
        }
        _ => Ok(Vec::new()),
    }
}

/// CLEAR (SPC-4 5.13.11.2.3): every registration and the reservation go.
fn clear(st: &mut PrState, me: ItNexus, params: &ParamList) -> Done {
    sender(st, me, params)?;
    let gone = st.remove(|_| true);
    st.res = None;
    st.bump();
    Ok(gone)
}

/// PREEMPT and PREEMPT AND ABORT (SPC-4 5.13.11.4): removes the registrations holding
/// SERVICE ACTION RESERVATION KEY and, when that is the holder's key (or 0 under an
/// all-registrants type), takes the reservation with the CDB's type. The sender keeps
/// its own registration.
fn preempt(st: &mut PrState, me: ItNexus, params: &ParamList, kind: ResType) -> Done {
    sender(st, me, params)?;
    let sa = params.sa_key;
    let matched = sa != 0 && st.regs.iter().any(|r| r.key == sa);
    let others_with_key = |r: &Registration| r.key == sa && r.nexus != me;
    let gone = match st.res {
        // All registrants hold it: key 0 preempts every other registrant and the reservation.
        Some(r) if r.kind.all_registrants() && sa == 0 => {
            let gone = st.remove(|r| r.nexus != me);
            st.res = Some(Reservation { holder: me, kind });
            gone
        }
        Some(r)
            if !r.kind.all_registrants()
                && st.registration(r.holder).map(|h| h.key) == Some(sa) =>
        {
            let gone = st.remove(others_with_key);
            st.res = Some(Reservation { holder: me, kind });
            gone
        }
        // No reservation, or not the holder's key: registrations only.
        _ => {
            if sa == 0 {
                return Err(Refuse::Check(Sense::invalid_field_in_parameter_list(
                    SA_KEY_BYTE,
                    None,
                )));
            }
            if !matched {
                return Err(Refuse::Conflict);
            }
            st.remove(others_with_key)
        }
    };
    st.bump();
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_list_known_bytes() {
        let mut b = [0xa5u8; PARAM_LEN];
        b[..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes()); // RESERVATION KEY
        b[8..16].copy_from_slice(&0x99aa_bbcc_ddee_ff00u64.to_be_bytes()); // SA RESERVATION KEY
        b[20] = ALL_TG_PT | APTPL; // SPEC_I_PT 0
        let p = ParamList::parse(&b).expect("valid");
        assert_eq!(
            p,
            ParamList {
                key: 0x1122_3344_5566_7788,
                sa_key: 0x99aa_bbcc_ddee_ff00,
                all_tg_pt: true,
                aptpl: true,
            }
        );
        b[20] = SPEC_I_PT;
        let s = ParamList::parse(&b).expect_err("SPEC_I_PT");
        assert_eq!(s.code(), SenseCode::INVALID_FIELD_IN_PARAMETER_LIST);
    }
}
