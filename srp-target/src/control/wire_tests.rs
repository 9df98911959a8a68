//! The target's control bodies: every request and answer from known JSON text (written
//! out by hand, not produced by the code under test), round trips, truncated and garbled
//! bodies refused, long lists in pages that fit.

use super::*;
use crate::control::model::{
    IocStatus, LoginForm, LunStatus, PortStatus, ReloadReport, SessionStatus,
};
use crate::exec::counters::LuCountersSnapshot;
use crate::io::SessionCounters;
use access_layer::ctl::wire::MAX_BODY;
use ib_verbs::{PortCounters, Resources};
use srp::wire::PortId;

fn ioc(i: u32) -> IocStatus {
    IocStatus {
        name: format!("ioc-{i}"),
        guid: 0x0002_c903_00a1_b2c3,
        id_ext: 1,
        service_id: 0x0002_c903_00a1_b2c4,
        enabled: true,
        luns: 3,
        sessions: i,
    }
}

fn port() -> PortStatus {
    let hca = PortCounters::from_pairs([("rx_packets", 9), ("icrc_errors", 2), ("tx_packets", 0)]);
    PortStatus {
        name: "p0".into(),
        address: "127.0.0.9:4791".parse().expect("addr"),
        active: true,
        provider: "soft soft:127.0.0.9:4791 port 1".into(),
        sessions: 4,
        resources: Resources {
            qps: 6,
            cqs: 5,
            srqs: 0,
            mrs: 3,
        },
        hca,
    }
}

fn lun(i: u32) -> LunStatus {
    LunStatus {
        name: format!("vol{i}"),
        naa: [
            0x60, 0x01, 0x40, 0x51, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
        ],
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
            writes_held: 5,
            writes_busy_for_copies: 1,
            copy_collisions: 2,
            async_commands: 6,
            async_peak: 3,
        },
        latency: Default::default(),
    }
}

fn session(channel: u64) -> SessionStatus {
    SessionStatus {
        channel,
        ioc: "ioc-b".into(),
        port: "p1".into(),
        initiator: PortId([0xaa; 16]),
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
            late_task_mgmt: 9,
            send_queue_waits: 10,
        },
    }
}

