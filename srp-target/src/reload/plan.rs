//! The difference between the running configuration and a new one, as changes the daemon
//! can make live or refusals that say why it cannot. Pure: both configurations are
//! already validated.

use crate::config::{Backing, ChannelGuards, IocConfig, LunConfig, TargetConfig};
use crate::lu::AluaState;
use std::fmt;

/// What a reload changes. Names refer to the new configuration (added, changed) or the
/// running one (removed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// `[[lun]]`s to open.
    pub luns_added: Vec<String>,
    /// `[[lun]]`s no longer configured (no IOC of the new configuration exports them).
    pub luns_removed: Vec<String>,
    /// `[[lun]]`s that grow: name, old and new size in bytes.
    pub luns_grown: Vec<(String, u64, u64)>,
    /// `[[ioc]]`s added (each after every IOC that stays).
    pub iocs_added: Vec<String>,
    /// `[[ioc]]`s removed.
    pub iocs_removed: Vec<String>,
    /// `[[ioc]]`s that stay with something changed.
    pub iocs_changed: Vec<IocChange>,
    /// The new channel guards, if they changed.
    pub guards: Option<ChannelGuards>,
    /// `[[peer]]` changed: the port groups REPORT TARGET PORT GROUPS lists.
    pub peers: bool,
}

/// What changes in one IOC that stays.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IocChange {
    /// The IOC's name.
    pub name: String,
    /// Its LUN table (`exports`) changed.
    pub exports: bool,
    /// Its ACL (`allow`) changed.
    pub allow: bool,
    /// `enabled` changed to this.
    pub enabled: Option<bool>,
    /// `alua` changed to this.
    pub alua: Option<AluaState>,
    /// `nexus_from_any_address` changed.
    pub nexus_from_any_address: bool,
}

impl IocChange {
    fn any(&self) -> bool {
        self.exports
            || self.allow
            || self.enabled.is_some()
            || self.alua.is_some()
            || self.nexus_from_any_address
    }
}

/// A change that cannot be made while the daemon runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// What it concerns, as a key path: `port p0`, `lun vol1.block_size`, `target.name`.
    pub what: String,
    /// Why, and what to do instead.
    pub why: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.why)
    }
}

impl Plan {
    /// Nothing changes.
    pub fn is_empty(&self) -> bool {
        *self == Plan::default()
    }

    /// One line per change, for the operator (`new` is the configuration the plan leads
    /// to).
    pub fn describe(&self, new: &TargetConfig) -> Vec<String> {
        let mut out = Vec::new();
        for name in &self.luns_added {
            let what = new
                .lun(name)
                .map_or_else(String::new, |l| backing(&l.backing));
            out.push(format!("lun {name} added: {what}"));
        }
        for (name, from, to) in &self.luns_grown {
            out.push(format!("lun {name} grown from {from} to {to} bytes"));
        }
        for name in &self.luns_removed {
            out.push(format!("lun {name} removed"));
        }
        for name in &self.iocs_added {
            let i = new.iocs.iter().position(|i| &i.name == name).unwrap_or(0);
            let port = usize::from(new.target.port_base) + i;
            out.push(format!("ioc {name} added (relative target port {port})"));
        }
        for name in &self.iocs_removed {
            out.push(format!("ioc {name} removed: its sessions are logged out"));
        }
        for c in &self.iocs_changed {
            let Some(ioc) = new.iocs.iter().find(|i| i.name == c.name) else {
                continue;
            };
            if c.exports {
                let table: Vec<String> = ioc
                    .exports
                    .iter()
                    .map(|(lun, name)| {
                        let n = lun.number().map_or_else(|_| "?".into(), |n| n.to_string());
                        format!("LUN {n} = {name}")
                    })
                    .collect();
                let table = if table.is_empty() {
                    "nothing".to_owned()
                } else {
                    table.join(", ")
                };
                out.push(format!("ioc {}: exports {table}", c.name));
            }
            if c.allow {
                out.push(format!(
                    "ioc {}: ACL changed; sessions it no longer admits are logged out",
                    c.name
                ));
            }
            match c.enabled {
                Some(true) => out.push(format!("ioc {}: enabled", c.name)),
                Some(false) => out.push(format!(
                    "ioc {}: disabled; its sessions are logged out",
                    c.name
                )),
                None => {}
            }
            if let Some(state) = c.alua {
                out.push(format!("ioc {}: ALUA state {state:?}", c.name));
            }
            if c.nexus_from_any_address {
                out.push(format!(
                    "ioc {}: nexus_from_any_address = {}",
                    c.name, ioc.nexus_from_any_address
                ));
            }
        }
        if self.guards.is_some() {
            out.push("channel guards changed (idle_probe, max_channels…)".to_owned());
        }
        if self.peers {
            let peers: Vec<String> = new
                .peers
                .iter()
                .map(|p| format!("{} {:?} {:?}", p.name, p.port_groups, p.alua))
                .collect();
            let peers = if peers.is_empty() {
                "none".to_owned()
            } else {
                peers.join(", ")
            };
            out.push(format!("peer appliances' port groups: {peers}"));
        }
        out
    }
}

