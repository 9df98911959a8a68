//! The SRP initiator channel core, sans-IO: login and re-login, credits, tags, per-command
//! timeouts with task-management escalation, target-initiated IUs, and the reconnect state
//! machine with the SRP transport class timers (reconnect_delay, fast_io_fail_tmo,
//! dev_loss_tmo) of Linux `scsi_transport_srp`.
//!
//! Contract: [`InitiatorChannel`] owns no queue pair, clock, thread or RNG. A driver (the
//! StorPort model, the iSCSI-port model, a simulator) feeds it time and inputs and drains its
//! outputs, in this order on every wake-up:
//!
//! 1. `handle_*` for whatever happened: [`InitiatorChannel::handle_login_rsp`] /
//!    [`InitiatorChannel::handle_login_rej`] (CM REP / REJ private data),
//!    [`InitiatorChannel::handle_recv`] (a received IU, with the rkey the target remotely
//!    invalidated, if any), [`InitiatorChannel::handle_send_done`],
//!    [`InitiatorChannel::handle_disconnect`] (QP error, DREQ, CM failure), and
//!    [`InitiatorChannel::handle_timeout`] once `now >= poll_timeout()`;
//!    [`InitiatorChannel::connect`] to log in and [`InitiatorChannel::submit`] for new SCSI
//!    commands;
//! 2. [`InitiatorChannel::poll_action`] until `None`: connect, post a SEND, register a held
//!    command's buffer again (answered by [`InitiatorChannel::handle_remapped`], at once or
//!    on a later wake-up), disconnect, complete a command, end a caller's task management
//!    request ([`InitiatorChannel::abort_task`], [`InitiatorChannel::reset_lun`]);
//! 3. [`InitiatorChannel::poll_event`] until `None`: what to log or show (state changes,
//!    escalation steps, AERs);
//! 4. [`InitiatorChannel::poll_timeout`]: when to call `handle_timeout` next.
//!
//! Every command submitted gets exactly one [`Completion`]. Memory registration is the
//! caller's: a command carries the data buffer descriptors it has already registered, and
//! they must stay valid until its completion. Every SRP_CMD SEND names its command
//! ([`Action::Send`] `cmd`), so the driver chains that command's registration work requests
//! in front. A command held across a reconnect that has descriptors is not re-sent with
//! them: after the re-login the core asks [`Action::Remap`] for it, the driver registers the
//! buffer again on the new queue pair and answers [`InitiatorChannel::handle_remapped`], and
//! the re-sent SRP_CMD carries the new descriptors.
//!
//! Only `core` and `alloc` are used here, so the core can later go `#![no_std]`; the one
//! exception is [`registration`], the memory-registration strategies, which build `hca`
//! work requests over `hca` memory blocks.
//!
//! Files: `login` (LOGIN_REQ in both forms, LOGIN_RSP negotiation, LOGIN_REJ reasons),
//! `tags` (the generation-checked tag slab), `pool` (send-slot accounting), `timers`
//! (transport timers, their validation, backoff, the port state table), `escalation` (the
//! abort → LUN reset → channel reset ladder), `command` (what a caller submits and gets
//! back), `channel` (the state machine), `receive` (received IUs), `recovery` (loss,
//! reconnect, fast_io_fail, dev_loss, logout), `task_mgmt` (the caller's ABORT TASK and
//! LOGICAL UNIT RESET), `error`, [`registration`] (per-I/O FRMR, immediate
//! data, the opt-in all-memory region).

extern crate alloc;

mod channel;
mod command;
mod error;
mod escalation;
mod login;
mod pool;
mod receive;
mod recovery;
pub mod registration;
mod tags;
mod task_mgmt;
mod timers;

pub use channel::{Action, Event, InitiatorChannel, InitiatorConfig, LossCause};
pub use command::{
    CmdId, Command, Completion, DataDescriptors, DataDir, Outcome, Refused, Remapped, Response,
};
pub use error::InitiatorError;
pub use escalation::{EscalationStep, Stage};
pub use login::{LoginForm, LoginParams, Negotiated, RejectAdvice};
pub use pool::{SendKind, SendPool};
pub use tags::{TagSlab, TaggedSlot};
pub use task_mgmt::{TmfCompletion, TmfId, TmfResult};
pub use timers::{
    BLOCK_MAX_TIMEOUT, PortEvent, PortState, TimerKind, TransportTimers, reconnect_backoff,
};

#[cfg(test)]
mod channel_tests;
#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod test_target;
