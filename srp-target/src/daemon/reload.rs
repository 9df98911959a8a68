//! The loop applying a reload (part of `Loop`; [`crate::reload`] has the contract): the
//! plan checked against the running configuration, new LUNs opened and grown ones resized
//! (undone if anything fails there), then the appliance, the channels, the ports and the
//! guards changed in one go between two turns.

use super::Loop;
use crate::config::TargetConfig;
use crate::control::model::{ControlAnswer, ControlError, DisableMode, ReloadReport};
use crate::exec::LogicalUnit;
use crate::exec::ua::To;
use crate::reload::{Plan, plan};
use scsi::SenseCode;
use std::sync::Arc;

impl Loop {
    /// Applies `new` whole, or nothing with every reason.
    pub(super) fn apply(&mut self, new: TargetConfig) -> Result<ControlAnswer, ControlError> {
        let r = self.try_apply(new);
        if let Err(e) = &r {
            self.tally
                .reload_refusals
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(error = %e, "reload refused");
        }
        r
    }

    fn try_apply(&mut self, new: TargetConfig) -> Result<ControlAnswer, ControlError> {
        let plan = plan(&self.config, &new).map_err(|refusals| {
            ControlError::ReloadRefused(refusals.iter().map(ToString::to_string).collect())
        })?;
        let changes = plan.describe(&new);
        if plan.is_empty() {
            self.config = new;
            return Ok(ControlAnswer::Reloaded(ReloadReport::default()));
        }
        // What can fail comes first, and is undone on failure: nothing else has changed.
        let opened = self
            .app
            .open_luns(&new, &plan.luns_added, self.layer.as_ref())
            .map_err(|e| {
                ControlError::ReloadRefused(e.0.iter().map(|e| format!("{e}")).collect())
            })?;
        let grown = self.grow(&plan)?;
        self.commit(&new, &plan, opened);
        // Hosts are told: LUN tables, capacities, ALUA states.
        self.tell_hosts(&plan, &grown);
        let sessions_ended = self.end_unadmitted(&plan);
        self.reap();
        if let Some(g) = plan.guards {
            self.guards = g;
        }
        let old = std::mem::replace(&mut self.config, new);
        if !plan.iocs_added.is_empty() || !plan.iocs_removed.is_empty() {
            self.relayout_ports(&old);
        }
        for line in &changes {
            tracing::info!(change = %line, "reload");
        }
        self.emit(super::DaemonEvent::Reloaded {
            changes: changes.clone(),
        });
        Ok(ControlAnswer::Reloaded(ReloadReport {
            changes,
            sessions_ended,
        }))
    }

    /// Resizes every LUN the plan grows; on a failure, shrinks back those already grown
    /// and refuses the reload.
    fn grow(&mut self, plan: &Plan) -> Result<Vec<Arc<LogicalUnit>>, ControlError> {
        let mut done: Vec<(Arc<LogicalUnit>, u64)> = Vec::new();
        for (name, _, to) in &plan.luns_grown {
            let Some(lu) = self.app.lun_by_name(name).cloned() else {
                continue;
            };
            let before = lu.backend().blocks();
            let blocks = to / u64::from(lu.backend().block_size().bytes());
            if let Err(e) = lu.backend().resize(blocks) {
                for (lu, blocks) in done.iter().rev() {
                    if let Err(undo) = lu.backend().resize(*blocks) {
                        tracing::error!(lun = %lu.identity(), error = %undo,
                            "reload: could not shrink a LUN back after another failed to grow");
                    }
                }
                return Err(ControlError::ReloadRefused(vec![format!(
                    "lun {name}: cannot grow to {to} bytes: {e}"
                )]));
            }
            done.push((lu, before));
        }
        Ok(done.into_iter().map(|(lu, _)| lu).collect())
    }

