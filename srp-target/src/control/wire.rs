//! The target's control messages on the socket: service messages of the access layer's
//! control protocol ([`access_layer::ctl`]: "SRPC" header, version negotiation, error
//! replies), whose bodies are JSON of the [`super::model`] types — the one service body
//! format of both daemons ([`access_layer::ctl::json`]: replies, paging, fitting).
//!
//! | opcode             | request body                                            | reply body (opcode \| bit 15)    |
//! |--------------------|---------------------------------------------------------|----------------------------------|
//! | `0x0201` IOCS      | [`ListPage`] `{"start":0}`                              | `{"Ok":{"Iocs":[…]}}`            |
//! | `0x0202` PORTS     | [`ListPage`]                                            | `{"Ok":{"Ports":[…]}}`           |
//! | `0x0203` LUNS      | [`ListPage`]                                            | `{"Ok":{"Luns":[…]}}`            |
//! | `0x0204` SESSIONS  | [`ListPage`]                                            | `{"Ok":{"Sessions":[…]}}`        |
//! | `0x0205` CONFIG    | [`ListPage`] (lines of the running config's TOML)       | `{"Ok":{"Config":["[target]",…]}}` |
//! | `0x0206` METRICS   | [`ListPage`] (lines of the Prometheus text exposition)  | `{"Ok":{"Metrics":["# HELP …",…]}}` |
//! | `0x0210` SET_IOC   | [`SetIoc`] `{"name":"ioc-a","enabled":false,"mode":"Logout"}` | `{"Ok":{"Done":{"sessions_ended":2}}}` |
//! | `0x0211` SET_PORT  | [`SetPort`] `{"name":"p0","enabled":true}`              | `{"Ok":{"Done":{…}}}`            |
//! | `0x0212` SET_LUN   | [`SetLun`] `{"name":"vol1","clear_flush_error":true}`   | `{"Ok":{"Done":{…}}}`            |
//! | `0x0213` RELOAD    | `{}`                                                    | `{"Ok":{"Reloaded":{"changes":[…],"sessions_ended":0}}}` |
//!
//! Every reply body is the JSON of `Result<ControlAnswer, ControlError>`: a refusal says
//! why (`{"Err":{"NoSuchIoc":"ioc-z"}}`, `{"Err":{"ReloadRefused":["port p0: …"]}}`). A
//! body the service cannot parse is answered by the protocol's error reply
//! ([`CtlStatus::Malformed`], [`CtlStatus::UnknownOpcode`]).

use super::model::{ControlAnswer, ControlError, ControlRequest, DisableMode};
pub use access_layer::ctl::json::ListPage;
use access_layer::ctl::json::{fit_reply, page, parse_body, parse_reply, to_json};
use access_layer::ctl::wire::CtlStatus;
use serde::{Deserialize, Serialize};

/// List the IOCs ([`ListPage`] → a page of `ControlAnswer::Iocs`).
pub const LIST_IOCS: u16 = 0x0201;
/// List the HCA ports ([`ListPage`] → a page of `ControlAnswer::Ports`).
pub const LIST_PORTS: u16 = 0x0202;
/// List the LUNs ([`ListPage`] → a page of `ControlAnswer::Luns`).
pub const LIST_LUNS: u16 = 0x0203;
/// List the sessions ([`ListPage`] → a page of `ControlAnswer::Sessions`).
pub const LIST_SESSIONS: u16 = 0x0204;
/// The running configuration's lines ([`ListPage`] → a page of `ControlAnswer::Config`).
pub const CONFIG: u16 = 0x0205;
/// The metrics' lines, Prometheus text ([`ListPage`] → a page of `ControlAnswer::Metrics`).
pub const METRICS: u16 = 0x0206;
/// Enable or disable an IOC ([`SetIoc`] → `ControlAnswer::Done`).
pub const SET_IOC: u16 = 0x0210;
/// Bring a port up or down ([`SetPort`] → `ControlAnswer::Done`).
pub const SET_PORT: u16 = 0x0211;
/// Act on a LUN: clear its latched flush error ([`SetLun`] → `ControlAnswer::Done`, the
/// count being 1 if one was latched).
pub const SET_LUN: u16 = 0x0212;
/// Re-read the configuration file and apply it (`{}` → `ControlAnswer::Reloaded`).
pub const RELOAD: u16 = 0x0213;

/// The body of a SET_IOC request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetIoc {
    /// The IOC's name.
    pub name: String,
    /// On or off.
    pub enabled: bool,
    /// When turning off: what its sessions get.
    pub mode: DisableMode,
}

/// The body of a SET_PORT request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetPort {
    /// The port's name.
    pub name: String,
    /// Up or down.
    pub enabled: bool,
}

/// The body of a SET_LUN request: what to do to the LUN (one action today).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetLun {
    /// The LUN's name.
    pub name: String,
    /// Clear its latched flush error.
    pub clear_flush_error: bool,
}

/// The body of a RELOAD request: nothing (the daemon re-reads its own file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reload {}

