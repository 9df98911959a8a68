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
        let mut next_sweep = Instant::now() + self.config.sweep_interval;
        while !self.nap() {
            self.check_sessions();
            if Instant::now() >= next_sweep {
                self.sweep_all();
                self.rescan_all();
                next_sweep = Instant::now() + self.config.sweep_interval;
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

    /// Drops lost sessions; rescans those whose bus changed.
    fn check_sessions(&self) {
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
}
