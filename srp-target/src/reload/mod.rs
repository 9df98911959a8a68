//! Live reconfiguration: a changed target.toml applied to the running daemon without a
//! restart (SIGHUP, `srpctl target reload`), as targetcli changes a running LIO.
//!
//! Contract:
//! - [`plan`] compares the running configuration with a new, already validated one and
//!   returns the [`Plan`] of changes, or every change that cannot be made live, each with
//!   its reason ([`Refusal`]). It is pure: nothing is opened or touched.
//! - The daemon's loop applies a plan whole or not at all (`daemon::reload`): new LUNs
//!   are opened and grown LUNs resized first (a failure there undoes what was done and
//!   refuses the reload); then exports, ACLs and IOCs change between two turns of the
//!   loop, so no command sees half of it.
//! - What changes live: LUNs added, removed (once no IOC exports them), grown (a file
//!   with a configured size); an IOC's exports, ACL (`allow`), `enabled`, `alua` and
//!   `nexus_from_any_address`; IOCs added after the existing ones, or removed from the
//!   end; the channel guards (`idle_probe`, `max_channels…`, `max_half_open`).
//! - What hosts are told: REPORTED LUNS DATA HAS CHANGED to every I_T nexus of an IOC
//!   whose exports changed (on each LU it still exports); CAPACITY DATA HAS CHANGED to
//!   every I_T nexus of a grown LU; ASYMMETRIC ACCESS STATE CHANGED to every I_T nexus of
//!   every LU when an ALUA state changes; sessions an IOC no longer admits (its ACL, it
//!   was disabled or removed) get SRP_T_LOGOUT then a DREQ.
//! - What is refused, with the reason: anything of `[target]` but the guards (identity,
//!   addresses and paths the daemon bound at start), any `[[port]]` change, an IOC's
//!   identity (GUID, id_ext, service ID), ports or partitions, an IOC that would change
//!   its relative port number (IOCs are numbered in file order), a LUN's backing store,
//!   block sizes, mode settings or write log, and shrinking a LUN (hosts may hold data past
//!   the new end).

mod plan;

pub use plan::{IocChange, Plan, Refusal, plan};
