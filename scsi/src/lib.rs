//! Transport-free SCSI: what a target executes and an initiator builds, knowing nothing of SRP,
//! InfiniBand or RDMA.
//!
//! Modules: [`lun`] (SAM LUN encoding).
#![deny(unsafe_code)]

pub mod lun;

pub use lun::{Lun, LunError};
