//! Verbs objects that hold no protocol state: work requests and completions ([`wr`]),
//! completion queues ([`cq`]) and shared receive queues ([`srq`]).

pub mod cq;
pub mod srq;

pub use ib_verbs::wr;

pub use cq::{Cq, CqOverrun};
pub use ib_verbs::wr::ArmMode;
pub use srq::{Srq, SrqFull};
pub use wr::{
    FastRegPages, RecvWr, SendFlags, SendOp, SendWr, SgList, Sge, UdDest, Wc, WcOpcode, WcStatus,
};