/// What a reply body carries.
pub type Answer = Result<ControlAnswer, ControlError>;

/// `request`'s opcode and body; for the lists, the page from `start` (ignored otherwise).
/// `None` for the requests that exist only in process ([`ControlRequest::Apply`]).
pub fn encode_request(request: &ControlRequest, start: u32) -> Option<(u16, Vec<u8>)> {
    let list = |op| Some((op, to_json(&ListPage { start })));
    match request {
        ControlRequest::ListIocs => list(LIST_IOCS),
        ControlRequest::ListPorts => list(LIST_PORTS),
        ControlRequest::ListLuns => list(LIST_LUNS),
        ControlRequest::ListSessions => list(LIST_SESSIONS),
        ControlRequest::RunningConfig => list(CONFIG),
        ControlRequest::Metrics => list(METRICS),
        ControlRequest::SetIoc {
            name,
            enabled,
            mode,
        } => Some((
            SET_IOC,
            to_json(&SetIoc {
                name: name.clone(),
                enabled: *enabled,
                mode: *mode,
            }),
        )),
        ControlRequest::SetPort { name, enabled } => Some((
            SET_PORT,
            to_json(&SetPort {
                name: name.clone(),
                enabled: *enabled,
            }),
        )),
        ControlRequest::ClearFlushError { name } => Some((
            SET_LUN,
            to_json(&SetLun {
                name: name.clone(),
                clear_flush_error: true,
            }),
        )),
        ControlRequest::Reload => Some((RELOAD, to_json(&Reload {}))),
        ControlRequest::Apply(_) => None,
    }
}

/// The request (and page start, 0 for the others) `opcode` and `body` carry, or the status
/// to answer.
pub fn decode_request(opcode: u16, body: &[u8]) -> Result<(ControlRequest, u32), CtlStatus> {
    let list = |r| Ok((r, parse_body::<ListPage>(body)?.start));
    match opcode {
        LIST_IOCS => list(ControlRequest::ListIocs),
        LIST_PORTS => list(ControlRequest::ListPorts),
        LIST_LUNS => list(ControlRequest::ListLuns),
        LIST_SESSIONS => list(ControlRequest::ListSessions),
        CONFIG => list(ControlRequest::RunningConfig),
        METRICS => list(ControlRequest::Metrics),
        SET_IOC => {
            let SetIoc {
                name,
                enabled,
                mode,
            } = parse_body(body)?;
            Ok((
                ControlRequest::SetIoc {
                    name,
                    enabled,
                    mode,
                },
                0,
            ))
        }
        SET_PORT => {
            let SetPort { name, enabled } = parse_body(body)?;
            Ok((ControlRequest::SetPort { name, enabled }, 0))
        }
        SET_LUN => match parse_body(body)? {
            SetLun {
                name,
                clear_flush_error: true,
            } => Ok((ControlRequest::ClearFlushError { name }, 0)),
            // Nothing asked: a list of what a LUN can be told grows here.
            SetLun { .. } => Err(CtlStatus::Malformed),
        },
        RELOAD => {
            // An empty object and nothing else: the daemon reads its own file, never one
            // the request names.
            let fields: serde_json::Map<String, serde_json::Value> = parse_body(body)?;
            if !fields.is_empty() {
                return Err(CtlStatus::Malformed);
            }
            Ok((ControlRequest::Reload, 0))
        }
        _ => Err(CtlStatus::UnknownOpcode),
    }
}

/// The reply body for `answer`: a list cut to its page from `start`, and anything still
/// over the body limit replaced by an error saying so.
pub fn encode_answer(answer: Answer, start: u32) -> Vec<u8> {
    fn cut<T: Serialize>(
        all: Vec<T>,
        start: u32,
        wrap: fn(Vec<T>) -> ControlAnswer,
        what: &str,
    ) -> Answer {
        page::<_, _, ControlError>(all, start, wrap, what).map_err(ControlError::Failed)
    }
    let answer = match answer {
        Ok(ControlAnswer::Iocs(v)) => cut(v, start, ControlAnswer::Iocs, "IOC"),
        Ok(ControlAnswer::Ports(v)) => cut(v, start, ControlAnswer::Ports, "port"),
        Ok(ControlAnswer::Luns(v)) => cut(v, start, ControlAnswer::Luns, "LUN"),
        Ok(ControlAnswer::Sessions(v)) => cut(v, start, ControlAnswer::Sessions, "session"),
        Ok(ControlAnswer::Config(v)) => cut(v, start, ControlAnswer::Config, "config line"),
        Ok(ControlAnswer::Metrics(v)) => cut(v, start, ControlAnswer::Metrics, "metrics line"),
        other => other,
    };
    fit_reply(
        answer,
        ControlError::Failed,
        "the daemon's log and `srpctl target config` show the result",
    )
}

/// The answer a reply body carries.
pub fn decode_answer(body: &[u8]) -> Result<Answer, serde_json::Error> {
    parse_reply(body)
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
