//! `srp.sys`: the SRP StorPort miniport (`srp_initiator_storport::srp::SrpMiniport`) linked
//! as a Windows kernel driver image, for x64 and x86. Built and checked on Linux by
//! `scripts/driver-image.sh` (mingw-w64, a target with no C runtime, `core` and `alloc`
//! built with panic=abort); loaded only on Windows (docs/windows-driver.md).
//!
//! - [`request`] (safe, tested on the host): a SCSI_REQUEST_BLOCK's fields as the port
//!   hands them over, into the miniport's SRB, and the adapter-control codes.
//! - `kernel` (the image only; every `unsafe` of the crate, each with its SAFETY line):
//!   `DriverEntry` → `StorPortInitialize` with a HW_INITIALIZATION_DATA whose routines call
//!   the miniport's (`SrpMiniport::hw_*`), the StorPort calls the miniport makes
//!   (`StorPortCalls`) over `storport.sys`'s exports, the pool allocator, the panic
//!   bugcheck.
//!
//! There is no RDMA provider for the Windows kernel in this tree, so HwFindAdapter reports
//! none present (`SP_RETURN_NOT_FOUND`), as the user-mode build's miniport does without a
//! fabric; docs/windows-driver.md says what a provider over NDK would take.
#![cfg_attr(target_os = "windows", no_std)]

extern crate alloc;

#[cfg(all(not(test), target_os = "windows"))]
mod kernel;
pub mod request;
