//! HCA port counters in a few words, as the target's port listing and the host's session
//! listing show them: packets both ways, then every non-zero drop reason, NAK and
//! retransmit count (`--json` carries them all).

/// `rx N tx M, <name> <value>, …` for the non-zero counters of `named` (name, value)
/// pairs, as a port's counters list them (`ib_verbs::PortCounters::named`).
pub(crate) fn transport<'a>(named: impl IntoIterator<Item = (&'a str, u64)>) -> String {
    let named: Vec<(&str, u64)> = named.into_iter().collect();
    let get = |k: &str| named.iter().find(|(n, _)| *n == k).map_or(0, |(_, v)| *v);
    let mut out = format!("rx {} tx {}", get("rx_packets"), get("tx_packets"));
    for (k, v) in &named {
        // The sum, and packets accepted from peers that number their IPv4 IDs (Linux rxe),
        // are not worth a word here.
        let quiet = matches!(
            *k,
            "rx_packets" | "tx_packets" | "dropped" | "ipv4_id_nonzero"
        );
        if *v != 0 && !quiet {
            out.push_str(&format!(", {k} {v}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_counters_and_zeros_are_left_out() {
        let named = [
            ("rx_packets", 10),
            ("tx_packets", 9),
            ("icrc_errors", 2),
            ("ipv4_id_nonzero", 10),
            ("wrong_peer", 0),
            ("psn_naks_sent", 1),
            ("dropped", 2),
        ];
        assert_eq!(
            transport(named),
            "rx 10 tx 9, icrc_errors 2, psn_naks_sent 1"
        );
    }
}
