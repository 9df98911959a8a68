//! [`PnpManager`]: the PnP inputs update the [`Topology`] and queue its events; one thread
//! at a time drains the queue into the clients' callbacks.
//!
//! Every input and registration takes the state lock, updates the topology and appends to
//! the queue in one step, so the queue order is the order of the changes. Each queued item
//! has a sequence number; a client registered at sequence `s` gets its replay as item `s`
//! and every broadcast after it, none before — so the replay and the live events never
//! overlap or leave a gap.
//!
//! Whoever appends to an idle queue becomes the deliverer and drains it; at most one
//! thread delivers at a time, so callbacks never nest, run in queue order, and never run
//! under the state lock (they may call the manager: their calls queue). A passive caller
//! waits until its own items are delivered — delivering them itself if the role is free —
//! which bounds the queue; a deliverer hands the role to such a waiter once its own items
//! are out, so nobody delivers other callers' events forever. Dispatch-level callers
//! (callbacks included) never wait.
#[allow(unused_imports)]
use crate::prelude::*;

use super::lifetime::{Callback, ClientHandle, Frame, FrameGuard, Slot};
use super::topology::Topology;
use super::{EventClasses, PnpConfig, PnpError, PnpEvent};
use crate::dm::DmEvent;
use crate::mad::MadAddress;
use crate::verbs::{CaAttr, DispatchGuard, at_dispatch, in_dispatch};
use alloc::collections::{BTreeMap, VecDeque};
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};
use ib_verbs::Event;
use ib_verbs::Guid;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Ids of managers and clients, unique in the process (the thread-local frames compare
/// them).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// A registered client as the manager sees it.
struct Client {
    slot: Arc<Slot<PnpEvent>>,
    classes: EventClasses,
    /// Sequence number of its replay; it receives broadcasts queued after it.
    first_seq: u64,
}

enum Item {
    /// An event for every client registered before it.
    Broadcast(PnpEvent),
    /// The state at registration, for one client.
    Replay(Arc<Client>, Vec<PnpEvent>),
}

struct State {
    topology: Topology,
    clients: Vec<Arc<Client>>,
    queue: VecDeque<(u64, Item)>,
    next_seq: u64,
    /// A thread is draining the queue.
    draining: bool,
    /// Every item before this sequence number is delivered.
    delivered: u64,
    /// Passive callers waiting for their items: how many wait for each target (everything
    /// before that sequence number delivered).
    waiting: BTreeMap<u64, u32>,
}

struct Shared {
    id: u64,
    state: Mutex<State>,
    /// Signalled when items are delivered or the deliverer role is free.
    progress: Condvar,
    panics: AtomicU64,
}

/// The PnP manager. Cloning gives another handle on the same manager. See the module doc
/// of [`crate::pnp`] for the contract.
#[derive(Clone)]
pub struct PnpManager {
    shared: Arc<Shared>,
}

impl fmt::Debug for PnpManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("PnpManager")
            .field("topology", &st.topology)
            .field("clients", &st.clients.len())
            .field("queued", &st.queue.len())
            .finish()
    }
}

