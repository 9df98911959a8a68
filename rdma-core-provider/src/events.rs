//! The device's event thread: it sleeps in epoll (mio) on the completion channel (CQ
//! notifications), the context's asynchronous event fd (QP errors, port state, device
//! loss) and every connection manager's event channel, and hands each to the consumer's
//! handler at dispatch level — a CQ notification as `Event::CqNotify` on this thread
//! (the data path's interrupt), a connection event as `Event::CmReady` (the consumer
//! polls its connection manager). No CPU while idle: every fd is edge-triggered and read
//! until it would block.

use crate::ca::Shared;
use crate::ffi::types::*;
use ib_verbs::{CqId, Event, Qpn};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

const COMP: Token = Token(0);
const ASYNC: Token = Token(1);
const WAKE: Token = Token(2);
/// Connection managers' channels get tokens from here on.
const FIRST_CM: usize = 16;

/// The event thread. See the module doc.
pub(crate) struct EventLoop {
    registry: Registry,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    next_token: AtomicUsize,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Makes `fd` non-blocking (the library's reads then return at once when it is empty).
fn nonblocking(fd: RawFd) -> std::io::Result<()> {
    crate::ffi::verbs::set_nonblocking(fd)
}

impl EventLoop {
    /// Starts the thread over `shared`'s device.
    pub(crate) fn start(shared: Arc<Shared>) -> std::io::Result<EventLoop> {
        let mut poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let comp = shared.dev.channel.fd();
        let asyn = shared.dev.ctx.async_fd();
        nonblocking(comp)?;
        nonblocking(asyn)?;
        registry.register(&mut SourceFd(&comp), COMP, Interest::READABLE)?;
        registry.register(&mut SourceFd(&asyn), ASYNC, Interest::READABLE)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rdma-events-{}", shared.dev.ctx.name()))
            .spawn(move || run(&mut poll, &shared, &s))?;
        Ok(EventLoop {
            registry,
            waker,
            stop,
            next_token: AtomicUsize::new(FIRST_CM),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Watches a connection manager's event channel `fd`: its events ring the handler
    /// as `Event::CmReady`. Returns the token to [`EventLoop::unwatch`] with.
    pub(crate) fn watch(&self, fd: RawFd) -> std::io::Result<Token> {
        nonblocking(fd)?;
        let t = Token(self.next_token.fetch_add(1, Ordering::Relaxed));
        self.registry
            .register(&mut SourceFd(&fd), t, Interest::READABLE)?;
        Ok(t)
    }

    /// Stops watching `fd`.
    pub(crate) fn unwatch(&self, fd: RawFd) {
        let _ = self.registry.deregister(&mut SourceFd(&fd));
    }

    /// Stops the thread and joins it.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        let t = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = t {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

fn run(poll: &mut Poll, shared: &Shared, stop: &AtomicBool) {
    let mut events = Events::with_capacity(64);
    while !stop.load(Ordering::Acquire) {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            tracing::error!(%e, device = shared.dev.ctx.name(), "the RDMA event thread stops");
            shared.deliver(Event::DeviceFatal);
            return;
        }
        for ev in &events {
            match ev.token() {
                COMP => completions(shared),
                ASYNC => async_events(shared),
                WAKE => {}
                _ => shared.deliver(Event::CmReady),
            }
        }
    }
}

/// Every CQ notification waiting on the completion channel.
fn completions(shared: &Shared) {
    while let Some(event) = shared.dev.channel.next_event() {
        let id = u32::try_from(event.context).unwrap_or(0);
        {
            let o = shared.objects();
            match o.cq_by_addr(event.cq_addr()).and_then(|c| o.cq(c)) {
                // Counted on the CQ, acked in batches and by its Drop.
                Some(cq) => cq.note_event(),
                // Its CQ left the table: being destroyed, and waiting for this very ack.
                None => {
                    event.ack_orphan();
                    continue;
                }
            }
        }
        shared.deliver(Event::CqNotify(CqId(id)));
    }
}

/// Every asynchronous event waiting: the access layer's for those it has a word for, a
/// warning and a count for the rest (nothing in silence).
fn async_events(shared: &Shared) {
    while let Some((kind, element)) = shared.dev.ctx.async_event() {
        let qp = || shared.objects().qp_by_addr(element).map(Qpn::from_wire);
        let cq = || shared.objects().cq_by_addr(element).map(CqId);
        let port = || u8::try_from(element).ok();
        let ev = match kind {
            IBV_EVENT_QP_FATAL | IBV_EVENT_QP_REQ_ERR | IBV_EVENT_QP_ACCESS_ERR => {
                qp().map(Event::QpError)
            }
            IBV_EVENT_SQ_DRAINED => qp().map(Event::SqDrained),
            IBV_EVENT_CQ_ERR => cq().map(Event::CqOverrun),
            IBV_EVENT_PORT_ACTIVE if port() == Some(shared.dev.port) => Some(Event::PortActive(1)),
            IBV_EVENT_PORT_ERR if port() == Some(shared.dev.port) => Some(Event::PortDown(1)),
            IBV_EVENT_DEVICE_FATAL => Some(Event::DeviceFatal),
            IBV_EVENT_COMM_EST | IBV_EVENT_QP_LAST_WQE_REACHED => None,
            _ => None,
        };
        match ev {
            Some(e) => {
                if matches!(e, Event::DeviceFatal | Event::QpError(_)) {
                    tracing::warn!(device = shared.dev.ctx.name(), event = ?e, "RDMA device event");
                }
                shared.deliver(e);
            }
            None => {
                shared.unknown_events.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    device = shared.dev.ctx.name(),
                    kind,
                    "asynchronous event with no consumer here (counted)"
                );
            }
        }
    }
}
