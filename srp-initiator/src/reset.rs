//! Bus and device resets of the SRP miniport: HwResetBus and RESET_DEVICE send a LOGICAL
//! UNIT RESET for each LUN the adapter knows, one after the other, on the live channel.
//!
//! Why not a channel reset: a fresh login ends only our own I_T nexus, so a SCSI-2
//! reservation another initiator holds survives it; Windows clusters (MSCS on Server
//! 2003) break a hung owner's reservation with IOCTL_STORAGE_BREAK_RESERVATION, which the
//! port turns into a bus reset, and a target releases the reservation on a LOGICAL UNIT
//! RESET (SPC-2 5.5.1; srp-target does). Linux ib_srp resets a device the same way
//! (`srp_reset_device`: SRP_TSK_LUN_RESET); its host reset (a reconnect) stays here as the
//! escalation.
//!
//! - HwResetBus (dispatch, the port's queues held): the port requires every SRB of the path
//!   completed before the routine returns, so each held SRB completes `SRB_STATUS_BUS_RESET`
//!   at once. A command the core has not sent yet is withdrawn (it never reaches the
//!   target); one the target may have keeps its tag in the core until the LUN's reset ends
//!   it (or its answer comes), but its regions are invalidated now (LOCAL_INV, posted
//!   before the SRB completes), so the target cannot write into the SRB's pages once they
//!   are the port's again (an RDMA with the old key fails the channel, which then logs in
//!   again and the sequence goes on). A read with no region of its own (TrustTarget
//!   registration: one region over all memory, nothing to invalidate) makes the bus reset
//!   a channel reset first — only a teardown keeps the target out — and the LUN resets
//!   follow on the new login. The adapter is paused (StorPortPause) until the last reset
//!   is answered: the class driver's retries reach the target after the target stopped the
//!   aborted commands (it answers the TMF after they stopped), never before.
//! - RESET_DEVICE (StartIo): the SRB waits for the sequence; the LU's SRBs the target had
//!   complete `SRB_STATUS_BUS_RESET` as each LUN's reset ends them (as RESET_LOGICAL_UNIT).
//!   The SRB completes SUCCESS, or ERROR when the target refused a LUN's reset.
//! - A LUN whose reset the target refuses (not FUNCTION COMPLETE) is counted and logged and
//!   the sequence goes on: the target answered, a channel reset would not reset that LUN
//!   either — unless HwResetBus handed back commands of that LUN the target may still run
//!   (the class driver retries them: a stale one could land after its retry); then the
//!   channel is reset, which ends our I_T nexus and so those tasks, and the sequence goes
//!   on from the next LUN on the new login. A reset not sent (no task management credit or slot, the channel down) or not
//!   answered within the core's TMF timeout escalates to the channel reset: teardown,
//!   everything held completes BUS_RESET, a fresh SINGLE login, and the sequence goes on
//!   from that LUN on the new channel (the adapter stays paused); a second such failure
//!   ends it there, a RESET_DEVICE then completing SUCCESS as a channel reset did before.
//!   A reset asked for while the channel is not logged in, or while a sequence runs, is a
//!   channel reset.
//!
//! Which LUNs: those a target answered a command for (a LOGICAL UNIT NOT SUPPORTED answer
//! excepted) and those of the commands held at the reset. Counters: [`ResetCounts`].
#[allow(unused_imports)]
use crate::prelude::*;

use super::SrbExt;
use super::adapter::{Adapter, Inner};
use super::dpc::{self, Done};
use super::side::PortSide;
use alloc::collections::VecDeque;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use srp::initiator::{PortState, TmfId, TmfResult};
use win_port::{DataDirection, Srb, SrbStatus};

/// The margin over the core's TMF timeout in the pause per LUN ([`Adapter::pause_for`]).
const PAUSE_MARGIN_SECS: u64 = 1;

