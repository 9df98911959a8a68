//! Time as the sans-IO cores see it: nanoseconds on a monotonic clock the driver (or the
//! simulator) supplies; the cores never read a clock themselves. [`Clock`] (`std`) is
//! where the layers above read the time: the system's, or a simulated net's.

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time, in nanoseconds since an arbitrary epoch chosen by the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    /// The later of two times.
    pub fn max(self, other: Time) -> Time {
        if self >= other { self } else { other }
    }

    /// Time since `earlier`, zero if `earlier` is later.
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;

    fn add(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl Sub<Time> for Time {
    type Output = Duration;

    fn sub(self, earlier: Time) -> Duration {
        self.since(earlier)
    }
}

/// Where the layers above the engine read the time: the system's monotonic clock in a
/// daemon, the simulator's virtual one in a simulated run (a simulator's net), so the
/// same code runs in both with no real sleep in the simulated one.
#[cfg(feature = "std")]
pub trait Clock: Send + Sync + core::fmt::Debug {
    /// Now.
    fn now(&self) -> std::time::Instant;
}

/// The system's monotonic clock.
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

#[cfg(feature = "std")]
impl Clock for SystemClock {
    fn now(&self) -> std::time::Instant {
        std::time::Instant::now()
    }
}

/// The system clock, shared.
#[cfg(feature = "std")]
pub fn system_clock() -> std::sync::Arc<dyn Clock> {
    std::sync::Arc::new(SystemClock)
}

/// The IBTA local ACK timeout and CM response timeout encoding: 4.096 µs × 2^value
/// (0 disables the timer; values above 31 are clamped).
pub fn ack_timeout(code: u8) -> Option<Duration> {
    if code == 0 {
        return None;
    }
    Some(Duration::from_nanos(4096u64 << code.min(31)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_encoding_is_4_096us_times_2_to_the_code() {
        assert_eq!(ack_timeout(0), None);
        assert_eq!(ack_timeout(1), Some(Duration::from_nanos(8192)));
        // 14 is a common default: 67.1 ms.
        assert_eq!(ack_timeout(14), Some(Duration::from_nanos(4096 << 14)));
        assert_eq!(Time(5) + Duration::from_nanos(7), Time(12));
        assert_eq!(Time(12) - Time(5), Duration::from_nanos(7));
        assert_eq!(Time(5) - Time(12), Duration::ZERO);
    }
}
