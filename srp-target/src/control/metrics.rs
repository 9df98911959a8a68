//! The target's metrics in the Prometheus text format ([`opskit::metrics::Exposition`]): per
//! LUN (commands, reads, writes, bytes, CHECK CONDITIONs, reservation conflicts, flush
//! errors, capacity, service-time histograms), per session (commands, task management,
//! bytes, CHECK/BUSY/aborted, in flight, window), per IOC (enabled, sessions, LUNs), per
//! port (up, sessions, live device objects, every HCA counter: datagrams, drops by reason,
//! NAKs, retransmits) and the daemon's own tally (logins, rejects, logouts, reloads, events
//! the log could not take). Built by the loop from the same lists the control socket
//! serves; the names are documented in docs/operators-guide.md.

use super::model::{IocStatus, LunStatus, PortStatus, SessionStatus};
use opskit::metrics::Exposition;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the daemon has done since it started, counted as its events go out.
#[derive(Debug, Default)]
pub struct DaemonTally {
    /// Logins accepted.
    pub logins: AtomicU64,
    /// Logins rejected (SRP LOGIN_REJ or CM REJ).
    pub rejects: AtomicU64,
    /// Channels closed.
    pub logouts: AtomicU64,
    /// Reloads applied.
    pub reloads: AtomicU64,
    /// Reloads refused (not valid, or a change that takes a restart).
    pub reload_refusals: AtomicU64,
    /// Events the log reader did not take in time (the queue was full): lost lines.
    pub events_dropped: AtomicU64,
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// The exposition of the lists and the tally.
pub fn render(
    iocs: &[IocStatus],
    ports: &[PortStatus],
    luns: &[LunStatus],
    sessions: &[SessionStatus],
    tally: &DaemonTally,
) -> String {
    let mut e = Exposition::new();
    for (name, help, c) in [
        ("srp_target_logins_total", "Logins accepted.", &tally.logins),
        (
            "srp_target_login_rejects_total",
            "Logins rejected (SRP or CM).",
            &tally.rejects,
        ),
        (
            "srp_target_logouts_total",
            "Channels closed, whatever the reason.",
            &tally.logouts,
        ),
        (
            "srp_target_reloads_total",
            "Configuration reloads applied.",
            &tally.reloads,
        ),
        (
            "srp_target_reload_refusals_total",
            "Configuration reloads refused (nothing applied).",
            &tally.reload_refusals,
        ),
        (
            "srp_target_events_dropped_total",
            "Daemon events lost because the log reader fell behind.",
            &tally.events_dropped,
        ),
    ] {
        e.counter(name, help, &[], get(c));
    }
    for l in luns {
        let labels: &[(&str, &str)] = &[("lun", &l.name)];
        let c = &l.counters;
        for (name, help, v) in [
            (
                "srp_target_lun_commands_total",
                "Commands executed (any status).",
                c.commands,
            ),
            ("srp_target_lun_reads_total", "READ commands.", c.reads),
            (
                "srp_target_lun_writes_total",
                "Medium-modifying commands.",
                c.writes,
            ),
            (
                "srp_target_lun_read_bytes_total",
                "Bytes read by successful READs.",
                c.bytes_read,
            ),
            (
                "srp_target_lun_written_bytes_total",
                "Bytes written by successful medium-modifying commands.",
                c.bytes_written,
            ),
            (
                "srp_target_lun_check_conditions_total",
                "Commands answered CHECK CONDITION.",
                c.check_conditions,
            ),
            (
                "srp_target_lun_reservation_conflicts_total",
                "Commands answered RESERVATION CONFLICT.",
                c.reservation_conflicts,
            ),
            (
                "srp_target_lun_flush_errors_total",
                "Flushes the backend failed.",
                c.flush_errors,
            ),
            (
                "srp_target_lun_writes_held_total",
                "Writes that waited for a copy holding their range.",
                c.writes_held,
            ),
            (
                "srp_target_lun_writes_busy_for_copies_total",
                "Writes answered BUSY because a copy held their range.",
                c.writes_busy_for_copies,
            ),
            (
                "srp_target_lun_copy_collisions_total",
                "Copies that failed because another copy wrote their held source.",
                c.copy_collisions,
            ),
            (
                "srp_target_lun_async_commands_total",
                "Commands started asynchronously on a store with asynchronous I/O (RBD).",
                c.async_commands,
            ),
        ] {
            e.counter(name, help, labels, v);
        }
        e.gauge(
            "srp_target_lun_async_peak",
            "The most asynchronous reads and writes in flight at once on the store.",
            labels,
            c.async_peak as f64,
        );
        e.gauge(
            "srp_target_lun_size_bytes",
            "Capacity.",
            labels,
            (l.blocks * u64::from(l.block_size)) as f64,
        );
        e.gauge(
            "srp_target_lun_flush_failed",
            "1 while a failed flush is latched (flushes and durable writes refused).",
            labels,
            f64::from(u8::from(l.flush_failed)),
        );
        for (op, h) in [
            ("read", &l.latency.read),
            ("write", &l.latency.write),
            ("flush", &l.latency.flush),
        ] {
            e.histogram(
                "srp_target_lun_latency_seconds",
                "Service time of READs, medium-modifying commands and SYNCHRONIZE CACHE.",
                &[("lun", &l.name), ("op", op)],
                h,
            );
        }
    }
    for s in sessions {
        let channel = s.channel.to_string();
        let initiator = s.initiator.to_string();
        let labels: &[(&str, &str)] = &[
            ("channel", &channel),
            ("ioc", &s.ioc),
            ("port", &s.port),
            ("initiator", &initiator),
        ];
        let c = &s.counters;
        for (name, help, v) in [
            (
                "srp_target_session_commands_total",
                "SRP_CMDs received.",
                c.commands,
            ),
            (
                "srp_target_session_task_mgmt_total",
                "SRP_TSK_MGMTs received.",
                c.task_mgmt,
            ),
            (
                "srp_target_session_data_in_bytes_total",
                "Bytes sent to the initiator.",
                c.data_in_bytes,
            ),
            (
                "srp_target_session_data_out_bytes_total",
                "Bytes received from the initiator.",
                c.data_out_bytes,
            ),
            (
                "srp_target_session_check_conditions_total",
                "Responses with CHECK CONDITION.",
                c.check_conditions,
            ),
            (
                "srp_target_session_busy_total",
                "Responses with BUSY (a backend queue was full).",
                c.busy,
            ),
            (
                "srp_target_session_aborted_total",
                "Commands aborted by task management.",
                c.aborted,
            ),
            (
                "srp_target_session_late_task_mgmt_total",
                "Answers given with aborted commands still running on the backend after the drain limit (task management FAILED, or a PREEMPT AND ABORT's GOOD).",
                c.late_task_mgmt,
            ),
            (
                "srp_target_session_send_queue_waits_total",
                "Chains of work requests (a response with its RDMA WRITEs, RDMA READs) that waited for room in the QP's send queue.",
                c.send_queue_waits,
            ),
        ] {
            e.counter(name, help, labels, v);
        }
        e.gauge(
            "srp_target_session_in_flight",
            "Commands in flight now.",
            labels,
            f64::from(s.in_flight),
        );
        e.gauge(
            "srp_target_session_window",
            "Credits granted at login.",
            labels,
            f64::from(s.window),
        );
    }
    for i in iocs {
        let labels: &[(&str, &str)] = &[("ioc", &i.name)];
        e.gauge(
            "srp_target_ioc_enabled",
            "1 if the IOC accepts logins.",
            labels,
            f64::from(u8::from(i.enabled)),
        );
        e.gauge(
            "srp_target_ioc_sessions",
            "Live sessions.",
            labels,
            f64::from(i.sessions),
        );
        e.gauge(
            "srp_target_ioc_luns",
            "LUNs exported.",
            labels,
            f64::from(i.luns),
        );
    }
    for p in ports {
        let labels: &[(&str, &str)] = &[("port", &p.name)];
        e.gauge(
            "srp_target_port_up",
            "1 if the HCA port is up.",
            labels,
            f64::from(u8::from(p.active)),
        );
        e.gauge(
            "srp_target_port_sessions",
            "Live sessions.",
            labels,
            f64::from(p.sessions),
        );
        for (kind, n) in [
            ("qp", p.resources.qps),
            ("cq", p.resources.cqs),
            ("srq", p.resources.srqs),
            ("mr", p.resources.mrs),
        ] {
            e.gauge(
                "srp_target_port_objects",
                "Live device objects (a leak shows here).",
                &[("port", &p.name), ("kind", kind)],
                n as f64,
            );
        }
        for (name, v) in p.hca.named() {
            e.counter(
                "srp_target_hca_total",
                "HCA port counters by name: datagrams, drops by reason, NAKs, retransmits.",
                &[("port", &p.name), ("counter", name)],
                v,
            );
        }
    }
    e.finish()
}