/// What the adapter's resets did, for tests and a host daemon.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResetCounts {
    /// Reset sequences started (HwResetBus and RESET_DEVICE on a live channel).
    pub sequences: u64,
    /// LOGICAL UNIT RESETs the target answered FUNCTION COMPLETE.
    pub lun_resets: u64,
    /// LOGICAL UNIT RESETs the target refused (each logged).
    pub refused: u64,
    /// Resets done as a channel reset: the channel was not logged in, a sequence was
    /// running, or a LUN's reset was not sent or not answered (each logged); and channel
    /// resets a transport's caller asked for (`SrpTransport::reset`).
    pub escalated: u64,
}

/// The counters behind [`ResetCounts`].
#[derive(Debug, Default)]
pub(crate) struct ResetCounters {
    sequences: AtomicU64,
    lun_resets: AtomicU64,
    refused: AtomicU64,
    escalated: AtomicU64,
}

impl ResetCounters {
    pub(crate) fn snapshot(&self) -> ResetCounts {
        ResetCounts {
            sequences: self.sequences.load(Relaxed),
            lun_resets: self.lun_resets.load(Relaxed),
            refused: self.refused.load(Relaxed),
            escalated: self.escalated.load(Relaxed),
        }
    }
}

/// A running sequence of LOGICAL UNIT RESETs (under the adapter lock).
#[derive(Debug)]
pub(crate) struct TargetReset {
    /// What asked for it, for log lines.
    why: &'static str,
    /// LUNs still to reset, in order.
    luns: VecDeque<u8>,
    /// The reset outstanding and its LUN.
    current: Option<(TmfId, u8)>,
    /// The RESET_DEVICE SRB waiting for the sequence (HwResetBus returned already).
    srb: Option<Srb<SrbExt>>,
    /// LUNs whose reset the target refused.
    refused: Vec<u8>,
    /// A reset failed and the channel was reset: the rest of the sequence runs on the
    /// new login, and a second failure ends it.
    again: bool,
    /// LUNs of commands HwResetBus handed back that the target may still run: a refused
    /// reset of one resets the channel (module doc).
    live: Vec<u8>,
}

impl TargetReset {
    /// The RESET_DEVICE SRB waiting for it, if any (the sequence ends).
    pub(crate) fn into_srb(self) -> Option<Srb<SrbExt>> {
        self.srb
    }

    /// Whether `id` is the sequence's outstanding reset.
    pub(crate) fn owns(&self, id: TmfId) -> bool {
        self.current.is_some_and(|(c, _)| c == id)
    }
}

impl Adapter {
    /// HwResetBus: see the module doc. Never waits; true (every SRB is completed).
    pub(crate) fn reset_bus(&self, port: &dyn PortSide) -> bool {
        let mut done = dpc::done_list();
        {
            let mut s = self.lock();
            if let Some(why) = self.cannot_sequence(&s) {
                tracing::warn!(target = %self.cfg.target, why, "bus reset as a channel reset");
                self.escalate(&mut s, port, &mut done);
                self.run_actions(&mut s, port, &mut done);
            } else {
                let luns = self.reset_luns(&s);
                let (exposed, live) = self.hand_back_for_reset(&mut s, &mut done);
                let secs = self.pause_for(luns.len());
                s.ch.paused = true;
                port.hold(secs);
                if exposed {
                    // Only a teardown stops the target writing into pages the port owns
                    // again; the LUN resets follow on the new login (`resume_sequence`).
                    tracing::warn!(target = %self.cfg.target, "bus reset: a read the target may still answer has no region to invalidate (TrustTarget registration): the channel is reset first, then the LUNs");
                    self.begin_sequence(&mut s, "bus reset", luns, None);
                    self.escalate_within(&mut s, port, &mut done);
                } else {
                    self.begin_sequence(&mut s, "bus reset", luns, None);
                    if let Some(r) = s.ch.target_reset.as_mut() {
                        r.live = live;
                    }
                    self.next_lun_reset(&mut s, port, &mut done);
                }
                self.run_actions(&mut s, port, &mut done);
            }
        }
        dpc::complete_all(port, done);
        // The TMFs' (or the login's) timers are the DPC's.
        self.port.wake();
        true
    }

