//! The impairable links between two namespaces, with `tc netem` or with the impairer, and
//! the probe that picks one.

use super::model::Impairment;
use super::relay::{Impairer, Stats};
use crate::netns::{Netns, VethPair};
use crate::process::output_within;
use std::process::Command;
use std::time::{Duration, Instant};

/// One link: an interface and its address in each namespace.
#[derive(Clone, Debug)]
pub struct Link {
    /// The interface in the first namespace (e.g. `t1`).
    pub a: String,
    /// Its address (a /24).
    pub addr_a: String,
    /// The interface in the second namespace (e.g. `h1`).
    pub b: String,
    /// Its address.
    pub addr_b: String,
}

/// How the links are impaired.
enum Kind {
    /// `tc netem` on both ends of each veth pair.
    Tc { ns_a: String, ns_b: String },
    /// The impairer in the wire namespace. Field order: the thread stops before its
    /// namespace goes.
    Userspace { impairer: Impairer, _wire: Netns },
}

/// Links between two namespaces, every direction impairable; unimpaired when made.
/// Dropped before or after the namespaces they join (the interfaces go with them).
pub struct ChaosLinks {
    kind: Kind,
    links: Vec<Link>,
}

/// Whether the kernel has sch_netem: a netem qdisc added on a scratch veth in a scratch
/// namespace.
pub fn kernel_has_netem() -> bool {
    let ns = Netns::new("netem-probe");
    ns.ip(&["link", "add", "pa", "type", "veth", "peer", "name", "pb"]);
    Command::new("tc")
        .args([
            "-n",
            ns.name(),
            "qdisc",
            "add",
            "dev",
            "pa",
            "root",
            "netem",
        ])
        .args(["delay", "1ms"])
        .output()
        .is_ok_and(|o| o.status.success())
}

impl ChaosLinks {
    /// Joins `ns_a` and `ns_b` with `links`: with `tc netem` if the kernel has it (and
    /// `SRP_NETEM` is not `userspace`), else through a wire namespace and the impairer
    /// (seeded with `seed`). Returns once every link carries pings both ways.
    pub fn new(ns_a: &Netns, ns_b: &Netns, links: &[Link], seed: u64) -> ChaosLinks {
        let forced = std::env::var("SRP_NETEM").is_ok_and(|v| v == "userspace");
        let kind = if !forced && kernel_has_netem() {
            eprintln!("netem: the kernel's (tc qdisc … netem)");
            for l in links {
                VethPair::new(ns_a, &l.a, &l.addr_a, ns_b, &l.b, &l.addr_b);
            }
            Kind::Tc {
                ns_a: ns_a.name().to_owned(),
                ns_b: ns_b.name().to_owned(),
            }
        } else {
            eprintln!(
                "netem: the userspace impairer ({}; seed {seed:#x})",
                if forced {
                    "SRP_NETEM=userspace"
                } else {
                    "the kernel has no sch_netem"
                }
            );
            Self::through_wire(ns_a, ns_b, links, seed)
        };
        let chaos = ChaosLinks {
            kind,
            links: links.to_vec(),
        };
        for (l, link) in links.iter().enumerate() {
            chaos.wait_for_pings(ns_a, ns_b, link, l);
        }
        chaos
    }

    /// The wire namespace with `wa{i}`/`wb{i}` for each link, and the impairer.
    fn through_wire(ns_a: &Netns, ns_b: &Netns, links: &[Link], seed: u64) -> Kind {
        let wire = Netns::new("srpt-wire");
        // The wire's own interfaces say nothing: no addresses, no IPv6.
        let mut sysctl = wire.exec("sysctl");
        sysctl.args([
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ]);
        let out = output_within(sysctl, 10);
        assert!(
            out.status.success(),
            "sysctl in the wire namespace: {out:?}"
        );
        let mut ends = Vec::new();
        for (i, l) in links.iter().enumerate() {
            let (wa, wb) = (format!("wa{}", i + 1), format!("wb{}", i + 1));
            VethPair::create(ns_a, &l.a, Some(&l.addr_a), &wire, &wa, None);
            VethPair::create(&wire, &wb, None, ns_b, &l.b, Some(&l.addr_b));
            for w in [&wa, &wb] {
                wire.ip(&["link", "set", w, "promisc", "on"]);
            }
            // The impairer forwards frames, not GSO bursts: the sending veth segments
            // (as a NIC would) when it may pass only one segment on.
            ns_a.ip(&["link", "set", "dev", &l.a, "gso_max_segs", "1"]);
            ns_b.ip(&["link", "set", "dev", &l.b, "gso_max_segs", "1"]);
            ends.push((wa, wb));
        }
        Kind::Userspace {
            impairer: Impairer::start(wire.name(), &ends, seed),
            _wire: wire,
        }
    }

