//! The log line for what a port drops. Every drop is counted by reason
//! ([`crate::engine::Stats`]); this says so at warning level, the first time at once and
//! then at most once per [`INTERVAL`] per port, naming each reason's count since the last
//! line: a peer sending garbage cannot flood the log, and no drop goes unmentioned.

use crate::engine::Stats;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The shortest time between two drop lines of one port.
pub(crate) const INTERVAL: Duration = Duration::from_secs(10);

/// One port's drop log.
pub(crate) struct DropLog {
    addr: SocketAddr,
    logged: Stats,
    quiet_until: Option<Instant>,
}

impl DropLog {
    /// The log of the port bound to `addr`.
    pub(crate) fn new(addr: SocketAddr) -> Self {
        DropLog {
            addr,
            logged: Stats::default(),
            quiet_until: None,
        }
    }

    /// Looks at the port's counters now; logs the drops since the last line if there are
    /// any and the interval has passed.
    pub(crate) fn check(&mut self, now: Instant, stats: &Stats) {
        if stats.dropped() == self.logged.dropped() || self.quiet_until.is_some_and(|t| now < t) {
            return;
        }
        if let Some(line) = since(&self.logged, stats) {
            tracing::warn!(port = %self.addr, "dropped {line}");
        }
        self.logged = *stats;
        self.quiet_until = Some(now + INTERVAL);
    }
}

/// `N datagrams: reason n, …` for the drops in `now` that `before` did not have.
fn since(before: &Stats, now: &Stats) -> Option<String> {
    let parts: Vec<String> = now
        .drops()
        .iter()
        .zip(before.drops())
        .filter(|((_, n), (_, b))| n > b)
        .map(|((name, n), (_, b))| format!("{name} {}", n - b))
        .collect();
    let total = now.dropped().saturating_sub(before.dropped());
    (total > 0).then(|| format!("{total} datagram(s): {}", parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_each_reason_since_the_last() {
        let before = Stats {
            icrc_errors: 2,
            ..Stats::default()
        };
        let now = Stats {
            icrc_errors: 5,
            wrong_peer: 1,
            rx_packets: 100,
            ..Stats::default()
        };
        assert_eq!(
            since(&before, &now).as_deref(),
            Some("4 datagram(s): icrc_errors 3, wrong_peer 1")
        );
        assert_eq!(since(&now, &now), None);
    }

    #[test]
    fn lines_are_spaced_by_the_interval() {
        let mut log = DropLog::new("127.0.0.1:4791".parse().expect("addr"));
        let t0 = Instant::now();
        let one = Stats {
            malformed: 1,
            ..Stats::default()
        };
        log.check(t0, &one);
        assert_eq!(log.logged, one, "the first drop is logged at once");
        let two = Stats {
            malformed: 2,
            ..Stats::default()
        };
        log.check(t0 + Duration::from_secs(1), &two);
        assert_eq!(log.logged, one, "within the interval: not yet");
        log.check(t0 + INTERVAL, &two);
        assert_eq!(log.logged, two);
    }
}
