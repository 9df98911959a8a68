//! HwBuildIo and HwStartIo of the SRP miniport, and the hand-back and re-login of a channel
//! reset.
//!
//! - BuildIo (unlocked, concurrent, dispatch): maps the SRB's own pages — its scatter-gather
//!   elements, physical addresses in system memory — through the registration (FRMR per
//!   I/O, or descriptors into the all-memory region under TrustTarget; a small write as
//!   immediate data), so the HCA moves the data straight between them and the wire, and
//!   leaves the ready [`Command`] in the SRB extension. No region free →
//!   `SRB_STATUS_BUSY` (the port re-issues); never waits.
//! - StartIo (serialized, dispatch): submits the command to the channel core and executes
//!   what it yields (the SEND with its REG_MRs chained before). A core refusal (not logged
//!   in yet, its queue full) → `SRB_STATUS_BUSY`. After a reconnect the core asks to
//!   register each held command again (`Action::Remap`, answered in `dpc`): the old regions
//!   are discarded and recreated, the buffer mapped anew, and the SRP_CMD re-sent with the
//!   new descriptors behind the new REG_MRs.
//! - A channel reset (HwResetBus's escalation, RestartAdapter; see `reset`): every SRB the
//!   adapter holds completes through RequestComplete (its regions discarded and
//!   recreated), the old QP and CM connection are torn down and a fresh core logs in again
//!   (SINGLE, so the target drops the old one).
#[allow(unused_imports)]
use crate::prelude::*;

use super::adapter::{Active, Adapter, Inner};
use super::side::PortSide;
use super::{SrbExt, dpc};
use core::sync::atomic::Ordering;
use srp::initiator::registration::{Mapping, MappingKind, RegError, Segment};
use srp::initiator::{Command, DataDescriptors, DataDir, InitiatorChannel, InitiatorError};
use srp::wire::cmd::TaskAttr;
use win_port::{DataDirection, Srb, SrbFunction, SrbStatus};

/// What BuildIo prepared for StartIo.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) cmd: Command,
    pub(crate) handle: srp::initiator::registration::MapHandle,
    pub(crate) pre_wrs: ib_verbs::inline_one::InlineOne<ib_verbs::wr::SendWr>,
    pub(crate) dir: DataDir,
}

fn finish_now(port: &dyn PortSide, srb: &Srb<SrbExt>, status: SrbStatus) -> bool {
    srb.set_status(status);
    port.complete(srb);
    false
}

#[cfg(feature = "std")]
std::thread_local! {
    /// This thread's segment list for mapping an SRB (BuildIo runs on many threads at
    /// once), kept between calls: mapping allocates no list.
    static SEGMENTS: core::cell::RefCell<Vec<Segment>> = const { core::cell::RefCell::new(Vec::new()) };
}

/// Spare segment lists (no `std`: no thread-locals in a kernel).
#[cfg(not(feature = "std"))]
static SEGMENTS: crate::scratch::Stash<Segment> = crate::scratch::Stash::new();

/// Runs `f` with a segment list kept between calls.
fn with_segments<R>(f: impl FnOnce(&mut Vec<Segment>) -> R) -> R {
    #[cfg(feature = "std")]
    {
        SEGMENTS.with_borrow_mut(f)
    }
    #[cfg(not(feature = "std"))]
    {
        let mut segments = SEGMENTS.take();
        let r = f(&mut segments);
        SEGMENTS.give(segments);
        r
    }
}

impl Adapter {
    /// Maps the SRB's own pages — its scatter-gather elements, physical addresses in
    /// system memory — through the registration for `dir`.
    pub(crate) fn map_srb(&self, srb: &Srb<SrbExt>, dir: DataDir) -> Result<Mapping, RegError> {
        let block = self.memory.block();
        with_segments(|segments| {
            segments.clear();
            segments.extend(
                (srb.scatter_gather_list().elements())
                    .map(|e| Segment::new(block, e.physical_address, e.length)),
            );
            let mapped = self.reg().map(dir, segments);
            segments.clear();
            mapped
        })
    }

    /// HwBuildIo: [`Adapter::prepare`], completing the SRB at once when it cannot go.
    pub(crate) fn build_io(&self, port: &dyn PortSide, srb: &Srb<SrbExt>) -> bool {
        match self.prepare(srb) {
            Ok(()) => true,
            Err(status) => finish_now(port, srb, status),
        }
    }

    /// Maps an EXECUTE_SCSI SRB's buffer and leaves the ready command in its extension
    /// (other functions need nothing). The status it must complete with when it cannot go:
    /// BUSY when no region is free (try again after a completion), INVALID_LUN,
    /// INVALID_REQUEST. Never waits.
    pub(crate) fn prepare(&self, srb: &Srb<SrbExt>) -> Result<(), SrbStatus> {
        if srb.function() != SrbFunction::ExecuteScsi {
            return Ok(());
        }
        let Ok(lun) = scsi::Lun::from_number(u32::from(srb.address().lun)) else {
            return Err(SrbStatus::INVALID_LUN);
        };
        let dir = match srb.direction() {
            DataDirection::None => DataDir::None,
            DataDirection::In => DataDir::Read,
            DataDirection::Out => DataDir::Write,
        };
        let mapped = self.map_srb(srb, dir);
        let mut m = match mapped {
            Ok(m) => m,
            Err(RegError::Busy { .. }) => return Err(SrbStatus::BUSY),
            Err(_) => return Err(SrbStatus::INVALID_REQUEST),
        };
        match m.kind {
            MappingKind::Immediate => self.mapped.0.fetch_add(1, Ordering::Relaxed),
            MappingKind::Frmr | MappingKind::Windows => {
                self.mapped.1.fetch_add(1, Ordering::Relaxed)
            }
            MappingKind::AllMemory => self.mapped_all_memory.fetch_add(1, Ordering::Relaxed),
            MappingKind::NoData => 0,
        };
        let mut cmd = Command {
            lun,
            cdb: srb.cdb().into(),
            task_attr: TaskAttr::Simple,
            dir,
            data_len: u32::try_from(srb.data_transfer_length()).unwrap_or(u32::MAX),
            data: DataDescriptors::None,
            imm_data: Vec::new(),
            remote_invalidate: false,
            timeout: None,
        };
        m.apply(&mut cmd);
        let prepared = Prepared {
            cmd,
            handle: m.handle,
            pre_wrs: m.pre_wrs,
            dir,
        };
        srb.with_extension(|x| x.prepared = Some(prepared));
        Ok(())
    }

