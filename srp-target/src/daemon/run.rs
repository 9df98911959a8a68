//! The daemon's loop: CM events of every port, logins, channel polling, reaping, shutdown.

use super::event::DaemonEvent;
use super::login::{Outcome, Place, handle_req};
use super::port::Port;
use super::{DaemonError, DaemonOptions, Started};
use crate::appliance::Appliance;
use crate::config::TargetConfig;
use crate::control::handle::Pending;
use crate::io::{ChannelIo, Executor, IoState, Workers};
use crate::login::{ChannelId, CmAnswer, NexusTable};
use access_layer::cm::{ConnEvent, ConnId, ConnRequest, ConnState};
use access_layer::verbs::Doorbell;
use srp::wire::logout::TLogoutReason;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

/// The longest the loop waits for its doorbell when no timer is due sooner: a safety net
/// (every completion, backend result, control request and stop rings the bell), so an idle
/// daemon wakes 10 times a second.
const MAX_WAIT: Duration = Duration::from_millis(100);

#[path = "answer.rs"]
mod answer;
#[path = "reload.rs"]
mod reload;

/// One accepted login.
struct Session {
    io: Box<ChannelIo>,
    port: usize,
    conn: ConnId,
    /// The IOC's name, the initiator and the form: what the control socket lists.
    ioc: String,
    initiator: srp::wire::PortId,
    form: &'static str,
    since: Instant,
    /// Ended by an operator's "drop": no DREQ when reaped, the CM forgets it silently.
    silent: bool,
    /// The address its login came from (the REQ's primary path, checked by the CM).
    from: ib_verbs::Gid,
}

/// The loop's state. Built and run on the daemon thread.
pub(super) struct Loop {
    app: Appliance,
    /// The configuration running now: what a reload is compared with, what
    /// `srpctl target config` shows.
    config: TargetConfig,
    /// The RDMA-CM port logins name (the file's, or the option overriding it).
    rdma_cm_port: u16,
    /// The layer beneath file LUNs (the simulator's disk model), for LUNs a reload opens.
    layer: Option<crate::backend::medium::MediumLayer>,
    // Sessions before ports: channels release their QPs on the port's device first.
    sessions: BTreeMap<ChannelId, Session>,
    /// Closed channels whose QPs are draining before their resources are released
    /// ([`ChannelIo::released`]): polled until then. Boxed as the sessions hold them: a
    /// closed session's channel moves here without moving the channel itself.
    #[allow(clippy::vec_box)]
    releasing: Vec<Box<ChannelIo>>,
    ports: Vec<Port>,
    table: NexusTable,
    executor: Arc<dyn Executor>,
    next_id: u64,
    events: SyncSender<DaemonEvent>,
    step: Duration,
    control: Receiver<Pending>,
    /// Rung by CQ notifications, backend results, control requests and the stop.
    bell: Arc<Doorbell>,
    /// Channel bounds and idle probing.
    guards: crate::config::ChannelGuards,
    /// When idle channels were last looked at.
    last_sweep: Instant,
    /// Where the loop reads the time (the system clock, or a simulated run's).
    clock: Arc<dyn ib_verbs::time::Clock>,
    /// What the metrics count of the daemon's own doings.
    tally: crate::control::metrics::DaemonTally,
}

