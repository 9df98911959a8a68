//! The daemons' log: the stack's `tracing` events on stderr, one line each, printed by
//! tracing-subscriber's `fmt` layer behind an `EnvFilter`. No ANSI colours.
//!
//! `SRPCTL_LOG` says what is printed: a level — `error`, `warn`, `info`, `debug`, `trace`
//! or `off`; unset or empty, the caller's default (`info` for the daemons) — or EnvFilter
//! directives, such as `info,srp_hostd=debug` or `srp_initiator_storport::srp=debug`.
//! Targets the directives do not name stay at the default level unless a bare level is
//! among them (`off,mpio=debug`: mpio alone). A target needs its level
//! (`srp_hostd=trace`): a bare word that is not a level is taken for a typo. An invalid
//! value is reported in one line on stderr and the default is used.
//!
//! `SRPCTL_LOG_FORMAT` says how: `text` (the default), `LEVEL target: message key=value …`,
//! or `json` for log shippers, one object per line:
//! `{"timestamp":"…","level":"INFO","fields":{"message":"…","key":value},"target":"…"}`.
//! An invalid value is reported in one line and `text` is used.
//!
//! Timestamps (RFC 3339, UTC) lead every JSON object and every text line, except text
//! lines under systemd: when `JOURNAL_STREAM` is set, stderr goes to the journal, which
//! stamps each line itself, so a second stamp would only make the line longer.

use std::io::Write as _;
use tracing::Level;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};

/// A setting read from one variable and, if the value was not valid (the default is used
/// then), the line saying so.
#[derive(Debug)]
struct Parsed<T> {
    value: T,
    complaint: Option<String>,
}

/// The filter for a `SRPCTL_LOG` value (`None`: unset); `default` where it names no level.
fn filter(value: Option<&str>, default: Level) -> Parsed<EnvFilter> {
    let default = LevelFilter::from_level(default);
    let fallback = |complaint: String| Parsed {
        value: EnvFilter::new(default.to_string()),
        complaint: Some(complaint),
    };
    let text = value.map(str::trim).unwrap_or_default();
    let pieces: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let is_level = |s: &str| s.parse::<LevelFilter>().is_ok();
    let names_target = |s: &str| s.contains(['=', ':', '[', '{']);
    if let Some(bad) = pieces.iter().find(|s| !is_level(s) && !names_target(s)) {
        return fallback(format!(
            "SRPCTL_LOG={text:?}: {bad:?} is not a level (error, warn, info, debug, trace, \
             off) nor a directive (target=level); using {default}"
        ));
    }
    let mut directives = pieces.join(",");
    if !pieces.iter().any(|s| is_level(s)) {
        directives = if directives.is_empty() {
            default.to_string()
        } else {
            format!("{default},{directives}")
        };
    }
    match EnvFilter::builder().with_regex(false).parse(&directives) {
        Ok(f) => Parsed {
            value: f,
            complaint: None,
        },
        Err(e) => fallback(format!("SRPCTL_LOG={text:?}: {e}; using {default}")),
    }
}

/// How events are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// `LEVEL target: message key=value …`, after a timestamp if `timestamps`.
    Text {
        /// Lead each line with the time (not under systemd's journal).
        timestamps: bool,
    },
    /// One JSON object per event, always timestamped.
    Json,
}

/// The format a `SRPCTL_LOG_FORMAT` value names, with `JOURNAL_STREAM`'s value (set:
/// the journal stamps lines, so text lines go without a timestamp).
fn format(value: Option<&str>, journal_stream: Option<&str>) -> Parsed<Format> {
    let text = Format::Text {
        timestamps: journal_stream.is_none_or(str::is_empty),
    };
    let value = value.map(str::trim).unwrap_or_default();
    match value.to_ascii_lowercase().as_str() {
        "" | "text" => Parsed {
            value: text,
            complaint: None,
        },
        "json" => Parsed {
            value: Format::Json,
            complaint: None,
        },
        _ => Parsed {
            value: text,
            complaint: Some(format!(
                "SRPCTL_LOG_FORMAT={value:?}: not a log format (text, json); using text"
            )),
        },
    }
}

