//! Benchmarks (`srpctl bench …`): commands, never test assertions; every figure is reported
//! next to a peer measured in the same run (../shared/design/PERFORMANCE.md).

pub(crate) mod atomic;
pub(crate) mod copy;
pub(crate) mod disk;
mod endpoint;
pub(crate) mod peer;
pub(crate) mod transport;
