//! [`SteppedDaemon`]: the daemon's loop without its thread, turned by its owner — the
//! whole-stack simulator, which runs the target on a simulated net in virtual time
//! ([`super::DaemonOptions::sim`]): the same loop, logins, channels and command set as
//! [`super::Daemon`], with the waiting left to the owner.
//!
//! A crash is dropping it: nothing is sent, the devices leave the net, what the LUNs'
//! media had not flushed is the media's to lose.

use super::event::DaemonEvent;
use super::run::Loop;
use super::{DaemonError, DaemonOptions, EVENT_QUEUE, Started};
use crate::config::TargetConfig;
use crate::control::handle::ControlHandle;
use access_layer::verbs::Doorbell;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::Instant;

/// The target daemon's loop, turned by its owner (see the module doc).
pub struct SteppedDaemon {
    lp: Loop,
    events: Receiver<DaemonEvent>,
    started: Started,
    // Kept so the loop's control queue stays open; a stepped daemon takes no requests.
    _control: ControlHandle,
}

impl std::fmt::Debug for SteppedDaemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SteppedDaemon")
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

impl SteppedDaemon {
    /// Builds the appliance and opens every port, as [`super::Daemon::start`] does, on
    /// this thread; nothing runs until [`SteppedDaemon::turn`].
    pub fn build(config: &TargetConfig, options: &DaemonOptions) -> Result<Self, DaemonError> {
        let (events_tx, events) = sync_channel(EVENT_QUEUE);
        let bell = Arc::new(Doorbell::new());
        let (control, control_rx) = ControlHandle::pair_with_bell(Some(bell.clone()));
        let (lp, started) = Loop::build(config, options, events_tx, control_rx, bell)?;
        Ok(SteppedDaemon {
            lp,
            events,
            started,
            _control: control,
        })
    }

    /// What started.
    pub fn started(&self) -> &Started {
        &self.started
    }

    /// One pass over every port and channel (CM MADs, logins, completions, backend
    /// results, idle probes, reaping); how much happened. The owner turns until a pass
    /// finds nothing, then arms ([`SteppedDaemon::arm`]) and waits for the net or
    /// [`SteppedDaemon::next_due`].
    pub fn turn(&mut self) -> usize {
        self.lp.turn()
    }

    /// Arms every CQ, as the loop does before it waits.
    pub fn arm(&mut self) {
        self.lp.arm();
    }

    /// When the loop next has timed work of its own (a CM timer, the idle sweep).
    pub fn next_due(&self) -> Option<Instant> {
        self.lp.next_due()
    }

    /// Logins, rejects and logouts so far.
    pub fn events(&self) -> Vec<DaemonEvent> {
        self.events.try_iter().collect()
    }
}
