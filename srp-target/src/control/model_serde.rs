//! How the control model's borrowed types travel as JSON: the port counters as an object
//! by name, device object counts as an object, port IDs as their `0x…` text.

/// [`ib_verbs::PortCounters`] as `{"rx_packets":1,…}` in the provider's order; read back
/// in the order written.
pub(super) mod counters {
    use ib_verbs::PortCounters;
    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};

    pub(in super::super) fn serialize<S: Serializer>(
        v: &PortCounters,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(v.0.len()))?;
        for (name, value) in v.named() {
            m.serialize_entry(name, &value)?;
        }
        m.end()
    }

    struct InOrder;

    impl<'de> Visitor<'de> for InOrder {
        type Value = PortCounters;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object of counters by name")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PortCounters, A::Error> {
            let mut v = Vec::new();
            while let Some((k, n)) = map.next_entry::<String, u64>()? {
                v.push((k, n));
            }
            Ok(PortCounters(v))
        }
    }

    pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<PortCounters, D::Error> {
        d.deserialize_map(InOrder)
    }
}

/// [`ib_verbs::Resources`] as `{"qps":2,"cqs":2,"srqs":0,"mrs":1}`.
pub(super) mod resources {
    use ib_verbs::Resources;
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