    /// HwStartIo: [`Adapter::submit`]; an SRB the channel cannot take now completes BUSY
    /// (the port issues it again).
    pub(crate) fn start_io(&self, port: &dyn PortSide, srb: Srb<SrbExt>) -> bool {
        if let Some(srb) = self.submit(port, srb) {
            srb.set_status(SrbStatus::BUSY);
            port.complete(&srb);
        }
        true
    }

    /// Starts a prepared SRB ([`Adapter::prepare`]): an EXECUTE_SCSI goes to the channel
    /// core and what it yields is executed (the SEND behind its REG_MRs); FLUSH and
    /// SHUTDOWN complete SUCCESS (the target's cache is the target's: SYNCHRONIZE CACHE
    /// travels as a command); management SRBs start their TMF. Gives the SRB back,
    /// unprepared and not completed, when the channel cannot take it now — not logged in,
    /// or its queue is full — for the caller to complete BUSY or to hold and submit again
    /// (prepared anew). Never waits.
    pub(crate) fn submit(&self, port: &dyn PortSide, srb: Srb<SrbExt>) -> Option<Srb<SrbExt>> {
        match srb.function() {
            SrbFunction::ExecuteScsi => {}
            SrbFunction::Flush | SrbFunction::Shutdown => {
                finish_now(port, &srb, SrbStatus::SUCCESS);
                return None;
            }
            SrbFunction::AbortCommand
            | SrbFunction::ResetLogicalUnit
            | SrbFunction::ResetDevice => {
                self.start_management(port, srb);
                return None;
            }
        }
        let Some(p) = srb.with_extension(|x| x.prepared.take()) else {
            finish_now(port, &srb, SrbStatus::ERROR);
            return None;
        };
        let mut done = dpc::done_list();
        let mut refused = None;
        {
            let mut s = self.lock();
            let now = self.now();
            match s.ch.channel.submit(now, p.cmd) {
                Ok(id) => {
                    if !p.pre_wrs.is_empty() {
                        s.post.pending_reg.insert(id, p.pre_wrs);
                    }
                    s.ch.cmds.insert(
                        id,
                        Active {
                            srb,
                            handle: p.handle,
                            dir: p.dir,
                        },
                    );
                }
                Err(r) => {
                    // Its REG_MRs were never posted.
                    self.discard(p.handle);
                    if matches!(
                        r.reason,
                        InitiatorError::Busy { .. } | InitiatorError::WrongState(_)
                    ) {
                        refused = Some(srb);
                    } else {
                        // It can never be carried (a CDB the IU cannot hold).
                        tracing::warn!(reason = %r.reason, "a command the channel cannot carry");
                        srb.set_status(SrbStatus::INVALID_REQUEST);
                        done.push(srb);
                    }
                }
            }
            self.run_actions(&mut s, port, &mut done);
        }
        dpc::complete_all(port, done);
        refused
    }

    /// Completes every SRB the adapter holds with `status` (its regions discarded: posted on
    /// a QP just destroyed, or never), management SRBs included.
    pub(crate) fn flush_held(&self, s: &mut Inner, status: SrbStatus, done: &mut dpc::Done) {
        let active = s.ch.cmds.drain_by_id();
        for (_, a) in active {
            self.discard(a.handle);
            a.srb.set_status(status);
            done.push(a.srb);
        }
        drop(s.post.pending_reg.drain_by_id());
        for (_, m) in core::mem::take(&mut s.ch.mgmt).into_iter() {
            m.srb.set_status(status);
            done.push(m.srb);
        }
        // A bus or device reset running ends with the channel it ran on.
        if let Some(srb) = s.ch.target_reset.take().and_then(|r| r.into_srb()) {
            srb.set_status(status);
            done.push(srb);
        }
    }

    /// A fresh channel core logs in (SINGLE, so the target drops any old channel); the
    /// port is paused until it has.
    pub(crate) fn relogin(&self, s: &mut Inner, port: &dyn PortSide, done: &mut dpc::Done) {
        self.start_login(s, port);
        self.run_actions(s, port, done);
    }

    /// [`Adapter::relogin`] without running the new core's actions (for a caller inside
    /// the DPC's action loop, which runs them next).
    pub(crate) fn start_login(&self, s: &mut Inner, port: &dyn PortSide) {
        let now = self.now();
        s.ch.channel = InitiatorChannel::new(Adapter::channel_config(&self.cfg));
        s.ch.channel.connect(now);
        s.ch.paused = true;
        port.hold(self.cfg.login_timeout.as_secs().max(1) as u32);
    }
}
