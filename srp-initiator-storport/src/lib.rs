//! The SRP initiator as a StorPort miniport (design §2: `srp-initiator-storport/`), and the
//! emulated StorPort port driver it runs under.
//!
//! Contract: [`port`] is a port driver that a miniport written exactly as a StorPort
//! miniport plugs into ([`port::Miniport`], the HW_INITIALIZATION_DATA routines). The port
//! calls BuildIo unlocked and concurrently, StartIo serialized, both at dispatch level with
//! the dispatch verifier of `access-layer` active; it owns the per-LU queues (depth ≤ 255),
//! honours Busy/Ready, Pause/Resume and DeviceBusy, times SRBs out into HwResetBus, and
//! traps rule violations (blocking at dispatch, double completion, SRBs left after a bus
//! reset) as a Driver Verifier bugcheck would. [`srp`] is the SRP miniport over the initiator channel
//! core of the `srp` crate. Besides I/O it handles the management SRBs (ABORT_COMMAND as
//! SRP ABORT TASK, RESET_LOGICAL_UNIT as LOGICAL UNIT RESET, RESET_DEVICE and HwResetBus as
//! a LOGICAL UNIT RESET of each known LUN, a channel reset only as the escalation)
//! and HwAdapterControl StopAdapter (an orderly SRP_I_LOGOUT and CM disconnect, no
//! reconnects) and RestartAdapter (a fresh login).
//!
//! Modules: [`port`] (`std`), [`hw`], [`srp`].
//!
//! With no `std` (the default feature off: a kernel driver's build) [`hw`] and [`srp`]
//! remain — the SRP miniport's HW_INITIALIZATION_DATA routines written against the StorPort
//! calls they make ([`hw::StorPortCalls`]) — and the emulated port, which stands for
//! `storport.sys`, is left out.
#![deny(unsafe_code)]
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod hw;
#[cfg(feature = "std")]
pub mod port;
pub mod srp;
