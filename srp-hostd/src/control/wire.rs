//! The host's control messages on the socket: service messages of the access layer's
//! control protocol ([`access_layer::ctl`]: "SRPC" header, version negotiation, error
//! replies), whose bodies are JSON of the [`super::model`] types — the one service body
//! format of both daemons ([`access_layer::ctl::json`]: replies, paging, fitting).
//!
//! | opcode              | request body                                           | reply body (opcode \| bit 15) |
//! |---------------------|--------------------------------------------------------|-------------------------------|
//! | `0x0301` SESSIONS   | [`ListPage`] `{"start":0}`                             | `{"Ok":{"Sessions":[…]}}`     |
//! | `0x0302` DISKS      | [`ListPage`] `{"start":0}`                             | `{"Ok":{"Disks":[…]}}`        |
//! | `0x0303` LOGIN      | [`LoginSpec`]                                          | `{"Ok":{"LoggedIn":[…]}}`     |
//! | `0x0304` LOGOUT     | [`Logout`] `{"session":3}`                             | `{"Ok":{"LoggedOut":{…}}}`    |
//! | `0x0305` SET_POLICY | [`SetPolicy`] `{"disk":"srp0","policy":"round-robin"}` | `{"Ok":{"Done":{…}}}`         |
//! | `0x0306` SET_PATH   | [`SetPath`] `{"session":3,"enabled":false}`            | `{"Ok":{"Done":{…}}}`         |
//! | `0x0307` PERSISTENT | [`ListPage`] `{"start":0}`                             | `{"Ok":{"Persistent":[…]}}`   |
//! | `0x0308` FORGET     | [`Forget`] `{"index":0}`                               | `{"Ok":{"Forgotten":{…}}}`    |
//! | `0x0309` TARGETS    | [`ListPage`] `{"start":0}`                             | `{"Ok":{"Targets":[…]}}`      |
//! | `0x030a` PORTALS    | [`ListPage`] `{"start":0}`                             | `{"Ok":{"Portals":[…]}}`      |
//! | `0x030b` RELOAD     | `{}`                                                   | `{"Ok":{"Reloaded":{…}}}`     |
//! | `0x030c` POWER      | [`Power`] `{"suspend":true}`                           | `{"Ok":{"Powered":{…}}}`      |
//!
//! - A request body is the JSON of the request's parameters (the opcode says which request):
//!   the payload of the [`HostRequest`] variant, plus the page start for the lists.
//! - Every reply body is the JSON of `Result<HostAnswer, HostControlError>`, so a refusal
//!   (`{"Err":{"NoSuchSession":7}}`) carries its reason to the operator. A request the
//!   service cannot parse is answered by the protocol's error reply instead
//!   ([`CtlStatus::Malformed`], [`CtlStatus::UnknownOpcode`]).
//! - Lists come in pages, since a body is at most [`MAX_BODY`](access_layer::ctl::wire::MAX_BODY) bytes: the reply holds the
//!   entries from `start` on that fit; the client asks again from where the page ended
//!   until a page comes back empty. A list that changes between pages may skip or repeat an
//!   entry at a page boundary (each entry is consistent in itself).
//! - A reply that does not fit even so (one list entry, or the answer to LOGIN, LOGOUT,
//!   SET_POLICY or SET_PATH, over [`MAX_BODY`](access_layer::ctl::wire::MAX_BODY) bytes of JSON) is replaced by a
//!   [`HostControlError::Failed`] saying so: the operator sees why, and for the requests
//!   that change something, that it was carried out.

use super::model::{HostAnswer, HostControlError, HostRequest, LoginSpec};
pub use access_layer::ctl::json::ListPage;
use access_layer::ctl::json::{fit_reply, page, parse_body, parse_reply, to_json};
use access_layer::ctl::wire::CtlStatus;
use serde::{Deserialize, Serialize};

