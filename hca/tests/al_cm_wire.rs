//! CM MADs on the wire: two soft HCAs on loopback run the Communication Manager over their
//! GSI QPs (UD, QP1) — an RDMA-CM-form connection with REQ/REP/RTU, a REJ for an unknown
//! service, and DREQ/DREP — while dumpcap captures; tshark must dissect every frame as
//! RoCEv2 with a CM MAD and flag nothing as malformed or erroneous.
//!
//! Needs tshark/dumpcap (scripts/test.sh installs them) and capture rights on `lo`;
//! HCA_SKIP_WIRE_CHECK=1 skips it.

use access_layer::cm::{
    AcceptParams, CmConfig, CmEndpoint, CmEvent, ConnId, ConnState, ConnectParams,
};
use access_layer::gsi::port::{GsiPort, GsiPortConfig};
use access_layer::mad::cm::{CmaHeader, RdmaPortSpace};
use access_layer::mad::{MadAddress, Mtu, ServiceId};
use access_layer::verbs::{Device, SyncCa};
use hca::driver::HcaConfig;
use ib_verbs::{Gid, Guid, Psn, Qpn};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

/// One side: an HCA, its GSI glue and a CM.
struct Side {
    dev: Device,
    gsi: GsiPort,
    cm: CmEndpoint,
    events: Vec<CmEvent>,
}

impl Side {
    fn open(ip: IpAddr, guid: u64) -> Side {
        let mut config = HcaConfig::new(Guid(guid), vec![ip]);
        config.gso = false; // every packet its own frame in the capture
        let dev = hca::ca::open_config(config).expect("open HCA");
        SyncCa::new(dev.ca.clone())
            .open_ca(std::sync::Arc::new(|_| {}))
            .expect("open CA");
        let gsi = GsiPort::open(dev.ca.clone(), 1, GsiPortConfig::default()).expect("GSI");
        let cm = CmEndpoint::new(CmConfig {
            local_ca_guid: Guid(guid),
            local_gid: Gid::from_ip(ip),
            port: 1,
            time_wait: Duration::from_millis(20),
            agent_id: guid as u32,
            first_comm_id: 1,
        });
        Side {
            dev,
            gsi,
            cm,
            events: Vec::new(),
        }
    }

    /// Moves MADs both ways and fires CM timers.
    fn pump(&mut self) {
        let Side {
            dev,
            gsi,
            cm,
            events,
        } = self;
        let now = dev.port.now();
        while let Ok(Some((from, mad))) = gsi.recv() {
            cm.handle_mad(now, from, &mad.0);
        }
        if cm.poll_timeout().is_some_and(|t| t <= now) {
            cm.handle_timeout(now);
        }
        while let Some(out) = cm.poll_transmit() {
            gsi.send(&out).expect("send MAD");
        }
        while let Some(ev) = cm.poll_event() {
            events.push(ev);
        }
    }
}