fn backing(b: &Backing) -> String {
    match b {
        Backing::File {
            path,
            size_bytes: Some(n),
        } => format!("file {} ({n} bytes)", path.display()),
        Backing::File { path, .. } => format!("file {}", path.display()),
        Backing::Device { path } => format!("device {}", path.display()),
        Backing::Ram { size_bytes } => format!("ram ({size_bytes} bytes)"),
        Backing::Rbd(b) => format!("rbd {}", b.name()),
    }
}

/// What it takes to change `[target]` fields: the daemon bound them at start.
const RESTART: &str = "fixed while the daemon runs; takes a restart";

/// The plan from `running` to `new`, or every change that cannot be made live.
pub fn plan(running: &TargetConfig, new: &TargetConfig) -> Result<Plan, Vec<Refusal>> {
    let mut refusals = Vec::new();
    let mut refuse = |what: String, why: String| refusals.push(Refusal { what, why });
    target(running, new, &mut refuse);
    ports(running, new, &mut refuse);
    let mut out = Plan::default();
    iocs(running, new, &mut out, &mut refuse);
    luns(running, new, &mut out, &mut refuse);
    if running.target.guards != new.target.guards {
        out.guards = Some(new.target.guards);
    }
    out.peers = running.peers != new.peers;
    if refusals.is_empty() {
        Ok(out)
    } else {
        Err(refusals)
    }
}

fn target(running: &TargetConfig, new: &TargetConfig, refuse: &mut impl FnMut(String, String)) {
    let (r, n) = (&running.target, &new.target);
    let mut check = |key: &str, changed: bool, detail: String| {
        if changed {
            refuse(format!("target.{key}"), format!("{detail}: {RESTART}"));
        }
    };
    check(
        "node_guid",
        r.node_guid != n.node_guid,
        format!("{} to {}", r.node_guid, n.node_guid),
    );
    check(
        "oui",
        r.oui != n.oui,
        "the LUN identities' company ID".into(),
    );
    check(
        "name",
        r.name != n.name,
        format!("{:?} to {:?}", r.name, n.name),
    );
    check(
        "rdma_cm_port",
        r.rdma_cm_port != n.rdma_cm_port,
        format!("{} to {}", r.rdma_cm_port, n.rdma_cm_port),
    );
    check(
        "login_forms",
        r.login_forms != n.login_forms,
        "the service IDs every port listens on".into(),
    );
    check(
        "control_socket",
        r.control_socket != n.control_socket,
        format!(
            "{} to {}",
            r.control_socket.display(),
            n.control_socket.display()
        ),
    );
    check(
        "control_group",
        r.control_group != n.control_group,
        "the control socket's group".into(),
    );
    check(
        "port_base",
        r.port_base != n.port_base,
        format!(
            "{} to {} (every IOC's relative target port and group, which sessions and \
             reservations name)",
            r.port_base, n.port_base
        ),
    );
    check(
        "state_dir",
        r.state_dir != n.state_dir,
        format!("{} to {}", r.state_dir.display(), n.state_dir.display()),
    );
}

fn ports(running: &TargetConfig, new: &TargetConfig, refuse: &mut impl FnMut(String, String)) {
    for r in &running.ports {
        match new.port(&r.name) {
            None => refuse(
                format!("port {}", r.name),
                format!(
                    "removed; its HCA port ({}) is bound: takes a restart",
                    r.address
                ),
            ),
            Some(n) if n != r => refuse(
                format!("port {}", r.name),
                "changed (address or partitions); its HCA port is bound: takes a restart".into(),
            ),
            Some(_) => {}
        }
    }
    for n in &new.ports {
        if running.port(&n.name).is_none() {
            refuse(
                format!("port {}", n.name),
                format!("added ({}); opening HCA ports takes a restart", n.address),
            );
        }
    }
}

