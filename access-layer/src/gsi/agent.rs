//! The GSI agent: one node's MAD transactions, sans-IO (IBTA Vol1 13.5; Linux `ib_mad.c`).
//!
//! Inputs: [`GsiAgent::handle_mad`] (a received MAD and where it came from),
//! [`GsiAgent::handle_timeout`], [`GsiAgent::send_request`] and [`GsiAgent::send`].
//! Outputs: [`GsiAgent::poll_transmit`], [`GsiAgent::poll_event`],
//! [`GsiAgent::poll_timeout`]. See the [module docs](super) for the driver loop.
#[allow(unused_imports)]
use crate::prelude::*;

use super::GsiError;
use crate::mad::{MadAddress, MadBuf, MadHeader, MadOut, MadStatus, Method, MgmtClass, Tid};
use alloc::collections::{BTreeMap, VecDeque};
use core::time::Duration;
use ib_verbs::time::Time;

/// Sizes of the agent's bounded queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GsiConfig {
    /// High 32 bits of every TID this agent allocates (Linux: the agent's `hi_tid`).
    pub agent_id: u32,
    /// Requests awaiting a response at once (the MAD buffer pool).
    pub max_outstanding: usize,
    /// MADs queued for transmission; answers beyond it are dropped and counted.
    pub max_transmit: usize,
    /// Inbound requests queued as events; requests beyond it are dropped (the peer retries).
    pub max_events: usize,
}

impl Default for GsiConfig {
    fn default() -> Self {
        GsiConfig {
            agent_id: 1,
            max_outstanding: 64,
            max_transmit: 256,
            max_events: 256,
        }
    }
}

/// How long to wait for a response and how often to resend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestOptions {
    /// Wait for a response this long after each transmission.
    pub timeout: Duration,
    /// Retransmissions after the first send (same TID, as `ib_mad`).
    pub retries: u8,
}

impl Default for RequestOptions {
    /// WinOF IOC PnP: 250 ms, 4 retries (srp-linux.md §2.5).
    fn default() -> Self {
        RequestOptions {
            timeout: Duration::from_millis(250),
            retries: 4,
        }
    }
}

/// What the agent reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GsiEvent {
    /// A request (no response bit) for a class this node serves.
    Request {
        /// Who sent it (answer there).
        from: MadAddress,
        /// The MAD.
        mad: MadBuf,
    },
    /// The response to a request of ours.
    Response {
        /// The request's TID.
        tid: Tid,
        /// Who answered.
        from: MadAddress,
        /// The MAD.
        mad: MadBuf,
    },
    /// A request of ours got no response after all retries; its slot is free again.
    Timeout {
        /// The request's TID.
        tid: Tid,
        /// Where it went.
        to: MadAddress,
        /// Its class.
        mgmt_class: MgmtClass,
        /// Its attribute.
        attr_id: u16,
    },
}

/// Counters of what the agent did and dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GsiStats {
    /// MADs queued for transmission, retransmissions included.
    pub transmitted: u64,
    /// Retransmissions.
    pub retries: u64,
    /// Responses matched to a request.
    pub responses: u64,
    /// Requests that ran out of retries.
    pub timeouts: u64,
    /// Responses of a known class matching no outstanding request (late or duplicate).
    pub unmatched_responses: u64,
    /// Get/Set of a class (or version) nobody serves, answered with status 0x0004.
    pub unsupported_answered: u64,
    /// Responses or other methods of a class nobody registered, dropped.
    pub unknown_class_dropped: u64,
    /// Received MADs whose header did not parse.
    pub malformed: u64,
    /// MADs dropped because the transmit or event queue was full.
    pub queue_full_drops: u64,
}

/// A request awaiting its response.
#[derive(Clone, Debug)]
struct Pending {
    to: MadAddress,
    mad: MadBuf,
    mgmt_class: MgmtClass,
    attr_id: u16,
    deadline: Time,
    retries_left: u8,
    timeout: Duration,
}

