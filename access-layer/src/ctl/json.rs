//! The body format of every daemon's service messages: JSON (serde_json, compact).
//!
//! The control protocol's header, version negotiation and error replies are the access
//! layer's fixed binary layout ([`super::wire`]); what a daemon's own service carries in a
//! body — requests, answers, lists — is JSON of that daemon's model types, the same way in
//! the target and the host daemon:
//! - a request body is the JSON of the request's parameters (the opcode says which
//!   request); a list request is a [`ListPage`] `{"start":0}`;
//! - a reply body is the JSON of `Result<Answer, Error>`, so a refusal carries its reason
//!   (`{"Err":{"NoSuchLun":"vol9"}}`); a body the service cannot parse is answered by the
//!   protocol's error reply instead ([`CtlStatus::Malformed`]);
//! - lists come in pages, since a body is at most [`MAX_BODY`] bytes: the reply holds the
//!   entries from `start` on that fit ([`page`]); the client asks again from where the page
//!   ended until a page comes back empty. A list that changes between pages may skip or
//!   repeat an entry at a page boundary (each entry is consistent in itself);
//! - a reply that does not fit even so is replaced by the daemon's error saying so
//!   ([`fit_reply`]), so the operator learns why.
//!
//! JSON rather than another fixed layout: the lists carry names, addresses and counters
//! that grow with every release; a field added to an answer is ignored by an older client
//! and defaults for a newer one (`#[serde(default)]`), where a fixed layout would need a new
//! protocol version for each.
#[allow(unused_imports)]
use crate::prelude::*;

use super::wire::{CtlStatus, MAX_BODY};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The body of a list request: entries from `start` on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListPage {
    /// Index of the first entry wanted.
    pub start: u32,
}

/// The value a request body carries, or [`CtlStatus::Malformed`].
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, CtlStatus> {
    serde_json::from_slice(body).map_err(|_| CtlStatus::Malformed)
}

/// Compact JSON of a model value. Model types have string keys and no floats that could
/// fail, so this never fails in practice; if it did, the empty body is answered and the
/// client reports a reply that does not parse.
pub fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// The entries of `all` from `start` on that fit in one body once wrapped by `wrap` into
/// the reply (`Ok(wrap(entries))`); `Err` with the reason if the first of them does not
/// fit alone (`what` names the kind of entry in it).
pub fn page<T, A, E>(
    all: Vec<T>,
    start: u32,
    wrap: impl Fn(Vec<T>) -> A,
    what: &str,
) -> Result<A, String>
where
    T: Serialize,
    A: Serialize,
    E: Serialize,
{
    let empty = to_json(&Ok::<_, E>(wrap(Vec::new()))).len();
    let budget = (MAX_BODY as usize).saturating_sub(empty);
    let (mut used, mut entries) = (0usize, Vec::new());
    for (index, entry) in all.into_iter().enumerate().skip(start as usize) {
        // Compact JSON: entries joined by commas inside the brackets.
        let len = to_json(&entry).len() + usize::from(!entries.is_empty());
        if used.saturating_add(len) > budget {
            if entries.is_empty() {
                return Err(format!(
                    "{what} entry {index} is {len} bytes of JSON, more than a control socket \
                     message carries ({MAX_BODY})"
                ));
            }
            break;
        }
        used += len;
        entries.push(entry);
    }
    Ok(wrap(entries))
}

/// The reply body for `answer`, never longer than [`MAX_BODY`]: an answer that does not
/// fit becomes `failed(why)` — saying the request was carried out (`shown_by` tells where
/// its result can be seen) —, and an error whose text does not fit is cut.
pub fn fit_reply<A, E>(
    answer: Result<A, E>,
    failed: impl Fn(String) -> E,
    shown_by: &str,
) -> Vec<u8>
where
    A: Serialize,
    E: Serialize + std::fmt::Display,
{
    let body = to_json(&answer);
    if body.len() <= MAX_BODY as usize {
        return body;
    }
    let why = match &answer {
        Ok(_) => format!(
            "the request was carried out, but its answer is {} bytes of JSON, more than a \
             control socket message carries ({MAX_BODY}); {shown_by}",
            body.len()
        ),
        // The daemon's own text, cut to fit even if every byte is escaped (`\u00XX`: 6).
        Err(e) => {
            let mut text = e.to_string();
            let mut cut = ((MAX_BODY as usize - 64) / 6).min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text + "…"
        }
    };
    to_json(&Err::<A, E>(failed(why)))
}

