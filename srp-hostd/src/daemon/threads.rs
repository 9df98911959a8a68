//! The daemon's two threads: the path supervisor and the sweeper, and what the sweeper
//! runs every tick (session checks) and every sweep interval (rescans).

use super::{Shared, TICK, lock};
use crate::session::{Session, SessionState};
use mpio::MultipathDisk;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

impl Shared {
    /// Waits a tick (or a wake-up); whether the daemon is stopping.
    fn nap(&self) -> bool {
        let st = lock(&self.state);
        let (st, _) = self
            .wake
            .wait_timeout(st, TICK)
            .unwrap_or_else(PoisonError::into_inner);
        st.stopping
    }

    /// The path supervisor (see the module contract).
    pub(super) fn supervise_paths(&self) {
        while !self.nap() {
            let disks: Vec<Arc<MultipathDisk>> =
                lock(&self.state).disks.values().cloned().collect();
            for d in disks {
                d.tick(Instant::now());
            }
        }
    }

    /// The sweeper (see the module contract).
    pub(super) fn sweep_loop(&self) {
        let mut next_sweep = Instant::now() + self.config().sweep_interval;
        while !self.nap() {
            self.check_sessions();
            if Instant::now() >= next_sweep {
                self.sweep_all();
                self.rescan_all();
                next_sweep = Instant::now() + self.config().sweep_interval;
            }
        }
    }

    /// Rescans every running session (LUNs added or removed at the target: the miniport
    /// reports no bus change).
    fn rescan_all(&self) {
        let sessions: Vec<Arc<Session>> = lock(&self.state).sessions.values().cloned().collect();
        for s in sessions {
            if self.stopping() {
                return;
            }
            if s.state() == SessionState::Running {
                let _serial = lock(&self.logins);
                self.expose(&s);
            }
        }
    }

    /// Surprise-removes the sessions whose IOC left its unit (the IOC bus), drops lost
    /// sessions, rescans those whose bus changed.
    fn check_sessions(&self) {
        self.ioc_removals();
        let sessions: Vec<Arc<Session>> = lock(&self.state).sessions.values().cloned().collect();
        for s in sessions {
            match s.state() {
                SessionState::Lost => {
                    tracing::warn!(
                        session = s.id(),
                        "device loss: removing the session's disks"
                    );
                    let _serial = lock(&self.logins);
                    self.drop_session(s.id());
                }
                SessionState::Running if s.bus_changed() => {
                    let _serial = lock(&self.logins);
                    self.expose(&s);
                }
                _ => {}
            }
        }
    }

    /// Feeds every watched session's Device Management findings to the IOC bus, then acts
    /// on the IOCs it reports removed: each session to such an IOC loses its device as its
    /// model's port sees it (`HostAdapter::ioc_removed`: the iSCSI model's surprise removal,
    /// StorPort's bus change and re-enumeration) — what it holds fails at once, multipath
    /// moves it to another path — and is dropped. The IOC's return is the next sweep's to
    /// log in to.
    fn ioc_removals(&self) {
        let watched: Vec<Arc<Session>> = lock(&self.state)
            .sessions
            .values()
            .filter(|s| s.watched())
            .cloned()
            .collect();
        for s in &watched {
            let events = s.take_ioc_events();
            if !events.is_empty() {
                self.bus.feed(s.id(), events);
            }
        }
        for (id, ioc) in self.bus.take_removed() {
            let Some(s) = lock(&self.state).sessions.get(&id).cloned() else {
                continue;
            };
            if s.service().ioc_guid != ioc {
                continue;
            }
            let how = match s.port().model() {
                crate::config::DriverModel::IscsiModel => "surprise removal of the session",
                crate::config::DriverModel::StorPort => {
                    "bus change: the re-enumeration finds its LUs gone"
                }
            };
            tracing::warn!(
                session = id,
                ioc = %format!("{:#018x}", ioc.0),
                portal = %s.service().portal,
                "the IOC left its I/O unit: {how}"
            );
            let luns: Vec<_> = s.disks().iter().map(|d| d.disk.lu()).collect();
            s.port().ioc_removed(&luns);
            let _serial = lock(&self.logins);
            self.drop_session(id);
        }
        self.ioc_arrivals();
    }

    /// IOCs the watches saw arrive that no session serves: their portal is swept now (a
    /// login where the rules and the configuration allow one), not at the next sweep.
    fn ioc_arrivals(&self) {
        let mut portals = std::collections::BTreeSet::new();
        for (id, ioc) in self.bus.take_arrived() {
            let st = lock(&self.state);
            let Some(portal) = st.sessions.get(&id).map(|s| s.service().portal) else {
                continue;
            };
            let served = st
                .sessions
                .values()
                .any(|o| o.service().portal == portal && o.service().ioc_guid == ioc);
            if !served && !st.suspended {
                tracing::info!(
                    %portal,
                    ioc = %format!("{:#018x}", ioc.0),
                    "PnP: an IOC arrived in the unit: sweeping its portal now"
                );
                portals.insert(portal);
            }
        }
        // Each login of the sweep takes the logins lock itself.
        for portal in portals {
            self.sweep_portal(portal);
        }
    }
}