/// List the sessions ([`ListPage`] → a page of `HostAnswer::Sessions`).
pub const SESSIONS: u16 = 0x0301;
/// List the disks ([`ListPage`] → a page of `HostAnswer::Disks`).
pub const DISKS: u16 = 0x0302;
/// Log in ([`LoginSpec`] → `HostAnswer::LoggedIn`).
pub const LOGIN: u16 = 0x0303;
/// Log out ([`Logout`] → `HostAnswer::LoggedOut`).
pub const LOGOUT: u16 = 0x0304;

/// Set a disk's load-balance policy ([`SetPolicy`] → `HostAnswer::Done`).
pub const SET_POLICY: u16 = 0x0305;
/// Take a path out of service or return it ([`SetPath`] → `HostAnswer::Done`).
pub const SET_PATH: u16 = 0x0306;

/// List the persistent logins ([`ListPage`] → a page of `HostAnswer::Persistent`).
pub const PERSISTENT: u16 = 0x0307;
/// Forget a persistent login ([`Forget`] → `HostAnswer::Forgotten`).
pub const FORGET: u16 = 0x0308;

/// List the SRP targets the sweeps found ([`ListPage`] → a page of `HostAnswer::Targets`).
pub const TARGETS: u16 = 0x0309;
/// List the portals ([`ListPage`] → a page of `HostAnswer::Portals`).
pub const PORTALS: u16 = 0x030a;
/// Re-read the configuration file and take it (`{}` → `HostAnswer::Reloaded`).
pub const RELOAD: u16 = 0x030b;
/// Suspend or resume the host's SRP stack ([`Power`] → `HostAnswer::Powered`).
pub const POWER: u16 = 0x030c;

/// The body of a POWER request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Power {
    /// Down (`true`) or up.
    pub suspend: bool,
}

/// The body of a FORGET request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forget {
    /// The persistent login's index.
    pub index: u32,
}

/// The body of a LOGOUT request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Logout {
    /// The session's number.
    pub session: u32,
}

/// The body of a SET_POLICY request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetPolicy {
    /// The disk's name (or identity).
    pub disk: String,
    /// The policy's name.
    pub policy: String,
}

/// The body of a SET_PATH request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetPath {
    /// The session the path runs over.
    pub session: u32,
    /// In service (`true`) or administratively down.
    pub enabled: bool,
}

/// What a reply body carries.
pub type Answer = Result<HostAnswer, HostControlError>;

/// `request`'s opcode and body; for the lists, the page from `start` (ignored otherwise).
pub fn encode_request(
    request: &HostRequest,
    start: u32,
) -> Result<(u16, Vec<u8>), serde_json::Error> {
    Ok(match request {
        HostRequest::Sessions => (SESSIONS, body(&ListPage { start })?),
        HostRequest::Disks => (DISKS, body(&ListPage { start })?),
        HostRequest::Login(spec) => (LOGIN, body(spec)?),
        HostRequest::Logout { session } => (LOGOUT, body(&Logout { session: *session })?),
        HostRequest::SetPolicy { disk, policy } => (
            SET_POLICY,
            body(&SetPolicy {
                disk: disk.clone(),
                policy: policy.clone(),
            })?,
        ),
        HostRequest::SetPath { session, enabled } => (
            SET_PATH,
            body(&SetPath {
                session: *session,
                enabled: *enabled,
            })?,
        ),
        HostRequest::PersistentLogins => (PERSISTENT, body(&ListPage { start })?),
        HostRequest::RemovePersistent { index } => (FORGET, body(&Forget { index: *index })?),
        HostRequest::Targets => (TARGETS, body(&ListPage { start })?),
        HostRequest::Portals => (PORTALS, body(&ListPage { start })?),
        HostRequest::Reload => (RELOAD, b"{}".to_vec()),
        HostRequest::Power { suspend } => (POWER, body(&Power { suspend: *suspend })?),
    })
}

