//! The connection-manager seam over the access layer's own CM on QP1
//! (`access_layer::mads::MadService`), end to end on two simulated software HCAs: an
//! RDMA-CM-form connection whose private data arrives without the cma header and with its
//! addresses, QP attributes from `qp_attrs` that connect both QPs (a SEND crosses each
//! way), a consumer's reject with its private data, and a disconnect seen by the peer. The
//! same calls run over rdma-core's librdmacm in the Linux guest (tests/interop).

use access_layer::cm::{
    AcceptRequest, CmSetup, ConnEvent, ConnId, ConnState, ConnectRequest, ConnectionManager,
    DeviceManagement,
};
use access_layer::mad::ServiceId;
use access_layer::mad::cm::{CmRejReason, RdmaPortSpace};
use access_layer::verbs::{ChannelInterface, Device, DeviceSpec, Fabric, MrSpec, SyncCa};
use hca::ca::SimFabric;
use hca::sim::{FaultConfig, SimNet};
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrKeys};
use ib_verbs::qp::QpInit;
use ib_verbs::wr::{RecvWr, SendFlags, SendOp, SendWr, Sge, Wc, WcOpcode, WcStatus};
use ib_verbs::{CqId, Gid, Guid, QpId, Qpn};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 74, last))
}

/// One side: a simulated device, its connection manager, an RC QP with a CQ and memory.
struct Side {
    dev: Device,
    cm: Box<dyn ConnectionManager>,
    cq: CqId,
    qp: QpId,
    qpn: Qpn,
    mem: Arc<MemBlock>,
    mr: MrKeys,
    events: Vec<ConnEvent>,
}

impl Side {
    fn open(net: &Arc<SimNet>, last: u8) -> Side {
        let fabric = SimFabric(net.clone());
        let dev = fabric
            .open(&DeviceSpec::soft(
                SocketAddr::new(ip(last), 4791),
                Guid(0x5352_4d00_0000_0000 | u64::from(last)),
            ))
            .expect("device");
        let sync = SyncCa::new(dev.ca.clone());
        sync.open_ca(Arc::new(|_| {})).expect("open CA");
        let setup = CmSetup {
            time_wait: Duration::from_millis(20),
            agent_id: u32::from(last),
            first_comm_id: (fabric.random() as u32).max(1),
        };
        let cm =
            access_layer::mads::open_connection_manager(&dev, &setup, DeviceManagement::default())
                .expect("connection manager");
        let pd = sync.alloc_pd().expect("pd");
        let mem = MemBlock::new(4096);
        let mr = sync
            .reg_mr(
                pd,
                MrSpec {
                    block: mem.clone(),
                    offset: 0,
                    len: 4096,
                    iova: 0x1000,
                    access: Access::LOCAL_WRITE,
                },
            )
            .expect("mr");
        let cq = sync.create_cq(64).expect("cq");
        let qp = sync.create_qp(QpInit::rc(pd, cq, 16, 16)).expect("qp");
        let QpId::Qp(qpn) = qp else {
            panic!("an RC QP")
        };
        Side {
            dev,
            cm,
            cq,
            qp,
            qpn,
            mem,
            mr,
            events: Vec::new(),
        }
    }

    fn ca(&self) -> &Arc<dyn ChannelInterface> {
        &self.dev.ca
    }

    fn pump(&mut self) {
        let now = self.dev.port.now();
        self.cm.poll(now);
        while let Some(ev) = self.cm.poll_event() {
            self.events.push(ev);
        }
    }

    /// Connects the QP from the connection manager's attributes.
    fn connect_qp(&mut self, conn: ConnId) {
        let rc = self.cm.qp_attrs(conn).expect("qp attributes");
        SyncCa::new(self.ca().clone())
            .connect_rc(self.qp, rc)
            .expect("connect_rc");
        let wr = RecvWr {
            wr_id: 7,
            sg_list: [Sge {
                addr: 0x1000 + 2048,
                len: 2048,
                lkey: self.mr.lkey,
            }]
            .into(),
        };
        self.ca().post_recv(self.qp, wr).expect("recv");
    }