    /// A channel reset at once (a transport's caller asking for one): see [`Adapter::escalate`].
    pub(crate) fn channel_reset(&self, port: &dyn PortSide) -> bool {
        let mut done = dpc::done_list();
        {
            let mut s = self.lock();
            self.escalate(&mut s, port, &mut done);
            self.run_actions(&mut s, port, &mut done);
        }
        dpc::complete_all(port, done);
        self.port.wake();
        true
    }

    /// StartIo of RESET_DEVICE (under the adapter lock): see the module doc.
    pub(crate) fn reset_device(
        &self,
        s: &mut Inner,
        port: &dyn PortSide,
        srb: Srb<SrbExt>,
        done: &mut Done,
    ) {
        if let Some(why) = self.cannot_sequence(s) {
            tracing::warn!(target = %self.cfg.target, why, "device reset as a channel reset");
            self.escalate(s, port, done);
            srb.set_status(SrbStatus::SUCCESS);
            done.push(srb);
            return;
        }
        let luns = self.reset_luns(s);
        self.start_sequence(s, port, "device reset", luns, Some(srb), done);
    }

    /// How long (seconds) to pause the adapter for `luns` LUN resets: each the core's TMF
    /// timeout and a margin. The pause ends earlier, when the last reset is answered.
    fn pause_for(&self, luns: usize) -> u32 {
        let per = Self::channel_config(&self.cfg)
            .tmf_timeout
            .as_secs()
            .saturating_add(PAUSE_MARGIN_SECS);
        u32::try_from(per.saturating_mul(luns.max(1) as u64)).unwrap_or(u32::MAX)
    }

