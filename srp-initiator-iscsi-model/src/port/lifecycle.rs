//! The port's life as a state machine: [`Lifecycle`] states, [`LifeEvent`]s, and one
//! transition table ([`Lifecycle::on`]); an illegal transition is an error naming both.
//!
//! ```text
//! Starting ─Started─► Running ◄─Resume── Paused
//!                       │ └──Pause──────────►│
//!                       └─PowerDown─► PoweredDown ─PowerUp─► Running   (Paused too goes down)
//! Running | Paused | PoweredDown ─Remove─► Removing ─Removed─► Removed ─Unload─► Unloaded
//! any but Unloaded ─BugCheck─► BugChecked
//! ```

/// Where the port is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lifecycle {
    /// [`Driver::initialize`](super::Driver::initialize) runs.
    Starting,
    /// Requests flow.
    Running,
    /// The queue is held: requests are accepted and wait; those in the driver go on.
    Paused,
    /// The device is in D3: as paused, and the driver holds no request.
    PoweredDown,
    /// [`Driver::remove`](super::Driver::remove) runs: nothing is accepted or started.
    Removing,
    /// The device is gone; only unload is left.
    Removed,
    /// The driver is unloaded: no entry point is ever called again.
    Unloaded,
    /// The verifier stopped the port for good.
    BugChecked,
}

/// What moves the port from state to state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LifeEvent {
    /// Initialize returned.
    Started,
    /// Hold the queue.
    Pause,
    /// Release it.
    Resume,
    /// Go to D3.
    PowerDown,
    /// Back to D0.
    PowerUp,
    /// Removal begins (orderly or surprise).
    Remove,
    /// The removal entry returned.
    Removed,
    /// DriverUnload.
    Unload,
    /// A violation.
    BugCheck,
}

impl Lifecycle {
    /// The transition table.
    pub fn on(self, event: LifeEvent) -> Result<Lifecycle, (Lifecycle, LifeEvent)> {
        use LifeEvent as E;
        use Lifecycle as S;
        match (self, event) {
            // Initialize returned with usable limits.
            (S::Starting, E::Started) => Ok(S::Running),
            // The owner holds and releases the queue.
            (S::Running, E::Pause) => Ok(S::Paused),
            (S::Paused, E::Resume) => Ok(S::Running),
            // Power: down from a running or paused queue (drained first), up to running.
            (S::Running | S::Paused, E::PowerDown) => Ok(S::PoweredDown),
            (S::PoweredDown, E::PowerUp) => Ok(S::Running),
            // Removal from any working state; unload only after it.
            (S::Running | S::Paused | S::PoweredDown, E::Remove) => Ok(S::Removing),
            (S::Removing, E::Removed) => Ok(S::Removed),
            (S::Removed, E::Unload) => Ok(S::Unloaded),
            // A violation stops everything but an unloaded driver, which is gone.
            (S::Unloaded, E::BugCheck) => Err((self, event)),
            (_, E::BugCheck) => Ok(S::BugChecked),
            _ => Err((self, event)),
        }
    }

    /// Whether requests are accepted (queued; started only while [`Lifecycle::Running`]).
    pub fn accepts(self) -> bool {
        matches!(
            self,
            Lifecycle::Running | Lifecycle::Paused | Lifecycle::PoweredDown
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_allows_the_documented_paths_only() {
        use LifeEvent as E;
        use Lifecycle as S;
        let path = [E::Started, E::Pause, E::PowerDown, E::PowerUp, E::Remove];
        let mut s = S::Starting;
        for e in path {
            s = s.on(e).expect("legal");
        }
        assert_eq!(s, S::Removing);
        assert_eq!(s.on(E::Unload), Err((S::Removing, E::Unload)));
        assert_eq!(
            s.on(E::Removed).and_then(|s| s.on(E::Unload)),
            Ok(S::Unloaded)
        );
        assert_eq!(S::Unloaded.on(E::BugCheck), Err((S::Unloaded, E::BugCheck)));
        assert_eq!(S::Running.on(E::Resume), Err((S::Running, E::Resume)));
        assert_eq!(S::Removed.on(E::Remove), Err((S::Removed, E::Remove)));
        assert!(!S::Removing.accepts() && S::Paused.accepts());
    }
}
