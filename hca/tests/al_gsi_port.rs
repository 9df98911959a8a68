//! The GSI glue on the simulator: more MADs than one CQ batch and than the receive buffers
//! cross between two ports' QP1s, buffers are reposted, the GRH is stripped and the source
//! address comes from the completion.

use access_layer::gsi::{GsiError, GsiPort, GsiPortConfig};
use access_layer::mad::{MadAddress, MadBuf, MadOut};
use access_layer::verbs::{ChannelInterface, SyncCa};
use hca::driver::HcaConfig;
use hca::sim::{FaultConfig, SimNet};
use ib_verbs::{Gid, Guid};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 72, last))
}

/// A simulated one-port device at `ip`, its CA open.
fn device(net: &Arc<SimNet>, guid: u64, ip: IpAddr) -> Arc<dyn ChannelInterface> {
    let config = HcaConfig {
        sim: Some(net.clone()),
        ..HcaConfig::new(Guid(guid), vec![ip])
    };
    let dev = hca::ca::open_config(config).expect("device");
    SyncCa::new(dev.ca.clone())
        .open_ca(Arc::new(|_| {}))
        .expect("open CA");
    dev.ca
}

/// Runs the net for `d` of virtual time.
fn run_for(net: &SimNet, d: std::time::Duration) {
    let end = net.time() + d;
    loop {
        net.settle();
        match net.next_event() {
            Some(t) if t <= end => net.advance_to(t),
            _ => break,
        }
    }
    net.advance_to(end);
    net.settle();
}

#[test]
fn mads_cross_with_buffers_reposted() {
    let net = SimNet::new(9, FaultConfig::default());
    let a = device(&net, 1, ip(11));
    let b = device(&net, 2, ip(12));
    let config = GsiPortConfig {
        recv_bufs: 16,
        send_bufs: 8,
    };
    let mut pa = GsiPort::open(a.clone(), 1, config).expect("a");
    let mut pb = GsiPort::open(b.clone(), 1, config).expect("b");
    assert!(
        GsiPort::open(a.clone(), 1, config).is_err(),
        "one QP1 per port"
    );
    let to_b = MadAddress::gsi(1, Gid::from_ip(ip(12)));
    let wrong = MadOut {
        to: MadAddress { port: 2, ..to_b },
        mad: MadBuf::zeroed(),
    };
    assert_eq!(
        pa.send(&wrong),
        Err(GsiError::WrongPort { want: 2, have: 1 })
    );
    let mut got = Vec::new();
    for round in 0..25u8 {
        for i in 0..4u8 {
            let mut mad = MadBuf::zeroed();
            mad.0[0] = 1;
            mad.0[255] = round;
            mad.0[254] = i;
            pa.send(&MadOut { to: to_b, mad }).expect("send");
        }
        run_for(&net, std::time::Duration::from_millis(1));
        while let Some(m) = pb.recv().expect("recv") {
            got.push(m);
        }
        // Reap a's send completions so its buffers free up.
        assert!(pa.recv().expect("reap").is_none());
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
