//! The periodic maintenance, split from its I/O: [`MpCore::tick_plan`] decides (transport
//! states, damping holds, which paths get `fail_fast` and which a verify); the driver
//! calls `fail_fast` and runs each [`VerifyJob`] — TEST UNIT READY
//! ([`MpCore::verify_cdb`]), then REPORT TARGET PORT GROUPS ([`RTPG_CDB`]) if
//! [`MpCore::needs_rtpg`] — and hands the answers to [`MpCore::verify_done`] (or
//! [`MpCore::verify_abandoned`] when it could not run it).
#[allow(unused_imports)]
use crate::prelude::*;

use super::{MpCore, Transport};
use crate::alua::{group_of, parse_groups};
use crate::clock::Instant;
use crate::dsm::DsmIdentifier;
use crate::outcome::Outcome;
use crate::path::{PathEvent, PathState};

/// REPORT TARGET PORT GROUPS (MAINTENANCE IN, service action 0Ah), 4 KiB allocation.
pub const RTPG_CDB: [u8; 12] = [0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0];

/// The data-in length of [`RTPG_CDB`].
pub const RTPG_ALLOCATION: usize = 4096;

/// A path verify to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyJob<D> {
    /// The path's key.
    pub key: u32,
    /// Its device handle.
    pub device: D,
    /// What the DSM claimed it as (whether the LU reports ALUA, the path's port and group).
    pub id: DsmIdentifier,
}

/// What one maintenance pass asks of the driver ([`MpCore::tick_plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickPlan<D> {
    /// Paths whose transport must fail its held I/O now
    /// ([`crate::PathDevice::fail_fast`]: idempotent).
    pub fail_fast: Vec<D>,
    /// Path verifies to run; each path is marked verifying until [`MpCore::verify_done`]
    /// or [`MpCore::verify_abandoned`].
    pub verify: Vec<VerifyJob<D>>,
}

impl<D: Clone> MpCore<D> {
    /// One maintenance pass at `now` (see the module contract): each path's transport,
    /// read through `transport_of`, becomes path events; damping holds that are over end;
    /// and what the driver must do: paths to `fail_fast` (down, holding I/O, while another
    /// path is usable) and paths to verify (failed with the transport up, or active and due
    /// after [`crate::MpConfig::verify_period`]; not admin-down, damped or being verified).
    pub fn tick_plan(
        &mut self,
        now: Instant,
        transport_of: impl Fn(&D) -> Transport,
    ) -> TickPlan<D> {
        let mut plan = TickPlan {
            fail_fast: Vec::new(),
            verify: Vec::new(),
        };
        for i in 0..self.paths.len() {
            let transport = transport_of(&self.paths[i].device);
            let key = self.paths[i].key;
            self.paths[i].transport = transport;
            if transport != Transport::Up {
                if self.paths[i].path.state() == PathState::Active {
                    self.paths[i].path.handle(PathEvent::TransportDown, now);
                }
                // Not only when the channel goes down: I/O held while no other path was
                // usable moves as soon as one is (fail_fast is idempotent).
                if self.paths[i].in_flight > 0
                    && self.paths.iter().any(|p| p.key != key && self.active(p))
                {
                    plan.fail_fast.push(self.paths[i].device.clone());
                }
            }
            let period = self.config.verify_period;
            let p = &mut self.paths[i];
            p.path.handle_timeout(now);
            let due = p
                .last_verify
                .is_none_or(|t| crate::clock::since(now, t) >= period);
            let failed = p.path.state() == PathState::Failed;
            if transport == Transport::Up
                && !p.verifying
                && (failed || due)
                && p.path.state() != PathState::AdminDown
                && p.path.state() != PathState::Damped
            {
                p.last_verify = Some(now);
                p.verifying = true;
                plan.verify.push(VerifyJob {
                    key: p.key,
                    device: p.device.clone(),
                    id: p.id.clone(),
                });
            }
        }
        plan
    }

    /// The CDB a verify sends first (the DSM's `path_verify_cdb`: TEST UNIT READY).
    pub fn verify_cdb(&self) -> Vec<u8> {
        self.dsm.path_verify_cdb()
    }

    /// Whether `job`, whose first command answered `tur`, goes on with [`RTPG_CDB`]: the
    /// answer proved the path and the LU reports ALUA.
    pub fn needs_rtpg(&self, job: &VerifyJob<D>, tur: &Outcome) -> bool {
        job.id.alua && self.dsm.path_verified(tur)
    }

    /// `job` ended: its TEST UNIT READY answered `tur`, its REPORT TARGET PORT GROUPS
    /// `rtpg` (if sent). The path's ALUA state is set and it returns to service (or stays
    /// out) at `now`; its new state, or `None` if the path is gone meanwhile.
    pub fn verify_done(
        &mut self,
        job: &VerifyJob<D>,
        tur: &Outcome,
        rtpg: Option<&Outcome>,
        now: Instant,
    ) -> Option<PathState> {
        let ok = self.dsm.path_verified(tur);
        let alua = match rtpg {
            Some(Outcome::Good(d)) if ok && job.id.alua => {
                let groups = parse_groups(d);
                group_of(&groups, job.id.relative_port, job.id.port_group).map(|g| g.state)
            }
            _ => None,
        };
        let disk = &self.identity.identity;
        let p = self.paths.iter_mut().find(|p| p.key == job.key)?;
        p.verifying = false;
        if job.id.alua && ok {
            p.alua = alua;
        }
        let event = if ok {
            PathEvent::VerifyOk
        } else {
            PathEvent::VerifyFailed
        };
        let before = p.path.state();
        let after = p.path.handle(event, now);
        if before != PathState::Active && after == PathState::Active {
            tracing::info!(disk, path = job.key, "path verified: back in service");
        }
        Some(after)
    }

    /// The verify of path `key` could not run: it may be planned again.
    pub fn verify_abandoned(&mut self, key: u32) {
        if let Some(p) = self.path_mut(key) {
            p.verifying = false;
        }
    }
}
