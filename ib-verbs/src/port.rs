//! A port's counters as every provider reports them: `(name, value)` pairs in the
//! provider's order, with four names every provider fills (packets both ways, drops,
//! retransmissions), so listings, metrics and the control sockets need no provider's type.
//! The software HCA counts every drop by reason (`hca`'s `Stats`); the rdma-core provider
//! reads the kernel's port and hardware counters.

use alloc::string::String;
use alloc::vec::Vec;

/// Packets received.
pub const RX_PACKETS: &str = "rx_packets";
/// Packets sent.
pub const TX_PACKETS: &str = "tx_packets";
/// Received packets dropped, for any reason (the sum of the reasons where a provider
/// counts them apart).
pub const DROPPED: &str = "dropped";
/// Packets sent again (transport retries).
pub const RETRANSMITTED: &str = "retransmitted_packets";

/// One port's counters by name. See the module doc.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortCounters(pub Vec<(String, u64)>);

impl PortCounters {
    /// Counters from `(name, value)` pairs, in their order.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> PortCounters {
        PortCounters(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// The counter named `name`; 0 when the provider has none by that name.
    pub fn get(&self, name: &str) -> u64 {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }

    /// Packets received.
    pub fn rx_packets(&self) -> u64 {
        self.get(RX_PACKETS)
    }

    /// Packets sent.
    pub fn tx_packets(&self) -> u64 {
        self.get(TX_PACKETS)
    }

    /// Received packets dropped.
    pub fn dropped(&self) -> u64 {
        self.get(DROPPED)
    }

    /// Packets sent again.
    pub fn retransmitted(&self) -> u64 {
        self.get(RETRANSMITTED)
    }

    /// The pairs, as `(&str, u64)`.
    pub fn named(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Adds `other` into `self`, counter by counter (names `self` lacks are appended).
    pub fn add(&mut self, other: &PortCounters) {
        for (name, v) in &other.0 {
            match self.0.iter_mut().find(|(n, _)| n == name) {
                Some((_, mine)) => *mine += v,
                None => self.0.push((name.clone(), *v)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn well_known_names_read_and_missing_ones_are_zero() {
        let mut c = PortCounters::from_pairs([("rx_packets", 3), ("dropped", 1)]);
        assert_eq!((c.rx_packets(), c.tx_packets(), c.dropped()), (3, 0, 1));
        c.add(&PortCounters::from_pairs([
            ("rx_packets", 2),
            ("tx_packets", 5),
        ]));
        assert_eq!(
            c.named().collect::<Vec<_>>(),
            vec![("rx_packets", 5), ("dropped", 1), ("tx_packets", 5)]
        );
    }
}
