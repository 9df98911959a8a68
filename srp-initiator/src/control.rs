//! Management SRBs and HwAdapterControl of the SRP miniport. Nothing here waits: each
//! routine runs at the level the port calls it (StartIo at dispatch, AdapterControl at
//! dispatch standing for DIRQL) and leaves the rest to the DPC thread.
//!
//! - ABORT_COMMAND: SRP_TSK_MGMT ABORT TASK for the command the named SRB became (the core's
//!   task management reserve carries it). FUNCTION COMPLETE → the named SRB completes
//!   `SRB_STATUS_ABORTED`, then the abort `SUCCESS`; an SRB the adapter no longer holds (it
//!   completed) or an abort the target refuses or never answers → `SRB_STATUS_ABORT_FAILED`.
//! - RESET_LOGICAL_UNIT: LOGICAL UNIT RESET. FUNCTION COMPLETE → every SRB of the LU the
//!   target had completes `SRB_STATUS_BUS_RESET`, then the reset `SUCCESS`; otherwise
//!   `SRB_STATUS_ERROR` (the SRBs stay, under their own timeouts).
//! - RESET_DEVICE: SRP has no TARGET RESET (SRP r16a 6.7), and this adapter is one target
//!   port, so it sends LOGICAL UNIT RESET to each LUN it knows, one at a time (the core
//!   holds back one TMF credit), as ib_srp's device reset does: the LUs' SRBs complete
//!   `SRB_STATUS_BUS_RESET` as their LUN's reset ends them, the SRB SUCCESS after the last
//!   (ERROR if the target refused one). A channel reset — a fresh SINGLE login, which ends
//!   only our own I_T nexus and so leaves another initiator's reservation in place — is
//!   the escalation when a reset is not sent or not answered; see `reset`.
//! - StopAdapter (the port drained first): anything still held completes
//!   `SRB_STATUS_REQUEST_FLUSHED`; on a live channel SRP_I_LOGOUT is posted and the DPC
//!   thread waits up to [`LOGOUT_LINGER`] for the target's DREQ, then disconnects itself;
//!   without one the DREQ goes out before StopAdapter returns. The core goes LOST: no
//!   reconnects. Dropping the port later tears down whatever is left (the adapter's Drop).
//! - RestartAdapter: a fresh core logs in (the port paused until it has).

use super::adapter::{Adapter, Mgmt};
use super::side::PortSide;
use super::{SrbExt, dpc};
use core::time::Duration;
use win_port::{Srb, SrbFunction, SrbStatus};

/// How long a logout waits for the target to close the channel before sending the DREQ.
pub(crate) const LOGOUT_LINGER: Duration = Duration::from_secs(1);

impl Adapter {
    /// StartIo of ABORT_COMMAND, RESET_LOGICAL_UNIT and RESET_DEVICE.
    pub(crate) fn start_management(&self, port: &dyn PortSide, srb: Srb<SrbExt>) {
        let mut done = dpc::done_list();
        {
            let mut s = self.lock();
            let now = self.now();
            match srb.function() {
                SrbFunction::AbortCommand => {
                    let named = srb.abort_target();
                    let cmd =
                        s.ch.cmds
                            .iter()
                            .find(|(_, a)| Some(a.srb.id()) == named)
                            .map(|(id, _)| id);
                    if let Some(id) = cmd {
                        let tmf = s.ch.channel.abort_task(now, id);
                        s.ch.mgmt.insert(
                            tmf,
                            Mgmt {
                                srb,
                                abort_of: Some(id),
                            },
                        );
                    } else {
                        srb.set_status(SrbStatus::ABORT_FAILED);
                        done.push(srb);
                    }
                }
                SrbFunction::ResetLogicalUnit => {
                    match scsi::Lun::from_number(u32::from(srb.address().lun)) {
                        Ok(lun) => {
                            let tmf = s.ch.channel.reset_lun(now, lun);
                            s.ch.mgmt.insert(
                                tmf,
                                Mgmt {
                                    srb,
                                    abort_of: None,
                                },
                            );
                        }
                        Err(_) => {
                            srb.set_status(SrbStatus::INVALID_LUN);
                            done.push(srb);
                        }
                    }
                }
                SrbFunction::ResetDevice => self.reset_device(&mut s, port, srb, &mut done),
                _ => {
                    srb.set_status(SrbStatus::INVALID_REQUEST);
                    done.push(srb);
                }
            }
            self.run_actions(&mut s, port, &mut done);
        }
        dpc::complete_all(port, done);
        // A task management request's timer is the DPC's.
        self.port.wake();
    }

    /// HwAdapterControl(StopAdapter): see the module doc.
    pub(crate) fn stop(&self, port: &dyn PortSide) {
        let mut done = dpc::done_list();
        {
            let mut s = self.lock();
            self.flush_held(&mut s, SrbStatus::REQUEST_FLUSHED, &mut done);
            let now = self.now();
            s.ch.channel.logout(now, LOGOUT_LINGER);
            self.run_actions(&mut s, port, &mut done);
            if s.ch.paused {
                // Stopped while logging in: the port holds nothing for the login now.
                s.ch.paused = false;
                port.release();
            }
        }
        dpc::complete_all(port, done);
        // The DREQ after the linger is the DPC's (its timer).
        self.port.wake();
    }

    /// HwAdapterControl(RestartAdapter): what is left of the old channel goes, a fresh core
    /// logs in.
    pub(crate) fn restart(&self, port: &dyn PortSide) {
        let mut done = dpc::done_list();
        {
            let mut s = self.lock();
            self.teardown(&mut s);
            self.flush_held(&mut s, SrbStatus::REQUEST_FLUSHED, &mut done);
            self.relogin(&mut s, port, &mut done);
        }
        dpc::complete_all(port, done);
        self.port.wake();
    }
}
