//! The whole-stack deterministic simulation: the target daemon's loop
//! (`srp_target::daemon::SteppedDaemon`), the StorPort-model SRP initiator (its emulated
//! port in manual mode) and the multipath core (`mpio::MpCore`) on a simulated RoCE net
//! (`hca::sim::SimNet`) in virtual time — one thread, no sleeps — with loss, duplication,
//! reordering, delay, partitions, link flaps and target crashes with restarts (the crash
//! model of the write-log checker), under a verifying workload whose every read is checked
//! against a model of the acknowledged writes.
//!
//! A run is a function of its seed: `SIM_SEED=n` replays one exactly (docs/testing.md,
//! "Whole-stack simulation").
//!
//! Files: [`disk`] (the LU's storage and its crash model), [`model`] (what reads may
//! return), [`workload`] (the commands), [`host`] (ports, scan, multipath), [`target`]
//! (the daemon, crash and restart), [`faults`] (the seed's faults), [`world`] (the run).

pub mod disk;
pub mod faults;
pub mod host;
pub mod model;
pub mod target;
pub mod workload;
pub mod world;

pub use faults::{Fault, FaultMix, FaultPlan};
pub use workload::Shape;
pub use world::{Failure, LinkFault, Report, Scenario, run};
