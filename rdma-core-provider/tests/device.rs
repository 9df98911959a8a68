//! The provider against a real RDMA device: two connection managers and two QPs on the
//! device that holds `RDMA_CORE_TEST_ADDR`'s RoCEv2 GID (the Linux guest's rxe0 in the
//! interop matrix, where this binary also runs under AddressSanitizer). An RDMA-CM
//! connection with private data both ways; SENDs each way; a type-2 memory window bound
//! over part of a region that grants no remote right itself — an RDMA WRITE through it
//! lands, a LOCAL_INV closes it, a rebind under a new key and a SEND WITH INVALIDATE close
//! it again (the receive reports the key: rxe's flag quirk); the QP drained (ERR and a
//! zero-length WRITE marker) with every posted request flushed; a disconnect seen by the
//! peer; every object released.
//!
//! Without `RDMA_CORE_TEST_ADDR` (no RDMA device here: this machine's kernel has no RDMA
//! modules) it prints `SKIP` and passes; `tests/interop` runs it in the guest.

use access_layer::cm::{
    AcceptRequest, CmSetup, ConnEvent, ConnId, ConnectRequest, ConnectionManager,
};
use access_layer::mad::ServiceId;
use access_layer::mad::cm::RdmaPortSpace;
use access_layer::verbs::{ChannelInterface, Device, DeviceSpec, MrSpec, ProviderKind, SyncCa};
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrKeys, PdId};
use ib_verbs::qp::QpInit;
use ib_verbs::qp::state::{QpAttrMask, QpState};
use ib_verbs::wr::{RecvWr, SendFlags, SendOp, SendWr, Sge, Wc, WcOpcode, WcStatus};
use ib_verbs::{CqId, Gid, Guid, PathMtu, QpId, Qpn, Rkey};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

const IOVA: u64 = 0x10_0000;
const LEN: usize = 64 << 10;

struct Side {
    dev: Device,
    sync: SyncCa<dyn ChannelInterface>,
    cm: Box<dyn ConnectionManager>,
    pd: PdId,
    cq: CqId,
    qp: QpId,
    qpn: Qpn,
    mem: Arc<MemBlock>,
    mr: MrKeys,
    wcs: Vec<Wc>,
}

impl Side {
    fn open(addr: IpAddr) -> Side {
        let spec = DeviceSpec {
            provider: ProviderKind::RdmaCore,
            ..DeviceSpec::soft(SocketAddr::new(addr, 4791), Guid(0))
        };
        let dev = rdma_core_provider::open(&spec).expect("open the device holding the address");
        let sync = SyncCa::new(dev.ca.clone());
        let attr = sync.open_ca(Arc::new(|_| {})).expect("open CA");
        assert!(attr.caps.mem_windows, "rxe has type-2 memory windows");
        assert!(!attr.caps.fast_reg, "user space has no fast registration");
        let setup = CmSetup {
            time_wait: Duration::from_millis(20),
            agent_id: 1,
            first_comm_id: 1,
        };
        let cm = dev
            .port
            .connection_manager(&setup)
            .expect("rdma-core has its own CM")
            .expect("librdmacm");
        let pd = sync.alloc_pd().expect("pd");
        let mem = MemBlock::new(LEN);
        let mr = sync
            .reg_mr(
                pd,
                MrSpec {
                    block: mem.clone(),
                    offset: 0,
                    len: LEN as u64,
                    iova: IOVA,
                    access: Access::LOCAL_WRITE | Access::MW_BIND,
                },
            )
            .expect("a region at a page-aligned I/O address");
        assert_eq!(mr.rkey, None, "no remote right: no rkey handed out");
        let cq = sync.create_cq(256).expect("cq");
        let qp = sync.create_qp(QpInit::rc(pd, cq, 64, 32)).expect("qp");
        let QpId::Qp(qpn) = qp else {
            panic!("an RC QP")
        };
        Side {
            dev,
            sync,
            cm,
            pd,
            cq,
            qp,
            qpn,
            mem,
            mr,
            wcs: Vec::new(),
        }
    }