    /// Sends `bytes` on the QP.
    fn send(&self, bytes: &[u8]) {
        self.mem.write(0, bytes).expect("write");
        let wr = SendWr {
            wr_id: 1,
            op: SendOp::Send,
            sg_list: [Sge {
                addr: 0x1000,
                len: bytes.len() as u32,
                lkey: self.mr.lkey,
            }]
            .into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        self.ca().post_send(self.qp, wr).expect("send");
    }

    /// What completed.
    fn wcs(&self) -> Vec<Wc> {
        let mut out = Vec::new();
        self.ca().poll_cq(self.cq, 64, &mut out).expect("poll");
        out
    }
}

/// Runs the net and both connection managers for `d` of virtual time.
fn run(net: &SimNet, a: &mut Side, b: &mut Side, d: Duration) {
    let end = net.time() + d;
    loop {
        net.settle();
        a.pump();
        b.pump();
        net.settle();
        let next = [net.next_event(), a.cm.poll_timeout(), b.cm.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if t <= end => net.advance_to(t.max(net.time())),
            _ => break,
        }
        if next == Some(net.time()) && net.next_event().is_none() {
            // Only a CM timer at this instant: it fired in the pumps above.
            net.advance_to(ib_verbs::Time(net.time().0 + 1));
        }
    }
    net.advance_to(end);
    net.settle();
    a.pump();
    b.pump();
}

fn login() -> Vec<u8> {
    (0..56u8).collect()
}

#[test]
fn an_rdma_cm_connection_carries_private_data_and_connects_both_qps() {
    let net = SimNet::new(11, FaultConfig::default());
    let mut a = Side::open(&net, 1);
    let mut b = Side::open(&net, 2);
    let service = ServiceId::rdma_ip(RdmaPortSpace::Tcp, 5555);
    b.cm.listen(service).expect("listen");
    let conn_a =
        a.cm.connect(&ConnectRequest {
            qpn: a.qpn,
            to: Gid::from_ip(ip(2)),
            service_id: service,
            pkey_index: 0,
            responder_resources: 4,
            initiator_depth: 4,
            mtu: ib_verbs::PathMtu::Mtu1024,
            response_timeout: 18,
            max_retries: 3,
            retry_count: 7,
            rnr_retry_count: 7,
            private_data: login(),
        })
        .expect("connect");
    run(&net, &mut a, &mut b, Duration::from_millis(5));
    let req = b
        .events
        .iter()
        .find_map(|e| match e {
            ConnEvent::Request(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a request");
    // The consumer's 56 bytes, the cma header stripped and read.
    assert_eq!(req.private_data, login());
    let (src, dst, _) = req.rdma_cm.expect("the cma header's addresses");
    assert_eq!((src, dst), (ip(1), ip(2)));
    assert_eq!(req.from, Gid::from_ip(ip(1)));
    assert_eq!(req.peer_qpn, a.qpn);
    b.connect_qp(req.conn);
    b.cm.accept(
        req.conn,
        &AcceptRequest {
            qpn: b.qpn,
            responder_resources: 4,
            initiator_depth: 4,
            rnr_retry_count: 7,
            private_data: b"login response".to_vec(),
        },
    )
    .expect("accept");
    run(&net, &mut a, &mut b, Duration::from_millis(5));
    let rep = a
        .events
        .iter()
        .find_map(|e| match e {
            ConnEvent::Response { conn, private_data } if *conn == conn_a => {
                Some(private_data.clone())
            }
            _ => None,
        })
        .expect("a response");
    assert_eq!(&rep[..14], b"login response");
    a.connect_qp(conn_a);
    a.cm.establish(conn_a).expect("establish");
    run(&net, &mut a, &mut b, Duration::from_millis(5));
    assert!(
        b.events
            .contains(&ConnEvent::Established { conn: req.conn }),
        "{:?}",
        b.events
    );
    assert_eq!(a.cm.state(conn_a), ConnState::Established);
    // The attributes connected the QPs: the PSNs and QPNs agree both ways.
    a.send(b"from a");
    b.send(b"from b");
    run(&net, &mut a, &mut b, Duration::from_millis(5));
    for side in [&a, &b] {
        let wcs = side.wcs();
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
        assert!(wcs.iter().any(|w| w.opcode == WcOpcode::Recv), "{wcs:?}");
    }
    let mut got = [0u8; 6];
    b.mem.read(2048, &mut got).expect("read");
    assert_eq!(&got, b"from a");
    a.mem.read(2048, &mut got).expect("read");
    assert_eq!(&got, b"from b");
    // A disconnect reaches the peer.
    a.cm.disconnect(conn_a).expect("disconnect");
    run(&net, &mut a, &mut b, Duration::from_millis(50));
    assert!(
        b.events
            .iter()
            .any(|e| matches!(e, ConnEvent::DisconnectRequested { conn } if *conn == req.conn)),
        "{:?}",
        b.events
    );
}

#[test]
fn a_consumers_reject_reaches_the_requester_with_its_private_data() {
    let net = SimNet::new(12, FaultConfig::default());
    let mut a = Side::open(&net, 3);
    let mut b = Side::open(&net, 4);
    let service = ServiceId(0x0002_c903_0000_0042);
    b.cm.listen(service).expect("listen");
    let conn =
        a.cm.connect(&ConnectRequest {
            qpn: a.qpn,
            to: Gid::from_ip(ip(4)),
            service_id: service,
            pkey_index: 0,
            responder_resources: 4,
            initiator_depth: 4,
            mtu: ib_verbs::PathMtu::Mtu1024,
            response_timeout: 18,
            max_retries: 3,
            retry_count: 7,
            rnr_retry_count: 7,
            private_data: vec![0xc1; 64],
        })
        .expect("connect");
    run(&net, &mut a, &mut b, Duration::from_millis(5));
    let req = b
        .events
        .iter()
        .find_map(|e| match e {
            ConnEvent::Request(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a request");
    // The IB CM form: the private data as sent, no cma header.
    assert_eq!(&req.private_data[..64], &[0xc1; 64][..]);
    assert_eq!(req.rdma_cm, None);
    b.cm.reject(
        req.conn,
        CmRejReason::ConsumerDefined,
        &[0xc2, 0, 0, 0, 0, 1, 0, 3],
    )
    .expect("reject");
    run(&net, &mut a, &mut b, Duration::from_millis(5));
    let rej = a
        .events
        .iter()
        .find_map(|e| match e {
            ConnEvent::Rejected {
                conn: c,
                reason,
                private_data,
            } if *c == conn => Some((*reason, private_data.clone())),
            _ => None,
        })
        .expect("rejected");
    assert_eq!(rej.0, CmRejReason::ConsumerDefined);
    assert_eq!(&rej.1[..8], &[0xc2, 0, 0, 0, 0, 1, 0, 3]);
    assert_eq!(a.cm.state(conn), ConnState::Closed);
}