/// One node's MAD transaction layer.
///
/// Order of calls for a driver: feed [`GsiAgent::handle_mad`] with what arrived and
/// [`GsiAgent::handle_timeout`] when [`GsiAgent::poll_timeout`] has passed; then drain
/// [`GsiAgent::poll_event`] (servers and clients may call [`GsiAgent::send_request`] and
/// [`GsiAgent::send`] meanwhile), then [`GsiAgent::poll_transmit`].
#[derive(Debug)]
pub struct GsiAgent {
    config: GsiConfig,
    /// Served classes and their class version.
    servers: BTreeMap<u8, u8>,
    /// Classes we send requests of.
    clients: BTreeMap<u8, ()>,
    next_tid: u32,
    outstanding: BTreeMap<Tid, Pending>,
    transmit: VecDeque<MadOut>,
    events: VecDeque<GsiEvent>,
    stats: GsiStats,
}

impl GsiAgent {
    /// An agent with no class registered.
    pub fn new(config: GsiConfig) -> Self {
        GsiAgent {
            config,
            servers: BTreeMap::new(),
            clients: BTreeMap::new(),
            next_tid: 1,
            outstanding: BTreeMap::new(),
            transmit: VecDeque::new(),
            events: VecDeque::new(),
            stats: GsiStats::default(),
        }
    }

    /// This node serves `class` at `class_version`: its requests become
    /// [`GsiEvent::Request`]s (DM: class 0x06, version 1, as ib_srpt registers).
    pub fn register_server(&mut self, class: MgmtClass, class_version: u8) {
        self.servers.insert(class.into(), class_version);
    }

    /// This node sends requests of `class` and matches their responses.
    pub fn register_client(&mut self, class: MgmtClass) {
        self.clients.insert(class.into(), ());
    }

    /// Stops serving `class`; its Get/Set are answered "class not supported" from now on.
    pub fn unregister_server(&mut self, class: MgmtClass) {
        self.servers.remove(&u8::from(class));
    }

    /// Counters.
    pub fn stats(&self) -> GsiStats {
        self.stats
    }

    /// Requests awaiting a response.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Sends request `mad` to `to` under a fresh TID (its TID field is overwritten), resending
    /// it every `opts.timeout` up to `opts.retries` times; the answer comes as
    /// [`GsiEvent::Response`], or [`GsiEvent::Timeout`] after the last retry.
    pub fn send_request(
        &mut self,
        now: Time,
        to: MadAddress,
        mut mad: MadBuf,
        opts: RequestOptions,
    ) -> Result<Tid, GsiError> {
        let mut header = mad.header()?;
        if header.response {
            return Err(GsiError::NotARequest);
        }
        if !self.clients.contains_key(&u8::from(header.mgmt_class)) {
            return Err(GsiError::NotClient(header.mgmt_class));
        }
        if self.outstanding.len() >= self.config.max_outstanding {
            return Err(GsiError::PoolFull {
                capacity: self.config.max_outstanding,
            });
        }
        if self.transmit.len() >= self.config.max_transmit {
            return Err(GsiError::TransmitQueueFull {
                capacity: self.config.max_transmit,
            });
        }
        header.tid = self.alloc_tid();
        mad.set_header(&header)?;
        self.outstanding.insert(
            header.tid,
            Pending {
                to,
                mad: mad.clone(),
                mgmt_class: header.mgmt_class,
                attr_id: header.attr_id,
                deadline: now + opts.timeout,
                retries_left: opts.retries,
                timeout: opts.timeout,
            },
        );
        self.queue(MadOut { to, mad });
        Ok(header.tid)
    }

    /// Sends `out` once, untracked: a server's answer, or a Send whose retries its class
    /// manages itself (CM).
    pub fn send(&mut self, out: MadOut) -> Result<(), GsiError> {
        if self.transmit.len() >= self.config.max_transmit {
            self.stats.queue_full_drops += 1;
            return Err(GsiError::TransmitQueueFull {
                capacity: self.config.max_transmit,
            });
        }
        self.queue(out);
        Ok(())
    }

    /// Forgets an outstanding request (no event follows); returns whether it was there.
    pub fn cancel(&mut self, tid: Tid) -> bool {
        self.outstanding.remove(&tid).is_some()
    }

    /// A MAD arrived from `from`.
    pub fn handle_mad(&mut self, _now: Time, from: MadAddress, mad: MadBuf) {
        let Ok(header) = mad.header() else {
            self.stats.malformed += 1;
            return;
        };
        if header.response {
            self.handle_response(from, &header, mad);
        } else {
            self.handle_request(from, &header, mad);
        }
    }

