//! The MAD service of one port: QP1 ([`GsiPort`]) and everything that speaks over it — our
//! Communication Manager (behind the connection-manager seam, [`ConnectionManager`]),
//! Device Management agents and a DM client ([`DeviceManagement`]), and the answer to
//! classes nobody here serves — pumped in one place for every consumer (the target's ports,
//! the initiator's adapters, the host's discovery).
//!
//! It runs on any provider that gives the access layer QP1 (`create_gsi_qp`: the software
//! HCA, the simulator's devices). Where a provider owns QP1 and the CM itself (rdma-core),
//! [`open_connection_manager`] hands out the provider's connection manager instead, and
//! Device Management is not available on that port.
//!
//! Files: this one (opening, routing MADs, timers, transmits), `cm.rs` (the seam over
//! [`CmEndpoint`]).
#[allow(unused_imports)]
use crate::prelude::*;

mod cm;

use crate::cm::{
    CmEndpoint, CmError, CmSetup, ConnEvent, ConnId, ConnectionManager, DeviceManagement,
};
use crate::gsi::{GsiAgent, GsiConfig, GsiError, GsiEvent, GsiPort, GsiPortConfig};
use crate::mad::{MadAddress, MadBuf, MgmtClass};
use crate::verbs::{Device, PortInterface, SyncCa};
use alloc::collections::{BTreeMap, VecDeque};
use alloc::sync::Arc;
use core::net::IpAddr;
use ib_verbs::{Gid, PathMtu, Psn, Qpn, Time};

/// What our side of a connection chose, kept for the seam's later calls.
#[derive(Clone, Copy, Debug)]
struct Ours {
    /// Our QP.
    qpn: Qpn,
    /// Our receive PSN (the Starting PSN our REQ or REP offers).
    rq_psn: Psn,
    /// The partition.
    pkey_index: u16,
}

/// One port's MAD service. See the module doc.
pub struct MadService {
    port: Arc<dyn PortInterface>,
    gsi: GsiPort,
    cm: CmEndpoint,
    dm: DeviceManagement,
    /// The DM client's transactions (retries, response matching).
    client_agent: GsiAgent,
    /// Answers Gets and Sets of every class nobody here serves (SA, PerfMgt, vendor
    /// classes, DM on a port with no agent) with "class or version not supported", as IBTA
    /// Vol1 13.4.7 asks of a node.
    others: GsiAgent,
    local_gid: Gid,
    link_mtu: Option<PathMtu>,
    ours: BTreeMap<ConnId, Ours>,
    events: VecDeque<ConnEvent>,
    unknown_events: u64,
}

impl core::fmt::Debug for MadService {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MadService")
            .field("port", &self.port.identity())
            .field("gsi", &self.gsi)
            .finish_non_exhaustive()
    }
}

impl MadService {
    /// Opens QP1 of `device` (whose CA is open) and the services over it: our CM with
    /// `setup`, and the Device Management in `dm`. The port's P_Key table must be set
    /// first (the CM checks REQs against it). Blocks for QP1's resource verbs: passive
    /// level only.
    pub fn open(
        device: &Device,
        setup: &CmSetup,
        dm: DeviceManagement,
    ) -> Result<MadService, GsiError> {
        let attr = device.port.attr();
        let node_guid = SyncCa::new(device.ca.clone()).query_ca()?.node_guid;
        let gsi = GsiPort::open(device.ca.clone(), attr.port, GsiPortConfig::default())?;
        let mut cm = CmEndpoint::new(crate::cm::CmConfig {
            local_ca_guid: node_guid,
            local_gid: attr.gid,
            port: attr.port,
            time_wait: setup.time_wait,
            agent_id: setup.agent_id,
            first_comm_id: setup.first_comm_id,
        });
        cm.set_pkey_table(device.port.pkey_table());
        let mut client_agent = GsiAgent::new(GsiConfig::default());
        client_agent.register_client(MgmtClass::DeviceMgmt);
        Ok(MadService {
            port: device.port.clone(),
            gsi,
            cm,
            dm,
            client_agent,
            others: GsiAgent::new(GsiConfig::default()),
            local_gid: attr.gid,
            link_mtu: attr.link_mtu,
            ours: BTreeMap::new(),
            events: VecDeque::new(),
            unknown_events: 0,
        })
    }

    /// Our port's address.
    fn local_ip(&self) -> IpAddr {
        self.local_gid.to_ip()
    }

