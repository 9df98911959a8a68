//! The queue pair state machine (IBTA Vol 1 §10.3, table 91 "QP state transition
//! properties"; the required/optional attribute table as libibverbs' `qp_state_table` and
//! sideway's `RC_QP_STATE_TABLE`).
//!
//! One function, [`transition`], says whether `modify_qp(cur → next, mask)` is legal for a QP
//! type: an undefined transition names both states; a legal one names any required
//! attribute that is missing and any attribute the transition does not accept.

use core::fmt;

/// QP states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Reset: no resources in use, nothing processed.
    Reset,
    /// Initialized: receives may be posted, nothing is processed.
    Init,
    /// Ready to receive: inbound requests are processed.
    Rtr,
    /// Ready to send: both directions work.
    Rts,
    /// Send queue drain: no new send requests are started.
    Sqd,
    /// Send queue error (UD/UC only): sends fail, receives work.
    Sqe,
    /// Error: everything outstanding is flushed.
    Err,
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Sqd => "SQD",
            QpState::Sqe => "SQE",
            QpState::Err => "ERR",
        })
    }
}

/// QP transport service types this HCA implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable datagram (QP1, the GSI, is one).
    Ud,
}

bitflags::bitflags! {
    /// Which attributes a `modify_qp` call sets (`IBV_QP_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct QpAttrMask: u32 {
        /// The new state.
        const STATE = 1 << 0;
        /// The current state (a check).
        const CUR_STATE = 1 << 1;
        /// Enable SQD async notification.
        const EN_SQD_ASYNC_NOTIFY = 1 << 2;
        /// Access flags for inbound RDMA.
        const ACCESS_FLAGS = 1 << 3;
        /// P_Key index.
        const PKEY_INDEX = 1 << 4;
        /// Port.
        const PORT = 1 << 5;
        /// Q_Key (UD).
        const QKEY = 1 << 6;
        /// Address vector: the peer's GID.
        const AV = 1 << 7;
        /// Path MTU.
        const PATH_MTU = 1 << 8;
        /// Local ACK timeout.
        const TIMEOUT = 1 << 9;
        /// Transport retry count.
        const RETRY_CNT = 1 << 10;
        /// RNR retry count.
        const RNR_RETRY = 1 << 11;
        /// Expected receive PSN.
        const RQ_PSN = 1 << 12;
        /// Outstanding RDMA READs/atomics as initiator (ORD).
        const MAX_QP_RD_ATOMIC = 1 << 13;
        /// Alternate path.
        const ALT_PATH = 1 << 14;
        /// Minimum RNR NAK timer.
        const MIN_RNR_TIMER = 1 << 15;
        /// Send PSN.
        const SQ_PSN = 1 << 16;
        /// Outstanding RDMA READs/atomics as responder (IRD).
        const MAX_DEST_RD_ATOMIC = 1 << 17;
        /// Path migration state.
        const PATH_MIG_STATE = 1 << 18;
        /// Destination QP number.
        const DEST_QPN = 1 << 20;
    }
}

/// Why a `modify_qp` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModifyError {
    /// The state machine has no such transition.
    #[error("no QP state transition {from} -> {to}")]
    InvalidTransition {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// Attributes the transition requires were not given.
    #[error("QP {from} -> {to} requires {missing:?}")]
    MissingAttributes {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
        /// What is missing.
        missing: QpAttrMask,
    },
    /// Attributes the transition does not accept were given.
    #[error("QP {from} -> {to} does not accept {extra:?}")]
    UnexpectedAttributes {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
        /// What was not accepted.
        extra: QpAttrMask,
    },
    /// `CUR_STATE` was given and is not the QP's state.
    #[error("QP is in {actual}, not {claimed}")]
    WrongCurrentState {
        /// What the caller claimed.
        claimed: QpState,
        /// The real state.
        actual: QpState,
    },
}

type M = QpAttrMask;

/// The (required, optional) attributes of a transition, or `None` if it does not exist.
/// `STATE` is required by every transition and listed nowhere below.
fn table(qp_type: QpType, from: QpState, to: QpState) -> Option<(M, M)> {
    use QpState::*;
    let rc = qp_type == QpType::Rc;
    let path = M::ALT_PATH | M::PATH_MIG_STATE;
    let ud_key = if rc { M::ACCESS_FLAGS } else { M::QKEY };
    Some(match (from, to) {
        // Any state may go to RESET or ERR with nothing else.
        (_, Reset) | (_, Err) => (M::empty(), M::empty()),
        // Bring-up: bind to a port and partition; RC also sets inbound access rights.
        (Reset, Init) => (M::PKEY_INDEX | M::PORT | ud_key, M::empty()),
        (Init, Init) => (M::empty(), M::PKEY_INDEX | M::PORT | ud_key),
        // RC learns its peer here; UD needs nothing.
        (Init, Rtr) if rc => (
            M::AV
                | M::PATH_MTU
                | M::DEST_QPN
                | M::RQ_PSN
                | M::MAX_DEST_RD_ATOMIC
                | M::MIN_RNR_TIMER,
            M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
        ),
        (Init, Rtr) => (M::empty(), M::PKEY_INDEX | M::QKEY),
        // Sending needs the send PSN, and for RC the retry rules and ORD.
        (Rtr, Rts) if rc => (
            M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC,
            M::CUR_STATE | M::ACCESS_FLAGS | M::MIN_RNR_TIMER | path,
        ),
        (Rtr, Rts) => (M::SQ_PSN, M::CUR_STATE | M::QKEY),
        (Rts, Rts) if rc => (
            M::empty(),
            M::CUR_STATE | M::ACCESS_FLAGS | M::MIN_RNR_TIMER | path,
        ),
        (Rts, Rts) => (M::empty(), M::CUR_STATE | M::QKEY),
        // Draining and back.
        (Rts, Sqd) => (M::empty(), M::EN_SQD_ASYNC_NOTIFY),
        (Sqd, Rts) if rc => (
            M::empty(),
            M::CUR_STATE | M::ACCESS_FLAGS | M::MIN_RNR_TIMER | path,
        ),
        (Sqd, Rts) => (M::empty(), M::CUR_STATE | M::QKEY),
        (Sqd, Sqd) if rc => (
            M::empty(),
            M::AV
                | M::ALT_PATH
                | M::ACCESS_FLAGS
                | M::PKEY_INDEX
                | M::MIN_RNR_TIMER
                | M::PATH_MIG_STATE
                | M::TIMEOUT
                | M::RETRY_CNT
                | M::RNR_RETRY
                | M::MAX_QP_RD_ATOMIC
                | M::MAX_DEST_RD_ATOMIC,
        ),
        (Sqd, Sqd) => (M::empty(), M::PKEY_INDEX | M::QKEY),
        // Send queue error exists for UD only; RC send errors take the whole QP to ERR.
        (Sqe, Rts) if !rc => (M::empty(), M::CUR_STATE | M::QKEY),
        _ => return None,
    })
}