/// Every request: known body text, and decode(encode(x)) == x.
#[test]
fn requests_round_trip_from_known_text() {
    let cases: [(ControlRequest, u32, u16, &str); 10] = [
        (ControlRequest::Metrics, 3, METRICS, r#"{"start":3}"#),
        (ControlRequest::ListIocs, 0, LIST_IOCS, r#"{"start":0}"#),
        (ControlRequest::ListPorts, 2, LIST_PORTS, r#"{"start":2}"#),
        (ControlRequest::ListLuns, 5, LIST_LUNS, r#"{"start":5}"#),
        (
            ControlRequest::ListSessions,
            1,
            LIST_SESSIONS,
            r#"{"start":1}"#,
        ),
        (ControlRequest::RunningConfig, 40, CONFIG, r#"{"start":40}"#),
        (
            ControlRequest::SetIoc {
                name: "ioc-a".into(),
                enabled: false,
                mode: DisableMode::Drop,
            },
            0,
            SET_IOC,
            r#"{"name":"ioc-a","enabled":false,"mode":"Drop"}"#,
        ),
        (
            ControlRequest::SetPort {
                name: "p0".into(),
                enabled: true,
            },
            0,
            SET_PORT,
            r#"{"name":"p0","enabled":true}"#,
        ),
        (
            ControlRequest::ClearFlushError {
                name: "vol1".into(),
            },
            0,
            SET_LUN,
            r#"{"name":"vol1","clear_flush_error":true}"#,
        ),
        (ControlRequest::Reload, 0, RELOAD, "{}"),
    ];
    for (request, start, opcode, text) in cases {
        let (op, body) = encode_request(&request, start).expect("on the wire");
        assert_eq!(
            (op, String::from_utf8_lossy(&body).as_ref()),
            (opcode, text)
        );
        assert_eq!(decode_request(op, text.as_bytes()), Ok((request, start)));
    }
}

#[test]
fn bad_requests_are_refused() {
    for op in [
        LIST_IOCS,
        LIST_PORTS,
        LIST_LUNS,
        LIST_SESSIONS,
        CONFIG,
        METRICS,
        SET_IOC,
        SET_PORT,
        SET_LUN,
        RELOAD,
    ] {
        for body in [&b""[..], b"{", b"\xff\xfe", b"[]", b"\"x\"", b"{} trailing"] {
            assert_eq!(
                decode_request(op, body),
                Err(CtlStatus::Malformed),
                "{op:#x} {body:?}"
            );
        }
    }
    for (op, body) in [
        (LIST_LUNS, &br#"{"start":-1}"#[..]),
        (SET_IOC, br#"{"name":"a","enabled":false,"mode":"Maybe"}"#),
        (SET_IOC, br#"{"name":"a","enabled":false}"#),
        (SET_PORT, br#"{"name":3,"enabled":true}"#),
        // A SET_LUN that asks nothing.
        (SET_LUN, br#"{"name":"vol1","clear_flush_error":false}"#),
        (RELOAD, br#"{"path":"/etc/passwd"}"#),
    ] {
        assert_eq!(
            decode_request(op, body),
            Err(CtlStatus::Malformed),
            "{body:?}"
        );
    }
    assert_eq!(
        decode_request(0x0301, br#"{"start":0}"#),
        Err(CtlStatus::UnknownOpcode)
    );
    // Apply exists only in process.
    let c = crate::config::TargetConfig::from_str(include_str!("../../examples/target.toml"), "t")
        .expect("valid")
        .config;
    assert_eq!(encode_request(&ControlRequest::Apply(Box::new(c)), 0), None);
}

/// Answers from known text, and decode(encode(x)) == x.
#[test]
fn answers_round_trip_from_known_text() {
    let cases: [(Answer, &str); 7] = [
        (
            Ok(ControlAnswer::Iocs(vec![ioc(2)])),
            r#"{"Ok":{"Iocs":[{"name":"ioc-2","guid":783964686103235,"id_ext":1,"service_id":783964686103236,"enabled":true,"luns":3,"sessions":2}]}}"#,
        ),
        (
            Ok(ControlAnswer::Done { sessions_ended: 2 }),
            r#"{"Ok":{"Done":{"sessions_ended":2}}}"#,
        ),
        (
            Ok(ControlAnswer::Config(vec!["[target]".into()])),
            r#"{"Ok":{"Config":["[target]"]}}"#,
        ),
        (
            Ok(ControlAnswer::Reloaded(ReloadReport {
                changes: vec!["lun vol3 added".into()],
                sessions_ended: 1,
            })),
            r#"{"Ok":{"Reloaded":{"changes":["lun vol3 added"],"sessions_ended":1}}}"#,
        ),
        (
            Err(ControlError::NoSuchIoc("ioc-z".into())),
            r#"{"Err":{"NoSuchIoc":"ioc-z"}}"#,
        ),
        (
            Err(ControlError::ReloadRefused(vec!["port p0: address".into()])),
            r#"{"Err":{"ReloadRefused":["port p0: address"]}}"#,
        ),
        (Err(ControlError::Stopped), r#"{"Err":"Stopped"}"#),
    ];
    for (answer, text) in cases {
        let body = encode_answer(answer.clone(), 0);
        assert_eq!(String::from_utf8_lossy(&body), text);
        assert_eq!(decode_answer(text.as_bytes()).expect("decode"), answer);
    }
    for answer in [
        Ok(ControlAnswer::Ports(vec![port()])),
        Ok(ControlAnswer::Luns(vec![lun(1), lun(2)])),
        Ok(ControlAnswer::Sessions(vec![session(42)])),
        Err(ControlError::InvalidConfig(
            "t.toml: lun[0].size: bad".into(),
        )),
        Err(ControlError::Timeout(std::time::Duration::from_secs(5))),
    ] {
        let body = encode_answer(answer.clone(), 0);
        assert_eq!(decode_answer(&body).expect("decode"), answer);
    }
}

/// The HCA counters travel by name: a reader ignores names it does not know and reads 0
/// for those it misses, whichever side is newer; the initiator is its text.
#[test]
fn counters_travel_by_name_and_port_ids_as_text() {
    let body = encode_answer(Ok(ControlAnswer::Ports(vec![port()])), 0);
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains(r#""rx_packets":9"#), "{text}");
    assert!(text.contains(r#""icrc_errors":2"#), "{text}");
    assert!(
        text.contains(r#""resources":{"qps":6,"cqs":5,"srqs":0,"mrs":3}"#),
        "{text}"
    );
    let older = text
        .replace(r#""icrc_errors":2,"#, r#""a_counter_from_the_future":7,"#)
        .into_bytes();
    let Ok(ControlAnswer::Ports(p)) = decode_answer(&older).expect("decode") else {
        panic!("ports");
    };
    assert_eq!(p[0].hca.get("icrc_errors"), 0);
    assert_eq!(p[0].hca.rx_packets(), 9);
    assert_eq!(p[0].hca.get("a_counter_from_the_future"), 7);
    let body = encode_answer(Ok(ControlAnswer::Sessions(vec![session(1)])), 0);
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains(r#""initiator":"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa""#),
        "{text}"
    );
    let bad = text.replace("0xaaaa", "0xzzzz");
    assert!(decode_answer(bad.as_bytes()).is_err());
}

#[test]
fn truncated_or_garbled_answers_error() {
    let body = encode_answer(Ok(ControlAnswer::Luns(vec![lun(1), lun(2)])), 0);
    for len in 0..body.len() {
        assert!(decode_answer(&body[..len]).is_err(), "truncated to {len}");
    }
    for garbled in [
        &br#"{"Ok":{"Nope":[]}}"#[..],
        br#"{"Maybe":1}"#,
        b"\x00\x01",
        b"null",
    ] {
        assert!(decode_answer(garbled).is_err(), "{garbled:?}");
    }
}

/// 500 sessions and 300 config lines, page by page as the client asks: every page fits,
/// and together they are the list.
#[test]
fn long_lists_come_in_pages_that_fit() {
    let all: Vec<SessionStatus> = (0..500).map(session).collect();
    let mut got = Vec::new();
    loop {
        let start = u32::try_from(got.len()).expect("u32");
        let body = encode_answer(Ok(ControlAnswer::Sessions(all.clone())), start);
        assert!(body.len() <= MAX_BODY as usize);
        let Ok(ControlAnswer::Sessions(page)) = decode_answer(&body).expect("decode") else {
            panic!("not a session page");
        };
        if page.is_empty() {
            break;
        }
        got.extend(page);
    }
    assert_eq!(got, all);
    let lines: Vec<String> = (0..300).map(|i| format!("name = \"vol{i}\"")).collect();
    let mut got = Vec::new();
    loop {
        let start = u32::try_from(got.len()).expect("u32");
        let body = encode_answer(Ok(ControlAnswer::Config(lines.clone())), start);
        let Ok(ControlAnswer::Config(page)) = decode_answer(&body).expect("decode") else {
            panic!("not a config page");
        };
        if page.is_empty() {
            break;
        }
        got.extend(page);
    }
    assert_eq!(got, lines);
}

#[test]
fn a_reload_report_too_large_says_it_was_carried_out() {
    let changes = (0..500).map(|i| format!("lun vol{i} added")).collect();
    let body = encode_answer(
        Ok(ControlAnswer::Reloaded(ReloadReport {
            changes,
            sessions_ended: 0,
        })),
        0,
    );
    assert!(body.len() <= MAX_BODY as usize);
    match decode_answer(&body).expect("decode") {
        Err(ControlError::Failed(why)) => assert!(why.contains("carried out"), "{why}"),
        other => panic!("{other:?}"),
    }
}
