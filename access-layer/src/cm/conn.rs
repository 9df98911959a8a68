//! One connection's state machine: the states of IBTA Vol 1 §12.9 and what each input does
//! in each of them, in one `match` with a comment per arm.

use crate::mad::MadAddress;
use crate::mad::cm::{CmRep, CmReq};
use crate::mad::{CommId, MadBuf, ServiceId, Tid};
use ib_verbs::time::Time;

/// Which side started the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sent the REQ.
    Active,
    /// Received the REQ.
    Passive,
}

/// Connection states (IBTA Vol 1 figure 107/108, without LAP and SIDR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// Active: REQ sent, waiting for REP (or MRA, REJ).
    ReqSent,
    /// Active: the passive side sent an MRA for our REQ: waiting longer, not resending.
    MraReceived,
    /// Active: REP received, waiting for the consumer to confirm (RTU) or reject it.
    RepReceived,
    /// Passive: REQ received, waiting for the consumer to accept or reject it.
    ReqReceived,
    /// Passive: REP sent, waiting for RTU.
    RepSent,
    /// Both: connected.
    Established,
    /// Both: DREQ sent, waiting for DREP.
    DreqSent,
    /// Both: disconnected; old messages are still answered until the wait ends.
    TimeWait,
    /// Both: gone (rejected, timed out, or out of time-wait).
    Closed,
}

/// What a connection sends or does next, decided by [`Conn::on`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// The retransmit timer fired.
    Timeout,
    /// A duplicate of the REQ that opened this connection.
    DupReq,
    /// REP received.
    Rep,
    /// RTU received.
    Rtu,
    /// REJ received.
    Rej,
    /// MRA received.
    Mra,
    /// DREQ received.
    Dreq,
    /// DREP received.
    Drep,
}

/// The reaction to an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing (the message does not belong to this state).
    Ignore,
    /// Send the last message again (a retransmission or an answer to a duplicate).
    Resend,
    /// Retries are spent: REJ with reason timeout (establishment) and close.
    GiveUp,
    /// Retries are spent while disconnecting: enter time-wait.
    GiveUpDisconnect,
    /// Tell the consumer the REP arrived.
    RepArrived,
    /// The connection is established.
    Establish,
    /// The peer rejected: close.
    Rejected,
    /// Wait longer before resending (the peer sent an MRA).
    Extend,
    /// The peer disconnects: send DREP, enter time-wait.
    AnswerDreq,
    /// Our DREQ was answered: enter time-wait.
    Disconnected,
    /// The time-wait is over: remove the connection.
    Remove,
    /// Answer a duplicate REP with the RTU again.
    ResendRtu,
    /// Answer a duplicate DREQ with the DREP again.
    ResendDrep,
}

/// One connection.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) role: Role,
    pub(crate) state: ConnState,
    pub(crate) local_id: CommId,
    pub(crate) remote_id: CommId,
    pub(crate) peer: MadAddress,
    pub(crate) service_id: ServiceId,
    /// TID of the establishment exchange (REQ, MRA, REP, RTU, REJ).
    pub(crate) tid: Tid,
    /// The last message sent, for retransmission and for answering duplicates.
    pub(crate) last_sent: Option<MadBuf>,
    /// The RTU or DREP we sent, to answer duplicates after the fact.
    pub(crate) final_sent: Option<MadBuf>,
    pub(crate) retries_left: u8,
    pub(crate) max_retries: u8,
    /// How long to wait for an answer before resending.
    pub(crate) timeout: core::time::Duration,
    pub(crate) timer: Option<Time>,
    /// The peer's QP (from its REQ or REP), for DREQ.
    pub(crate) peer_qpn: ib_verbs::Qpn,
    pub(crate) req: Option<CmReq>,
    pub(crate) rep: Option<CmRep>,
}