/// Installs the log for this process, `default` being the level when `SRPCTL_LOG` names
/// none (once; later calls do nothing).
pub(crate) fn init(default: Level) {
    let var = |name| std::env::var(name).ok();
    let filter = filter(var("SRPCTL_LOG").as_deref(), default);
    let format = format(
        var("SRPCTL_LOG_FORMAT").as_deref(),
        var("JOURNAL_STREAM").as_deref(),
    );
    for complaint in [&filter.complaint, &format.complaint].into_iter().flatten() {
        let _ = writeln!(std::io::stderr(), "{complaint}");
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter.value)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        // A closed stderr loses the lines instead of panicking the thread that logged
        // (the report of a failed write would go to that stderr too).
        .log_internal_errors(false);
    // Err: a log is installed already.
    let _ = match format.value {
        Format::Text { timestamps: true } => builder.try_init(),
        Format::Text { timestamps: false } => builder.without_time().try_init(),
        Format::Json => builder.json().try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter's directives as EnvFilter prints them, and whether it complained.
    fn directives(value: Option<&str>, default: Level) -> (String, bool) {
        let p = filter(value, default);
        (p.value.to_string(), p.complaint.is_some())
    }

    #[test]
    fn unset_or_empty_is_the_default_level() {
        assert_eq!(directives(None, Level::INFO), ("info".into(), false));
        assert_eq!(directives(Some(""), Level::WARN), ("warn".into(), false));
        assert_eq!(directives(Some("  "), Level::INFO), ("info".into(), false));
    }

    #[test]
    fn a_bare_level_is_that_level() {
        for (v, want) in [
            ("error", "error"),
            ("warn", "warn"),
            ("info", "info"),
            ("debug", "debug"),
            ("trace", "trace"),
            ("off", "off"),
            (" DEBUG ", "debug"),
        ] {
            assert_eq!(
                directives(Some(v), Level::INFO),
                (want.into(), false),
                "{v}"
            );
        }
        let off = filter(Some("off"), Level::INFO).value;
        assert_eq!(off.max_level_hint(), Some(LevelFilter::OFF));
        let debug = filter(Some("debug"), Level::INFO).value;
        assert_eq!(debug.max_level_hint(), Some(LevelFilter::DEBUG));
    }

    #[test]
    fn directives_pass_through_and_keep_the_default_for_the_rest() {
        let (d, bad) = directives(Some("info,srp_target=debug"), Level::WARN);
        assert!(!bad);
        assert!(d.contains("srp_target=debug") && d.contains("info"), "{d}");
        assert!(!d.contains("warn"), "{d}");
        let (d, bad) = directives(Some("access_layer::cm=trace"), Level::INFO);
        assert!(!bad);
        assert!(
            d.contains("access_layer::cm=trace") && d.contains("info"),
            "{d}"
        );
        let (d, bad) = directives(Some("off,mpio=debug"), Level::INFO);
        assert!(!bad);
        assert!(d.contains("mpio=debug") && d.contains("off"), "{d}");
        assert!(!d.contains("info"), "{d}");
    }

    #[test]
    fn an_invalid_value_complains_and_uses_the_default() {
        for v in [
            "verbose",
            "warning",
            "infoo",
            "info,loud",
            "srp_target=loud",
            "a=b=c",
        ] {
            let p = filter(Some(v), Level::INFO);
            assert_eq!(p.value.to_string(), "info", "{v}");
            let c = p.complaint.unwrap_or_default();
            assert!(c.contains(&format!("SRPCTL_LOG={v:?}")), "{v}: {c}");
            assert!(c.ends_with("using info"), "{v}: {c}");
        }
    }

    #[test]
    fn format_text_by_default_timestamped_outside_the_journal() {
        let f = |v, j| {
            let p = format(v, j);
            (p.value, p.complaint.is_some())
        };
        let stamped = Format::Text { timestamps: true };
        let bare = Format::Text { timestamps: false };
        assert_eq!(f(None, None), (stamped, false));
        assert_eq!(f(Some("text"), None), (stamped, false));
        assert_eq!(f(Some(""), Some("8:12345")), (bare, false));
        assert_eq!(f(None, Some("")), (stamped, false));
        assert_eq!(f(Some("json"), None), (Format::Json, false));
        assert_eq!(f(Some(" JSON "), Some("8:12345")), (Format::Json, false));
        let p = format(Some("yaml"), Some("8:1"));
        assert_eq!(p.value, bare);
        assert_eq!(
            p.complaint.as_deref(),
            Some("SRPCTL_LOG_FORMAT=\"yaml\": not a log format (text, json); using text")
        );
    }
}
