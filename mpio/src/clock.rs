//! The time the core is given: the daemon's monotonic clock (`std::time::Instant`) with
//! `std`; without it (a kernel driver's build) the driver's tick count as
//! [`ib_verbs::Time`], which the core compares and adds durations to the same way.

use core::time::Duration;

/// A point in time, passed in by whoever drives the core.
#[cfg(feature = "std")]
pub type Instant = std::time::Instant;
/// A point in time, passed in by whoever drives the core.
#[cfg(not(feature = "std"))]
pub type Instant = ib_verbs::Time;

/// Time from `earlier` to `now`, zero if `earlier` is later.
pub(crate) fn since(now: Instant, earlier: Instant) -> Duration {
    #[cfg(feature = "std")]
    {
        now.saturating_duration_since(earlier)
    }
    #[cfg(not(feature = "std"))]
    {
        now.since(earlier)
    }
}