impl Loop {
    /// Opens everything `config` names; nothing stays open on error.
    pub(super) fn build(
        config: &TargetConfig,
        options: &DaemonOptions,
        events: SyncSender<DaemonEvent>,
        control: Receiver<Pending>,
        bell: Arc<Doorbell>,
    ) -> Result<(Loop, Started), DaemonError> {
        let app = Appliance::build_layered(config, options.limits, options.medium_layer.as_ref())
            .map_err(DaemonError::Appliance)?;
        let rdma_cm_port = options.rdma_cm_port.unwrap_or(config.target.rdma_cm_port);
        let ports = (0..config.ports.len())
            .map(|i| {
                Port::open(
                    config,
                    i,
                    rdma_cm_port,
                    &options.limits,
                    &bell,
                    &options.fabric,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        // A simulated run has no thread but the simulator's: backend jobs run on the loop.
        let executor: Arc<dyn Executor> = if options.fabric.single_threaded() {
            Arc::new(crate::io::Inline)
        } else {
            Arc::new(Workers::new(options.workers, options.queue)?)
        };
        let clock = options.fabric.clock();
        let started = Started {
            iocs: app
                .iocs()
                .iter()
                .map(|i| {
                    let c = i.config();
                    format!(
                        "ioc {}: target port {}, service {:#018x}, ports {}, {} LUN(s){}",
                        c.name,
                        c.target_port_id(),
                        c.service_id.0,
                        c.ports.join(","),
                        i.luns().len(),
                        if i.is_enabled() { "" } else { ", disabled" }
                    )
                })
                .collect(),
            ports: config
                .ports
                .iter()
                .zip(&ports)
                .map(|(p, open)| {
                    format!(
                        "port {}: {} on {} (RDMA-CM port {})",
                        p.name, p.address, open.identity, rdma_cm_port
                    )
                })
                .collect(),
        };
        Ok((
            Loop {
                app,
                config: config.clone(),
                rdma_cm_port,
                layer: options.medium_layer.clone(),
                sessions: BTreeMap::new(),
                releasing: Vec::new(),
                ports,
                table: NexusTable::new(),
                executor,
                next_id: 1,
                events,
                step: options.shutdown_step,
                control,
                bell,
                guards: config.target.guards,
                last_sweep: clock.now(),
                clock,
                tally: crate::control::metrics::DaemonTally::default(),
            },
            started,
        ))
    }

    /// Serves until `stop` is set (and the bell rung), then shuts down. Nothing polls on a
    /// timer: when a turn finds nothing, every CQ is armed, one more turn catches what
    /// completed before the arm, and the loop waits for its doorbell or the next CM timer.
    pub(super) fn run(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            self.settle();
        }
        self.shutdown();
    }

    /// When the loop next has timed work without an outside event: a CM timer or the idle
    /// sweep (what a simulated run advances its clock to).
    pub(super) fn next_due(&self) -> Option<Instant> {
        let now = self.clock.now();
        let cm = self
            .ports
            .iter()
            .filter_map(Port::next_timer)
            .min()
            .map(|d| now + d);
        let sweep = self
            .guards
            .idle_probe
            .filter(|_| !self.sessions.is_empty())
            .map(|idle| self.last_sweep + sweep_period(idle));
        cm.into_iter().chain(sweep).min()
    }

    /// Every port's connection manager and every channel's CQ armed (before a wait).
    pub(super) fn arm(&mut self) {
        for p in &mut self.ports {
            p.arm();
        }
        for s in self.sessions.values() {
            s.io.arm();
        }
        for io in &self.releasing {
            io.arm();
        }
    }

    /// Turns until one finds nothing, then waits as [`Loop::run`] says.
    fn settle(&mut self) {
        if self.turn() > 0 {
            return;
        }
        self.arm();
        if self.turn() > 0 {
            return;
        }
        let wait = self
            .ports
            .iter()
            .filter_map(Port::next_timer)
            .min()
            .map_or(MAX_WAIT, |t| t.min(MAX_WAIT));
        self.bell.wait(wait);
    }

    /// One pass over every port and channel; returns how much happened.
    pub(super) fn turn(&mut self) -> usize {
        let mut n = 0;
        for p in 0..self.ports.len() {
            for ev in self.ports[p].pump() {
                n += 1;
                self.on_cm(p, ev);
            }
        }
        for s in self.sessions.values_mut() {
            n += s.io.poll();
        }
        // Closed channels whose QPs are draining: their CQs until the drain's marker.
        for io in &mut self.releasing {
            n += io.poll();
        }
        self.releasing.retain(|io| !io.released());
        self.probe_idle();
        // PREEMPT AND ABORT reaches every channel of the preempted nexuses, on any IOC.
        // Checked first: the loop turns every 200 µs and most turns settle nothing.
        if self.sessions.values().any(|s| s.io.has_aborts()) {
            let mut ios: Vec<&mut ChannelIo> =
                self.sessions.values_mut().map(|s| &mut *s.io).collect();
            n += crate::io::settle_aborts(&mut ios);
        }
        self.reap();
        while let Ok(p) = self.control.try_recv() {
            n += 1;
            let answer = self.answer(p.request);
            // The caller may have given up waiting.
            let _ = p.reply.send(answer);
        }
        n
    }

    /// Probes channels silent for `idle_probe` (looked at a few times per interval, at most
    /// once a second; the loop wakes at least every [`MAX_WAIT`]).
    fn probe_idle(&mut self) {
        let Some(idle) = self.guards.idle_probe else {
            return;
        };
        let now = self.clock.now();
        if now.saturating_duration_since(self.last_sweep) < sweep_period(idle) {
            return;
        }
        self.last_sweep = now;
        for s in self.sessions.values_mut() {
            s.io.probe_if_idle(now, idle);
        }
    }

    /// The channels there are, as the guards count them, for a login from `from`.
    fn census(&self, from: ib_verbs::Gid) -> super::guards::Census {
        super::guards::Census {
            channels: self.sessions.len(),
            from_address: self.sessions.values().filter(|s| s.from == from).count(),
            half_open: self
                .sessions
                .values()
                .filter(|s| self.ports[s.port].cm.state(s.conn) == ConnState::RepSent)
                .count(),
        }
    }

    fn emit(&self, ev: DaemonEvent) {
        let t = &self.tally;
        let counter = match &ev {
            DaemonEvent::Login { .. } => Some(&t.logins),
            DaemonEvent::Rejected { .. } | DaemonEvent::CmRefused { .. } => Some(&t.rejects),
            DaemonEvent::Logout { .. } => Some(&t.logouts),
            DaemonEvent::Reloaded { .. } => Some(&t.reloads),
        };
        if let Some(c) = counter {
            c.fetch_add(1, Ordering::Relaxed);
        }
        // A full queue drops the event: a slow log reader never stalls the data path. It
        // is counted, and logged at the default level.
        if self.events.try_send(ev.clone()).is_err() {
            t.events_dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(event = %ev, "the event queue is full: the event is dropped");
        }
    }

    fn session_of(&mut self, port: usize, conn: ConnId) -> Option<&mut Session> {
        self.sessions
            .values_mut()
            .find(|s| s.port == port && s.conn == conn)
    }

    fn on_cm(&mut self, port: usize, ev: ConnEvent) {
        match ev {
            ConnEvent::Request(req) => self.login(port, &req),
            ConnEvent::DisconnectRequested { conn } | ConnEvent::Disconnected { conn } => {
                if let Some(s) = self.session_of(port, conn) {
                    s.io.close("initiator disconnected (DREQ)");
                }
            }
            ConnEvent::TimedOut { conn } => {
                if let Some(s) = self.session_of(port, conn) {
                    s.io.close("CM timed out (no RTU)");
                }
            }
            ConnEvent::Rejected { conn, .. } => {
                if let Some(s) = self.session_of(port, conn) {
                    s.io.close("initiator rejected the REP");
                }
            }
            ConnEvent::Refused {
                from,
                service_id,
                reason,
            } => self.emit(DaemonEvent::CmRefused {
                port: self.ports[port].name.clone(),
                from: from.to_ip(),
                service_id: service_id.0,
                reason: u16::from(reason),
            }),
            // The QP was connected when the REP was sent (see `login`).
            ConnEvent::Established { .. }
            | ConnEvent::Response { .. }
            | ConnEvent::Closed { .. } => {}
        }
    }

    /// Refuses a request we cannot set up at all (the connection manager has no attributes
    /// for it): a consumer-defined REJ with no login reply, logged as a reject.
    fn refuse(&mut self, port: usize, conn: ConnId, reason: String) {
        let _ = self.ports[port].cm.reject(
            conn,
            access_layer::mad::cm::CmRejReason::ConsumerDefined,
            &[],
        );
        self.emit(DaemonEvent::Rejected {
            ioc: None,
            initiator: None,
            code: u32::from(srp::wire::login::LoginRejReason::InsufficientResources),
            reason,
        });
    }

    fn login(&mut self, port: usize, req: &ConnRequest) {
        let conn = req.conn;
        let id = ChannelId(self.next_id);
        self.next_id += 1;
        let base = match self.ports[port].cm.qp_attrs(conn) {
            Ok(rc) => rc,
            Err(e) => return self.refuse(port, conn, format!("no QP attributes: {e}")),
        };
        let full = super::guards::refusal(&self.guards, self.census(req.from));
        let p = &self.ports[port];
        let place = Place {
            port: &p.name,
            ca: p.ca.clone(),
            link_mtu: p.link_mtu,
            pd: p.pd,
            executor: &self.executor,
            bell: &self.bell,
            full,
        };
        let outcome = handle_req(&self.app, &self.table, &place, req, base, id);
        match outcome {
            Outcome::Reject {
                answer,
                code,
                reason,
                ioc,
                initiator,
            } => {
                if let CmAnswer::Reject {
                    reason: cm_reason,
                    private_data,
                } = &answer
                {
                    let _ = self.ports[port].cm.reject(conn, *cm_reason, private_data);
                }
                self.emit(DaemonEvent::Rejected {
                    ioc,
                    initiator,
                    code,
                    reason,
                });
            }
            Outcome::Accept {
                mut io,
                rc,
                answer,
                nexus,
                ioc,
                terminate,
                form,
            } => {
                let Some(qpn) = io.qpn() else { return };
                io.set_clock(self.clock.clone());
                let Some(params) = answer.accept_params(qpn) else {
                    return;
                };
                // The QP goes to RTS before the REP leaves (ib_srpt moves it to RTR
                // here): the initiator may send its first IU as soon as it has the REP,
                // and we send nothing before its first IU arrives.
                if let Err(e) = io.connect(&rc) {
                    let _ = self.ports[port].cm.reject(
                        conn,
                        access_layer::mad::cm::CmRejReason::ConsumerDefined,
                        &[],
                    );
                    self.emit(DaemonEvent::Rejected {
                        ioc: Some(ioc),
                        initiator: Some(nexus.initiator),
                        code: u32::from(srp::wire::login::LoginRejReason::InsufficientResources),
                        reason: format!("cannot connect the QP: {e}"),
                    });
                    return;
                }
                if let Err(e) = self.ports[port].cm.accept(conn, &params) {
                    io.close(&format!("CM accept failed: {e}"));
                    self.releasing.push(io);
                    self.emit(DaemonEvent::Rejected {
                        ioc: Some(ioc),
                        initiator: Some(nexus.initiator),
                        code: u32::from(srp::wire::login::LoginRejReason::InsufficientResources),
                        reason: format!("CM accept failed: {e}"),
                    });
                    return;
                }
                for t in &terminate {
                    if let Some(s) = self.sessions.get_mut(t) {
                        s.io.logout(
                            TLogoutReason::MultiChannelAction,
                            &format!("replaced by {id} (MULTI-CHANNEL ACTION single)"),
                        );
                    }
                }
                self.table.add_from(nexus, id, req.from);
                self.sessions.insert(
                    id,
                    Session {
                        io,
                        port,
                        conn,
                        ioc: ioc.clone(),
                        initiator: nexus.initiator,
                        form,
                        since: self.clock.now(),
                        silent: false,
                        from: req.from,
                    },
                );
                self.emit(DaemonEvent::Login {
                    channel: id,
                    ioc,
                    initiator: nexus.initiator,
                    form,
                    terminated: terminate,
                });
            }
        }
    }

    /// Forgets closed channels: out of the nexus table, a DREQ for their connection.
    fn reap(&mut self) {
        let closed: Vec<ChannelId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.io.state() == IoState::Closed)
            .map(|(id, _)| *id)
            .collect();
        for id in closed {
            let Some(s) = self.sessions.remove(&id) else {
                continue;
            };
            if let Some(nexus) = self.table.remove(id) {
                if self.table.channels(&nexus).is_empty() {
                    s.io.it_nexus_lost();
                }
            }
            let p = &mut self.ports[s.port];
            if s.silent {
                let _ = p.cm.abandon(s.conn);
            } else if matches!(
                p.cm.state(s.conn),
                ConnState::Established | ConnState::RepSent
            ) {
                let _ = p.cm.disconnect(s.conn);
            }
            let reason =
                s.io.close_reason()
                    .unwrap_or("initiator logged out")
                    .to_string();
            if !s.io.released() {
                self.releasing.push(s.io);
            }
            self.emit(DaemonEvent::Logout {
                channel: id,
                reason,
            });
        }
    }

    /// T_LOGOUT to every live channel, wait for them to be sent; then DREQ to every
    /// connection, wait for the DREPs. Each wait is bounded by `step`.
    fn shutdown(&mut self) {
        let conns: Vec<(usize, ConnId)> =
            self.sessions.values().map(|s| (s.port, s.conn)).collect();
        for s in self.sessions.values_mut() {
            s.io.logout(TLogoutReason::NoReason, "target shutting down");
        }
        let end = Instant::now() + self.step;
        while Instant::now() < end
            && self
                .sessions
                .values()
                .any(|s| s.io.state() != IoState::Closed)
        {
            self.settle();
        }
        for s in self.sessions.values_mut() {
            s.io.close("target shutting down (T_LOGOUT not sent in time)");
        }
        self.reap();
        let end = Instant::now() + self.step;
        while Instant::now() < end
            && conns
                .iter()
                .any(|(p, c)| self.ports[*p].cm.state(*c) == ConnState::DreqSent)
        {
            self.settle();
        }
    }
}

/// How often idle channels are looked at: a few times per probe interval, at most once a
/// second.
fn sweep_period(idle: Duration) -> Duration {
    (idle / 4).min(Duration::from_secs(1))
}