    fn handle_response(&mut self, from: MadAddress, header: &MadHeader, mad: MadBuf) {
        let class = u8::from(header.mgmt_class);
        let matches = self.outstanding.get(&header.tid).is_some_and(|p| {
            // ib_mad `ib_find_send_mad`: same TID and class; we also want the attribute and
            // the peer we asked, so a stray answer from elsewhere cannot complete it.
            p.mgmt_class == header.mgmt_class && p.attr_id == header.attr_id && p.to.gid == from.gid
        });
        if matches {
            self.outstanding.remove(&header.tid);
            self.stats.responses += 1;
            self.events.push_back(GsiEvent::Response {
                tid: header.tid,
                from,
                mad,
            });
        } else if self.clients.contains_key(&class) {
            self.stats.unmatched_responses += 1;
        } else {
            self.stats.unknown_class_dropped += 1;
        }
    }

    fn handle_request(&mut self, from: MadAddress, header: &MadHeader, mad: MadBuf) {
        let class = u8::from(header.mgmt_class);
        match self.servers.get(&class) {
            Some(&version) if version == header.class_version => {
                if self.events.len() >= self.config.max_events {
                    self.stats.queue_full_drops += 1;
                    return;
                }
                self.events.push_back(GsiEvent::Request { from, mad });
            }
            _ if matches!(header.method, Method::Get | Method::Set) => {
                // IBTA Vol1 table 147: invalid-field code 1, "bad version or class not
                // supported". (Linux `generate_unmatched_resp` answers 0x000C instead.)
                // The answer echoes the request's data, as ib_mad copies it.
                let mut answer = mad;
                if answer
                    .set_header(&header.response_to(MadStatus::BadVersion))
                    .is_err()
                {
                    self.stats.malformed += 1;
                    return;
                }
                self.stats.unsupported_answered += 1;
                // `send` counts a full queue.
                let _ = self.send(MadOut {
                    to: from,
                    mad: answer,
                });
            }
            _ => self.stats.unknown_class_dropped += 1,
        }
    }

    /// Resends or gives up on every request whose deadline has passed.
    pub fn handle_timeout(&mut self, now: Time) {
        let due: Vec<Tid> = self
            .outstanding
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(&t, _)| t)
            .collect();
        for tid in due {
            let Some(p) = self.outstanding.get_mut(&tid) else {
                continue;
            };
            if p.retries_left > 0 && self.transmit.len() < self.config.max_transmit {
                p.retries_left -= 1;
                p.deadline = now + p.timeout;
                let out = MadOut {
                    to: p.to,
                    mad: p.mad.clone(),
                };
                self.stats.retries += 1;
                self.queue(out);
            } else if p.retries_left > 0 {
                // No room to resend now: try again in one timeout, spending the retry.
                p.retries_left -= 1;
                p.deadline = now + p.timeout;
                self.stats.queue_full_drops += 1;
            } else if let Some(p) = self.outstanding.remove(&tid) {
                self.stats.timeouts += 1;
                self.events.push_back(GsiEvent::Timeout {
                    tid,
                    to: p.to,
                    mgmt_class: p.mgmt_class,
                    attr_id: p.attr_id,
                });
            }
        }
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<MadOut> {
        self.transmit.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<GsiEvent> {
        self.events.pop_front()
    }

    /// The earliest retry deadline.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.outstanding.values().map(|p| p.deadline).min()
    }

    fn queue(&mut self, out: MadOut) {
        self.stats.transmitted += 1;
        self.transmit.push_back(out);
    }

    /// The next TID: agent id above, a counter below, skipping any still outstanding. The
    /// pool holds fewer than 2^32 requests, so the loop ends within `outstanding + 1` tries.
    fn alloc_tid(&mut self) -> Tid {
        let high = u64::from(self.config.agent_id) << 32;
        for _ in 0..=self.outstanding.len() {
            let tid = Tid(high | u64::from(self.next_tid));
            self.next_tid = self.next_tid.wrapping_add(1);
            if !self.outstanding.contains_key(&tid) {
                return tid;
            }
        }
        // Unreachable: `outstanding.len() + 1` distinct candidates cannot all be taken.
        Tid(high | u64::from(self.next_tid))
    }
}