    fn ca(&self) -> &Arc<dyn ChannelInterface> {
        &self.dev.ca
    }

    fn events(&mut self) -> Vec<ConnEvent> {
        let now = self.dev.port.now();
        self.cm.poll(now);
        let mut out = Vec::new();
        while let Some(ev) = self.cm.poll_event() {
            out.push(ev);
        }
        out
    }

    fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: IOVA + offset,
            len,
            lkey: self.mr.lkey,
        }
    }

    fn post_recv(&self, wr_id: u64, offset: u64) {
        let wr = RecvWr {
            wr_id,
            sg_list: [self.sge(offset, 1024)].into(),
        };
        self.ca().post_recv(self.qp, wr).expect("post_recv");
    }

    fn post(&self, wr_id: u64, op: SendOp, sges: &[Sge]) {
        let wr = SendWr {
            wr_id,
            op,
            sg_list: sges.iter().copied().collect(),
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        self.ca().post_send(self.qp, wr).expect("post_send");
    }

    /// Waits (bounded) for the completion of `wr_id`.
    fn wait(&mut self, wr_id: u64) -> Wc {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(i) = self.wcs.iter().position(|w| w.wr_id == wr_id) {
                return self.wcs.remove(i);
            }
            let mut got = Vec::new();
            self.ca().poll_cq(self.cq, 64, &mut got).expect("poll");
            self.wcs.extend(got);
            assert!(
                Instant::now() < end,
                "no completion for {wr_id:#x}: {:?}",
                self.wcs
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Pumps both until `want` says `a`'s or `b`'s events hold what it needs.
fn pump<T>(a: &mut Side, b: &mut Side, mut want: impl FnMut(&ConnEvent, bool) -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        for (ev, from_a) in a
            .events()
            .into_iter()
            .map(|e| (e, true))
            .chain(b.events().into_iter().map(|e| (e, false)))
        {
            if let Some(t) = want(&ev, from_a) {
                return t;
            }
        }
        assert!(Instant::now() < end, "connection events did not come");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The device address under test, or `None` (and a SKIP line) when there is none.
fn test_addr(test: &str) -> Option<IpAddr> {
    let addr = std::env::var("RDMA_CORE_TEST_ADDR")
        .ok()
        .and_then(|a| a.parse::<IpAddr>().ok());
    if addr.is_none() {
        eprintln!(
            "SKIP {test}: RDMA_CORE_TEST_ADDR not set (no RDMA device here; the interop \
             matrix runs this in the Linux guest)"
        );
    }
    addr
}

/// `a` connected to `b` through RDMA-CM on TCP port `port`, private data checked both
/// ways; B has one receive (0xb1) posted when `b_recv`, A has none. The two connections.
fn connect(a: &mut Side, b: &mut Side, addr: IpAddr, port: u16, b_recv: bool) -> (ConnId, ConnId) {
    let service = ServiceId::rdma_ip(RdmaPortSpace::Tcp, port);
    b.cm.listen(service).expect("listen");
    let login: Vec<u8> = (0..56u8).collect();
    let conn_a =
        a.cm.connect(&ConnectRequest {
            qpn: a.qpn,
            to: Gid::from_ip(addr),
            service_id: service,
            pkey_index: 0,
            responder_resources: 4,
            initiator_depth: 4,
            mtu: PathMtu::Mtu1024,
            response_timeout: 18,
            max_retries: 3,
            retry_count: 7,
            rnr_retry_count: 7,
            private_data: login.clone(),
        })
        .expect("connect");
    let req = pump(a, b, |ev, from_a| match ev {
        ConnEvent::Request(r) if !from_a => Some(r.clone()),
        _ => None,
    });
    assert_eq!(
        &req.private_data[..56],
        &login[..],
        "the REQ's private data"
    );
    assert_eq!(
        req.pkey.0, 0xffff,
        "RoCE: the default partition, not rdma-cm's 0"
    );
    let rc = b.cm.qp_attrs(req.conn).expect("qp attributes");
    b.sync.connect_rc(b.qp, rc).expect("connect B's QP");
    // Receives go on a QP past RESET (rxe refuses them before).
    if b_recv {
        b.post_recv(0xb1, 0);
    }
    b.cm.accept(
        req.conn,
        &AcceptRequest {
            qpn: b.qpn,
            responder_resources: 4,
            initiator_depth: 4,
            rnr_retry_count: 7,
            private_data: vec![0x5a; 52],
        },
    )
    .expect("accept");
    let rep = pump(a, b, |ev, from_a| match ev {
        ConnEvent::Response { conn, private_data } if from_a && *conn == conn_a => {
            Some(private_data.clone())
        }
        _ => None,
    });
    assert_eq!(&rep[..52], &[0x5a; 52][..], "the REP's private data");
    let rc = a.cm.qp_attrs(conn_a).expect("qp attributes");
    a.sync.connect_rc(a.qp, rc).expect("connect A's QP");
    a.cm.establish(conn_a).expect("establish (RTU)");
    let conn_b: ConnId = req.conn;
    pump(a, b, |ev, _| {
        matches!(ev, ConnEvent::Established { conn } if *conn == conn_b).then_some(())
    });
    (conn_a, conn_b)
}

#[test]
fn a_connection_windows_and_a_drain_on_a_real_device() {
    let Some(addr) = test_addr("a_connection_windows_and_a_drain_on_a_real_device") else {
        return;
    };
    let mut a = Side::open(addr);
    let mut b = Side::open(addr);
    let (conn_a, conn_b) = connect(&mut a, &mut b, addr, 7471, true);
    a.post_recv(0xa1, 0);

    // A SEND each way.
    a.mem.write(8192, b"hello from A").expect("write");
    a.post(1, SendOp::Send, &[a.sge(8192, 12)]);
    assert_eq!(a.wait(1).status, WcStatus::Success);
    let r = b.wait(0xb1);
    assert_eq!(
        (r.status, r.opcode, r.byte_len),
        (WcStatus::Success, WcOpcode::Recv, 12)
    );
    let mut got = [0u8; 12];
    b.mem.read(0, &mut got).expect("read");
    assert_eq!(&got, b"hello from A");
    b.mem.write(8192, b"hi A").expect("write");
    b.post(2, SendOp::Send, &[b.sge(8192, 4)]);
    assert_eq!(b.wait(2).status, WcStatus::Success);
    assert_eq!(a.wait(0xa1).byte_len, 4);

    // A window over 512 bytes of B's region, remote write only.
    let mw = b.sync.alloc_mw(b.pd).expect("alloc_mw");
    let key1 = Rkey((mw.0 & !0xff) | ((mw.0 + 1) & 0xff));
    b.post(
        3,
        SendOp::BindMw {
            rkey: key1,
            region: b.mr.lkey,
            addr: IOVA + 16384,
            len: 512,
            access: Access::REMOTE_WRITE,
        },
        &[],
    );
    let w = b.wait(3);
    assert_eq!((w.status, w.opcode), (WcStatus::Success, WcOpcode::BindMw));
    a.mem.write(12288, &[0xc3; 512]).expect("write");
    a.post(
        4,
        SendOp::Write {
            remote_addr: IOVA + 16384,
            rkey: key1,
        },
        &[a.sge(12288, 512)],
    );
    assert_eq!(
        a.wait(4).status,
        WcStatus::Success,
        "a WRITE through the window"
    );
    let mut landed = [0u8; 512];
    b.mem.read(16384, &mut landed).expect("read");
    assert_eq!(landed, [0xc3; 512]);
    b.post(5, SendOp::LocalInv(key1.0), &[]);
    assert_eq!(b.wait(5).status, WcStatus::Success, "LOCAL_INV");

    // Bound again under the next key (the provider names the window by the key the last
    // bind gave it), then invalidated by A's SEND WITH INVALIDATE.
    let key2 = Rkey((key1.0 & !0xff) | ((key1.0 + 1) & 0xff));
    b.post(
        6,
        SendOp::BindMw {
            rkey: key2,
            region: b.mr.lkey,
            addr: IOVA + 16384,
            len: 512,
            access: Access::REMOTE_WRITE,
        },
        &[],
    );
    assert_eq!(
        b.wait(6).status,
        WcStatus::Success,
        "rebind under a new key"
    );
    b.post_recv(0xb2, 0);
    a.post(7, SendOp::SendWithInv(key2), &[a.sge(8192, 12)]);
    assert_eq!(a.wait(7).status, WcStatus::Success);
    let r = b.wait(0xb2);
    assert_eq!(r.status, WcStatus::Success);
    assert_eq!(
        r.invalidated,
        Some(key2),
        "the receive names the key the peer invalidated"
    );

    // Drain: ERR, then a zero-length WRITE marker; posted receives flush before it.
    b.post_recv(0xb3, 0);
    b.sync
        .modify_qp(
            b.qp,
            ib_verbs::qp::QpAttr {
                state: QpState::Err,
                ..Default::default()
            },
            QpAttrMask::STATE,
        )
        .expect("to ERR");
    b.post(
        8,
        SendOp::Write {
            remote_addr: 0,
            rkey: Rkey(0),
        },
        &[],
    );
    assert_eq!(b.wait(0xb3).status, WcStatus::WrFlushErr);
    assert_eq!(b.wait(8).status, WcStatus::WrFlushErr, "the drain marker");

    a.cm.disconnect(conn_a).expect("disconnect");
    pump(&mut a, &mut b, |ev, from_a| {
        (!from_a && matches!(ev, ConnEvent::Disconnected { conn } if *conn == conn_b)).then_some(())
    });
    b.sync.dealloc_mw(key2).expect("dealloc_mw");
    for s in [&a, &b] {
        s.sync.destroy_qp(s.qp).expect("destroy_qp");
        s.sync.destroy_cq(s.cq).expect("destroy_cq");
        s.sync.dereg_mr(s.mr).expect("dereg_mr");
        s.sync.dealloc_pd(s.pd).expect("dealloc_pd");
    }
}

/// Linux's rxe replays local operations on a retry: `req_retry` rewinds the requester to
/// the oldest request not yet completed and `rxe_requester` runs every request from there
/// again — `req_next_wqe` does not skip those already done (`drivers/infiniband/sw/rxe/
/// rxe_req.c`, 6.1). A BIND_MW that ran behind a SEND still waiting for its ACK runs a
/// second time when that SEND is retried, on a window bound by then: the QP breaks (in the
/// interop smoke the bind completed MW_BIND_ERR and the host's channel was lost; here,
/// with the provider's fence removed, the SEND queued after the bind never completes).
/// The retry is forced: B posts no receive, so A's SENDs meet RNR NAKs. First a control —
/// two SENDs and no bind come through the retries — then a window bound for A's next
/// command behind a retried SEND. The provider fences such binds (`src/bind_fence.rs`):
/// the SENDs, the bind and a WRITE through the window all succeed once B posts receives.
#[test]
fn a_bind_behind_a_send_being_retried_is_not_replayed() {
    let Some(addr) = test_addr("a_bind_behind_a_send_being_retried_is_not_replayed") else {
        return;
    };
    let mut a = Side::open(addr);
    let mut b = Side::open(addr);
    let (conn_a, conn_b) = connect(&mut a, &mut b, addr, 7472, false);
    a.mem.write(8192, b"command one").expect("write");

    // Control: two SENDs through RNR retries, no bind.
    a.post(0x11, SendOp::Send, &[a.sge(8192, 11)]);
    a.post(0x12, SendOp::Send, &[a.sge(8192, 11)]);
    std::thread::sleep(Duration::from_millis(300));
    b.post_recv(0xb1, 0);
    b.post_recv(0xb2, 1024);
    for id in [0x11, 0x12] {
        let w = a.wait(id);
        assert_eq!(w.status, WcStatus::Success, "control SEND {id:#x}: {w:?}");
    }
    assert_eq!(b.wait(0xb1).byte_len, 11);
    assert_eq!(b.wait(0xb2).byte_len, 11);

    a.post(1, SendOp::Send, &[a.sge(8192, 11)]);
    // The next command: its window, then its SEND, behind the first SEND (RNR-retried).
    let mw = a.sync.alloc_mw(a.pd).expect("alloc_mw");
    let key = Rkey((mw.0 & !0xff) | ((mw.0 + 1) & 0xff));
    let mut chain = vec![
        SendWr {
            wr_id: 2,
            op: SendOp::BindMw {
                rkey: key,
                region: a.mr.lkey,
                addr: IOVA + 16384,
                len: 512,
                access: Access::REMOTE_WRITE,
            },
            sg_list: Default::default(),
            flags: SendFlags::SIGNALED,
            ud: None,
        },
        SendWr {
            wr_id: 3,
            op: SendOp::Send,
            sg_list: [a.sge(8192, 11)].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        },
    ];
    a.ca()
        .post_send_list(a.qp, &mut chain)
        .expect("post the bind and the SEND");
    // RNR NAKs (and retries) for a while: nothing completes.
    std::thread::sleep(Duration::from_millis(300));
    let mut early = Vec::new();
    a.ca().poll_cq(a.cq, 64, &mut early).expect("poll");
    assert!(
        early.iter().all(|w| w.status == WcStatus::Success),
        "nothing fails while the peer has no receive: {early:?}"
    );
    a.wcs.extend(early);
    b.post_recv(0xb3, 0);
    b.post_recv(0xb4, 1024);
    for id in [1, 2, 3] {
        let w = a.wait(id);
        assert_eq!(
            w.status,
            WcStatus::Success,
            "request {id} after the retries (2 is the bind): {w:?}"
        );
    }
    assert_eq!(b.wait(0xb3).byte_len, 11);
    assert_eq!(b.wait(0xb4).byte_len, 11);
    // The window is bound once, under `key`: a WRITE through it lands.
    b.mem.write(12288, &[0x7e; 512]).expect("write");
    b.post(
        4,
        SendOp::Write {
            remote_addr: IOVA + 16384,
            rkey: key,
        },
        &[b.sge(12288, 512)],
    );
    assert_eq!(
        b.wait(4).status,
        WcStatus::Success,
        "a WRITE through the window"
    );
    let mut landed = [0u8; 512];
    a.mem.read(16384, &mut landed).expect("read");
    assert_eq!(landed, [0x7e; 512]);
    a.post(5, SendOp::LocalInv(key.0), &[]);
    assert_eq!(a.wait(5).status, WcStatus::Success, "LOCAL_INV");
    let stats = a.ca().stats();
    assert_eq!(
        (stats.fenced_binds, stats.own_completions),
        (1, 0),
        "the one run of binds went behind the fence, whose requests all succeeded"
    );

    a.cm.disconnect(conn_a).expect("disconnect");
    pump(&mut a, &mut b, |ev, from_a| {
        (!from_a && matches!(ev, ConnEvent::Disconnected { conn } if *conn == conn_b)).then_some(())
    });
    a.sync.dealloc_mw(key).expect("dealloc_mw");
    for s in [&a, &b] {
        s.sync.destroy_qp(s.qp).expect("destroy_qp");
        s.sync.destroy_cq(s.cq).expect("destroy_cq");
        s.sync.dereg_mr(s.mr).expect("dereg_mr");
        s.sync.dealloc_pd(s.pd).expect("dealloc_pd");
    }
}