    /// Pings across `link` from each side in turn until both get answers (the impairer
    /// learns each end's address from its first frames), up to 20 s.
    fn wait_for_pings(&self, ns_a: &Netns, ns_b: &Netns, link: &Link, l: usize) {
        let end = Instant::now() + Duration::from_secs(20);
        let mut ok = [false, false];
        while ok != [true, true] {
            for (side, (ns, to)) in [(ns_a, &link.addr_b), (ns_b, &link.addr_a)]
                .into_iter()
                .enumerate()
            {
                if !ok[side] {
                    let mut ping = ns.exec("ping");
                    ping.args(["-c", "1", "-W", "1", to]);
                    ok[side] = output_within(ping, 5).status.success();
                }
            }
            assert!(
                Instant::now() < end,
                "link {} ({} ⇄ {}) carries no pings within 20 s (answered: {ok:?}); {}",
                l + 1,
                link.addr_a,
                link.addr_b,
                self.report()
            );
        }
    }

    /// Applies `imp` to both directions of every link (`Impairment::NONE`: none).
    pub fn impair(&self, imp: Impairment) {
        match &self.kind {
            Kind::Userspace { impairer, .. } => impairer.set(imp),
            Kind::Tc { ns_a, ns_b } => {
                for l in &self.links {
                    for (ns, dev) in [(ns_a, &l.a), (ns_b, &l.b)] {
                        let mut tc = Command::new("tc");
                        tc.args(["-n", ns, "qdisc"]);
                        if imp == Impairment::NONE {
                            tc.args(["del", "dev", dev, "root"]);
                        } else {
                            tc.args(["replace", "dev", dev, "root", "netem"])
                                .args(imp.tc_args());
                        }
                        let out = output_within(tc, 10);
                        assert!(
                            out.status.success() || imp == Impairment::NONE,
                            "tc on {dev}: {}",
                            String::from_utf8_lossy(&out.stderr)
                        );
                    }
                }
            }
        }
    }

    /// The impairer's counters (`None` with `tc netem`).
    pub fn stats(&self) -> Option<Stats> {
        match &self.kind {
            Kind::Userspace { impairer, .. } => Some(impairer.stats()),
            Kind::Tc { .. } => None,
        }
    }

    /// What was done to the frames, for the log: the impairer's counters per link and
    /// direction, or `tc -s qdisc show` of each end.
    pub fn report(&self) -> String {
        match &self.kind {
            Kind::Userspace { impairer, .. } => {
                let s = impairer.stats();
                let mut out = String::new();
                for (i, l) in self.links.iter().enumerate() {
                    let (ab, ba) = s.link(i);
                    out += &format!(
                        "link {}: {} → {}: {ab}\n        {} → {}: {ba}\n",
                        i + 1,
                        l.a,
                        l.b,
                        l.b,
                        l.a
                    );
                }
                out += &format!(
                    "dropped besides loss: {} before the ends were known, {} send errors \
                     ({}), {} by the kernel before the socket, {} truncated; {} frames \
                     on other interfaces; {} checksums completed, {} malformed frames; \
                     at most {} frames queued{}",
                    s.unlearned,
                    s.send_errors,
                    s.last_send_error.as_deref().unwrap_or("none"),
                    s.kernel_drops,
                    s.truncated,
                    s.foreign,
                    s.sums_written,
                    s.malformed,
                    s.max_queued,
                    s.failed
                        .map(|e| format!("; THE IMPAIRER FAILED: {e}"))
                        .unwrap_or_default()
                );
                out
            }
            Kind::Tc { ns_a, ns_b } => {
                let mut out = String::new();
                for l in &self.links {
                    for (ns, dev) in [(ns_a, &l.a), (ns_b, &l.b)] {
                        let mut tc = Command::new("tc");
                        tc.args(["-s", "-n", ns, "qdisc", "show", "dev", dev]);
                        let o = output_within(tc, 10);
                        out += &format!("{dev}: {}", String::from_utf8_lossy(&o.stdout));
                    }
                }
                out
            }
        }
    }
}
