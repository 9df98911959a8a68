//! The loop's answers to control requests (part of `Loop`): the lists, and the run-time
//! switches an operator (or a failover drill) turns.

use super::Loop;
use crate::control::model::{
    ControlAnswer, ControlError, ControlRequest, DisableMode, IocStatus, LoginForm, LunStatus,
    PortStatus, SessionStatus,
};
use crate::io::IoState;
use srp::wire::logout::TLogoutReason;

impl Loop {
    /// Answers one control request.
    pub(super) fn answer(&mut self, req: ControlRequest) -> Result<ControlAnswer, ControlError> {
        Ok(match req {
            ControlRequest::ListIocs => ControlAnswer::Iocs(self.iocs()),
            ControlRequest::ListPorts => ControlAnswer::Ports(self.port_list()),
            ControlRequest::ListLuns => ControlAnswer::Luns(self.luns()),
            ControlRequest::ListSessions => ControlAnswer::Sessions(self.session_list()),
            ControlRequest::SetIoc {
                name,
                enabled,
                mode,
            } => self.set_ioc(&name, enabled, mode)?,
            ControlRequest::SetPort { name, enabled } => self.set_port(&name, enabled)?,
            ControlRequest::ClearFlushError { name } => {
                let lu = self
                    .app
                    .luns()
                    .find(|(n, _)| **n == *name)
                    .map(|(_, lu)| lu)
                    .ok_or(ControlError::NoSuchLun(name))?;
                ControlAnswer::Done {
                    sessions_ended: u32::from(lu.clear_flush_error().is_some()),
                }
            }
            ControlRequest::RunningConfig => ControlAnswer::Config(
                crate::config::emit::to_toml(&self.config)
                    .lines()
                    .map(str::to_owned)
                    .collect(),
            ),
            ControlRequest::Metrics => ControlAnswer::Metrics(
                crate::control::metrics::render(
                    &self.iocs(),
                    &self.port_list(),
                    &self.luns(),
                    &self.session_list(),
                    &self.tally,
                )
                .lines()
                .map(str::to_owned)
                .collect(),
            ),
            ControlRequest::Apply(config) => return self.apply(*config),
            // The file is read off the loop, by whoever knows it (the socket's service).
            ControlRequest::Reload => return Err(ControlError::NoConfigFile),
        })
    }

    fn live(&self) -> impl Iterator<Item = &super::Session> {
        self.sessions
            .values()
            .filter(|s| s.io.state() != IoState::Closed)
    }

    fn iocs(&self) -> Vec<IocStatus> {
        self.app
            .iocs()
            .iter()
            .map(|i| {
                let c = i.config();
                IocStatus {
                    name: c.name.clone(),
                    guid: c.guid.0,
                    id_ext: c.id_ext,
                    service_id: c.service_id.0,
                    enabled: i.is_enabled(),
                    luns: i.luns().len() as u32,
                    sessions: self.live().filter(|s| s.ioc == c.name).count() as u32,
                }
            })
            .collect()
    }

    fn port_list(&self) -> Vec<PortStatus> {
        self.ports
            .iter()
            .enumerate()
            .map(|(n, p)| {
                let (active, resources, stats) =
                    (p.port.attr().active, p.port.resources(), p.port.counters());
                PortStatus {
                    name: p.name.clone(),
                    address: p.address,
                    active,
                    provider: p.identity.to_string(),
                    sessions: self.live().filter(|s| s.port == n).count() as u32,
                    resources,
                    hca: stats,
                }
            })
            .collect()
    }

    fn luns(&self) -> Vec<LunStatus> {
        self.app
            .luns()
            .map(|(name, lu)| LunStatus {
                name: name.to_string(),
                naa: *lu.identity().naa(),
                blocks: lu.backend().blocks(),
                block_size: lu.backend().block_size().bytes(),
                read_only: lu.read_only(),
                write_cache: lu.write_cache(),
                flush_failed: lu.flush_error().is_some(),
                counters: lu.counters(),
                latency: lu.latency(),
            })
            .collect()
    }

    fn session_list(&self) -> Vec<SessionStatus> {
        self.sessions
            .iter()
            .filter(|(_, s)| s.io.state() != IoState::Closed)
            .map(|(id, s)| {
                let n = s.io.channel().negotiated();
                SessionStatus {
                    channel: id.0,
                    ioc: s.ioc.clone(),
                    port: self.ports[s.port].name.clone(),
                    initiator: s.initiator,
                    form: if s.form == LoginForm::RdmaCm.as_str() {
                        LoginForm::RdmaCm
                    } else {
                        LoginForm::IbCm
                    },
                    window: n.window,
                    max_it_iu_len: n.it_iu_len,
                    in_flight: s.io.in_flight() as u32,
                    age_secs: s.since.elapsed().as_secs(),
                    counters: s.io.counters(),
                }
            })
            .collect()
    }

    /// Ends every live session `pick` selects, as `mode` says; returns how many.
    pub(super) fn end_sessions(
        &mut self,
        pick: impl Fn(&super::Session) -> bool,
        mode: DisableMode,
        why: &str,
    ) -> u32 {
        let mut ended = 0;
        for s in self.sessions.values_mut() {
            if s.io.state() == IoState::Closed || !pick(s) {
                continue;
            }
            ended += 1;
            match mode {
                DisableMode::Logout => s.io.logout(TLogoutReason::NoReason, why),
                DisableMode::Drop => {
                    s.silent = true;
                    s.io.close(why);
                }
            }
        }
        ended
    }

    fn set_ioc(
        &mut self,
        name: &str,
        enabled: bool,
        mode: DisableMode,
    ) -> Result<ControlAnswer, ControlError> {
        let ioc = self
            .app
            .iocs()
            .iter()
            .find(|i| i.config().name == name)
            .ok_or_else(|| ControlError::NoSuchIoc(name.to_string()))?;
        ioc.set_enabled(enabled);
        for p in &mut self.ports {
            p.advertise(name, enabled);
        }
        let sessions_ended = if enabled {
            0
        } else {
            let why = format!("IOC {name} disabled by the operator");
            self.end_sessions(|s| s.ioc == name, mode, &why)
        };
        self.reap();
        Ok(ControlAnswer::Done { sessions_ended })
    }

    fn set_port(&mut self, name: &str, enabled: bool) -> Result<ControlAnswer, ControlError> {
        let index = self
            .ports
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| ControlError::NoSuchPort(name.to_string()))?;
        // First the port (a provider that cannot take a real port down refuses, and then
        // nothing has changed); a down port carries nothing, so its sessions end without a
        // word either way.
        if let Err(e) = self.ports[index].port.set_active(enabled) {
            return Err(ControlError::Failed(format!(
                "port {name} ({}): {e}",
                self.ports[index].identity
            )));
        }
        let sessions_ended = if enabled {
            0
        } else {
            let why = format!("port {name} taken down by the operator");
            self.end_sessions(|s| s.port == index, DisableMode::Drop, &why)
        };
        self.reap();
        Ok(ControlAnswer::Done { sessions_ended })
    }
}
