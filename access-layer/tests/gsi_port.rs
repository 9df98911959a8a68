//! The GSI glue on the simulator: more MADs than one CQ batch and than the receive buffers
//! cross between two ports' QP1s, buffers are reposted, the GRH is stripped and the source
//! address comes from the completion.

use access_layer::gsi::{GsiError, GsiPort, GsiPortConfig};
use access_layer::mad::{MadAddress, MadBuf, MadOut};
use hca::engine::Engine;
use hca::sim::{Fabric, FaultConfig};
use hca::{Gid, Guid};
use std::net::{IpAddr, Ipv4Addr};

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 72, last))
}

#[test]
fn mads_cross_with_buffers_reposted() {
    let mut f = Fabric::new(9, FaultConfig::default());
    let a = f.add(Engine::new(Guid(1), &[ip(11)]));
    let b = f.add(Engine::new(Guid(2), &[ip(12)]));
    let now = f.now();
    let config = GsiPortConfig {
        recv_bufs: 16,
        send_bufs: 8,
    };
    let mut pa = GsiPort::open(f.hca(a), now, 1, config).expect("a");
    let mut pb = GsiPort::open(f.hca(b), now, 1, config).expect("b");
    assert!(
        GsiPort::open(f.hca(a), now, 1, config).is_err(),
        "one QP1 per port"
    );
    let to_b = MadAddress::gsi(1, Gid::from_ip(ip(12)));
    let wrong = MadOut {
        to: MadAddress { port: 2, ..to_b },
        mad: MadBuf::zeroed(),
    };
    assert_eq!(
        pa.send(f.hca(a), now, &wrong),
        Err(GsiError::WrongPort { want: 2, have: 1 })
    );
    let mut got = Vec::new();
    for round in 0..25u8 {
        for i in 0..4u8 {
            let mut mad = MadBuf::zeroed();
            mad.0[0] = 1;
            mad.0[255] = round;
            mad.0[254] = i;
            let now = f.now();
            pa.send(f.hca(a), now, &MadOut { to: to_b, mad })
                .expect("send");
        }
        f.run_until(std::time::Duration::from_millis(1), |_| false);
        let now = f.now();
        while let Some(m) = pb.recv(f.hca(b), now).expect("recv") {
            got.push(m);
        }
        // Reap a's send completions so its buffers free up.
        assert!(pa.recv(f.hca(a), now).expect("reap").is_none());
    }
    assert_eq!(got.len(), 100);
    let from = MadAddress::gsi(1, Gid::from_ip(ip(11)));
    for (n, (src, mad)) in got.iter().enumerate() {
        assert_eq!(*src, from);
        assert_eq!(
            (mad.0[0], mad.0[255], mad.0[254]),
            (1, (n / 4) as u8, (n % 4) as u8)
        );
    }
    assert_eq!((pa.stats().sent, pb.stats().received), (100, 100));
    assert_eq!(pb.stats().recv_dropped, 0);
}