    /// Routes one received MAD: CM MADs to the CM; Device Management requests to the agent
    /// of the partition they came on, DM responses to the client's transactions; requests
    /// of any other class (or DM with no agent here) get "not supported"; stray responses
    /// are dropped (counted by the agent).
    fn route(&mut self, now: Time, from: MadAddress, mad: MadBuf) {
        let Ok(header) = mad.header() else {
            return;
        };
        let response = header.response;
        match header.mgmt_class {
            MgmtClass::Cm => self.cm.handle_mad(now, from, &mad.0),
            MgmtClass::DeviceMgmt if response && self.dm.client.is_some() => {
                self.client_agent.handle_mad(now, from, mad);
            }
            MgmtClass::DeviceMgmt if !response && !self.dm.agents.is_empty() => {
                // The agent of the partition it came on (the HCA matched it).
                if let Some(agent) = self.dm.agents.get_mut(usize::from(from.pkey_index)) {
                    agent.handle_request(from, &mad);
                }
            }
            _ => self.others.handle_mad(now, from, mad),
        }
    }

    /// Everything due at `now`: MADs in, timers, the DM client's transactions, MADs out,
    /// CM events translated for the seam. How much happened.
    fn pump(&mut self, now: Time) -> usize {
        let mut n = 0;
        while let Ok(Some((from, mad))) = self.gsi.recv() {
            n += 1;
            self.route(now, from, mad);
        }
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.handle_timeout(now);
            n += 1;
        }
        n += self.run_client(now);
        self.transmit();
        while let Some(ev) = self.cm.poll_event() {
            n += 1;
            self.translate(ev);
        }
        n
    }

    /// The DM client's timers and answers.
    fn run_client(&mut self, now: Time) -> usize {
        let Some(client) = self.dm.client.as_mut() else {
            return 0;
        };
        let mut n = 0;
        if self.client_agent.poll_timeout().is_some_and(|t| t <= now) {
            self.client_agent.handle_timeout(now);
            n += 1;
        }
        if client.poll_timeout().is_some_and(|t| t <= now) {
            client.handle_timeout(now, &mut self.client_agent);
            n += 1;
        }
        while let Some(ev) = self.client_agent.poll_event() {
            n += 1;
            if !matches!(ev, GsiEvent::Request { .. }) {
                client.handle_event(now, &mut self.client_agent, &ev);
            }
        }
        n
    }

    /// Sends what every part has queued. A MAD that cannot be sent now is the sender's to
    /// retry (the CM's and the client's timers; a DM or "not supported" answer is the
    /// requester's to ask again).
    fn transmit(&mut self) {
        let MadService {
            gsi,
            cm,
            dm,
            client_agent,
            others,
            ..
        } = self;
        let agents = dm
            .agents
            .iter_mut()
            .flat_map(|a| core::iter::from_fn(move || a.poll_transmit()));
        let rest = core::iter::from_fn(|| others.poll_transmit())
            .chain(core::iter::from_fn(|| client_agent.poll_transmit()))
            .chain(core::iter::from_fn(|| cm.poll_transmit()));
        for out in agents.chain(rest) {
            let _ = gsi.send(&out);
        }
    }

    /// When the service must next run without a MAD arriving.
    fn next_timer(&self) -> Option<Time> {
        let client = self
            .dm
            .client
            .as_ref()
            .and_then(|c| c.poll_timeout())
            .into_iter()
            .chain(self.client_agent.poll_timeout());
        self.cm.poll_timeout().into_iter().chain(client).min()
    }

    /// The port's P_Key table changed: REQs are checked against the new one.
    pub fn set_pkey_table(&mut self) {
        self.cm.set_pkey_table(self.port.pkey_table());
    }
}

/// The connection manager of `device`: the provider's own where it has one (rdma-core's;
/// `dm` is then dropped — there is no Device Management without QP1, and the caller is
/// told so by [`ConnectionManager::device_management`] answering `None`), else the access
/// layer's MAD service over QP1 with `dm`. The CA must be open and the port's P_Key table
/// set. Blocks: passive level only.
pub fn open_connection_manager(
    device: &Device,
    setup: &CmSetup,
    dm: DeviceManagement,
) -> Result<Box<dyn ConnectionManager>, CmError> {
    if let Some(cm) = device.port.connection_manager(setup) {
        return cm;
    }
    let service = MadService::open(device, setup, dm).map_err(|e| CmError::Setup(e.to_string()))?;
    Ok(Box::new(service))
}