/// The answer a reply body carries.
pub fn parse_reply<A: DeserializeOwned, E: DeserializeOwned>(
    body: &[u8],
) -> Result<Result<A, E>, serde_json::Error> {
    serde_json::from_slice(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    enum Answer {
        Names(Vec<String>),
        Done { n: u32 },
    }

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
    enum Error {
        #[error("{0}")]
        Failed(String),
        #[error("no such thing {0:?}")]
        NoSuch(String),
    }

    fn names(n: usize, len: usize) -> Vec<String> {
        (0..n).map(|i| format!("{i:0len$}")).collect()
    }

    #[test]
    fn list_pages_carry_every_entry_once_and_fit() {
        let all = names(3000, 12);
        let mut got = Vec::new();
        let mut pages = 0;
        loop {
            let start = u32::try_from(got.len()).expect("u32");
            let answer = page::<_, _, Error>(all.clone(), start, Answer::Names, "name")
                .map_err(Error::Failed);
            let body = fit_reply(answer, Error::Failed, "");
            assert!(body.len() <= MAX_BODY as usize);
            let Ok(Answer::Names(p)) = parse_reply::<Answer, Error>(&body).expect("json") else {
                panic!("not a page");
            };
            if p.is_empty() {
                break;
            }
            pages += 1;
            got.extend(p);
        }
        assert_eq!(got, all);
        assert!(pages > 5, "{pages}");
    }

    #[test]
    fn an_entry_too_large_for_a_body_is_named() {
        let mut all = names(2, 4);
        all.push("x".repeat(5000));
        let first = page::<_, _, Error>(all.clone(), 0, Answer::Names, "name").expect("fits");
        assert_eq!(first, Answer::Names(names(2, 4)));
        let why = page::<_, _, Error>(all, 2, Answer::Names, "name").expect_err("too large");
        assert!(why.starts_with("name entry 2 is 5002 bytes"), "{why}");
    }

    #[test]
    fn replies_too_large_become_errors_that_fit() {
        let big = Ok::<_, Error>(Answer::Names(names(1000, 8)));
        let body = fit_reply(big, Error::Failed, "`x list` shows it");
        assert!(body.len() <= MAX_BODY as usize);
        match parse_reply::<Answer, Error>(&body).expect("json") {
            Err(Error::Failed(why)) => {
                assert!(why.contains("carried out") && why.ends_with("`x list` shows it"));
            }
            other => panic!("{other:?}"),
        }
        let body = fit_reply(
            Err::<Answer, _>(Error::Failed("é".repeat(5000))),
            Error::Failed,
            "",
        );
        assert!(body.len() <= MAX_BODY as usize);
        match parse_reply::<Answer, Error>(&body).expect("json") {
            Err(Error::Failed(why)) => assert!(why.ends_with("é…"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bodies_known_bytes_and_bad_ones() {
        assert_eq!(to_json(&ListPage { start: 3 }), br#"{"start":3}"#);
        assert_eq!(
            parse_body::<ListPage>(br#"{"start":7}"#),
            Ok(ListPage { start: 7 })
        );
        for bad in [&b""[..], b"{", b"{\"start\":-1}", b"[]", b"\xff", b"{} x"] {
            assert_eq!(
                parse_body::<ListPage>(bad),
                Err(CtlStatus::Malformed),
                "{bad:?}"
            );
        }
        let ok = to_json(&Ok::<_, Error>(Answer::Done { n: 2 }));
        assert_eq!(ok, br#"{"Ok":{"Done":{"n":2}}}"#);
        let err = to_json(&Err::<Answer, _>(Error::NoSuch("vol9".into())));
        assert_eq!(err, br#"{"Err":{"NoSuch":"vol9"}}"#);
        for len in 0..ok.len() {
            assert!(parse_reply::<Answer, Error>(&ok[..len]).is_err());
        }
    }
}
