//! The daemons' log: `tracing` events of the stack printed to stderr, one line each
//! (`LEVEL target: message key=value …`), at or above the level in `SRPCTL_LOG` (`error`,
//! `warn`, `info` — the default —, `debug`, `trace`, or `off`). A subscriber of our own:
//! the agreed dependency set has `tracing` but no subscriber crate, and the daemons need
//! nothing more than this (no spans are recorded; events carry their fields).

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Prints events at or above a level.
struct StderrLog {
    max: Level,
    next_span: AtomicU64,
}

/// Collects an event's message and fields.
struct Line(String, String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.1, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.1, " {}={value}", field.name());
        }
    }
}

impl Subscriber for StderrLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= self.max
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed).max(1))
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = Line(String::new(), String::new());
        event.record(&mut line);
        let m = event.metadata();
        let _ = writeln!(
            std::io::stderr().lock(),
            "{:5} {}: {}{}",
            m.level(),
            m.target(),
            line.0,
            line.1
        );
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// The level `SRPCTL_LOG` names, `default` if unset; `None` for `off`.
fn level(default: Level) -> Option<Level> {
    match std::env::var("SRPCTL_LOG").ok().as_deref().map(str::trim) {
        None | Some("") => Some(default),
        Some("off") => None,
        Some(s) => match s.to_ascii_lowercase().as_str() {
            "error" => Some(Level::ERROR),
            "warn" => Some(Level::WARN),
            "info" => Some(Level::INFO),
            "debug" => Some(Level::DEBUG),
            "trace" => Some(Level::TRACE),
            _ => {
                eprintln!(
                    "SRPCTL_LOG={s:?}: not a level (error, warn, info, debug, trace, off); using {default}"
                );
                Some(default)
            }
        },
    }
}

/// Installs the log for this process (once; later calls do nothing).
pub(crate) fn init(default: Level) {
    if let Some(max) = level(default) {
        let _ = tracing::subscriber::set_global_default(StderrLog {
            max,
            next_span: AtomicU64::new(1),
        });
    }
}
