//! What a port dropped, refused and did, counted by reason: nothing leaves the device in
//! silence. [`Stats`] is one port's counters (or their sum over the device); the engine
//! keeps a [`StatsTable`] with one per port.

/// Declares [`Stats`] with one `u64` counter per field, and the lists that walk them in
/// declaration order ([`Stats::NAMES`], [`Stats::to_array`], [`Stats::from_array`]), so a
/// counter is added in one place.
macro_rules! stats {
    ($($(#[$doc:meta])* $name:ident,)+) => {
        /// Counters of what a port received, sent, dropped and did. Every datagram a port
        /// drops is counted under exactly one reason (their sum is [`Stats::dropped`]).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Stats {
            $($(#[$doc])* pub $name: u64,)+
        }

        impl Stats {
            /// How many counters there are.
            pub const COUNT: usize = [$(stringify!($name)),+].len();

            /// The counters' names, in declaration order: what listings and control
            /// replies show.
            pub const NAMES: [&'static str; Stats::COUNT] = [$(stringify!($name)),+];

            /// The counters in [`Stats::NAMES`] order.
            pub fn to_array(&self) -> [u64; Stats::COUNT] {
                [$(self.$name),+]
            }

            /// Counters from [`Stats::NAMES`] order.
            pub fn from_array(v: [u64; Stats::COUNT]) -> Stats {
                let [$($name),+] = v;
                Stats { $($name),+ }
            }
        }
    };
}

stats! {
    /// Datagrams received.
    rx_packets,
    /// Datagrams queued for sending.
    tx_packets,
    /// Datagrams that failed to build.
    tx_errors,
    /// Received datagrams whose ICRC did not match for any IPv4 ID: corrupt.
    icrc_errors,
    /// Received datagrams that verified only with a non-zero IPv4 ID (Linux rxe sends
    /// those; `wire::icrc` solves for the ID). Accepted, counted for diagnosis.
    ipv4_id_nonzero,
    /// Received datagrams that did not parse (or an unknown opcode, or a bad port).
    malformed,
    /// Received for a QP that does not exist.
    unknown_qp,
    /// Received with a P_Key that is not the QP's.
    pkey_mismatch,
    /// RC packets from an address that is not the QP's peer.
    wrong_peer,
    /// RC packets for a QP that is not in RTR, RTS or SQD.
    wrong_state,
    /// A packet of one transport (RC, UD) for a QP of another, or for the wrong port.
    wrong_transport,
    /// Received or to be sent while the port was down.
    port_down_drops,
    /// UD datagrams with the wrong Q_Key.
    qkey_mismatch,
    /// UD datagrams with no receive posted.
    no_recv_posted,
    /// Completions for a destroyed CQ.
    lost_completions,
    /// PSN sequence error NAKs sent (a request arrived out of order: something was lost).
    psn_naks_sent,
    /// PSN sequence error NAKs received (the peer missed one of ours).
    psn_naks_received,
    /// Requests beyond the expected PSN after a sequence NAK was sent: the rest of a burst
    /// after a loss, dropped until the resend arrives.
    out_of_sequence,
    /// RNR NAKs sent (a SEND arrived with no receive posted).
    rnr_naks_sent,
    /// RNR NAKs received.
    rnr_naks_received,
    /// Fatal NAKs sent (invalid request, remote access or remote operational error).
    fatal_naks_sent,
    /// Fatal NAKs received.
    fatal_naks_received,
    /// Duplicate requests received (re-acknowledged or answered again).
    duplicate_requests,
    /// Go-back-N retries started (a NAK, a gap or the retransmit timer).
    retries,
    /// Packets sent again by those retries.
    retransmitted_packets,
    /// Retransmit timer expiries.
    retransmit_timeouts,
    /// ACKs not sent because a newer one for the same QP in the same receive batch
    /// acknowledged their requests too (coalesced; ACKs are cumulative).
    acks_coalesced,
}

impl Stats {
    /// The counters as `(name, value)` pairs, with `dropped` (their sum of drops) last.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> =
            Stats::NAMES.into_iter().zip(self.to_array()).collect();
        v.push(("dropped", self.dropped()));
        v
    }

    /// The drop counters by reason: every received datagram the port drops is counted in
    /// exactly one of them.
    pub fn drops(&self) -> [(&'static str, u64); 11] {
        [
            ("icrc_errors", self.icrc_errors),
            ("malformed", self.malformed),
            ("unknown_qp", self.unknown_qp),
            ("pkey_mismatch", self.pkey_mismatch),
            ("wrong_peer", self.wrong_peer),
            ("wrong_state", self.wrong_state),
            ("wrong_transport", self.wrong_transport),
            ("port_down_drops", self.port_down_drops),
            ("qkey_mismatch", self.qkey_mismatch),
            ("no_recv_posted", self.no_recv_posted),
            ("out_of_sequence", self.out_of_sequence),
        ]
    }

    /// Received datagrams dropped for any reason.
    pub fn dropped(&self) -> u64 {
        self.drops().iter().map(|(_, v)| v).sum()
    }

    /// Adds `other` into `self`, counter by counter.
    pub fn add(&mut self, other: &Stats) {
        let mut v = self.to_array();
        for (a, b) in v.iter_mut().zip(other.to_array()) {
            *a += b;
        }
        *self = Stats::from_array(v);
    }
}

/// One [`Stats`] per port, plus what belongs to no port (a completion for a destroyed CQ,
/// a datagram handed in for a port that does not exist).
#[derive(Clone, Debug, Default)]
pub(crate) struct StatsTable {
    ports: Vec<Stats>,
    device: Stats,
}

impl StatsTable {
    /// Counters for `ports` ports.
    pub(crate) fn new(ports: usize) -> Self {
        StatsTable {
            ports: vec![Stats::default(); ports],
            device: Stats::default(),
        }
    }

    /// Port `port`'s counters (1-based); the device's own for a port that does not exist.
    pub(crate) fn at(&mut self, port: u8) -> &mut Stats {
        match self.ports.get_mut(usize::from(port).wrapping_sub(1)) {
            Some(s) => s,
            None => &mut self.device,
        }
    }

    /// The device's own counters (not tied to a port).
    pub(crate) fn device(&mut self) -> &mut Stats {
        &mut self.device
    }

    /// Port `port`'s counters, if it exists.
    pub(crate) fn port(&self, port: u8) -> Option<Stats> {
        self.ports.get(usize::from(port).wrapping_sub(1)).copied()
    }

    /// Everything, summed.
    pub(crate) fn total(&self) -> Stats {
        let mut t = self.device;
        for p in &self.ports {
            t.add(p);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_lists_every_counter_once_and_total_sums_ports() {
        let mut t = StatsTable::new(2);
        t.at(1).icrc_errors = 2;
        t.at(2).icrc_errors = 3;
        t.at(2).wrong_peer = 1;
        t.at(9).malformed = 1; // no such port: the device's own
        t.device().lost_completions = 1;
        let total = t.total();
        assert_eq!(total.icrc_errors, 5);
        assert_eq!(total.dropped(), 7);
        assert_eq!(t.port(2).map(|s| s.dropped()), Some(4));
        assert_eq!(t.port(3), None);
        let names: Vec<&str> = total.named().iter().map(|(n, _)| *n).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        // Each field is listed with its own value: set each to a distinct number.
        let v: [u64; Stats::COUNT] = core::array::from_fn(|i| i as u64 * 3 + 1);
        let s = Stats::from_array(v);
        assert_eq!(s.to_array(), v);
        for (i, (name, value)) in s.named().into_iter().take(Stats::COUNT).enumerate() {
            assert_eq!((name, value), (Stats::NAMES[i], v[i]));
        }
        let mut twice = s;
        twice.add(&s);
        assert_eq!(twice.to_array(), v.map(|x| 2 * x));
    }
}
