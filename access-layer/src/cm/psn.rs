//! Which PSN each side of a CM exchange sends from, as Linux reads the Starting PSN fields.
//!
//! Linux's CM (drivers/infiniband/core/cm.c) treats each message's Starting PSN as the PSN
//! its *sender expects to receive*: the active side's receive PSN is its REQ's Starting PSN
//! (`ib_send_cm_req`: `rq_psn` from the REQ) and the passive side sends from it
//! (`cm_req_handler`: `sq_psn` from the REQ); the passive side's receive PSN is its REP's
//! Starting PSN (`ib_send_cm_rep`) and the active side sends from it (`cm_rep_handler`:
//! `sq_psn` from the REP). Reading it the other way round works only between two peers that
//! share the misreading: the first SRP_CMD from Linux ib_srp was NAKed with a PSN sequence
//! error until this was fixed (linux-interop.md). Every QP set up from a CM exchange takes
//! its PSNs from here.

use crate::mad::cm::{CmRep, CmReq};
use ib_verbs::ids::Psn;

/// The send and receive PSNs of an RC QP connected through the CM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpPsns {
    /// The PSN our first request carries.
    pub sq_psn: Psn,
    /// The PSN we expect the peer's first request to carry.
    pub rq_psn: Psn,
}

impl QpPsns {
    /// The active side: our REQ offered `req_starting_psn` (our receive PSN); the REP's
    /// Starting PSN is the passive side's receive PSN, which we send from.
    pub fn active(req_starting_psn: Psn, rep: &CmRep) -> QpPsns {
        QpPsns {
            sq_psn: rep.starting_psn,
            rq_psn: req_starting_psn,
        }
    }

    /// The passive side: the REQ's Starting PSN is the active side's receive PSN, which we
    /// send from; our REP offers `rep_starting_psn`, our receive PSN.
    pub fn passive(req: &CmReq, rep_starting_psn: Psn) -> QpPsns {
        QpPsns {
            sq_psn: req.starting_psn,
            rq_psn: rep_starting_psn,
        }
    }
}
