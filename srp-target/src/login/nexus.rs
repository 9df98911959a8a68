//! Channels by I_T nexus: an SRP initiator port and a target port (SRP r16a 3.1: an I_T
//! nexus may hold several RDMA channels; MULTI-CHANNEL ACTION single replaces them all).

use ib_verbs::Gid;
use srp::wire::PortId;
use std::collections::BTreeMap;
use std::fmt;

/// A channel of the target, unique for the daemon's lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelId(pub u64);

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ch{}", self.0)
    }
}

/// An I_T nexus: (initiator port identifier, target port identifier) from the login.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NexusKey {
    /// INITIATOR PORT IDENTIFIER.
    pub initiator: PortId,
    /// TARGET PORT IDENTIFIER.
    pub target: PortId,
}

/// Which live channels belong to which nexus.
#[derive(Debug, Default)]
pub struct NexusTable {
    by_nexus: BTreeMap<NexusKey, Vec<ChannelId>>,
    by_channel: BTreeMap<ChannelId, NexusKey>,
    /// The address each channel logged in from, where known.
    from: BTreeMap<ChannelId, Gid>,
}

impl NexusTable {
    /// An empty table.
    pub fn new() -> NexusTable {
        NexusTable::default()
    }

    /// The live channels of `nexus`, oldest first.
    pub fn channels(&self, nexus: &NexusKey) -> &[ChannelId] {
        self.by_nexus.get(nexus).map_or(&[], Vec::as_slice)
    }

    /// The nexus `ch` belongs to.
    pub fn nexus_of(&self, ch: ChannelId) -> Option<&NexusKey> {
        self.by_channel.get(&ch)
    }

    /// Adds an accepted channel to its nexus (a channel belongs to one nexus only; adding it
    /// again moves it).
    pub fn add(&mut self, nexus: NexusKey, ch: ChannelId) {
        self.remove(ch);
        self.by_nexus.entry(nexus).or_default().push(ch);
        self.by_channel.insert(ch, nexus);
    }

    /// [`NexusTable::add`] for a channel that logged in from `from`.
    pub fn add_from(&mut self, nexus: NexusKey, ch: ChannelId, from: Gid) {
        self.add(nexus, ch);
        self.from.insert(ch, from);
    }

    /// Whether a live channel of `nexus` logged in from another address than `from`.
    pub fn has_channel_from_elsewhere(&self, nexus: &NexusKey, from: Gid) -> bool {
        self.channels(nexus)
            .iter()
            .any(|ch| self.from.get(ch).is_some_and(|g| *g != from))
    }

    /// Forgets a closed channel; returns its nexus if it was known.
    pub fn remove(&mut self, ch: ChannelId) -> Option<NexusKey> {
        self.from.remove(&ch);
        let nexus = self.by_channel.remove(&ch)?;
        if let Some(list) = self.by_nexus.get_mut(&nexus) {
            list.retain(|c| *c != ch);
            if list.is_empty() {
                self.by_nexus.remove(&nexus);
            }
        }
        Some(nexus)
    }

    /// Number of live channels.
    pub fn len(&self) -> usize {
        self.by_channel.len()
    }

    /// Whether no channel is live.
    pub fn is_empty(&self) -> bool {
        self.by_channel.is_empty()
    }

    /// Every nexus with its channels.
    pub fn iter(&self) -> impl Iterator<Item = (&NexusKey, &[ChannelId])> {
        self.by_nexus.iter().map(|(k, v)| (k, v.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8, t: u8) -> NexusKey {
        NexusKey {
            initiator: PortId([i; 16]),
            target: PortId([t; 16]),
        }
    }

    #[test]
    fn channels_grouped_by_nexus_and_removed_cleanly() {
        let mut t = NexusTable::new();
        t.add(key(1, 9), ChannelId(1));
        t.add(key(1, 9), ChannelId(2));
        t.add(key(2, 9), ChannelId(3));
        assert_eq!(t.channels(&key(1, 9)), &[ChannelId(1), ChannelId(2)]);
        assert_eq!(t.nexus_of(ChannelId(3)), Some(&key(2, 9)));
        assert_eq!(t.remove(ChannelId(1)), Some(key(1, 9)));
        assert_eq!(t.remove(ChannelId(1)), None);
        assert_eq!(t.remove(ChannelId(2)), Some(key(1, 9)));
        assert!(t.channels(&key(1, 9)).is_empty());
        assert_eq!(t.len(), 1);
        assert_eq!(t.iter().count(), 1);
        t.add(key(1, 9), ChannelId(3));
        assert!(t.channels(&key(2, 9)).is_empty());
        assert_eq!(t.len(), 1);
        assert!(!t.is_empty());
    }

    #[test]
    fn where_a_nexus_logged_in_from_is_known() {
        let g = |n: u8| Gid::from_ip(std::net::IpAddr::from([127, 0, 0, n]));
        let mut t = NexusTable::new();
        assert!(
            !t.has_channel_from_elsewhere(&key(1, 9), g(2)),
            "no channel"
        );
        t.add_from(key(1, 9), ChannelId(1), g(2));
        t.add_from(key(1, 9), ChannelId(2), g(2));
        assert!(!t.has_channel_from_elsewhere(&key(1, 9), g(2)));
        assert!(t.has_channel_from_elsewhere(&key(1, 9), g(3)));
        assert!(
            !t.has_channel_from_elsewhere(&key(2, 9), g(3)),
            "another nexus"
        );
        t.remove(ChannelId(1));
        t.remove(ChannelId(2));
        assert!(
            !t.has_channel_from_elsewhere(&key(1, 9), g(3)),
            "gone with its channels"
        );
    }
}