impl PnpManager {
    /// A manager with nothing present and no client.
    pub fn new(config: PnpConfig) -> PnpManager {
        PnpManager {
            shared: Arc::new(Shared {
                id: next_id(),
                state: Mutex::new(State {
                    topology: Topology::new(config.children),
                    clients: Vec::new(),
                    queue: VecDeque::new(),
                    next_seq: 0,
                    draining: false,
                    delivered: 0,
                    waiting: BTreeMap::new(),
                }),
                progress: Condvar::new(),
                panics: AtomicU64::new(0),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Callbacks never run under this lock; a poisoned one means a panic in the
        // topology, whose updates are all-or-nothing before the queue is touched.
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a client for `classes`: the manager holds `owner` until the client is
    /// closed, and calls `callback(&owner, event)` for each event — first the replay of
    /// what exists (ending with [`PnpEvent::RegistrationComplete`]), then every later
    /// change. At passive level the replay is delivered before this returns; at dispatch
    /// level (a callback included) it is queued behind the events already queued.
    pub fn register<O: Send + Sync + 'static>(
        &self,
        owner: Arc<O>,
        classes: EventClasses,
        callback: impl Fn(&O, &PnpEvent) + Send + Sync + 'static,
    ) -> ClientHandle<PnpEvent> {
        let callback: Callback<PnpEvent> = Arc::new(move |ev| callback(&owner, ev));
        let slot = Arc::new(Slot::new(self.shared.id, next_id(), callback));
        let mut st = self.lock();
        st.clients.retain(|c| c.slot.is_open());
        let first_seq = st.next_seq;
        let client = Arc::new(Client {
            slot: slot.clone(),
            classes,
            first_seq,
        });
        let mut replay = st.topology.replay();
        replay.push(PnpEvent::RegistrationComplete);
        st.clients.push(client.clone());
        self.queue(st, vec![Item::Replay(client, replay)]);
        ClientHandle::new(slot)
    }

    /// A channel adapter and its ports arrived (e.g. with the attributes its `open_ca`
    /// completed with).
    ///
    /// # Errors
    /// [`PnpError::DuplicateCa`].
    pub fn ca_added(&self, attr: &CaAttr) -> Result<(), PnpError> {
        self.input(|t| t.ca_added(attr))
    }

    /// A channel adapter went away: its IOUs and IOCs, its ports' children, its ports and
    /// itself are removed, in that order.
    ///
    /// # Errors
    /// [`PnpError::UnknownCa`].
    pub fn ca_removed(&self, ca: Guid) -> Result<(), PnpError> {
        self.input(|t| t.ca_removed(ca))
    }

    /// Port `port` of `ca` is active (`up`) or down. Reporting the state it already has
    /// changes nothing.
    ///
    /// # Errors
    /// [`PnpError::UnknownCa`], [`PnpError::UnknownPort`].
    pub fn port_state(&self, ca: Guid, port: u8, up: bool) -> Result<(), PnpError> {
        self.input(|t| t.port_state(ca, port, up))
    }

    /// An asynchronous event of the HCA of CA `ca`: `PortActive` and `PortDown` change the
    /// port's state, `DeviceFatal` (hot-unplug, a fatal error) removes the CA; other events
    /// are not PnP's and are ignored (`Ok`).
    ///
    /// # Errors
    /// As [`PnpManager::port_state`].
    pub fn hca_event(&self, ca: Guid, event: &Event) -> Result<(), PnpError> {
        match *event {
            Event::PortActive(port) => self.port_state(ca, port, true),
            Event::PortDown(port) => self.port_state(ca, port, false),
            Event::DeviceFatal => self.ca_removed(ca),
            _ => Ok(()),
        }
    }

    /// A handler for `Hca::set_event_handler` (or to call from a CA's event handler) that
    /// feeds CA `ca`'s port events here. Events for a CA not (or no longer) added are
    /// dropped.
    pub fn hca_event_handler(&self, ca: Guid) -> impl Fn(Event) + Send + Sync + 'static {
        let this = self.clone();
        // The HCA says its handler must not block: at dispatch level this only queues
        // (or delivers, if the manager is idle), never waits for another deliverer.
        move |event| {
            let _ = at_dispatch(|| this.hca_event(ca, &event));
        }
    }

    /// What CA `ca`'s DM client found changed. An updated IOC is removed and arrives
    /// again; an arrival of what is already known with the same contents changes nothing.
    ///
    /// # Errors
    /// [`PnpError::UnknownCa`], [`PnpError::UnknownPort`] (the portal's `port`), or
    /// [`PnpError::UnknownIou`] for an IOC before its unit.
    pub fn dm_event(&self, ca: Guid, event: DmEvent) -> Result<(), PnpError> {
        self.input(|t| t.dm_event(ca, event))
    }

    /// A driver attached device `id` to IOC `ioc` of the unit at `addr` reached through
    /// `ca` (IBAL: a driver loaded on the IOC's PDO; the host: a session logged in to it).
    /// It goes before its IOC when the IOC, its unit or the CA goes.
    ///
    /// # Errors
    /// [`PnpError::UnknownIou`], [`PnpError::UnknownIoc`], [`PnpError::DuplicateDevice`].
    pub fn device_added(
        &self,
        ca: Guid,
        addr: MadAddress,
        ioc: Guid,
        id: &str,
    ) -> Result<(), PnpError> {
        self.input(|t| t.device_added(ca, addr, ioc, id))
    }

    /// The driver removed device `id` of IOC `ioc`.
    ///
    /// # Errors
    /// [`PnpError::UnknownIou`], [`PnpError::UnknownIoc`], [`PnpError::UnknownDevice`].
    pub fn device_removed(
        &self,
        ca: Guid,
        addr: MadAddress,
        ioc: Guid,
        id: &str,
    ) -> Result<(), PnpError> {
        self.input(|t| t.device_removed(ca, addr, ioc, id))
    }

    /// The current state as [`PnpManager::register`] would replay it (without
    /// [`PnpEvent::RegistrationComplete`]).
    pub fn snapshot(&self) -> Vec<PnpEvent> {
        self.lock().topology.replay()
    }

    /// How many callbacks panicked; the manager goes on delivering (the panic hook has
    /// printed each).
    pub fn callback_panics(&self) -> u64 {
        self.shared.panics.load(Ordering::Relaxed)
    }

    /// Applies a topology change and queues its events.
    fn input(
        &self,
        change: impl FnOnce(&mut Topology) -> Result<Vec<PnpEvent>, PnpError>,
    ) -> Result<(), PnpError> {
        let mut st = self.lock();
        let events = change(&mut st.topology)?;
        self.queue(st, events.into_iter().map(Item::Broadcast).collect());
        Ok(())
    }

    /// Appends `items`, then sees them delivered.
    ///
    /// At passive level the caller waits until they are: it drains the queue itself if
    /// nobody is, else sleeps until the deliverer is done with them. That bounds the queue
    /// by the number of passive callers. At dispatch level (including inside any callback)
    /// it may not wait: it drains only if the queue is idle, else its items are delivered
    /// by the current deliverer.
    fn queue<'a>(&'a self, mut st: MutexGuard<'a, State>, items: Vec<Item>) {
        for item in items {
            let seq = st.next_seq;
            st.next_seq += 1;
            st.queue.push_back((seq, item));
        }
        let target = st.next_seq;
        if in_dispatch() {
            if !st.draining && !st.queue.is_empty() {
                st.draining = true;
                drop(st);
                self.drain(None);
            }
            return;
        }
        loop {
            if st.delivered >= target {
                return;
            }
            if !st.draining {
                st.draining = true;
                drop(st);
                self.drain(Some(target));
                st = self.lock();
                continue;
            }
            *st.waiting.entry(target).or_insert(0) += 1;
            st = self
                .shared
                .progress
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = st.waiting.get_mut(&target) {
                *n -= 1;
                if *n == 0 {
                    st.waiting.remove(&target);
                }
            }
        }
    }

    /// Delivers queued items in order. Stops when the queue is empty, or hands the
    /// deliverer role to a waiting passive caller once `own` (everything before that
    /// sequence number; `None`: nothing of ours) is delivered — so no caller is kept
    /// delivering other callers' events forever. Leaves the role under the lock, so an
    /// item appended meanwhile is never stranded.
    fn drain(&self, own: Option<u64>) {
        loop {
            let (seq, deliveries, event_list) = {
                let mut st = self.lock();
                let ours_done = own.is_none_or(|t| st.delivered >= t);
                // Someone waits for an item not delivered yet: it takes over on waking.
                let waited_for = st
                    .waiting
                    .last_key_value()
                    .is_some_and(|(&t, _)| t > st.delivered);
                let next = if ours_done && waited_for {
                    None
                } else {
                    st.queue.pop_front()
                };
                let Some((seq, item)) = next else {
                    st.draining = false;
                    drop(st);
                    self.shared.progress.notify_all();
                    return;
                };
                let (to, events) = match item {
                    Item::Broadcast(event) => {
                        let class = event.class();
                        let to: Vec<Arc<Client>> = st
                            .clients
                            .iter()
                            .filter(|c| c.first_seq < seq)
                            .filter(|c| class.is_none_or(|k| c.classes.contains(k)))
                            .cloned()
                            .collect();
                        (to, vec![event])
                    }
                    Item::Replay(client, events) => (vec![client], events),
                };
                (seq, to, events)
            };
            for event in &event_list {
                for client in &deliveries {
                    if event.class().is_none_or(|k| client.classes.contains(k)) {
                        self.call(client, event);
                    }
                }
            }
            self.lock().delivered = seq + 1;
            self.shared.progress.notify_all();
        }
    }

    /// Calls one client's callback if it is still open, at dispatch level, marking the
    /// frame for close-from-callback detection; a panic is counted, not propagated.
    fn call(&self, client: &Client, event: &PnpEvent) {
        let Some(callback) = client.slot.enter() else {
            return;
        };
        {
            let _frame = FrameGuard::enter(Frame {
                domain: self.shared.id,
                client: client.slot.id(),
            });
            let _dispatch = DispatchGuard::enter();
            if catch_unwind(AssertUnwindSafe(|| callback(event))).is_err() {
                self.shared.panics.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Our reference goes before the count does, so the last one out releases the owner.
        drop(callback);
        client.slot.exit();
    }
}
