//! The host daemon's metrics in the Prometheus text format ([`opskit::metrics::Exposition`]),
//! from what its control interface lists: per disk (I/O by kind, errors, failovers, queued,
//! latency histograms), per path (state, in flight, I/O, bytes, errors, failures, HCA
//! drops, retransmits) and per session (state, logins, losses, resets, outstanding, every
//! HCA counter of its port). Served by `srpctl host run --metrics ADDR` and printed by
//! `srpctl host metrics`; the metric names are documented in docs/operators-guide.md.

use crate::control::{DiskInfo, SessionInfo};
use opskit::metrics::Exposition;

/// The exposition of `sessions` and `disks`.
pub fn render(sessions: &[SessionInfo], disks: &[DiskInfo]) -> String {
    let mut e = Exposition::new();
    for d in disks {
        let l: &[(&str, &str)] = &[("disk", &d.name)];
        let c = |e: &mut Exposition, n: &str, h: &str, v: u64| e.counter(n, h, l, v);
        c(
            &mut e,
            "srp_host_disk_reads_total",
            "Reads completed.",
            d.reads,
        );
        c(
            &mut e,
            "srp_host_disk_writes_total",
            "Writes completed.",
            d.writes,
        );
        c(
            &mut e,
            "srp_host_disk_flushes_total",
            "Flushes completed.",
            d.flushes,
        );
        c(
            &mut e,
            "srp_host_disk_errors_total",
            "I/Os failed to the disk's user (EIO).",
            d.errors,
        );
        c(
            &mut e,
            "srp_host_disk_failovers_total",
            "I/Os moved to another path after a path failure.",
            d.failovers,
        );
        e.gauge(
            "srp_host_disk_queued",
            "I/Os waiting for a usable path now.",
            l,
            f64::from(d.queued),
        );
        e.gauge(
            "srp_host_disk_size_bytes",
            "Capacity.",
            l,
            (d.blocks * u64::from(d.block_size)) as f64,
        );
        let usable = d
            .paths
            .iter()
            .filter(|p| p.state == "active" || p.state == "standby")
            .count();
        e.gauge(
            "srp_host_disk_paths_usable",
            "Paths active or standby now (0: I/O queues or fails).",
            l,
            usable as f64,
        );
        for (op, h) in [
            ("read", &d.latency.read),
            ("write", &d.latency.write),
            ("flush", &d.latency.flush),
        ] {
            e.histogram(
                "srp_host_disk_latency_seconds",
                "Completed I/O latency on the path that served it.",
                &[("disk", &d.name), ("op", op)],
                h,
            );
        }
        for p in &d.paths {
            let session = p.session.to_string();
            let l: &[(&str, &str)] = &[
                ("disk", &d.name),
                ("session", &session),
                ("ioc", &p.ioc_name),
            ];
            e.gauge(
                "srp_host_path_up",
                "1 if the path is active or standby, 0 if failed, down or verifying.",
                l,
                f64::from(u8::from(p.state == "active" || p.state == "standby")),
            );
            e.gauge(
                "srp_host_path_in_flight",
                "Commands on the path now.",
                l,
                f64::from(p.in_flight),
            );
            e.counter(
                "srp_host_path_reads_total",
                "Reads completed on the path.",
                l,
                p.reads,
            );
            e.counter(
                "srp_host_path_writes_total",
                "Writes completed on the path.",
                l,
                p.writes,
            );
            e.counter(
                "srp_host_path_bytes_total",
                "Bytes moved on the path.",
                l,
                p.bytes,
            );
            e.counter(
                "srp_host_path_errors_total",
                "Commands failed on the path.",
                l,
                p.errors,
            );
            e.counter(
                "srp_host_path_failures_total",
                "Times the path was failed.",
                l,
                p.failures,
            );
            e.counter(
                "srp_host_path_hca_dropped_total",
                "Datagrams its HCA port dropped (every reason).",
                l,
                p.hca_dropped,
            );
            e.counter(
                "srp_host_path_retransmits_total",
                "RC retransmissions of its HCA port.",
                l,
                p.retransmits,
            );
        }
    }
    for s in sessions {
        let id = s.id.to_string();
        let l: &[(&str, &str)] = &[
            ("session", &id),
            ("ioc", &s.ioc_name),
            ("portal", &s.portal.to_string()),
        ];
        e.gauge(
            "srp_host_session_running",
            "1 if the session is logged in and running.",
            l,
            f64::from(u8::from(s.state == "running")),
        );
        e.counter(
            "srp_host_session_logins_total",
            "Logins of the session (reconnects + 1).",
            l,
            s.logins,
        );
        e.counter(
            "srp_host_session_losses_total",
            "Times the session's channel was lost.",
            l,
            s.losses,
        );
        for (kind, value) in [
            ("sequences", s.resets.sequences),
            ("lun_resets", s.resets.lun_resets),
            ("refused", s.resets.refused),
            ("escalated", s.resets.escalated),
        ] {
            let labels: &[(&str, &str)] = &[("session", &id), ("kind", kind)];
            e.counter(
                "srp_host_session_resets_total",
                "Bus and device resets by kind: sequences started, LOGICAL UNIT RESETs answered and refused, resets escalated to a channel reset.",
                labels,
                value,
            );
        }
        e.gauge(
            "srp_host_session_outstanding",
            "Commands outstanding on the channel now.",
            l,
            f64::from(s.outstanding),
        );
        for (name, value) in &s.hca {
            let labels: &[(&str, &str)] = &[("session", &id), ("counter", name)];
            e.counter(
                "srp_host_hca_total",
                "The session's HCA port counters by name: datagrams, drops by reason, NAKs, retransmits.",
                labels,
                *value,
            );
        }
    }
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ResetInfo;

    fn session(resets: ResetInfo) -> SessionInfo {
        SessionInfo {
            id: 7,
            portal: "127.0.0.1".parse().expect("ip"),
            local: "127.0.0.2".parse().expect("ip"),
            ioc_guid: "0x0002c90300a1b2c3".into(),
            ioc_name: "ioc0".into(),
            id_ext: "0x0000000000000001".into(),
            service_id: "0x0002c90300a1b2c3".into(),
            state: "running".into(),
            logins: 2,
            losses: 1,
            last_error: None,
            outstanding: 0,
            disks: Vec::new(),
            login: "ib-cm".into(),
            driver: "storport".into(),
            hca: Default::default(),
            provider: "soft soft:10.0.0.2:4791 port 1".into(),
            fencing: "per-io".into(),
            resets,
        }
    }

    /// Each kind of reset is a series of its own, zero included (a rate needs the zero).
    #[test]
    fn a_sessions_resets_are_counted_by_kind() {
        let text = render(
            &[session(ResetInfo {
                sequences: 1,
                lun_resets: 3,
                refused: 0,
                escalated: 1,
            })],
            &[],
        );
        for (kind, value) in [
            ("sequences", 1),
            ("lun_resets", 3),
            ("refused", 0),
            ("escalated", 1),
        ] {
            let series =
                format!("srp_host_session_resets_total{{session=\"7\",kind=\"{kind}\"}} {value}\n");
            assert!(text.contains(&series), "{series} missing from\n{text}");
        }
        assert_eq!(
            text.matches("# TYPE srp_host_session_resets_total counter")
                .count(),
            1
        );
    }
}