fn run(a: &mut Side, b: &mut Side, until: impl Fn(&Side, &Side) -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        a.pump();
        b.pump();
        if until(a, b) {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

fn first_req(s: &Side) -> Option<ConnId> {
    s.events.iter().find_map(|e| match e {
        CmEvent::ReqReceived { conn, .. } => Some(*conn),
        _ => None,
    })
}

#[test]
fn tshark_dissects_our_cm_mads() {
    if testkit::skip_wire_check() {
        eprintln!("HCA_SKIP_WIRE_CHECK set: wire check skipped");
        return;
    }
    let (a_ip, b_ip) = (
        IpAddr::V4(Ipv4Addr::new(127, 0, 80, 2)),
        IpAddr::V4(Ipv4Addr::new(127, 0, 80, 3)),
    );
    let dir = testkit::scratch_dir("cm-wire");
    let file = dir.join("cm.pcap");
    let cap = testkit::Capture::start(&file, "udp port 4791 and net 127.0.80.0/24");
    let mut a = Side::open(a_ip, 0x5352_5000_0000_8002);
    let mut b = Side::open(b_ip, 0x5352_5000_0000_8003);
    // The RDMA-CM form, as Linux ib_srp's dest=127.0.80.3:5555 would send it.
    let service = ServiceId::rdma_ip(RdmaPortSpace::Tcp, 5555);
    b.cm.listen(service).expect("listen");
    let cma = CmaHeader {
        src_port: 40000,
        src: a_ip,
        dst: b_ip,
    };
    let pd = cma.req_private_data(&[0u8; 56]).expect("private data");
    let params = |service_id, pd: Vec<u8>| ConnectParams {
        to: MadAddress::gsi(1, Gid::from_ip(b_ip)),
        service_id,
        qpn: Qpn::from_wire(0x11),
        receive_psn: Psn::from_wire(0x100),
        responder_resources: 4,
        initiator_depth: 4,
        mtu: Mtu::Mtu1024,
        response_timeout: 18,
        max_retries: 3,
        retry_count: 7,
        rnr_retry_count: 7,
        private_data: pd,
    };
    let now = a.dev.port.now();
    let ca =
        a.cm.connect(now, &params(service, pd.0.to_vec()))
            .expect("connect");
    assert!(
        run(&mut a, &mut b, |_, b| first_req(b).is_some()),
        "REQ did not arrive"
    );
    let cb = first_req(&b).expect("REQ");
    let now = b.dev.port.now();
    let accept = AcceptParams {
        qpn: Qpn::from_wire(0x12),
        receive_psn: Psn::from_wire(0x200),
        responder_resources: 4,
        initiator_depth: 4,
        rnr_retry_count: 7,
        private_data: vec![0xc0; 52],
    };
    b.cm.accept(now, cb, &accept).expect("accept");
    assert!(
        run(&mut a, &mut b, |a, _| a.cm.state(ca)
            == ConnState::RepReceived),
        "REP did not arrive"
    );
    a.cm.confirm(ca).expect("RTU");
    assert!(
        run(&mut a, &mut b, |_, b| b.cm.state(cb)
            == ConnState::Established),
        "RTU did not arrive"
    );
    // A REQ for a service nobody listens on is rejected.
    let now = a.dev.port.now();
    let bad =
        a.cm.connect(now, &params(ServiceId(0x1234), vec![1, 2, 3]))
            .expect("connect");
    assert!(
        run(&mut a, &mut b, |a, _| a.cm.state(bad) == ConnState::Closed),
        "REJ did not arrive"
    );
    // And the connection is torn down.
    let now = a.dev.port.now();
    a.cm.disconnect(now, ca).expect("DREQ");
    assert!(
        run(&mut a, &mut b, |a, b| a.cm.state(ca) == ConnState::TimeWait
            && b.cm.state(cb) == ConnState::TimeWait),
        "DREQ/DREP did not complete"
    );
    let file = cap.stop();
    drop((a, b));

    let ids: Vec<String> = testkit::tshark_field(&file, "infiniband.mad.attributeid");
    let frames = testkit::tshark_field(&file, "frame.number").len();
    assert_eq!(
        ids.len(),
        frames,
        "every frame is a MAD tshark decoded: {ids:?}"
    );
    for want in ["0x0010", "0x0013", "0x0014", "0x0012", "0x0015", "0x0016"] {
        // REQ, REP, RTU, REJ, DREQ, DREP
        assert!(
            ids.iter().any(|i| i == want),
            "attribute {want} missing: {ids:?}"
        );
    }
    let problems = testkit::tshark_problems(&file);
    assert!(
        problems.trim().is_empty(),
        "tshark flags CM frames:\n{problems}"
    );
    let services = testkit::tshark_field(&file, "infiniband.cm.req.serviceid.dport");
    assert!(
        services
            .iter()
            .any(|p| p.trim() == "5555" || p.trim() == "0x15b3"),
        "RDMA-CM port not decoded: {services:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
