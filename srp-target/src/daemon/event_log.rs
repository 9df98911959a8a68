//! The daemon's events as log lines ([`EventLog`]): logins and logouts at info, one line
//! each; refusals at warn through the project's rate-limited log (`opskit::ratelog`): one
//! line per source and reason per interval, with the count since the last line, so a
//! flood of forged logins or CM REQs cannot fill the log. Every refusal is still counted
//! by the daemon (`rejects`, in `srpctl target status` and the metrics) whatever is written.
//!
//! Sans-IO in time: the caller passes `now`, and calls [`EventLog::tick`] now and then so
//! the refusals held back when a flood stops are written too.

use super::DaemonEvent;
use opskit::ratelog::{Key, Line, RateLog};
use std::time::{Duration, Instant};

/// A refusal's key: where it came from, and why.
type Refusal = (String, String);

/// The daemon's log (module doc).
#[derive(Debug)]
pub struct EventLog {
    refusals: RateLog<Refusal>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog::new(opskit::ratelog::DEFAULT_INTERVAL)
    }
}

impl EventLog {
    /// A log writing at most one refusal line per source and reason per `interval`.
    pub fn new(interval: Duration) -> EventLog {
        EventLog {
            refusals: RateLog::new(interval, opskit::ratelog::DEFAULT_CAPACITY),
        }
    }

    /// Writes `ev` (or holds it back, counted); returns the line written, if one was.
    pub fn log(&mut self, now: Instant, ev: &DaemonEvent) -> Option<String> {
        match ev {
            DaemonEvent::Login {
                channel,
                ioc,
                initiator,
                form,
                ..
            } => {
                tracing::info!(target: "srp_target::session", channel = %channel, ioc = %ioc,
                    initiator = %initiator, form = %form, "{ev}");
                Some(ev.to_string())
            }
            DaemonEvent::Logout { channel, reason } => {
                tracing::info!(target: "srp_target::session", channel = %channel,
                    reason = %reason, "{ev}");
                Some(ev.to_string())
            }
            DaemonEvent::Reloaded { changes } => {
                tracing::info!(target: "srp_target::reload", changes = changes.len(), "{ev}");
                Some(ev.to_string())
            }
            DaemonEvent::Rejected {
                ioc,
                initiator,
                code,
                reason,
            } => {
                let source =
                    initiator.map_or_else(|| "an unparsed login".to_owned(), |i| i.to_string());
                let why = format!(
                    "SRP_LOGIN_REJ {code:#010x} {reason}; ioc {}",
                    ioc.as_deref().unwrap_or("-")
                );
                let line = self.refusals.event(now, (source, why))?;
                let text = with_count(ev.to_string(), &line, self.refusals.interval());
                tracing::warn!(target: "srp_target::login",
                    ioc = ioc.as_deref().unwrap_or("-"),
                    initiator = %initiator.map_or_else(|| "-".to_owned(), |i| i.to_string()),
                    code = *code, reason = %reason, count = line.count, "{text}");
                Some(text)
            }
            DaemonEvent::CmRefused {
                port,
                from,
                reason,
                service_id,
            } => {
                let key = (
                    from.to_string(),
                    format!("CM REJ {reason} on port {port}, service ID {service_id:#018x}"),
                );
                let line = self.refusals.event(now, key)?;
                let text = with_count(ev.to_string(), &line, self.refusals.interval());
                tracing::warn!(target: "srp_target::login", port = %port, from = %from,
                    cm_reason = *reason, count = line.count, "{text}");
                Some(text)
            }
        }
    }

    /// Writes the refusals held back whose interval has passed; returns the lines.
    pub fn tick(&mut self, now: Instant) -> Vec<String> {
        let interval = self.refusals.interval();
        self.refusals
            .due(now)
            .into_iter()
            .map(|l| {
                let text = match &l.key {
                    Key::One((source, why)) => format!(
                        "{} more refusal(s) from {source} in the last {interval:?}: {why}",
                        l.count
                    ),
                    Key::Overflow => format!(
                        "{} more refusal(s) from sources beyond the {} remembered, in the last {interval:?}",
                        l.count,
                        self.refusals.capacity()
                    ),
                };
                tracing::warn!(target: "srp_target::login", count = l.count, "{text}");
                text
            })
            .collect()
    }
}

/// `text`, saying how many events the line stands for when more than this one.
fn with_count<K>(text: String, line: &Line<K>, interval: Duration) -> String {
    match (&line.key, line.count) {
        (Key::Overflow, n) => format!(
            "{text} (and {} more from sources beyond those remembered, in the last {interval:?})",
            n - 1
        ),
        (Key::One(_), 1) => text,
        (Key::One(_), n) => {
            format!("{text} ({n} like it in the last {interval:?}, this one included)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn refused(from: u8, service_id: u64) -> DaemonEvent {
        DaemonEvent::CmRefused {
            port: "p0".into(),
            from: IpAddr::V4(Ipv4Addr::new(10, 0, 0, from)),
            service_id,
            reason: 8,
        }
    }

    #[test]
    fn a_flood_of_refusals_is_one_line_per_source_and_reason_per_interval() {
        let t0 = Instant::now();
        let mut log = EventLog::new(Duration::from_secs(10));
        let mut lines = Vec::new();
        // 10 000 refused REQs in 5 s: from two sources, one of them with two service IDs.
        for i in 0..10_000u64 {
            let at = t0 + Duration::from_micros(i * 500);
            let ev = match i % 3 {
                0 => refused(1, 0x10),
                1 => refused(1, 0x20),
                _ => refused(2, 0x10),
            };
            lines.extend(log.log(at, &ev));
        }
        assert_eq!(lines.len(), 3, "{lines:#?}");
        // The flood stops; the tick after the interval says how many were held back.
        let held = log.tick(t0 + Duration::from_secs(11));
        assert_eq!(held.len(), 3, "{held:#?}");
        let total: u64 = held
            .iter()
            .map(|l| {
                l.split(' ')
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .expect("a count")
            })
            .sum();
        assert_eq!(total, 10_000 - 3);
        // Logins are not limited.
        let login = DaemonEvent::Logout {
            channel: crate::login::ChannelId(1),
            reason: "initiator logout".into(),
        };
        assert!(log.log(t0, &login).is_some());
        assert!(log.log(t0, &login).is_some());
    }
}
