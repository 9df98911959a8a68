//! The port's two threads. The DPC delivers completions to submitters (their routines run
//! at dispatch level; held while a bus reset runs) and starts requests that completions, Ready and Resume released. The
//! timer never calls the miniport, so a routine stuck at dispatch level cannot stop it: it
//! runs the DPC watchdog and the request timeouts (each timeout starts a bus reset on a
//! thread of its own).

use super::ResetCause;
use super::miniport::Miniport;
use super::shared::Shared;
use std::sync::Arc;
use std::time::Instant;

/// The DPC thread, until the port shuts down.
pub(crate) fn run_dpc<M: Miniport>(shared: Arc<Shared<M>>) {
    loop {
        let done = {
            let mut s = shared.lock();
            // A bus reset holds completions until HwResetBus returned and was checked.
            let holding = s.queues.resetting > 0;
            if (s.done.is_empty() || holding) && !s.shutdown {
                s = shared
                    .kick
                    .wait_timeout(s, shared.config.tick)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            if s.shutdown {
                return;
            }
            if s.queues.resetting > 0 {
                continue;
            }
            std::mem::take(&mut s.done)
        };
        for (completer, result) in done {
            completer.complete(Ok(result));
        }
        shared.pump();
    }
}

/// The timer thread, until the port shuts down.
pub(crate) fn run_timer<M: Miniport>(shared: Arc<Shared<M>>) {
    while !shared.lock().shutdown {
        std::thread::sleep(shared.config.tick);
        for path in shared.tick(Instant::now()) {
            let sh = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("storport-reset-{path}"))
                .spawn(move || {
                    let _ = sh.reset_bus(path, ResetCause::Timeout);
                });
            if spawned.is_err() {
                // No thread to spare: reset from here rather than never.
                let _ = shared.reset_bus(path, ResetCause::Timeout);
            }
        }
    }
}
