//! The operator's side both daemons share: configuration values as people write them
//! ([`units`]: sizes and durations) and what the daemons export for monitoring
//! ([`metrics`]: latency histograms and the Prometheus text exposition), and the
//! rate-limited event log every refusal, lost channel and drop is written through
//! ([`ratelog`]).
//!
//! Transport-free: no layer of the stack below the daemons needs it, and it needs none of
//! them (`mpio`'s core records its path latencies in a [`metrics::Histogram`]).
//!
//! With no `std` (the default feature off: a kernel driver's build) [`metrics`] and [`units`] remain (`core` + `alloc`); [`ratelog`] keeps a clock and a hash map (`std`).
#![deny(unsafe_code)]
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod metrics;
#[cfg(feature = "std")]
pub mod ratelog;
pub mod units;

pub use metrics::{AtomicHistogram, Exposition, Histogram};
pub use units::{SizeError, parse_duration, parse_size};
