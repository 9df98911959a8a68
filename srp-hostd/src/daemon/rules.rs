//! The discovery rules in the sweeps (part of `Shared`; [`crate::rules`] has the file and
//! its contract): the file re-read when it changes, each service decided, each decision
//! logged once and again when it changes.

use super::{Shared, lock};
use crate::discover::SrpService;
use crate::rules::{Action, Decision, Rules, Target};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::SystemTime;

/// The rules in force, the file's modification time they were read at, and the last
/// decision per (portal, IOC GUID) (to log each change once).
#[derive(Debug, Default)]
pub(super) struct RulesState {
    rules: Rules,
    read: Option<SystemTime>,
    decided: BTreeMap<(IpAddr, u64), Decision>,
}

impl RulesState {
    /// Forgets when the file was read (a reload may name another): read at the next use.
    pub(super) fn forget(&mut self) {
        self.read = None;
    }
}

impl Shared {
    /// Re-reads the rules file if it changed since it was read; an invalid one leaves the
    /// rules in force (logged at error level).
    fn refresh_rules(&self) {
        let config = self.config();
        let Some(path) = &config.rules else {
            return;
        };
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        let mut st = lock(&self.rules);
        if st.read.is_some() && st.read == modified {
            return;
        }
        st.read = modified;
        match Rules::from_file(path) {
            Ok(r) => {
                if st.rules != r {
                    tracing::info!(file = %path.display(), "discovery rules read");
                    st.rules = r;
                }
            }
            Err(problems) => tracing::error!(
                file = %path.display(),
                problems = %problems.join("; "),
                "the discovery rules file is not valid; the rules in force stay"
            ),
        }
    }

    /// What the rules say of `service` found on partition `pkey`; logged when new or changed.
    pub(super) fn decide(&self, service: &SrpService, pkey: ib_verbs::PKey) -> Decision {
        self.refresh_rules();
        let target = Target {
            id_ext: service.id_ext,
            ioc_guid: service.ioc_guid,
            service_id: service.service_id.0,
            portal: service.portal,
            partition: pkey,
        };
        let mut st = lock(&self.rules);
        let d = st.rules.decide(&target);
        let key = (service.portal, service.ioc_guid.0);
        if st.decided.get(&key) != Some(&d) {
            st.decided.insert(key, d);
            let ioc = format!("{:#018x}", service.ioc_guid.0);
            match d.action {
                Action::Allow => {
                    tracing::info!(portal = %service.portal, ioc, name = %service.ioc_name,
                    options = ?d.options, "discovery rules: {d}")
                }
                Action::Deny => {
                    tracing::info!(portal = %service.portal, ioc, name = %service.ioc_name,
                    "discovery rules: {d}; not logged in to")
                }
            }
        }
        d
    }
}
