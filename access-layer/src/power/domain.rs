//! [`PowerDomain`]: an HCA and the client devices configured as children of its ports, with
//! the seed's ordering: power-down runs children first (last registered first) and the HCA
//! last; power-up runs the HCA first, then the children in registration order.
#[allow(unused_imports)]
use crate::prelude::*;

use super::{PowerError, PowerState};
use crate::verbs::{Completer, Completion, VerbsError};
use alloc::sync::Arc;
use core::fmt;
use ib_verbs::sync::{Lock, LockGuard};

/// A device with power states: the HCA ([`super::PoweredCa`]) or a client device (an SRP
/// initiator instance, an IPoIB-like port child). Both callbacks return at once; the
/// transition completes through the [`Completion`], possibly later, on any thread.
pub trait PowerDevice: Send + Sync {
    /// A name for logs and errors.
    fn name(&self) -> String;
    /// Goes to D3: stop issuing work, keep what must survive.
    fn power_down(&self) -> Completion<()>;
    /// Comes back to D0.
    fn power_up(&self) -> Completion<()>;
}

/// Names a child of a [`PowerDomain`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChildId(u64);

struct Child {
    id: ChildId,
    port: u8,
    device: Arc<dyn PowerDevice>,
}

struct State {
    power: PowerState,
    busy: bool,
    children: Vec<Child>,
    next_id: u64,
}

struct Inner {
    hca: Arc<dyn PowerDevice>,
    state: Lock<State>,
}

impl Inner {
    fn lock(&self) -> LockGuard<'_, State> {
        // Only this module's short critical sections run under the lock.
        self.state.lock()
    }
}

/// One HCA and its children. Cheap to clone; clones share the tree.
#[derive(Clone)]
pub struct PowerDomain {
    inner: Arc<Inner>,
}

impl fmt::Debug for PowerDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.inner.lock();
        f.debug_struct("PowerDomain")
            .field("hca", &self.inner.hca.name())
            .field("power", &s.power)
            .field("busy", &s.busy)
            .field("children", &s.children.len())
            .finish()
    }
}

/// Which way a transition goes.
#[derive(Clone, Copy)]
enum Direction {
    Down,
    Up,
}

impl PowerDomain {
    /// A domain whose HCA is `hca`, in D0, with no children.
    pub fn new(hca: Arc<dyn PowerDevice>) -> PowerDomain {
        PowerDomain {
            inner: Arc::new(Inner {
                hca,
                state: Lock::new(State {
                    power: PowerState::D0,
                    busy: false,
                    children: Vec::new(),
                    next_id: 0,
                }),
            }),
        }
    }

    /// The domain's state: D3 from the moment a power-down completes until a power-up
    /// completes.
    pub fn state(&self) -> PowerState {
        self.inner.lock().power
    }

    /// Whether a transition is in progress.
    pub fn is_busy(&self) -> bool {
        self.inner.lock().busy
    }

    /// Configures `device` as a child of HCA port `port`. Only in D0 with no transition in
    /// progress, so a child never misses a transition it should have seen.
    pub fn add_child(&self, port: u8, device: Arc<dyn PowerDevice>) -> Result<ChildId, PowerError> {
        let mut s = self.inner.lock();
        if s.busy || s.power != PowerState::D0 {
            return Err(PowerError::NotIdle);
        }
        let id = ChildId(s.next_id);
        s.next_id += 1;
        s.children.push(Child { id, port, device });
        Ok(id)
    }

    /// Removes a child (false if unknown). Only in D0 with no transition in progress.
    pub fn remove_child(&self, id: ChildId) -> Result<bool, PowerError> {
        let mut s = self.inner.lock();
        if s.busy || s.power != PowerState::D0 {
            return Err(PowerError::NotIdle);
        }
        let before = s.children.len();
        s.children.retain(|c| c.id != id);
        Ok(s.children.len() != before)
    }

    /// The children of port `port`, in registration order.
    pub fn children_of(&self, port: u8) -> Vec<ChildId> {
        let s = self.inner.lock();
        s.children
            .iter()
            .filter(|c| c.port == port)
            .map(|c| c.id)
            .collect()
    }

    /// Powers the domain down: children last registered first, then the HCA. A child that
    /// fails does not stop the others or the HCA; the domain ends in D3 and the completion
    /// carries the first error.
    pub fn power_down(&self) -> Result<Completion<()>, PowerError> {
        let steps = self.begin(PowerState::D3, |children, hca| {
            children
                .iter()
                .rev()
                .map(|c| c.device.clone())
                .chain([hca])
                .collect()
        })?;
        Ok(self.run(steps, Direction::Down))
    }

    /// Powers the domain up: the HCA, then the children in registration order. If the HCA
    /// fails, no child is powered up and the domain stays in D3; a child that fails does not
    /// stop the others. The completion carries the first error.
    pub fn power_up(&self) -> Result<Completion<()>, PowerError> {
        let steps = self.begin(PowerState::D0, |children, hca| {
            [hca]
                .into_iter()
                .chain(children.iter().map(|c| c.device.clone()))
                .collect()
        })?;
        Ok(self.run(steps, Direction::Up))
    }

    /// Marks the domain busy and lists the devices of a transition to `target`.
    fn begin(
        &self,
        target: PowerState,
        order: impl FnOnce(&[Child], Arc<dyn PowerDevice>) -> Vec<Arc<dyn PowerDevice>>,
    ) -> Result<Vec<Arc<dyn PowerDevice>>, PowerError> {
        let mut s = self.inner.lock();
        if s.busy {
            return Err(PowerError::Busy);
        }
        if s.power == target {
            return Err(PowerError::AlreadyIn(target));
        }
        s.busy = true;
        Ok(order(&s.children, self.inner.hca.clone()))
    }

    fn run(&self, steps: Vec<Arc<dyn PowerDevice>>, dir: Direction) -> Completion<()> {
        let (done, completion) = Completion::pair();
        let run = Run {
            inner: self.inner.clone(),
            steps,
            dir,
            first_error: None,
            done,
        };
        run.step(0);
        completion
    }
}

/// A transition in progress: the device list, where it is, and the first error.
struct Run {
    inner: Arc<Inner>,
    steps: Vec<Arc<dyn PowerDevice>>,
    dir: Direction,
    first_error: Option<VerbsError>,
    done: Completer<()>,
}

impl Run {
    /// Starts step `i`; its completion routine starts step `i + 1`.
    fn step(self, i: usize) {
        let Some(device) = self.steps.get(i).cloned() else {
            return self.finish(true);
        };
        let c = match self.dir {
            Direction::Down => device.power_down(),
            Direction::Up => device.power_up(),
        };
        c.on_complete(move |r| {
            let mut run = self;
            if let Err(e) = r {
                run.first_error.get_or_insert(e);
                // Power-up goes HCA first: children of an HCA that did not come up stay down.
                if matches!(run.dir, Direction::Up) && i == 0 {
                    return run.finish(false);
                }
            }
            run.step(i + 1);
        });
    }

    fn finish(self, reached: bool) {
        {
            let mut s = self.inner.lock();
            s.busy = false;
            s.power = match (self.dir, reached) {
                (Direction::Down, _) => PowerState::D3,
                (Direction::Up, true) => PowerState::D0,
                (Direction::Up, false) => PowerState::D3,
            };
        }
        self.done.complete(match self.first_error {
            None => Ok(()),
            Some(e) => Err(e),
        });
    }
}
