//! How the control model's borrowed types travel as JSON: the HCA counters as an object
//! by name, device object counts as an object, port IDs as their `0x…` text.

/// [`hca::engine::Stats`] as `{"rx_packets":1,…}` in [`Stats::NAMES`] order; unknown
/// names are ignored and missing ones read 0, so either side may be the newer.
///
/// [`Stats::NAMES`]: hca::engine::Stats::NAMES
pub(super) mod stats {
    use hca::engine::Stats;
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::collections::BTreeMap;

    pub(in super::super) fn serialize<S: Serializer>(v: &Stats, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(Stats::COUNT))?;
        for (name, value) in Stats::NAMES.iter().zip(v.to_array()) {
            m.serialize_entry(name, &value)?;
        }
        m.end()
    }

    pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Stats, D::Error> {
        let by_name = BTreeMap::<String, u64>::deserialize(d)?;
        let mut values = [0u64; Stats::COUNT];
        for (slot, name) in values.iter_mut().zip(Stats::NAMES) {
            *slot = by_name.get(name).copied().unwrap_or(0);
        }
        Ok(Stats::from_array(values))
    }
}

/// [`hca::engine::Resources`] as `{"qps":2,"cqs":2,"srqs":0,"mrs":1}`.
pub(super) mod resources {
    use hca::engine::Resources;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Counts {
        qps: usize,
        cqs: usize,
        #[serde(default)]
        srqs: usize,
        mrs: usize,
    }

    pub(in super::super) fn serialize<S: Serializer>(
        v: &Resources,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        Counts {
            qps: v.qps,
            cqs: v.cqs,
            srqs: v.srqs,
            mrs: v.mrs,
        }
        .serialize(s)
    }

    pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Resources, D::Error> {
        let c = Counts::deserialize(d)?;
        Ok(Resources {
            qps: c.qps,
            cqs: c.cqs,
            srqs: c.srqs,
            mrs: c.mrs,
        })
    }
}

/// [`srp::wire::PortId`] as its text, `"0x0000…"` (32 hex digits).
pub(super) mod port_id {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};
    use srp::wire::PortId;

    pub(in super::super) fn serialize<S: Serializer>(v: &PortId, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<PortId, D::Error> {
        let text = String::deserialize(d)?;
        text.parse()
            .map_err(|e| D::Error::custom(format!("{text:?}: {e}")))
    }
}
