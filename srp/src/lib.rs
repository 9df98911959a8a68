//! SRP, the SCSI RDMA Protocol: the information units that cross an RDMA channel between an
//! SRP initiator port and an SRP target port.
//!
//! Contract: [`wire`] turns bytes into validated values and back, byte-exact against SRP r16a
//! (plus the SRP-2 immediate-data fields and Linux's RDMA-CM login form), and never panics on
//! input. It knows nothing of queue pairs or sockets; the SCSI payload types (LUN, status)
//! come from the transport-free `scsi` crate.
//!
//! Layering: `hca <- access-layer <- srp <- {srp-target, srp-initiator-*}`. The sans-IO channel
//! core (credits, tags, login, reconnect) shared by target and initiators joins [`wire`] here
//! in issue #6.
#![deny(unsafe_code)]

pub mod wire;
