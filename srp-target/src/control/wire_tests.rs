//! Four tests per control message: known bytes decode, emit into a 0xa5-filled buffer
//! reproduces them, round trip, truncated input errors. Known bytes are written out by
//! hand here, field by field, not produced by the code under test.

use super::*;
use crate::exec::counters::LuCountersSnapshot;
use std::net::Ipv4Addr;

fn name_field(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.resize(NAME_LEN, 0);
    v
}

fn be32(v: u32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn be64(v: u64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn list_page() -> (Vec<u8>, ListPage) {
    (vec![0, 0, 0, 17, 0, 0, 0, 0], ListPage { start: 17 })
}

fn ioc() -> (Vec<u8>, IocStatus) {
    let bytes = [
        name_field("ioc-a"),
        be64(0x0002_c903_00a1_b2c3),
        be64(1),
        be64(0x0002_c903_00a1_b2c4),
        be32(3),
        be32(2),
        vec![1, 0, 0, 0, 0, 0, 0, 0],
    ]
    .concat();
    let v = IocStatus {
        name: "ioc-a".into(),
        guid: 0x0002_c903_00a1_b2c3,
        id_ext: 1,
        service_id: 0x0002_c903_00a1_b2c4,
        enabled: true,
        luns: 3,
        sessions: 2,
    };
    (bytes, v)
}

fn port() -> (Vec<u8>, PortStatus) {
    let bytes = [
        // A name that fills its field.
        vec![b'p'; NAME_LEN],
        vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 9],
        vec![0x12, 0xb7, 0],
        vec![0; 5],
        be32(4),
        be32(6),
        be32(5),
        be32(0),
        be32(7),
        vec![0; 4],
        // The HCA counters in Stats::NAMES order: rx 1000, tx 2000, then 3, 4, 5, ….
        (0..Stats::COUNT as u64)
            .flat_map(|i| {
                be64(match i {
                    0 => 1000,
                    1 => 2000,
                    i => i + 1,
                })
            })
            .collect(),
    ]
    .concat();
    let v = PortStatus {
        name: "p".repeat(NAME_LEN),
        address: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9)), 4791),
        active: false,
        sessions: 4,
        resources: Resources {
            qps: 6,
            cqs: 5,
            srqs: 0,
            mrs: 7,
        },
        hca: Stats::from_array(core::array::from_fn(|i| match i {
            0 => 1000,
            1 => 2000,
            i => i as u64 + 1,
        })),
    };
    (bytes, v)
}

fn lun() -> (Vec<u8>, LunStatus) {
    let naa = [
        0x60, 0x01, 0x40, 0x51, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
    ];
    let bytes = [
        name_field("vol1"),
        naa.to_vec(),
        be64(131_072),
        be32(512),
        vec![LUN_WRITE_CACHE | LUN_FLUSH_FAILED, 0, 0, 0],
        be64(10),
        be64(4),
        be64(3),
        be64(16384),
        be64(1536),
        be64(2),
        be64(1),
        be64(7),
    ]
    .concat();
    let v = LunStatus {
        name: "vol1".into(),
        naa,
        blocks: 131_072,
        block_size: 512,
        read_only: false,
        write_cache: true,
        flush_failed: true,
        counters: LuCountersSnapshot {
            commands: 10,
            reads: 4,
            writes: 3,
            bytes_read: 16384,
            bytes_written: 1536,
            check_conditions: 2,
            reservation_conflicts: 1,
            flush_errors: 7,
        },
    };
    (bytes, v)
}

fn session() -> (Vec<u8>, SessionStatus) {
    let initiator = [0xaa; 16];
    let bytes = [
        be64(42),
        name_field("ioc-b"),
        name_field("p1"),
        initiator.to_vec(),
        vec![1, 0, 0, 0],
        be32(32),
        be32(4200),
        be32(3),
        be64(61),
        (1..=8u64).flat_map(|i| i.to_be_bytes()).collect(),
    ]
    .concat();
    let v = SessionStatus {
        channel: 42,
        ioc: "ioc-b".into(),
        port: "p1".into(),
        initiator: PortId(initiator),
        form: LoginForm::RdmaCm,
        window: 32,
        max_it_iu_len: 4200,
        in_flight: 3,
        age_secs: 61,
        counters: SessionCounters {
            commands: 1,
            task_mgmt: 2,
            data_in_bytes: 3,
            data_out_bytes: 4,
            check_conditions: 5,
            busy: 6,
            reservation_conflicts: 7,
            aborted: 8,
        },
    };
    (bytes, v)
}

fn set_ioc() -> (Vec<u8>, SetIoc) {
    let bytes = [name_field("ioc-a"), vec![0, 1, 0, 0, 0, 0, 0, 0]].concat();
    let v = SetIoc {
        name: "ioc-a".into(),
        enabled: false,
        mode: DisableMode::Drop,
    };
    (bytes, v)
}

fn set_port() -> (Vec<u8>, SetPort) {
    let bytes = [name_field("p0"), vec![1, 0, 0, 0, 0, 0, 0, 0]].concat();
    let v = SetPort {
        name: "p0".into(),
        enabled: true,
    };
    (bytes, v)
}

