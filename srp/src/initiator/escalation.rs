//! The error-handling ladder for a command that does not complete (ib_srp's SCSI EH
//! handlers): ABORT TASK, then LOGICAL UNIT RESET, then a channel reset (reconnect).
//!
//! A step that cannot be taken (no task-management credit or send slot: the reserve is held
//! by a TMF that never came back) counts as failed, as in ib_srp where `srp_send_tsk_mgmt`
//! fails and the midlayer escalates.

use super::command::Outcome;
use crate::wire::Tag;

/// Where a command stands in the ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Sent, within its timeout.
    Running,
    /// Timed out; ABORT TASK `tmf` is outstanding.
    Aborting {
        /// Tag of the ABORT TASK.
        tmf: Tag,
    },
    /// LOGICAL UNIT RESET `tmf` is outstanding for its LUN.
    Resetting {
        /// Tag of the LOGICAL UNIT RESET.
        tmf: Tag,
    },
}

/// A rung of the ladder, reported as [`super::Event::Escalated`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EscalationStep {
    /// SRP_TSK_MGMT ABORT TASK for the command.
    AbortTask,
    /// SRP_TSK_MGMT LOGICAL UNIT RESET for its LUN.
    LunReset,
    /// Disconnect and re-login.
    ChannelReset,
}

/// What happened to a command under escalation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Trigger {
    /// Its own timeout expired.
    CommandTimedOut,
    /// The TMF for it answered FUNCTION COMPLETE.
    TmfSucceeded,
    /// The TMF answered with a failure code, or could not be sent.
    TmfFailed,
    /// The TMF did not answer in time.
    TmfTimedOut,
}

/// What to do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Take this step (AbortTask or LunReset: send it; ChannelReset: reset).
    Step(EscalationStep),
    /// Complete the command.
    Finish(Outcome),
    /// Nothing (e.g. a stale trigger for a stage already left).
    Ignore,
}

/// The ladder as one table.
pub(super) fn next(stage: Stage, trigger: Trigger) -> Next {
    use Stage as S;
    use Trigger as T;
    match (stage, trigger) {
        // A command times out: first ask the target to abort it.
        (S::Running, T::CommandTimedOut) => Next::Step(EscalationStep::AbortTask),
        // The abort worked: the command is over, without a response.
        (S::Aborting { .. }, T::TmfSucceeded) => Next::Finish(Outcome::Aborted),
        // The abort failed or hung: reset the logical unit.
        (S::Aborting { .. }, T::TmfFailed | T::TmfTimedOut) => Next::Step(EscalationStep::LunReset),
        // The LUN reset worked: every command on the LUN is over.
        (S::Resetting { .. }, T::TmfSucceeded) => Next::Finish(Outcome::Reset),
        // The LUN reset failed or hung: reset the channel.
        (S::Resetting { .. }, T::TmfFailed | T::TmfTimedOut) => {
            Next::Step(EscalationStep::ChannelReset)
        }
        // A command already under escalation has no timeout of its own any more; a TMF
        // answer for a running command belongs to an earlier stage it left.
        (S::Aborting { .. } | S::Resetting { .. }, T::CommandTimedOut)
        | (S::Running, T::TmfSucceeded | T::TmfFailed | T::TmfTimedOut) => Next::Ignore,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_table() {
        let a = Stage::Aborting { tmf: Tag(1) };
        let r = Stage::Resetting { tmf: Tag(2) };
        let cases = [
            (
                Stage::Running,
                Trigger::CommandTimedOut,
                Next::Step(EscalationStep::AbortTask),
            ),
            (a, Trigger::TmfSucceeded, Next::Finish(Outcome::Aborted)),
            (a, Trigger::TmfFailed, Next::Step(EscalationStep::LunReset)),
            (
                a,
                Trigger::TmfTimedOut,
                Next::Step(EscalationStep::LunReset),
            ),
            (r, Trigger::TmfSucceeded, Next::Finish(Outcome::Reset)),
            (
                r,
                Trigger::TmfFailed,
                Next::Step(EscalationStep::ChannelReset),
            ),
            (
                r,
                Trigger::TmfTimedOut,
                Next::Step(EscalationStep::ChannelReset),
            ),
            (a, Trigger::CommandTimedOut, Next::Ignore),
            (Stage::Running, Trigger::TmfSucceeded, Next::Ignore),
        ];
        for (stage, trigger, want) in cases {
            assert_eq!(next(stage, trigger), want, "{stage:?} on {trigger:?}");
        }
    }
}
