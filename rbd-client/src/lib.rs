//! Ceph RBD images through librbd and librados, loaded at run time (`dlopen`): a machine
//! without Ceph's client libraries builds and runs everything else, and an RBD LUN there is
//! refused with what to install (Debian: `librbd1`).
//!
//! [`Cluster::connect`] reads a cluster's configuration file and connects as a client
//! (cephx: a client id and a keyring); [`Cluster::pool`] opens a pool; [`Pool::open`] an
//! image. An [`Image`]'s asynchronous operations take their memory by value — an owned
//! vector or a span of a registered [`ib_verbs::mem::MemBlock`], whose bytes librbd reads
//! or fills directly (no copy) — and give it back to a completion routine that librbd calls
//! on its own thread when the operation ends; nothing waits. [`Image::allocated`] lists the
//! extents that hold data (GET LBA STATUS). [`Pool::object`] gives a RADOS object for state
//! several clients share: compare-and-set replacement, watch, notify with acknowledgements,
//! and [`Cluster::blocklist`] to fence a client.
//!
//! Every `unsafe` of the crate is in its one FFI module (`ffi`), each block with its SAFETY
//! reasoning; the crate's tests run against a real cluster (`scripts/ceph-cluster.sh`).
#![deny(unsafe_code)]
#![cfg(target_os = "linux")]

mod blocking;
mod buf;
mod error;
mod ffi;
mod image;
mod object;

pub use buf::IoBuf;
pub use error::RbdError;
pub use image::{Cluster, Completion, Extent, Image, Pool, WeakCluster};
pub use object::{Notification, NotifyReply, RadosObject, Watch};