/// Checks a `modify_qp` from `from` to `to` with `mask` (which must include `STATE`).
pub fn transition(
    qp_type: QpType,
    from: QpState,
    to: QpState,
    mask: QpAttrMask,
) -> Result<(), ModifyError> {
    let (required, optional) =
        table(qp_type, from, to).ok_or(ModifyError::InvalidTransition { from, to })?;
    let required = required | M::STATE;
    let missing = required - mask;
    if !missing.is_empty() {
        return Err(ModifyError::MissingAttributes { from, to, missing });
    }
    let extra = mask - required - optional;
    if !extra.is_empty() {
        return Err(ModifyError::UnexpectedAttributes { from, to, extra });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use QpState::{Init, Reset, Rtr, Rts, Sqd, Sqe};
    use alloc::string::ToString;
    const ERR: QpState = QpState::Err;

    const ALL: [QpState; 7] = [Reset, Init, Rtr, Rts, Sqd, Sqe, ERR];

    #[test]
    fn rc_bring_up_follows_the_ibta_table() {
        let init = M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS;
        assert_eq!(transition(QpType::Rc, Reset, Init, init), Ok(()));
        let rtr = M::STATE
            | M::AV
            | M::PATH_MTU
            | M::DEST_QPN
            | M::RQ_PSN
            | M::MAX_DEST_RD_ATOMIC
            | M::MIN_RNR_TIMER;
        assert_eq!(transition(QpType::Rc, Init, Rtr, rtr), Ok(()));
        let rts =
            M::STATE | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC;
        assert_eq!(transition(QpType::Rc, Rtr, Rts, rts), Ok(()));
        assert_eq!(
            transition(QpType::Rc, Rtr, Rts, rts - M::SQ_PSN),
            Err(ModifyError::MissingAttributes {
                from: Rtr,
                to: Rts,
                missing: M::SQ_PSN
            })
        );
        assert_eq!(
            transition(QpType::Rc, Rtr, Rts, rts | M::DEST_QPN),
            Err(ModifyError::UnexpectedAttributes {
                from: Rtr,
                to: Rts,
                extra: M::DEST_QPN
            })
        );
    }

    #[test]
    fn illegal_transitions_name_both_states() {
        let err = transition(QpType::Rc, Reset, Rts, M::STATE).expect_err("RESET -> RTS");
        assert_eq!(
            err,
            ModifyError::InvalidTransition {
                from: Reset,
                to: Rts
            }
        );
        assert_eq!(err.to_string(), "no QP state transition RESET -> RTS");
        assert!(
            transition(QpType::Rc, Sqe, Rts, M::STATE).is_err(),
            "SQE is UD-only"
        );
        assert!(transition(QpType::Ud, Sqe, Rts, M::STATE).is_ok());
    }

    #[test]
    fn every_state_can_reset_or_fail_and_nothing_else_is_implicit() {
        for from in ALL {
            assert_eq!(transition(QpType::Rc, from, Reset, M::STATE), Ok(()));
            assert_eq!(transition(QpType::Rc, from, ERR, M::STATE), Ok(()));
        }
        let legal = [
            (Reset, Init),
            (Init, Init),
            (Init, Rtr),
            (Rtr, Rts),
            (Rts, Rts),
            (Rts, Sqd),
            (Sqd, Rts),
            (Sqd, Sqd),
        ];
        for from in ALL {
            for to in ALL {
                let exists = table(QpType::Rc, from, to).is_some();
                let expected = to == Reset || to == ERR || legal.contains(&(from, to));
                assert_eq!(exists, expected, "RC {from} -> {to}");
            }
        }
    }

    #[test]
    fn ud_needs_qkey_not_peer_attributes() {
        let init = M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY;
        assert_eq!(transition(QpType::Ud, Reset, Init, init), Ok(()));
        assert_eq!(transition(QpType::Ud, Init, Rtr, M::STATE), Ok(()));
        assert_eq!(
            transition(QpType::Ud, Rtr, Rts, M::STATE | M::SQ_PSN),
            Ok(())
        );
        assert!(matches!(
            transition(QpType::Ud, Init, Rtr, M::STATE | M::DEST_QPN),
            Err(ModifyError::UnexpectedAttributes { .. })
        ));
    }
}
