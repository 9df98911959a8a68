//! The host daemon's configuration reloaded (part of `Shared`): SIGHUP to `host run`,
//! `srpctl host reload`. The daemon's identity and places — `name`, `node_guid`,
//! `initiator_ext`, `disks_dir`, `control_socket`, `control_group`, `state_dir` — are fixed
//! while it runs; a file that changes one is refused with each reason and nothing changes.
//! Everything else is taken whole: portals added are swept at once, removed ones no longer
//! (their sessions stay until logged out: a reload never takes a disk from under its
//! user), and the timers, sizes, driver model, login form, multipath settings and
//! discovery rules apply to what logs in or appears from now on.

use super::{Shared, lock};
use crate::config::HostConfig;
use std::sync::{Arc, PoisonError};

impl Shared {
    /// The configuration in force.
    pub(super) fn config(&self) -> Arc<HostConfig> {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Re-reads the file the configuration came from and takes it.
    pub(super) fn reload_file(&self) -> Result<Vec<String>, crate::control::HostControlError> {
        use crate::control::HostControlError as E;
        let Some(path) = self.config().source.clone() else {
            return Err(E::Failed(
                "the daemon has no configuration file to reload (started from a config in memory)"
                    .into(),
            ));
        };
        let new = HostConfig::from_file(&path).map_err(|e| {
            E::Failed(format!(
                "{e}\nnot valid; the running configuration is unchanged"
            ))
        })?;
        self.reload(new).map_err(|refused| {
            E::Failed(format!(
                "cannot apply without a restart; the running configuration is unchanged:\n  {}",
                refused.join("\n  ")
            ))
        })
    }

    /// Takes `new` (see the module doc): what changed, one line each, or every refusal.
    pub(super) fn reload(&self, new: HostConfig) -> Result<Vec<String>, Vec<String>> {
        let old = self.config();
        let mut refused = Vec::new();
        let mut fixed = |key: &str, changed: bool| {
            if changed {
                refused.push(format!(
                    "host.{key}: fixed while the daemon runs (its identity or where it lives); \
                     takes a restart"
                ));
            }
        };
        fixed("name", old.name != new.name);
        fixed("node_guid", old.node_guid != new.node_guid);
        fixed("initiator_ext", old.initiator_ext != new.initiator_ext);
        fixed("disks_dir", old.disks_dir != new.disks_dir);
        fixed("control_socket", old.control_socket != new.control_socket);
        fixed("control_group", old.control_group != new.control_group);
        fixed("state_dir", old.state_dir != new.state_dir);
        if !refused.is_empty() {
            return Err(refused);
        }
        let mut changes = Vec::new();
        for p in &new.portals {
            match old.portals.iter().find(|o| o.address == p.address) {
                None => changes.push(format!("portal {} added: swept now", p.address)),
                Some(o) if o != p => changes.push(format!(
                    "portal {} changed: its next logins follow the new settings",
                    p.address
                )),
                Some(_) => {}
            }
        }
        for o in &old.portals {
            if !new.portals.iter().any(|p| p.address == o.address) {
                changes.push(format!(
                    "portal {} removed: no longer swept; its sessions stay until logged out",
                    o.address
                ));
            }
        }
        let rest = HostConfig {
            portals: old.portals.clone(),
            source: old.source.clone(),
            ..new.clone()
        };
        let old_rest = HostConfig {
            source: old.source.clone(),
            ..(*old).clone()
        };
        if rest != old_rest {
            changes.push(
                "settings changed (timers, sizes, driver, login form, multipath, rules, sweep \
                 interval): applied to what logs in or appears from now on"
                    .into(),
            );
        }
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(new);
        // The rules file may be another now: read it at the next decision.
        lock(&self.rules).forget();
        for c in &changes {
            tracing::info!(change = %c, "reload");
        }
        self.wake.notify_all();
        Ok(changes)
    }
}
