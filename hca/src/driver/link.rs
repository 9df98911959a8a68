//! The link under a port's address: its MTU, from which the port's active IB MTU follows as
//! rxe derives it (`eth_mtu_int_to_enum`: the netdev MTU less 80 bytes of headers, rounded
//! down to an IB MTU, [`PathMtu::for_link_mtu`]): 1024 at Ethernet's 1500, 4096 at 9000
//! and on loopback.

use crate::wire::PathMtu;
use std::net::IpAddr;
use std::path::Path;

/// What a port's active MTU is when its link cannot be read (rxe's on plain Ethernet).
pub const FALLBACK_MTU: PathMtu = PathMtu::Mtu1024;

/// The name of the interface that holds `ip`: the one with that address, else the one
/// whose subnet holds it (every 127/8 address is lo's, though lo lists only 127.0.0.1/8).
pub fn interface_of(ip: IpAddr) -> Option<String> {
    let mut subnet = None;
    for a in nix::ifaddrs::getifaddrs().ok()? {
        let (Some(addr), Some(mask)) = (a.address, a.netmask) else {
            continue;
        };
        let (exact, within) = match ip {
            IpAddr::V4(v4) => match (addr.as_sockaddr_in(), mask.as_sockaddr_in()) {
                (Some(a), Some(m)) => {
                    let (a, m, x) = (a.ip().to_bits(), m.ip().to_bits(), v4.to_bits());
                    (a == x, a & m == x & m)
                }
                _ => continue,
            },
            IpAddr::V6(v6) => match (addr.as_sockaddr_in6(), mask.as_sockaddr_in6()) {
                (Some(a), Some(m)) => {
                    let (a, m, x) = (a.ip().to_bits(), m.ip().to_bits(), v6.to_bits());
                    (a == x, a & m == x & m)
                }
                _ => continue,
            },
        };
        if exact {
            return Some(a.interface_name);
        }
        if within && subnet.is_none() {
            subnet = Some(a.interface_name);
        }
    }
    subnet
}

fn read_number(path: &Path) -> Option<usize> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The MTU in bytes of the interface that holds `ip`. From `/sys/class/net/<if>/mtu` when
/// that sysfs is this network namespace's (its `ifindex` is the one the kernel gives the
/// name here: a process that entered a namespace with `nsenter --net` still sees the
/// host's sysfs), else from `/proc/sys/net/ipv6/conf/<if>/mtu` (per namespace); `None`
/// when neither answers.
pub fn link_mtu(ip: IpAddr) -> Option<usize> {
    let name = interface_of(ip)?;
    let sys = Path::new("/sys/class/net").join(&name);
    let here = nix::net::if_::if_nametoindex(name.as_str()).ok()?;
    if read_number(&sys.join("ifindex")) == Some(here as usize) {
        if let Some(mtu) = read_number(&sys.join("mtu")) {
            return Some(mtu);
        }
    }
    read_number(&Path::new("/proc/sys/net/ipv6/conf").join(&name).join("mtu"))
}

/// The active IB MTU of a port bound to `ip`, what its link carries after the headers;
/// `None` when the link's MTU cannot be read.
pub fn active_mtu(ip: IpAddr) -> Option<PathMtu> {
    link_mtu(ip).and_then(PathMtu::for_link_mtu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn loopback_carries_4096() {
        // Every 127/8 address is on lo (MTU 65536).
        for lo in [Ipv4Addr::LOCALHOST, Ipv4Addr::new(127, 0, 141, 2)] {
            let lo = IpAddr::V4(lo);
            assert_eq!(interface_of(lo).as_deref(), Some("lo"));
            assert!(link_mtu(lo).is_some_and(|m| m >= 4096 + 80));
            assert_eq!(active_mtu(lo), Some(PathMtu::Mtu4096));
        }
    }

    #[test]
    fn an_address_on_no_interface_falls_back() {
        // Class E (reserved): on no interface of any machine.
        let nowhere = IpAddr::V4(Ipv4Addr::new(240, 0, 0, 77));
        assert_eq!(interface_of(nowhere), None);
        assert_eq!(active_mtu(nowhere), None);
    }
}
