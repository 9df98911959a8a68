//! Where a MAD comes from or goes to on the GSI: a port of ours, and the peer's GID, QP and
//! Q_Key (QP1 and 0x80010000 for every GSI class on RoCE, where there is no SM to redirect).

use ib_verbs::{Gid, QKey, Qpn};

/// The address of a MAD's peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MadAddress {
    /// Our port (1-based) the MAD arrived on or leaves from.
    pub port: u8,
    /// The peer's GID (its IP address on RoCE).
    pub gid: Gid,
    /// The peer's QP (1, the GSI, unless redirected).
    pub qpn: Qpn,
    /// The Q_Key to send with.
    pub qkey: QKey,
    /// The partition: an index in our port's P_Key table (a received MAD's, and the one
    /// its answer goes out on; 0, the default partition, unless configured otherwise).
    pub pkey_index: u16,
}

impl MadAddress {
    /// The GSI of the peer at `gid`, reached from our `port`.
    pub fn gsi(port: u8, gid: Gid) -> Self {
        MadAddress {
            port,
            gid,
            qpn: Qpn::GSI,
            qkey: QKey::GSI,
            pkey_index: 0,
        }
    }

    /// The same peer, on partition `pkey_index` of our port's table.
    pub fn on_partition(self, pkey_index: u16) -> Self {
        MadAddress { pkey_index, ..self }
    }
}

/// A MAD to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MadOut {
    /// Where to.
    pub to: MadAddress,
    /// The 256 bytes.
    pub mad: crate::mad::MadBuf,
}
