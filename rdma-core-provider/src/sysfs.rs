//! A port's counters from the kernel (`/sys/class/infiniband/<dev>/ports/<n>/counters`
//! and `hw_counters`), with the four names every provider fills mapped from what the
//! device has: packets both ways (the port's `port_rcv_packets` / `port_xmit_packets`, or
//! rxe's `rcvd_pkts` / `sent_pkts`), drops (`port_rcv_errors`), retransmissions (rxe's
//! `completer_retry_err`, mlx5's `local_ack_timeout_err`). Every counter the device has
//! follows under its own name.

use ib_verbs::PortCounters;
use ib_verbs::port::{DROPPED, RETRANSMITTED, RX_PACKETS, TX_PACKETS};
use std::path::Path;

/// The counters of `device` port `port` (empty where sysfs has none).
pub(crate) fn counters(device: &str, port: u8) -> PortCounters {
    let base = Path::new("/sys/class/infiniband")
        .join(device)
        .join("ports")
        .join(port.to_string());
    let mut all: Vec<(String, u64)> = Vec::new();
    for dir in ["counters", "hw_counters"] {
        let Ok(rd) = std::fs::read_dir(base.join(dir)) else {
            continue;
        };
        let mut names: Vec<_> = rd.flatten().map(|e| e.file_name()).collect();
        names.sort();
        for n in names {
            let name = n.to_string_lossy().into_owned();
            let v = std::fs::read_to_string(base.join(dir).join(&n))
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok());
            if let Some(v) = v {
                all.push((name, v));
            }
        }
    }
    PortCounters(well_known(all))
}

/// `raw` with the four well-known names first, mapped as the module doc says.
pub(crate) fn well_known(raw: Vec<(String, u64)>) -> Vec<(String, u64)> {
    let get = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| raw.iter().find(|(k, _)| k == n).map(|(_, v)| *v))
            .unwrap_or(0)
    };
    let mut out = vec![
        (
            RX_PACKETS.to_owned(),
            get(&["port_rcv_packets", "rcvd_pkts"]),
        ),
        (
            TX_PACKETS.to_owned(),
            get(&["port_xmit_packets", "sent_pkts"]),
        ),
        (DROPPED.to_owned(), get(&["port_rcv_errors"])),
        (
            RETRANSMITTED.to_owned(),
            get(&["completer_retry_err", "local_ack_timeout_err"]),
        ),
    ];
    out.extend(raw);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rxe_and_mlx5_counters_fill_the_well_known_names() {
        let rxe = well_known(vec![
            ("rcvd_pkts".into(), 10),
            ("sent_pkts".into(), 12),
            ("completer_retry_err".into(), 3),
        ]);
        let c = PortCounters(rxe);
        assert_eq!(
            (c.rx_packets(), c.tx_packets(), c.retransmitted()),
            (10, 12, 3)
        );
        assert_eq!(c.get("rcvd_pkts"), 10, "the raw names stay");
        let mlx = PortCounters(well_known(vec![
            ("port_rcv_packets".into(), 5),
            ("port_xmit_packets".into(), 6),
            ("port_rcv_errors".into(), 1),
            ("local_ack_timeout_err".into(), 2),
        ]));
        assert_eq!(
            (
                mlx.rx_packets(),
                mlx.tx_packets(),
                mlx.dropped(),
                mlx.retransmitted()
            ),
            (5, 6, 1, 2)
        );
    }
}