/// The request (and page start, 0 for the others) `opcode` and `body` carry, or the status
/// to answer.
pub fn decode_request(opcode: u16, body: &[u8]) -> Result<(HostRequest, u32), CtlStatus> {
    fn json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, CtlStatus> {
        parse_body(body)
    }
    Ok(match opcode {
        SESSIONS => (HostRequest::Sessions, json::<ListPage>(body)?.start),
        DISKS => (HostRequest::Disks, json::<ListPage>(body)?.start),
        LOGIN => (HostRequest::Login(json::<LoginSpec>(body)?), 0),
        LOGOUT => {
            let Logout { session } = json(body)?;
            (HostRequest::Logout { session }, 0)
        }
        SET_POLICY => {
            let SetPolicy { disk, policy } = json(body)?;
            (HostRequest::SetPolicy { disk, policy }, 0)
        }
        SET_PATH => {
            let SetPath { session, enabled } = json(body)?;
            (HostRequest::SetPath { session, enabled }, 0)
        }
        PERSISTENT => (HostRequest::PersistentLogins, json::<ListPage>(body)?.start),
        FORGET => {
            let Forget { index } = json(body)?;
            (HostRequest::RemovePersistent { index }, 0)
        }
        TARGETS => (HostRequest::Targets, json::<ListPage>(body)?.start),
        PORTALS => (HostRequest::Portals, json::<ListPage>(body)?.start),
        RELOAD => {
            // An empty object and nothing else: the daemon reads its own file.
            let fields: serde_json::Map<String, serde_json::Value> = json(body)?;
            if !fields.is_empty() {
                return Err(CtlStatus::Malformed);
            }
            (HostRequest::Reload, 0)
        }
        POWER => {
            let Power { suspend } = json(body)?;
            (HostRequest::Power { suspend }, 0)
        }
        _ => return Err(CtlStatus::UnknownOpcode),
    })
}

/// The reply body for `answer`: a list cut to its page from `start`, and anything still
/// over the body limit replaced by an error saying so ([`fit_reply`]).
pub fn encode_answer(answer: Answer, start: u32) -> Vec<u8> {
    fn cut<T: Serialize>(
        all: Vec<T>,
        start: u32,
        wrap: fn(Vec<T>) -> HostAnswer,
        what: &str,
    ) -> Answer {
        page::<_, _, HostControlError>(all, start, wrap, what).map_err(HostControlError::Failed)
    }
    let answer = match answer {
        Ok(HostAnswer::Sessions(v)) => cut(v, start, HostAnswer::Sessions, "session"),
        Ok(HostAnswer::Disks(v)) => cut(v, start, HostAnswer::Disks, "disk"),
        Ok(HostAnswer::Persistent(v)) => cut(v, start, HostAnswer::Persistent, "persistent login"),
        Ok(HostAnswer::Targets(v)) => cut(v, start, HostAnswer::Targets, "target"),
        Ok(HostAnswer::Portals(v)) => cut(v, start, HostAnswer::Portals, "portal"),
        other => other,
    };
    fit_reply(
        answer,
        HostControlError::Failed,
        "`srpctl sessions`, `srpctl disks` and `srpctl paths` show the result",
    )
}

/// The answer a reply body carries.
pub fn decode_answer(body: &[u8]) -> Result<Answer, serde_json::Error> {
    parse_reply(body)
}

