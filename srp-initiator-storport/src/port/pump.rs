//! Starting requests: take the next one the queues allow, HwBuildIo with no lock held
//! (submitter threads and the worker pump at once, so BuildIo runs concurrently), then
//! HwStartIo under the StartIo lock (never two at once).

use super::miniport::Miniport;
use super::shared::{Owned, RunState, Shared};
use super::srb::Srb;
use super::verifier::{Routine, Violation};

impl<M: Miniport> Shared<M> {
    /// Starts requests until the queues hold the rest; returns how many it started.
    pub(crate) fn pump(&self) -> usize {
        let mut started = 0;
        loop {
            let srb = {
                let mut s = self.lock();
                if s.run != RunState::Running || s.shutdown {
                    return started;
                }
                let now = self.now();
                let Some((_, srb)) = s.queues.next(now) else {
                    return started;
                };
                s.owned.insert(
                    srb.id(),
                    Owned {
                        srb: srb.clone(),
                        started: None,
                        timed_out: false,
                    },
                );
                srb
            };
            self.dispatch(srb);
            started += 1;
        }
    }

    /// BuildIo then StartIo for one request.
    fn dispatch(&self, srb: Srb<M::SrbExtension>) {
        let port = self.services();
        match self.call(Routine::BuildIo, true, || {
            self.miniport.build_io(&port, &srb)
        }) {
            Err(v) => return self.bugcheck(v),
            Ok(false) if !srb.is_completed() => {
                return self.bugcheck(Violation::BuildIoDropped { id: srb.id() });
            }
            Ok(_) if srb.is_completed() => return,
            Ok(_) => {}
        }
        let Some(_startio) = self.start_io_lock() else {
            return;
        };
        {
            let now = self.now();
            let mut s = self.lock();
            match s.owned.get_mut(srb.id()) {
                Some(o) => o.started = Some(now),
                None => return,
            }
        }
        let r = self.call(Routine::StartIo, true, || {
            self.miniport.start_io(&port, srb)
        });
        if let Err(v) = r {
            self.bugcheck(v);
        }
    }
}