fn set_lun() -> (Vec<u8>, SetLun) {
    let bytes = [name_field("vol1"), vec![1, 0, 0, 0, 0, 0, 0, 0]].concat();
    let v = SetLun {
        name: "vol1".into(),
        clear_flush_error: true,
    };
    (bytes, v)
}

fn done() -> (Vec<u8>, Done) {
    (vec![0, 0, 0, 5, 0, 0, 0, 0], Done { sessions_ended: 5 })
}

fn ioc_page() -> (Vec<u8>, Page<IocStatus>) {
    let (one, v) = ioc();
    let mut second = v.clone();
    second.name = "ioc-b".into();
    second.enabled = false;
    let mut two = one.clone();
    two[..NAME_LEN].copy_from_slice(&name_field("ioc-b"));
    two[IocStatus::LEN - 8] = 0;
    let bytes = [be32(5), be32(2), one, two].concat();
    (
        bytes,
        Page {
            total: 5,
            entries: vec![v, second],
        },
    )
}

/// The four tests for one message type, from its fixture (`wirekit::wire_repr::check`).
macro_rules! four {
    ($modname:ident, $fixture:ident, $ty:ty) => {
        mod $modname {
            use super::*;
            use wirekit::wire_repr::check;

            #[test]
            fn decodes() {
                let (bytes, v) = $fixture();
                check::decodes::<$ty>(&bytes, &v);
            }

            #[test]
            fn emits() {
                let (bytes, v) = $fixture();
                check::emits(&v, &bytes);
            }

            #[test]
            fn round_trips() {
                let (_, v) = $fixture();
                check::round_trips(&v, &mut Vec::new());
            }

            #[test]
            fn truncation_errors() {
                let (bytes, _) = $fixture();
                check::truncation_errors::<$ty>(&bytes);
            }
        }
    };
}

four!(list_page_msg, list_page, ListPage);
four!(ioc_entry, ioc, IocStatus);
four!(port_entry, port, PortStatus);
four!(lun_entry, lun, LunStatus);
four!(session_entry, session, SessionStatus);
four!(set_ioc_msg, set_ioc, SetIoc);
four!(set_port_msg, set_port, SetPort);
four!(set_lun_msg, set_lun, SetLun);
four!(done_msg, done, Done);
four!(page_msg, ioc_page, Page<IocStatus>);

#[test]
fn bad_fields_are_named() {
    let (mut b, _) = ioc();
    b[IocStatus::LEN - 8] = 2;
    let e = IocStatus::parse(&b).expect_err("enabled 2");
    assert!(e.to_string().contains("enabled"), "{e}");
    let (mut b, _) = lun();
    b[NAME_LEN + 16 + 12] = 0x80;
    assert!(
        LunStatus::parse(&b)
            .expect_err("flags")
            .to_string()
            .contains("flags")
    );
    let (mut b, _) = session();
    b[8 + 2 * NAME_LEN + 16] = 2;
    assert!(
        SessionStatus::parse(&b)
            .expect_err("form")
            .to_string()
            .contains("form")
    );
    let (mut b, _) = set_ioc();
    b[NAME_LEN + 1] = 9;
    assert!(
        SetIoc::parse(&b)
            .expect_err("mode")
            .to_string()
            .contains("mode")
    );
    let (mut b, _) = set_port();
    b[..NAME_LEN].fill(0);
    assert!(
        SetPort::parse(&b)
            .expect_err("empty")
            .to_string()
            .contains("empty")
    );
    let (mut b, _) = set_lun();
    b[NAME_LEN] = 2;
    let e = SetLun::parse(&b).expect_err("flag 2");
    assert!(e.to_string().contains("clear_flush_error"), "{e}");
    let (mut b, _) = set_lun();
    b[NAME_LEN + 3] = 1;
    let e = SetLun::parse(&b).expect_err("reserved");
    assert!(e.to_string().contains("reserved"), "{e}");
    let long = SetPort {
        name: "x".repeat(NAME_LEN + 1),
        enabled: true,
    };
    assert!(long.emit(&mut [0; 72]).is_err());
}

#[test]
fn pages_cut_at_the_body_limit_and_count_is_checked() {
    let (_, s) = session();
    let all: Vec<SessionStatus> = (0..40).map(|_| s.clone()).collect();
    let first = Page::of(all.clone(), 0);
    assert_eq!(first.total, 40);
    assert_eq!(first.entries.len(), Page::<SessionStatus>::PER_PAGE);
    assert!(first.buffer_len() <= MAX_BODY as usize);
    let past = Page::of(all, 40);
    assert!(past.entries.is_empty());
    // A count above the total is refused both ways.
    let bad = [be32(1), be32(2), vec![0; 2 * SessionStatus::LEN]].concat();
    assert!(Page::<SessionStatus>::parse(&bad).is_err());
    let (_, i) = ioc();
    let over = Page {
        total: 1,
        entries: vec![i.clone(), i],
    };
    assert!(over.emit(&mut vec![0; 4096]).is_err());
}