/// Compact JSON of a request body.
fn body<T: Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    Ok(to_json(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::model::{DiskInfo, PathInfo, ResetInfo, SessionInfo};
    use access_layer::ctl::wire::MAX_BODY;
    use std::net::{IpAddr, Ipv4Addr};

    fn path(i: u32, session: u32) -> PathInfo {
        PathInfo {
            session,
            lun: i,
            ioc_guid: format!("{:#018x}", 0x0002_c903_00a1_b2c0u64 + u64::from(session)),
            ioc_name: format!("ioc{session}"),
            portal: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            local: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            state: "active".into(),
            alua: Some("active/optimized".into()),
            preferred: session == 0,
            weight: 1,
            in_flight: 0,
            reads: u64::from(i),
            writes: 2,
            bytes: 4096,
            errors: 0,
            failures: 0,
            hca_dropped: 0,
            retransmits: 0,
        }
    }

    fn disk(i: u32) -> DiskInfo {
        DiskInfo {
            name: format!("srp{i}"),
            path: format!("/run/srp-host/disks/srp{i}"),
            identity: format!("naa.6001405{i:025x}"),
            vendor: "LIO-ORG".into(),
            product: "srp-target".into(),
            revision: "0001".into(),
            block_size: 512,
            blocks: 1 << 21,
            policy: "round-robin".into(),
            queued: 0,
            reads: u64::from(i),
            writes: 2,
            flushes: 3,
            errors: 0,
            failovers: 1,
            latency: Default::default(),
            paths: vec![path(i, i % 7), path(i, i % 7 + 1)],
        }
    }

    fn session(id: u32, disks: usize) -> SessionInfo {
        SessionInfo {
            id,
            portal: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            local: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            ioc_guid: "0x0002c90300a1b2c3".into(),
            ioc_name: "ioc0".into(),
            id_ext: "0x0000000000000001".into(),
            service_id: "0x0002c90300a1b2c3".into(),
            state: "running".into(),
            logins: 1,
            losses: 0,
            last_error: None,
            outstanding: 0,
            disks: (0..disks).map(|i| format!("srp{i}")).collect(),
            login: "ib-cm".into(),
            driver: "storport".into(),
            hca: [("icrc_errors".to_owned(), 1u64)].into_iter().collect(),
            provider: "soft soft:10.0.0.2:4791 port 1".into(),
            fencing: "per-io".into(),
            resets: ResetInfo {
                sequences: 2,
                lun_resets: 3,
                refused: 0,
                escalated: 1,
            },
        }
    }

    /// Every request: known body bytes, and decode(encode(x)) == x.
    #[test]
    fn requests_round_trip() {
        let spec = LoginSpec {
            portal: "10.0.0.1".parse().expect("ip"),
            local: None,
            ioc_guid: Some("0x0002c90300a1b2c3".into()),
            persistent: true,
            driver: Some("iscsi-model".into()),
        };
        let cases: [(HostRequest, u32, u16, &str); 13] = [
            (HostRequest::Targets, 1, TARGETS, r#"{"start":1}"#),
            (HostRequest::Portals, 0, PORTALS, r#"{"start":0}"#),
            (HostRequest::Sessions, 5, SESSIONS, r#"{"start":5}"#),
            (HostRequest::Disks, 0, DISKS, r#"{"start":0}"#),
            (
                HostRequest::Login(spec),
                0,
                LOGIN,
                r#"{"portal":"10.0.0.1","local":null,"ioc_guid":"0x0002c90300a1b2c3","persistent":true,"driver":"iscsi-model"}"#,
            ),
            (
                HostRequest::PersistentLogins,
                2,
                PERSISTENT,
                r#"{"start":2}"#,
            ),
            (
                HostRequest::RemovePersistent { index: 4 },
                0,
                FORGET,
                r#"{"index":4}"#,
            ),
            (
                HostRequest::Logout { session: 3 },
                0,
                LOGOUT,
                r#"{"session":3}"#,
            ),
            (
                HostRequest::SetPolicy {
                    disk: "srp0".into(),
                    policy: "least-queue-depth".into(),
                },
                0,
                SET_POLICY,
                r#"{"disk":"srp0","policy":"least-queue-depth"}"#,
            ),
            (
                HostRequest::SetPath {
                    session: 2,
                    enabled: false,
                },
                0,
                SET_PATH,
                r#"{"session":2,"enabled":false}"#,
            ),
            (
                HostRequest::SetPath {
                    session: 9,
                    enabled: true,
                },
                0,
                SET_PATH,
                r#"{"session":9,"enabled":true}"#,
            ),
            (
                HostRequest::Power { suspend: true },
                0,
                POWER,
                r#"{"suspend":true}"#,
            ),
            (
                HostRequest::Power { suspend: false },
                0,
                POWER,
                r#"{"suspend":false}"#,
            ),
        ];
        for (request, start, opcode, text) in cases {
            let (op, body) = encode_request(&request, start).expect("encode");
            assert_eq!((op, body.as_slice()), (opcode, text.as_bytes()));
            assert_eq!(decode_request(op, &body), Ok((request, start)));
        }
    }

    #[test]
    fn bad_requests_are_refused() {
        for op in [
            SESSIONS, DISKS, LOGIN, LOGOUT, SET_POLICY, SET_PATH, PERSISTENT, FORGET, TARGETS,
            PORTALS,
        ] {
            for body in [
                &b""[..],
                b"{",
                b"{\"start\":",
                b"\xff\xfe",
                b"{} trailing",
                b"[]",
                b"\"x\"",
            ] {
                assert_eq!(
                    decode_request(op, body),
                    Err(CtlStatus::Malformed),
                    "{op:#x} {body:?}"
                );
            }
        }
        // A start that is not a u32, a portal that is not an address.
        assert_eq!(
            decode_request(SESSIONS, br#"{"start":-1}"#),
            Err(CtlStatus::Malformed)
        );
        assert_eq!(
            decode_request(
                LOGIN,
                br#"{"portal":"nowhere","local":null,"ioc_guid":null}"#
            ),
            Err(CtlStatus::Malformed)
        );
        // A policy that is not a string, a path switch without its state.
        assert_eq!(
            decode_request(SET_POLICY, br#"{"disk":"srp0","policy":3}"#),
            Err(CtlStatus::Malformed)
        );
        assert_eq!(
            decode_request(SET_PATH, br#"{"session":1}"#),
            Err(CtlStatus::Malformed)
        );
        // A power request without its direction, or with a word for it.
        assert_eq!(decode_request(POWER, br#"{}"#), Err(CtlStatus::Malformed));
        assert_eq!(
            decode_request(POWER, br#"{"suspend":"yes"}"#),
            Err(CtlStatus::Malformed)
        );
        assert_eq!(
            decode_request(0x030d, br#"{"start":0}"#),
            Err(CtlStatus::UnknownOpcode)
        );
        assert_eq!(
            decode_request(0x0201, br#"{"start":0}"#),
            Err(CtlStatus::UnknownOpcode)
        );
    }

    /// Every answer: known body bytes, and decode(encode(x)) == x.
    #[test]
    fn answers_round_trip() {
        let cases: [(Answer, &str); 8] = [
            (
                Ok(HostAnswer::LoggedOut {
                    disks_removed: vec!["srp0".into(), "srp1".into()],
                }),
                r#"{"Ok":{"LoggedOut":{"disks_removed":["srp0","srp1"]}}}"#,
            ),
            (Ok(HostAnswer::Disks(vec![])), r#"{"Ok":{"Disks":[]}}"#),
            (
                Err(HostControlError::NoSuchSession(7)),
                r#"{"Err":{"NoSuchSession":7}}"#,
            ),
            (
                Err(HostControlError::Failed(
                    "login rejected: no channel".into(),
                )),
                r#"{"Err":{"Failed":"login rejected: no channel"}}"#,
            ),
            (Err(HostControlError::Stopping), r#"{"Err":"Stopping"}"#),
            (
                Ok(HostAnswer::Done {
                    disks: vec!["srp0".into()],
                }),
                r#"{"Ok":{"Done":{"disks":["srp0"]}}}"#,
            ),
            (
                Err(HostControlError::NoSuchDisk("srp9".into())),
                r#"{"Err":{"NoSuchDisk":"srp9"}}"#,
            ),
            (
                Err(HostControlError::NoSuchPolicy("fastest".into())),
                r#"{"Err":{"NoSuchPolicy":"fastest"}}"#,
            ),
        ];
        for (answer, text) in cases {
            let body = encode_answer(answer.clone(), 0);
            assert_eq!(String::from_utf8_lossy(&body), text);
            assert_eq!(decode_answer(&body).expect("decode"), answer);
        }
        for answer in [
            Ok(HostAnswer::Sessions(vec![session(1, 3), session(2, 0)])),
            Ok(HostAnswer::Disks(vec![disk(0), disk(1)])),
            Ok(HostAnswer::LoggedIn(vec![session(4, 2)])),
            Err(HostControlError::NothingToLogIn(
                "no SRP IOC at 10.0.0.1".into(),
            )),
            Err(HostControlError::NoLocalAddress(
                "10.0.0.1".parse().expect("ip"),
            )),
            Err(HostControlError::BadRequest("bad GUID".into())),
        ] {
            let body = encode_answer(answer.clone(), 0);
            assert_eq!(decode_answer(&body).expect("decode"), answer);
        }
    }

    /// A session as an older daemon answers it (no `resets`): decoded, resets all zero; the
    /// counters travel by name.
    #[test]
    fn a_session_without_resets_decodes_with_none() {
        let mut old = serde_json::to_value(session(1, 0)).expect("json");
        let fields = old.as_object_mut().expect("object");
        assert_eq!(
            fields.remove("resets"),
            Some(
                serde_json::json!({"sequences": 2, "lun_resets": 3, "refused": 0, "escalated": 1})
            )
        );
        let body =
            serde_json::to_vec(&serde_json::json!({ "Ok": { "Sessions": [old] } })).expect("json");
        let Ok(HostAnswer::Sessions(got)) = decode_answer(&body).expect("decode") else {
            panic!("not a session list");
        };
        assert_eq!(got[0].resets, ResetInfo::default());
        assert_eq!(got[0].hca, session(1, 0).hca);
    }

    #[test]
    fn truncated_or_garbled_answers_error() {
        let body = encode_answer(Ok(HostAnswer::Disks(vec![disk(1), disk(2)])), 0);
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

    /// 2000 disks, page by page as the client asks: every page fits, none is empty before
    /// the end, and together they are the list.
    #[test]
    fn long_lists_come_in_pages_that_fit() {
        let all: Vec<DiskInfo> = (0..2000).map(disk).collect();
        let mut got = Vec::new();
        let mut pages = 0;
        loop {
            let start = u32::try_from(got.len()).expect("u32");
            let body = encode_answer(Ok(HostAnswer::Disks(all.clone())), start);
            assert!(body.len() <= MAX_BODY as usize);
            let Ok(HostAnswer::Disks(page)) = decode_answer(&body).expect("decode") else {
                panic!("not a disk page");
            };
            if page.is_empty() {
                break;
            }
            pages += 1;
            got.extend(page);
        }
        assert_eq!(got, all);
        assert!(pages > 100, "{pages} pages");
        // Past the end: an empty page.
        let body = encode_answer(Ok(HostAnswer::Sessions(vec![session(1, 0)])), 9);
        assert_eq!(
            decode_answer(&body).expect("decode"),
            Ok(HostAnswer::Sessions(vec![]))
        );
    }

    #[test]
    fn answers_too_large_become_errors_that_fit() {
        // One session with more disks than a body holds: refused by name and index.
        let sessions = vec![session(1, 1), session(2, 1000)];
        let body = encode_answer(Ok(HostAnswer::Sessions(sessions.clone())), 0);
        assert_eq!(
            decode_answer(&body).expect("decode"),
            Ok(HostAnswer::Sessions(vec![session(1, 1)]))
        );
        let body = encode_answer(Ok(HostAnswer::Sessions(sessions)), 1);
        match decode_answer(&body).expect("decode") {
            Err(HostControlError::Failed(why)) => {
                assert!(why.starts_with("session entry 1 is "), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // A logout answer too large: carried out, said so.
        let disks_removed = (0..1000).map(|i| format!("srp{i}")).collect();
        let body = encode_answer(Ok(HostAnswer::LoggedOut { disks_removed }), 0);
        assert!(body.len() <= MAX_BODY as usize);
        match decode_answer(&body).expect("decode") {
            Err(HostControlError::Failed(why)) => assert!(why.contains("carried out"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A daemon error text too long: cut, on a char boundary.
        let body = encode_answer(Err(HostControlError::Failed("é".repeat(5000))), 0);
        assert!(body.len() <= MAX_BODY as usize);
        match decode_answer(&body).expect("decode") {
            Err(HostControlError::Failed(why)) => assert!(why.ends_with("é…"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