    /// The appliance becomes `new`'s; every live channel sees its IOC's new exports.
    fn commit(&mut self, new: &TargetConfig, plan: &Plan, opened: Vec<(String, Arc<LogicalUnit>)>) {
        let old = &self.config;
        let runtime: Vec<(String, bool)> = self
            .app
            .iocs()
            .iter()
            .map(|i| (i.config().name.clone(), i.is_enabled()))
            .collect();
        self.app.reconfigure(new, opened, |index, c| {
            // An IOC that stays keeps what an operator switched, unless the file changed it.
            match (old.iocs.get(index), runtime.get(index)) {
                (Some(o), Some((name, on))) if o.name == c.name && o.enabled == c.enabled => {
                    debug_assert_eq!(name, &c.name);
                    *on
                }
                _ => c.enabled,
            }
        });
        for c in &plan.iocs_changed {
            if let Some(on) = c.enabled {
                for p in &mut self.ports {
                    p.advertise(&c.name, on);
                }
            }
        }
        for s in self.sessions.values_mut() {
            let Some(ioc) = self.app.ioc(&s.ioc) else {
                continue;
            };
            let (luns, nexus) = self.app.exports_for(ioc, s.initiator);
            s.io.set_exports(luns, nexus);
        }
    }

    /// The unit attentions a reload establishes.
    fn tell_hosts(&self, plan: &Plan, grown: &[Arc<LogicalUnit>]) {
        for c in plan.iocs_changed.iter().filter(|c| c.exports) {
            let Some(ioc) = self.app.ioc(&c.name) else {
                continue;
            };
            let port = ioc.port().relative_port;
            for lun in ioc.luns() {
                if let Some(lu) = ioc.lun(*lun) {
                    lu.unit_attention(To::Port(port), SenseCode::REPORTED_LUNS_DATA_HAS_CHANGED);
                }
            }
        }
        for lu in grown {
            lu.unit_attention(To::All, SenseCode::CAPACITY_DATA_HAS_CHANGED);
        }
        let alua = plan.iocs_changed.iter().any(|c| c.alua.is_some())
            || plan.peers
            || !plan.iocs_added.is_empty()
            || !plan.iocs_removed.is_empty();
        if alua {
            for (_, lu) in self.app.luns() {
                lu.unit_attention(To::All, SenseCode::ASYMMETRIC_ACCESS_STATE_CHANGED);
            }
        }
    }

    /// Logs out every session whose IOC went away, was disabled by the file, or whose ACL
    /// no longer admits it; returns how many.
    fn end_unadmitted(&mut self, plan: &Plan) -> u32 {
        let mut ended = 0;
        for name in &plan.iocs_removed {
            let why = format!("IOC {name} removed by a configuration reload");
            ended += self.end_sessions(|s| &s.ioc == name, DisableMode::Logout, &why);
        }
        for c in &plan.iocs_changed {
            if c.enabled == Some(false) {
                let why = format!("IOC {} disabled by a configuration reload", c.name);
                ended += self.end_sessions(|s| s.ioc == c.name, DisableMode::Logout, &why);
            } else if c.allow {
                let Some(ioc) = self.app.ioc(&c.name) else {
                    continue;
                };
                let allow = ioc.config().allow.clone();
                let why = format!("no longer admitted by IOC {}'s ACL (reload)", c.name);
                ended += self.end_sessions(
                    |s| s.ioc == c.name && !allow.allows_from(s.initiator, Some(s.from.to_ip())),
                    DisableMode::Logout,
                    &why,
                );
            }
        }
        ended
    }

    /// Device Management and CM listens after IOCs came or went.
    fn relayout_ports(&mut self, old: &TargetConfig) {
        let enabled: Vec<(String, bool)> = self
            .app
            .iocs()
            .iter()
            .map(|i| (i.config().name.clone(), i.is_enabled()))
            .collect();
        let on = |name: &str| enabled.iter().any(|(n, e)| n == name && *e);
        let limits = *self.app.limits();
        for p in &mut self.ports {
            if let Err(e) = p.reconfigure(old, &self.config, self.rdma_cm_port, &limits, on) {
                // The plan checked service IDs are unique: this is the CM refusing.
                tracing::error!(port = %p.name, error = %e, "reload: port not fully reconfigured");
            }
        }
    }
}
