//! Login: deciding an SRP_LOGIN_REQ, sans-IO, and keeping track of which channels make up
//! each I_T nexus.
//!
//! The same decision serves both login forms (the 64-byte request in IB CM REQ private data
//! and the 56-byte RDMA-CM form): the caller parses whichever arrived, computes whether the
//! IOC's ACL admits the initiator, and sends back the LOGIN_RSP (in CM REP) or LOGIN_REJ (in
//! CM REJ, reason 28 consumer defined) that [`decide()`] returns, then closes every channel the
//! decision lists for termination (MULTI-CHANNEL ACTION single).
//!
//! Files: [`cm`] (the login out of CM REQ private data in either form; the decision back
//! as REP or REJ private data), [`mod@decide`] (the policy, the order of checks, the negotiated parameters),
//! [`nexus`] (channels by I_T nexus).

pub mod cm;
pub mod decide;
pub mod nexus;

pub use cm::{CmAnswer, CmLogin, CmLoginError, LoginForm, parse_cm_login};
pub use decide::{
    LoginDecision, LoginFacts, LoginPolicy, LoginRefusal, Negotiated, decide, decide_with,
};
pub use nexus::{ChannelId, NexusKey, NexusTable};