impl Conn {
    /// The transition table: what `input` does in the current state.
    pub(crate) fn on(&self, input: Input) -> Action {
        use ConnState as S;
        use Input as I;
        match (self.state, input) {
            // Retransmissions while waiting for an answer; time-wait simply ends.
            (S::ReqSent | S::MraReceived | S::RepSent, I::Timeout) if self.retries_left > 0 => {
                Action::Resend
            }
            (S::ReqSent | S::MraReceived | S::RepSent, I::Timeout) => Action::GiveUp,
            (S::DreqSent, I::Timeout) if self.retries_left > 0 => Action::Resend,
            (S::DreqSent, I::Timeout) => Action::GiveUpDisconnect,
            (S::TimeWait, I::Timeout) => Action::Remove,
            // Active side: the passive side answers our REQ.
            (S::ReqSent | S::MraReceived, I::Rep) => Action::RepArrived,
            (S::ReqSent, I::Mra) => Action::Extend,
            // A duplicate REP after we answered: our RTU was lost, send it again.
            (S::Established, I::Rep) if self.role == Role::Active => Action::ResendRtu,
            // Passive side: a duplicate REQ means our REP was lost (resend it); while the
            // consumer still decides, it is simply ignored.
            (S::RepSent, I::DupReq) => Action::Resend,
            (S::ReqReceived, I::DupReq) => Action::Ignore,
            (S::RepSent, I::Rtu) => Action::Establish,
            // A REJ ends any establishment, on either side.
            (
                S::ReqSent | S::MraReceived | S::RepReceived | S::ReqReceived | S::RepSent,
                I::Rej,
            ) => Action::Rejected,
            // Disconnection: a DREQ is answered in every connected state, including when our
            // own DREQ crossed it (both sides then go to time-wait).
            (S::Established | S::DreqSent, I::Dreq) => Action::AnswerDreq,
            (S::RepSent, I::Dreq) => Action::AnswerDreq,
            (S::DreqSent, I::Drep) => Action::Disconnected,
            (S::TimeWait, I::Dreq) => Action::ResendDrep,
            // Everything else is stale or out of order: drop it.
            _ => Action::Ignore,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::MadAddress;
    use ib_verbs::Gid;

    fn conn(state: ConnState, role: Role, retries_left: u8) -> Conn {
        Conn {
            role,
            state,
            local_id: CommId(1),
            remote_id: CommId(2),
            peer: MadAddress::gsi(1, Gid::default()),
            service_id: ServiceId(7),
            tid: Tid(1),
            last_sent: None,
            final_sent: None,
            retries_left,
            max_retries: 3,
            timeout: core::time::Duration::from_millis(1),
            timer: None,
            peer_qpn: ib_verbs::Qpn::default(),
            req: None,
            rep: None,
        }
    }

    #[test]
    fn timers_resend_until_the_budget_is_spent() {
        for s in [
            ConnState::ReqSent,
            ConnState::MraReceived,
            ConnState::RepSent,
        ] {
            assert_eq!(
                conn(s, Role::Active, 1).on(Input::Timeout),
                Action::Resend,
                "{s:?}"
            );
            assert_eq!(
                conn(s, Role::Active, 0).on(Input::Timeout),
                Action::GiveUp,
                "{s:?}"
            );
        }
        assert_eq!(
            conn(ConnState::DreqSent, Role::Active, 0).on(Input::Timeout),
            Action::GiveUpDisconnect
        );
        assert_eq!(
            conn(ConnState::TimeWait, Role::Active, 0).on(Input::Timeout),
            Action::Remove
        );
    }

    #[test]
    fn every_input_in_every_state_has_a_defined_action() {
        let states = [
            ConnState::ReqSent,
            ConnState::MraReceived,
            ConnState::RepReceived,
            ConnState::ReqReceived,
            ConnState::RepSent,
            ConnState::Established,
            ConnState::DreqSent,
            ConnState::TimeWait,
            ConnState::Closed,
        ];
        let inputs = [
            Input::Timeout,
            Input::DupReq,
            Input::Rep,
            Input::Rtu,
            Input::Rej,
            Input::Mra,
            Input::Dreq,
            Input::Drep,
        ];
        for s in states {
            for i in inputs {
                for role in [Role::Active, Role::Passive] {
                    let a = conn(s, role, 1).on(i);
                    if s == ConnState::Closed {
                        assert_eq!(a, Action::Ignore, "closed connections react to nothing");
                    }
                }
            }
        }
        // The crossing-DREQ and duplicate rules.
        assert_eq!(
            conn(ConnState::DreqSent, Role::Active, 1).on(Input::Dreq),
            Action::AnswerDreq
        );
        assert_eq!(
            conn(ConnState::TimeWait, Role::Passive, 1).on(Input::Dreq),
            Action::ResendDrep
        );
        assert_eq!(
            conn(ConnState::Established, Role::Active, 1).on(Input::Rep),
            Action::ResendRtu
        );
        assert_eq!(
            conn(ConnState::Established, Role::Passive, 1).on(Input::Rep),
            Action::Ignore
        );
        assert_eq!(
            conn(ConnState::RepSent, Role::Passive, 1).on(Input::DupReq),
            Action::Resend
        );
        assert_eq!(
            conn(ConnState::Established, Role::Active, 1).on(Input::Rej),
            Action::Ignore
        );
    }
}
