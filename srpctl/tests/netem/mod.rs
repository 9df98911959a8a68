//! `tc netem` for the namespace tests, in the kernel where it has sch_netem and in user
//! space where it has not (the kernels this project's machines and CI run are built
//! without it: "Specified qdisc kind is unknown").
//!
//! [`ChaosLinks`] joins two namespaces with links whose every direction can be impaired
//! (loss, delay and jitter, reordering, duplication, as [`Impairment`]). With sch_netem:
//! plain veth pairs, `tc qdisc replace … root netem …` on both ends. Without: each link
//! runs through a third, "wire" namespace — `t{i}` ⇄ `wa{i}` … `wb{i}` ⇄ `h{i}` — where
//! the [`relay::Impairer`] thread forwards frames between `wa{i}` and `wb{i}` through the
//! [`model::Netem`] model. `SRP_NETEM=userspace` picks the impairer even where the kernel
//! has netem.
//!
//! Modules: `model` (netem's decisions and timer queue, no I/O), `relay` (the impairer's
//! thread and packet socket), `checksum` (finishing the checksums veth offloads), `links`
//! (the topology and the probe).
#![allow(dead_code, unreachable_pub)]

pub mod checksum;
pub mod links;
pub mod model;
pub mod relay;

pub use links::ChaosLinks;
pub use model::Impairment;
