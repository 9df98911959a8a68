//! What both daemons export for monitoring: latency histograms (fixed buckets, counted
//! without locks on the I/O path) and a Prometheus text-exposition builder (format 0.0.4)
//! that groups every sample under its family's `# HELP` / `# TYPE`, whatever order the
//! daemon walks its objects in, and escapes label values.
//!
//! Here rather than in a metrics crate: the exposition format is a few lines of text and
//! the daemons serve it on a plain socket.

use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::Write as _;
use core::sync::atomic::{AtomicU64, Ordering};
use serde::{Deserialize, Serialize};

/// Upper bounds of the latency buckets, in microseconds (50 µs to 5 s); a last bucket
/// holds what is slower.
pub const LATENCY_BOUNDS_US: [u64; 16] = [
    50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000,
    1_000_000, 2_000_000, 5_000_000,
];

/// Buckets of a histogram: one per bound and the overflow.
const BUCKETS: usize = LATENCY_BOUNDS_US.len() + 1;

/// A latency histogram at one moment: counts per bucket (not cumulative), their sum and
/// how many.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    /// Observations per bucket of [`LATENCY_BOUNDS_US`], then the overflow.
    pub buckets: Vec<u64>,
    /// The sum of every observation, in microseconds.
    pub sum_us: u64,
    /// Observations.
    pub count: u64,
}

impl Histogram {
    /// Records one observation of `us` microseconds.
    pub fn record(&mut self, us: u64) {
        if self.buckets.len() != BUCKETS {
            self.buckets.resize(BUCKETS, 0);
        }
        self.buckets[bucket(us)] += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.count += 1;
    }
}

fn bucket(us: u64) -> usize {
    LATENCY_BOUNDS_US
        .iter()
        .position(|b| us <= *b)
        .unwrap_or(LATENCY_BOUNDS_US.len())
}

/// A [`Histogram`] many threads record into without a lock.
#[derive(Debug, Default)]
pub struct AtomicHistogram {
    buckets: [AtomicU64; BUCKETS],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl AtomicHistogram {
    /// Records one observation of `us` microseconds.
    pub fn record(&self, us: u64) {
        self.buckets[bucket(us)].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> Histogram {
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            sum_us: self.sum_us.load(Ordering::Relaxed),
            count: self.count.load(Ordering::Relaxed),
        }
    }
}

/// One metric family being built.
#[derive(Debug)]
struct Family {
    help: String,
    kind: &'static str,
    lines: String,
}

/// A Prometheus text exposition, built family by family.
#[derive(Debug, Default)]
pub struct Exposition {
    order: Vec<String>,
    families: BTreeMap<String, Family>,
}

/// Label pairs of a sample.
pub type Labels<'a> = &'a [(&'a str, &'a str)];

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    fn family(&mut self, name: &str, help: &str, kind: &'static str) -> &mut String {
        if !self.families.contains_key(name) {
            self.order.push(name.to_owned());
        }
        &mut self
            .families
            .entry(name.to_owned())
            .or_insert_with(|| Family {
                help: help.to_owned(),
                kind,
                lines: String::new(),
            })
            .lines
    }

    /// A counter sample (`name` should end in `_total`).
    pub fn counter(&mut self, name: &str, help: &str, labels: Labels<'_>, value: u64) {
        let line = sample(name, labels, None, &value.to_string());
        self.family(name, help, "counter").push_str(&line);
    }

    /// A gauge sample.
    pub fn gauge(&mut self, name: &str, help: &str, labels: Labels<'_>, value: f64) {
        let line = sample(name, labels, None, &number(value));
        self.family(name, help, "gauge").push_str(&line);
    }

    /// A histogram: cumulative `_bucket{le=…}` samples in seconds, `_sum`, `_count`.
    pub fn histogram(&mut self, name: &str, help: &str, labels: Labels<'_>, h: &Histogram) {
        let mut text = String::new();
        let mut cumulative = 0;
        for (i, bound) in LATENCY_BOUNDS_US.iter().enumerate() {
            cumulative += h.buckets.get(i).copied().unwrap_or(0);
            let le = number(*bound as f64 / 1e6);
            text.push_str(&sample(
                &format!("{name}_bucket"),
                labels,
                Some(&le),
                &cumulative.to_string(),
            ));
        }
        text.push_str(&sample(
            &format!("{name}_bucket"),
            labels,
            Some("+Inf"),
            &h.count.to_string(),
        ));
        text.push_str(&sample(
            &format!("{name}_sum"),
            labels,
            None,
            &number(h.sum_us as f64 / 1e6),
        ));
        text.push_str(&sample(
            &format!("{name}_count"),
            labels,
            None,
            &h.count.to_string(),
        ));
        self.family(name, help, "histogram").push_str(&text);
    }

    /// The text: each family's HELP and TYPE, then its samples, in first-seen order.
    pub fn finish(self) -> String {
        let mut out = String::new();
        for name in &self.order {
            if let Some(f) = self.families.get(name) {
                let help = f.help.replace('\\', "\\\\").replace('\n', "\\n");
                let _ = writeln!(out, "# HELP {name} {help}");
                let _ = writeln!(out, "# TYPE {name} {}", f.kind);
                out.push_str(&f.lines);
            }
        }
        out
    }
}

/// A number as the format writes it (integers without a fraction).
fn number(v: f64) -> String {
    // No `fract` in `core`: a value under 1e15 that survives the round trip is whole.
    if v.abs() < 1e15 && (v as i64) as f64 == v {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn sample(name: &str, labels: Labels<'_>, le: Option<&str>, value: &str) -> String {
    let mut pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if let Some(le) = le {
        pairs.push(format!("le=\"{le}\""));
    }
    if pairs.is_empty() {
        format!("{name} {value}\n")
    } else {
        format!("{name}{{{}}} {value}\n", pairs.join(","))
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_group_under_their_family_in_first_seen_order() {
        let mut e = Exposition::new();
        e.counter("a_total", "A things.", &[("lun", "vol1")], 3);
        e.gauge("b", "B now.", &[], 1.5);
        e.counter("a_total", "A things.", &[("lun", "v\"2\\")], 4);
        assert_eq!(
            e.finish(),
            "# HELP a_total A things.\n# TYPE a_total counter\na_total{lun=\"vol1\"} 3\n\
             a_total{lun=\"v\\\"2\\\\\"} 4\n# HELP b B now.\n# TYPE b gauge\nb 1.5\n"
        );
    }

    #[test]
    fn histograms_are_cumulative_in_seconds() {
        let mut h = Histogram::default();
        for us in [10, 60, 60, 7_000_000] {
            h.record(us);
        }
        let a = AtomicHistogram::default();
        for us in [10, 60, 60, 7_000_000] {
            a.record(us);
        }
        assert_eq!(a.snapshot(), h);
        let mut e = Exposition::new();
        e.histogram("lat_seconds", "L.", &[("op", "read")], &h);
        let text = e.finish();
        assert!(
            text.contains("lat_seconds_bucket{op=\"read\",le=\"0.00005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("lat_seconds_bucket{op=\"read\",le=\"0.0001\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("lat_seconds_bucket{op=\"read\",le=\"5\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("lat_seconds_bucket{op=\"read\",le=\"+Inf\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("lat_seconds_sum{op=\"read\"} 7.00013\n"),
            "{text}"
        );
        assert!(
            text.contains("lat_seconds_count{op=\"read\"} 4\n"),
            "{text}"
        );
    }
}
