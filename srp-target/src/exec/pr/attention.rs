//! The unit attentions a PERSISTENT RESERVE OUT service action establishes (SPC-4 5.13.11),
//! from the state before and after it and the registrations it removed:
//!
//! - PREEMPT, PREEMPT AND ABORT: REGISTRATIONS PREEMPTED to every I_T nexus whose
//!   registration it removed; if it changed the reservation's type, RESERVATIONS RELEASED
//!   to every other remaining registrant.
//! - CLEAR: RESERVATIONS PREEMPTED to every other registrant.
//! - RELEASE of a registrants-only or all-registrants reservation: RESERVATIONS RELEASED to
//!   every other registrant.
//! - REGISTER with key 0 by the holder of a registrants-only reservation (which releases
//!   it): RESERVATIONS RELEASED to every other registrant.
//!
//! RESERVE, and RELEASE of a Write Exclusive or Exclusive Access reservation, establish none.

use super::{ItNexus, PrState};
use crate::exec::ua::To;
use scsi::SenseCode;
use scsi::cdb::PrOutAction;

/// The conditions `action`, sent through `me`, establishes; `gone` are the I_T nexuses
/// whose registrations it removed.
pub(crate) fn attentions(
    action: PrOutAction,
    before: &PrState,
    after: &PrState,
    me: ItNexus,
    gone: &[ItNexus],
) -> Vec<(To, SenseCode)> {
    use PrOutAction as A;
    let others = |st: &PrState, code: SenseCode| -> Vec<(To, SenseCode)> {
        st.regs
            .iter()
            .filter(|r| r.nexus != me)
            .map(|r| (To::One(r.nexus), code))
            .collect()
    };
    // The reservation went away, and it was one registrants had access under.
    let released =
        matches!((before.res, after.res), (Some(r), None) if r.kind.registrants_access());
    match action {
        A::Preempt | A::PreemptAndAbort => {
            let mut v: Vec<(To, SenseCode)> = gone
                .iter()
                .map(|n| (To::One(*n), SenseCode::REGISTRATIONS_PREEMPTED))
                .collect();
            let retyped = matches!((before.res, after.res), (Some(b), Some(a)) if b.kind != a.kind);
            if retyped {
                v.extend(others(after, SenseCode::RESERVATIONS_RELEASED));
            }
            v
        }
        // CLEAR removed every registration: `gone` is everyone registered before it.
        A::Clear => gone
            .iter()
            .filter(|n| **n != me)
            .map(|n| (To::One(*n), SenseCode::RESERVATIONS_PREEMPTED))
            .collect(),
        A::Release if released => others(after, SenseCode::RESERVATIONS_RELEASED),
        A::Register | A::RegisterAndIgnoreExistingKey
            if released && before.res.is_some_and(|r| !r.kind.all_registrants()) =>
        {
            others(after, SenseCode::RESERVATIONS_RELEASED)
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::pr::{Registration, ResType, Reservation};

    fn nexus(i: u8) -> ItNexus {
        ItNexus::test(i, 1)
    }

    fn state(regs: &[u8], res: Option<(u8, ResType)>) -> PrState {
        PrState {
            regs: regs
                .iter()
                .map(|&i| Registration {
                    nexus: nexus(i),
                    key: u64::from(i),
                    all_tg_pt: false,
                })
                .collect(),
            res: res.map(|(i, kind)| Reservation {
                holder: nexus(i),
                kind,
            }),
            ..PrState::default()
        }
    }

    #[test]
    fn release_tells_registrants_only_for_registrant_types() {
        use ResType as R;
        let (a, b, c) = (nexus(1), nexus(2), nexus(3));
        let after = state(&[1, 2, 3], None);
        for (kind, told) in [
            (R::WriteExclusive, false),
            (R::ExclusiveAccess, false),
            (R::WriteExclusiveRegistrantsOnly, true),
            (R::ExclusiveAccessAllRegistrants, true),
        ] {
            let before = state(&[1, 2, 3], Some((1, kind)));
            let v = attentions(PrOutAction::Release, &before, &after, a, &[]);
            let want = if told {
                vec![
                    (To::One(b), SenseCode::RESERVATIONS_RELEASED),
                    (To::One(c), SenseCode::RESERVATIONS_RELEASED),
                ]
            } else {
                vec![]
            };
            assert_eq!(v, want, "{kind:?}");
        }
        // A RELEASE that released nothing (not the holder) tells nobody.
        let before = state(&[1, 2], Some((2, R::WriteExclusiveRegistrantsOnly)));
        let v = attentions(PrOutAction::Release, &before, &before, a, &[]);
        assert!(v.is_empty());
    }

    #[test]
    fn preempt_clear_and_unregister() {
        use ResType as R;
        let (a, b, c) = (nexus(1), nexus(2), nexus(3));
        // A preempts B, the holder, with another type: B preempted, C told of the release.
        let before = state(&[1, 2, 3], Some((2, R::WriteExclusive)));
        let after = state(&[1, 3], Some((1, R::ExclusiveAccess)));
        let v = attentions(PrOutAction::PreemptAndAbort, &before, &after, a, &[b]);
        assert_eq!(
            v,
            vec![
                (To::One(b), SenseCode::REGISTRATIONS_PREEMPTED),
                (To::One(c), SenseCode::RESERVATIONS_RELEASED),
            ]
        );
        // Same type: only the preempted hear of it.
        let after = state(&[1, 3], Some((1, R::WriteExclusive)));
        let v = attentions(PrOutAction::Preempt, &before, &after, a, &[b]);
        assert_eq!(v, vec![(To::One(b), SenseCode::REGISTRATIONS_PREEMPTED)]);
        // CLEAR: everyone else registered before it.
        let v = attentions(
            PrOutAction::Clear,
            &before,
            &state(&[], None),
            a,
            &[a, b, c],
        );
        assert_eq!(
            v,
            vec![
                (To::One(b), SenseCode::RESERVATIONS_PREEMPTED),
                (To::One(c), SenseCode::RESERVATIONS_PREEMPTED),
            ]
        );
        // The holder of a registrants-only reservation unregisters: it is released.
        let before = state(&[1, 2, 3], Some((1, R::ExclusiveAccessRegistrantsOnly)));
        let after = state(&[2, 3], None);
        let v = attentions(PrOutAction::Register, &before, &after, a, &[a]);
        assert_eq!(
            v,
            vec![
                (To::One(b), SenseCode::RESERVATIONS_RELEASED),
                (To::One(c), SenseCode::RESERVATIONS_RELEASED),
            ]
        );
        // RESERVE establishes nothing.
        let v = attentions(PrOutAction::Reserve, &after, &before, a, &[]);
        assert!(v.is_empty());
    }
}
