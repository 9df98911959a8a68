//! The driver's worker thread, at passive level: it owns the SRP transport's completion
//! context. Each turn it moves requests from the incoming queue into the transport (under
//! the gate), runs completion rounds (the CQ, the CM, the channel core's timers; finished
//! requests go to the port), and when nothing is left arms the completion queues and
//! sleeps until a wake-up — a CQ notification, a new request, a verb's completion, the
//! login — or the transport's next timer. No polling: an idle worker sleeps until then.
//!
//! A request the transport cannot take now (not logged in, its queue full, no region
//! free) goes back to the front of the queue and the worker tries again after the next
//! round that did work or the next wake-up: the driver owns that queue, where a StorPort
//! miniport would answer BUSY and leave it to the port.

use super::side::Side;
use alloc::sync::Arc;
use core::time::Duration;
use srp_initiator::SrpTransport;
use win_port::SrbStatus;

/// Rounds the worker runs before it looks at the incoming queue again.
const ROUNDS: usize = 8;

/// The worker's body, until the side says stop.
pub(crate) fn run(side: Arc<Side>, transport: Arc<SrpTransport>, max_wait: Duration) {
    loop {
        if side.lock().stop {
            return;
        }
        let stalled = start_incoming(&side, &transport);
        let mut did = 0;
        for _ in 0..ROUNDS {
            let n = transport.round();
            did += n;
            if n == 0 {
                break;
            }
        }
        if did > 0 {
            side.progress(&mut side.lock());
            continue;
        }
        let Some(wait) = transport.idle(max_wait) else {
            continue;
        };
        let s = side.lock();
        // Woken meanwhile (new requests, a release, a notification): go again.
        let ready = !s.incoming.is_empty() && !s.holding && !stalled;
        if s.stop {
            return;
        }
        if s.woken || ready {
            drop(s);
            side.lock().woken = false;
            continue;
        }
        drop(s);
        drop(side.wait_for_work(wait.max(Duration::from_micros(50))));
    }
}

/// Moves incoming requests into the transport until one cannot go now; returns whether
/// one had to stay (the transport is full or not logged in).
fn start_incoming(side: &Side, transport: &SrpTransport) -> bool {
    let _gate = side.gate();
    loop {
        let request = {
            let mut s = side.lock();
            if s.holding {
                return !s.incoming.is_empty();
            }
            match s.incoming.pop_front() {
                Some(r) => r,
                None => return false,
            }
        };
        match transport.prepare(&request) {
            Ok(()) => {}
            Err(SrbStatus::BUSY) => {
                side.lock().incoming.push_front(request);
                return true;
            }
            Err(status) => {
                side.finish(&mut side.lock(), &request, status);
                continue;
            }
        }
        if transport.submit((*request).clone()).is_some() {
            side.lock().incoming.push_front(request);
            return true;
        }
    }
}
