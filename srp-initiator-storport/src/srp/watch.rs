//! [`IocWatch`]: the adapter's own Device Management client on its GSI port, sweeping the
//! target's I/O unit every `ioc_watch` period — how a driver that sees its device's life
//! (the iSCSI model) learns that its IOC left the unit or came back, through the access
//! layer's PnP (IBAL's ibiou: the IOU's DM sweeps create and remove IOC devices). The
//! StorPort miniport runs without it: StorPort hides device removal from a miniport.
//!
//! Sans-IO, run by the completion context under the adapter lock: DM MADs the GSI port
//! receives come here (the rest go to the CM), its timers are the context's timers, its
//! events are kept for [`super::SrpTransport::take_ioc_events`].

use access_layer::dm::{DmClient, DmClientConfig, DmEvent};
use access_layer::gsi::agent::{GsiAgent, GsiConfig, GsiEvent};
use access_layer::gsi::port::GsiPort;
use access_layer::mad::common::MadBuf;
use access_layer::mad::{MadAddress, MgmtClass};
use hca::engine::Engine;
use hca::time::Time;
use std::time::Duration;

/// The adapter's DM client and its GSI agent (transactions, retries).
pub(crate) struct IocWatch {
    agent: GsiAgent,
    dm: DmClient,
    /// What the sweeps reported, oldest first, until taken.
    pub(crate) events: Vec<DmEvent>,
}

impl IocWatch {
    /// A watch of the I/O unit at `portal` (its QP1 on port 1), swept every `period` from
    /// `now` on.
    pub(crate) fn new(now: Time, portal: hca::Gid, period: Duration) -> IocWatch {
        let mut agent = GsiAgent::new(GsiConfig::default());
        agent.register_client(MgmtClass::DeviceMgmt);
        let mut dm = DmClient::new(DmClientConfig {
            rescan_period: period,
            ..DmClientConfig::default()
        });
        // A fresh client has no portal: adding the one cannot fail.
        let _ = dm.add_portal(now, MadAddress::gsi(1, portal));
        IocWatch {
            agent,
            dm,
            events: Vec::new(),
        }
    }

    /// Whether `mad` is a Device Management MAD (this watch's; the rest is the CM's).
    pub(crate) fn wants(mad: &MadBuf) -> bool {
        MgmtClass::from(mad.0[1]) == MgmtClass::DeviceMgmt
    }

    /// A DM MAD the GSI port received.
    pub(crate) fn handle_mad(&mut self, now: Time, from: MadAddress, mad: MadBuf) {
        self.agent.handle_mad(now, from, mad);
    }

    /// Fires due timers, feeds the agent's answers to the DM client, sends what is queued
    /// through `gsi`, keeps the DM client's events; how many things happened.
    pub(crate) fn run(&mut self, e: &mut Engine, now: Time, gsi: &mut GsiPort) -> usize {
        let mut n = 0;
        if self.agent.poll_timeout().is_some_and(|t| t <= now) {
            self.agent.handle_timeout(now);
            n += 1;
        }
        if self.dm.poll_timeout().is_some_and(|t| t <= now) {
            self.dm.handle_timeout(now, &mut self.agent);
            n += 1;
        }
        while let Some(ev) = self.agent.poll_event() {
            n += 1;
            if !matches!(ev, GsiEvent::Request { .. }) {
                self.dm.handle_event(now, &mut self.agent, &ev);
            }
        }
        while let Some(out) = self.agent.poll_transmit() {
            // A MAD that cannot be sent now is retried by the agent's timers.
            let _ = gsi.send(e, now, &out);
        }
        while let Some(ev) = self.dm.poll_event() {
            n += 1;
            tracing::debug!(?ev, "IOC watch");
            self.events.push(ev);
        }
        n
    }

    /// When the watch must run next.
    pub(crate) fn poll_timeout(&self) -> Option<Time> {
        [self.agent.poll_timeout(), self.dm.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }
}