fn iocs(
    running: &TargetConfig,
    new: &TargetConfig,
    out: &mut Plan,
    refuse: &mut impl FnMut(String, String),
) {
    let find = |c: &TargetConfig, name: &str| c.iocs.iter().position(|i| i.name == name);
    for (i, r) in running.iocs.iter().enumerate() {
        let Some(j) = find(new, &r.name) else {
            out.iocs_removed.push(r.name.clone());
            continue;
        };
        if i != j {
            refuse(
                format!("ioc {}", r.name),
                format!(
                    "would move from relative target port {} to {} (IOCs are numbered in \
                     file order, and hosts know them by it): add new IOCs after the existing \
                     ones; to retire one in the middle, set enabled = false",
                    i + 1,
                    j + 1
                ),
            );
            continue;
        }
        ioc(r, &new.iocs[j], out, refuse);
    }
    for n in &new.iocs {
        if find(running, &n.name).is_none() {
            out.iocs_added.push(n.name.clone());
        }
    }
}

fn ioc(r: &IocConfig, n: &IocConfig, out: &mut Plan, refuse: &mut impl FnMut(String, String)) {
    let mut fixed = |key: &str, changed: bool| {
        if changed {
            refuse(
                format!("ioc {}.{key}", r.name),
                "the IOC's identity and where it is reachable are fixed while it runs: \
                 add a new IOC instead, or restart"
                    .into(),
            );
        }
    };
    fixed("guid", r.guid != n.guid);
    fixed("id_ext", r.id_ext != n.id_ext);
    fixed("service_id", r.service_id != n.service_id);
    fixed("ports", r.ports != n.ports);
    fixed("partitions", r.partitions != n.partitions);
    let change = IocChange {
        name: r.name.clone(),
        exports: r.exports != n.exports,
        allow: r.allow != n.allow,
        enabled: (r.enabled != n.enabled).then_some(n.enabled),
        alua: (r.alua != n.alua).then_some(n.alua),
        nexus_from_any_address: r.nexus_from_any_address != n.nexus_from_any_address,
    };
    if change.any() {
        out.iocs_changed.push(change);
    }
}

fn luns(
    running: &TargetConfig,
    new: &TargetConfig,
    out: &mut Plan,
    refuse: &mut impl FnMut(String, String),
) {
    for r in &running.luns {
        match new.lun(&r.name) {
            None => out.luns_removed.push(r.name.clone()),
            Some(n) => lun(r, n, out, refuse),
        }
    }
    for n in &new.luns {
        if running.lun(&n.name).is_none() {
            out.luns_added.push(n.name.clone());
        }
    }
}

fn lun(r: &LunConfig, n: &LunConfig, out: &mut Plan, refuse: &mut impl FnMut(String, String)) {
    let mut fixed = |key: &str, changed: bool, why: &str| {
        if changed {
            refuse(format!("lun {}.{key}", r.name), why.to_owned());
        }
    };
    let hint = "fixed while the LUN is open: give the new one another name (a new LUN), or restart";
    fixed("block_size", r.block_size != n.block_size, hint);
    fixed(
        "physical_block_size",
        r.physical_block_size != n.physical_block_size,
        hint,
    );
    fixed("read_only", r.read_only != n.read_only, hint);
    fixed(
        "write_cache",
        r.write_cache != n.write_cache,
        "the caching page hosts see (and may have changed by MODE SELECT); takes a restart",
    );
    fixed(
        "write_cache_changeable",
        r.write_cache_changeable != n.write_cache_changeable,
        hint,
    );
    fixed("record_writes", r.record_writes != n.record_writes, hint);
    match (&r.backing, &n.backing) {
        (
            Backing::File {
                path: rp,
                size_bytes: Some(rs),
            },
            Backing::File {
                path: np,
                size_bytes: Some(ns),
            },
        ) if rp == np => {
            if ns > rs {
                if r.record_writes.is_some() {
                    fixed(
                        "size",
                        true,
                        "a LUN whose writes are recorded cannot grow while it runs",
                    );
                } else {
                    out.luns_grown.push((r.name.clone(), *rs, *ns));
                }
            } else if ns < rs {
                fixed(
                    "size",
                    true,
                    &format!(
                        "shrinking from {rs} to {ns} bytes would cut off blocks hosts may \
                         hold data in; refused (copy the data to a smaller LUN instead)"
                    ),
                );
            }
        }
        (rb, nb) if rb == nb => {}
        (Backing::Ram { .. }, Backing::Ram { .. }) => fixed(
            "size",
            true,
            "a RAM LUN cannot change size while it runs; takes a restart (its data is lost then)",
        ),
        _ => fixed(
            "backing",
            true,
            "the backing store (file, device, RAM or RBD image, its path or name, a configured \
             size or none, its cluster settings) is fixed while the LUN is open: give the new \
             one another name, or restart",
        ),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
