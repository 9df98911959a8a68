//! The provider's one FFI module: libibverbs and librdmacm loaded at run time
//! ([`lib`]), their structures ([`types`]) and owned handles over their objects
//! ([`verbs`], [`cm`]). Every `unsafe` block of the crate is here, each with its SAFETY
//! reasoning; the rest of the crate calls the handles' safe methods.
//!
//! Soundness rests on three rules the handles keep: an object is destroyed once, by its
//! handle's `Drop`, when no `Arc` of it is left (so no verb runs on a destroyed object);
//! a handle keeps alive what its object depends on (a QP its CQs and PD, a region its
//! memory block); and pointers handed to the libraries point into memory that outlives
//! the call (work request chains are linked in place right before the post).
#![allow(unsafe_code)]

pub(crate) mod cm;
pub(crate) mod lib;
pub(crate) mod types;
pub(crate) mod verbs;

#[cfg(test)]
mod layout_tests;