    /// Why a reset cannot be a sequence of LUN resets now, if it cannot.
    fn cannot_sequence(&self, s: &Inner) -> Option<&'static str> {
        if s.ch.target_reset.is_some() {
            Some("a reset is already running")
        } else if s.ch.channel.state() != PortState::Running {
            Some("the channel is not logged in")
        } else {
            None
        }
    }

    /// The LUNs to reset: known ones and those of the commands held, in order.
    fn reset_luns(&self, s: &Inner) -> VecDeque<u8> {
        let mut luns = s.ch.known_luns.clone();
        luns.extend(s.ch.cmds.values().map(|a| a.srb.address().lun));
        luns.into_iter().collect()
    }

    /// HwResetBus's hand-back: every held SRB completes BUS_RESET now; commands not sent
    /// are withdrawn (their regions, never posted, given up), the regions of the others
    /// invalidated (module doc). Returns whether a read the target may still answer has no
    /// region to invalidate (TrustTarget's one region over all memory: then only a
    /// teardown keeps the target out of its pages), and the LUNs of the commands handed
    /// back that the target may still run (their LUN's reset ends them).
    fn hand_back_for_reset(&self, s: &mut Inner, done: &mut Done) -> (bool, Vec<u8>) {
        let (mut exposed, mut live) = (false, Vec::new());
        let active = s.ch.cmds.drain_by_id();
        for (id, a) in active {
            let withdrawn = s.ch.channel.withdraw(id);
            let never_posted = s.post.pending_reg.remove(id).is_some();
            if withdrawn || never_posted {
                self.discard(a.handle);
            } else {
                // LOCAL_INV, not deregistration: the target may still answer with a SEND
                // WITH INVALIDATE naming the key (invalidating a free region is allowed;
                // one deregistered would fail the channel).
                let invs = self.reg().unmap(a.handle, None).unwrap_or_default();
                exposed |= invs.as_slice().is_empty() && a.srb.direction() == DataDirection::In;
                self.post_reg(s, invs);
                let lun = a.srb.address().lun;
                if !live.contains(&lun) {
                    live.push(lun);
                }
            }
            a.srb.set_status(SrbStatus::BUS_RESET);
            done.push(a.srb);
        }
        for (_, m) in core::mem::take(&mut s.ch.mgmt).into_iter() {
            m.srb.set_status(SrbStatus::BUS_RESET);
            done.push(m.srb);
        }
        (exposed, live)
    }

    fn start_sequence(
        &self,
        s: &mut Inner,
        port: &dyn PortSide,
        why: &'static str,
        luns: VecDeque<u8>,
        srb: Option<Srb<SrbExt>>,
        done: &mut Done,
    ) {
        self.begin_sequence(s, why, luns, srb);
        self.next_lun_reset(s, port, done);
    }

    /// Records a sequence over `luns` (counted, logged); the caller sends the first reset.
    fn begin_sequence(
        &self,
        s: &mut Inner,
        why: &'static str,
        luns: VecDeque<u8>,
        srb: Option<Srb<SrbExt>>,
    ) {
        self.resets.sequences.fetch_add(1, Relaxed);
        tracing::info!(target = %self.cfg.target, why, ?luns, "LOGICAL UNIT RESET of each known LUN");
        s.ch.target_reset = Some(TargetReset {
            why,
            luns,
            current: None,
            srb,
            refused: Vec::new(),
            again: false,
            live: Vec::new(),
        });
    }

    /// Sends the next LUN's reset, or ends the sequence when none is left.
    fn next_lun_reset(&self, s: &mut Inner, port: &dyn PortSide, done: &mut Done) {
        let Some(r) = s.ch.target_reset.as_mut() else {
            return;
        };
        let Some(lun) = r.luns.pop_front() else {
            return self.end_sequence(s, port, done);
        };
        let Ok(l) = scsi::Lun::from_number(u32::from(lun)) else {
            // Port LUNs are below 256: always addressable.
            r.refused.push(lun);
            return self.next_lun_reset(s, port, done);
        };
        let now = self.now();
        let id = s.ch.channel.reset_lun(now, l);
        if let Some(r) = s.ch.target_reset.as_mut() {
            r.current = Some((id, lun));
        }
    }

    /// The sequence's reset `id` ended with `result` (from the DPC's TmfDone).
    pub(crate) fn lun_reset_done(
        &self,
        s: &mut Inner,
        port: &dyn PortSide,
        result: TmfResult,
        done: &mut Done,
    ) {
        let Some(r) = s.ch.target_reset.as_mut() else {
            return;
        };
        let Some((_, lun)) = r.current.take() else {
            return;
        };
        match result {
            TmfResult::Complete => {
                self.resets.lun_resets.fetch_add(1, Relaxed);
                self.next_lun_reset(s, port, done);
            }
            TmfResult::Rejected | TmfResult::NotFound => {
                self.resets.refused.fetch_add(1, Relaxed);
                r.refused.push(lun);
                if r.live.contains(&lun) {
                    // Commands the port has back (the class driver retries them) could
                    // still run at the target after their retries: ending the I_T nexus
                    // aborts them.
                    tracing::warn!(target = %self.cfg.target, why = r.why, lun, ?result, "the target refused the LOGICAL UNIT RESET with commands handed back still there: resetting the channel, then the other LUNs");
                    r.live.retain(|&l| l != lun);
                    self.escalate_within(s, port, done);
                } else {
                    tracing::warn!(target = %self.cfg.target, why = r.why, lun, ?result, "the target refused the LOGICAL UNIT RESET");
                    self.next_lun_reset(s, port, done);
                }
            }
            TmfResult::TimedOut | TmfResult::NotSent if !r.again => {
                tracing::warn!(target = %self.cfg.target, why = r.why, lun, ?result, "LOGICAL UNIT RESET failed: resetting the channel, then the LUNs again");
                r.again = true;
                r.luns.push_front(lun);
                self.escalate_within(s, port, done);
            }
            TmfResult::TimedOut | TmfResult::NotSent => {
                tracing::warn!(target = %self.cfg.target, why = r.why, lun, ?result, "LOGICAL UNIT RESET failed again after a channel reset: giving up");
                self.escalate(s, port, done);
            }
        }
    }

    /// The channel logged in (the DPC's LoggedIn, the adapter still paused): a sequence
    /// waiting for it goes on, and keeps the adapter paused until it ends. False when none
    /// waits (the caller resumes the adapter).
    pub(crate) fn resume_sequence(
        &self,
        s: &mut Inner,
        port: &dyn PortSide,
        done: &mut Done,
    ) -> bool {
        let Some(left) = (s.ch.target_reset.as_ref())
            .filter(|r| r.current.is_none())
            .map(|r| r.luns.len())
        else {
            return false;
        };
        // The login's pause may lapse before the LUN resets are answered: paused anew.
        port.hold(self.pause_for(left));
        self.next_lun_reset(s, port, done);
        true
    }

    /// The last LUN's reset ended: the RESET_DEVICE SRB completes, the adapter resumes.
    fn end_sequence(&self, s: &mut Inner, port: &dyn PortSide, done: &mut Done) {
        let Some(r) = s.ch.target_reset.take() else {
            return;
        };
        tracing::info!(target = %self.cfg.target, why = r.why, refused = ?r.refused, "reset sequence done");
        if let Some(srb) = r.srb {
            srb.set_status(if r.refused.is_empty() {
                SrbStatus::SUCCESS
            } else {
                SrbStatus::ERROR
            });
            done.push(srb);
        }
        if s.ch.paused {
            s.ch.paused = false;
            port.release();
        }
    }

    /// The channel reset inside a running sequence: it goes on from its next LUN once the
    /// new login is in (`resume_sequence`).
    fn escalate_within(&self, s: &mut Inner, port: &dyn PortSide, done: &mut Done) {
        let sequence = s.ch.target_reset.take();
        self.escalate(s, port, done);
        s.ch.target_reset = sequence;
    }

    /// The channel reset (the escalation): teardown, everything held BUS_RESET, a fresh
    /// SINGLE login (the adapter paused until it is in). A running sequence ends; its
    /// RESET_DEVICE SRB completes SUCCESS, as a channel reset did for it before. The
    /// caller runs the core's actions.
    pub(crate) fn escalate(&self, s: &mut Inner, port: &dyn PortSide, done: &mut Done) {
        self.resets.escalated.fetch_add(1, Relaxed);
        if let Some(srb) = s.ch.target_reset.take().and_then(|r| r.srb) {
            srb.set_status(SrbStatus::SUCCESS);
            done.push(srb);
        }
        self.teardown(s);
        self.flush_held(s, SrbStatus::BUS_RESET, done);
        self.start_login(s, port);
    }

    /// Notes that the target answered `srb` (its LUN one to reset later), unless the answer
    /// says there is no such LUN: LOGICAL UNIT NOT SUPPORTED (ASC 25h), or standard INQUIRY
    /// data with peripheral qualifier 011b (SPC-4 6.6.2); then the LUN is forgotten.
    pub(crate) fn note_lun(s: &mut Inner, srb: &Srb<SrbExt>, r: &srp::initiator::Response) {
        let unsupported = !r.sense.is_empty()
            && <scsi::sense::Sense as wirekit::WireRepr>::parse(&r.sense)
                .is_ok_and(|s| s.code() == scsi::sense::SenseCode::LUN_NOT_SUPPORTED);
        let cdb = srb.cdb();
        let inquiry =
            u8::from(r.status) == 0 && cdb.len() >= 2 && cdb[0] == 0x12 && cdb[1] & 1 == 0;
        let mut pq = [0u8; 1];
        let no_lu = inquiry && srb.read_data(0, &mut pq).is_ok() && pq[0] >> 5 == 3;
        let lun = srb.address().lun;
        if unsupported || no_lu {
            s.ch.known_luns.remove(&lun);
        } else {
            s.ch.known_luns.insert(lun);
        }
    }
}
