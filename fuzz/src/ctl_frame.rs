//! A control socket connection, sans-IO: the input is the byte stream a client wrote. Each
//! message is read as the server reads it ([`read_message`]), answered by the server's own
//! [`answer`] over a service, written as the server writes it and read back as a client
//! reads it. Checked for every message: the reply encodes, fits a body, reads back equal
//! and echoes the request id; a request that decoded re-encodes to the same opcode and a
//! body that decodes to the same request; a request that did not decode is answered with
//! the error naming why; framing errors end the connection.
//!
//! [`stream`] builds the client's bytes from the input: raw, or a sequence of messages with
//! valid headers around bodies the target's own generator makes, so that the services'
//! body parsers are reached.

use crate::input::Input;
use access_layer::ctl::frame::{read_message, write_message};
use access_layer::ctl::wire::{CtlHeader, CtlStatus, ErrorReply, MAX_BODY, Opcode};
use access_layer::ctl::{CtlService, Reply, Request, answer};

/// Messages answered per input at most.
const MAX_MESSAGES: usize = 64;

/// One request as the service saw it and what it answered.
pub struct Exchange<'a> {
    /// The request's header.
    pub header: CtlHeader,
    /// Its body.
    pub body: &'a [u8],
    /// What it decoded to, or the status it was refused with.
    pub request: Result<Request, CtlStatus>,
    /// The reply.
    pub reply: &'a Reply,
}

/// The error reply with `status`.
pub fn error(status: CtlStatus) -> Reply {
    Reply::Error(ErrorReply::new(status))
}

/// Serves the connection whose client wrote `stream`; `check` sees every request that had
/// a readable header.
pub fn serve(service: &dyn CtlService, stream: &[u8], mut check: impl FnMut(Exchange<'_>)) {
    let mut r = stream;
    for _ in 0..MAX_MESSAGES {
        let read = read_message(&mut r, &|| true);
        let message = read.as_ref().ok().cloned();
        let Some(a) = answer(service, read) else {
            return;
        };
        let (op, body) = a.reply.encode().expect("every reply encodes");
        let mut wire = Vec::new();
        write_message(&mut wire, a.version, a.request_id, op, &body).expect("into a Vec");
        let (h, back_body) = read_message(&mut &wire[..], &|| true).expect("the reply reads");
        assert!(
            back_body.len() <= MAX_BODY as usize,
            "a reply body over MAX_BODY"
        );
        assert_eq!(Reply::decode(&h, &back_body).as_ref(), Ok(&a.reply));
        assert_eq!(
            h.request_id, a.request_id,
            "the reply echoes the request id"
        );
        if let Some((header, body)) = &message {
            let request = Request::decode(header, body);
            match &request {
                Ok(req) => {
                    let (op, again) = req.encode().expect("a decoded request encodes");
                    assert_eq!(op, header.opcode, "re-encoded opcode");
                    let h2 = CtlHeader {
                        length: again.len() as u32,
                        ..*header
                    };
                    assert_eq!(Request::decode(&h2, &again).as_ref(), Ok(req));
                    if matches!(req, Request::Hello(_)) {
                        assert!(matches!(
                            a.reply,
                            Reply::Hello(_) | Reply::Error(ErrorReply { .. })
                        ));
                    }
                }
                Err(status) => assert_eq!(a.reply, error(*status), "refusal of {header:?}"),
            }
            check(Exchange {
                header: *header,
                body,
                request,
                reply: &a.reply,
            });
        }
        if a.close {
            return;
        }
    }
}

/// The client's bytes: the input as it is (first byte even), or messages built from it,
/// each body from `body(input, opcode)` when the opcode is one of `service_opcodes`.
pub fn stream(
    input: &mut Input<'_>,
    service_opcodes: &[u16],
    mut body: impl FnMut(&mut Input<'_>, u16) -> Vec<u8>,
) -> Vec<u8> {
    if input.u8().is_multiple_of(2) {
        return input.rest().to_vec();
    }
    let mut out = Vec::new();
    while !input.is_empty() && out.len() < 64 * 1024 {
        let opcode: u16 = match input.below(8) {
            0 => input.u16(),
            1 => input.pick(&[
                Opcode::Hello.into(),
                Opcode::ListCas.into(),
                Opcode::OpenCa.into(),
                Opcode::QueryCa.into(),
                Opcode::QueryPort.into(),
            ]),
            _ => input.pick(service_opcodes),
        };
        let b = match input.below(6) {
            0 => {
                let n = input.below(128);
                input.bytes(n).to_vec()
            }
            _ => body(input, opcode),
        };
        let version = if input.below(16) == 0 { input.u16() } else { 1 };
        let mut length = b.len() as u32;
        if input.below(16) == 0 {
            length = input.u32() % (MAX_BODY + 64);
        }
        let header = CtlHeader {
            version,
            opcode: opcode.into(),
            length,
            request_id: u64::from(input.u8()),
        };
        let mut buf = [0u8; access_layer::ctl::wire::HEADER_LEN];
        wirekit::WireRepr::emit(&header, &mut buf).expect("a header fits");
        out.extend(buf);
        out.extend(b);
    }
    out
}
