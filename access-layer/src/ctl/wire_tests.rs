//! The four wire tests per control message type (STYLE.md): known bytes decode, emit into
//! 0xa5 reproduces them, parse(emit(x)) == x, truncation errors.
#[allow(unused_imports)]
use crate::prelude::*;

use super::*;
use wirekit::wire_repr::check;

/// Generates the four tests for one type from its known bytes and value.
macro_rules! four_tests {
    ($name:ident, $ty:ty, $bytes:expr, $value:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn decodes() {
                check::decodes::<$ty>(&$bytes, &$value);
            }
            #[test]
            fn emits() {
                check::emits(&$value, &$bytes);
            }
            #[test]
            fn round_trips() {
                check::round_trips(&$value, &mut Vec::new());
            }
            #[test]
            fn truncation_errors() {
                check::truncation_errors::<$ty>(&$bytes);
            }
        }
    };
}

const HEADER: [u8; 24] = [
    0x53, 0x52, 0x50, 0x43, // magic "SRPC"
    0x00, 0x01, // version 1
    0x00, 0x03, // opcode OpenCa
    0x00, 0x00, 0x00, 0x08, // length 8
    0, 0, 0, 0, // reserved
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // request id
];
fn header() -> CtlHeader {
    CtlHeader {
        version: 1,
        opcode: Opcode::OpenCa,
        length: 8,
        request_id: 0x0102_0304_0506_0708,
    }
}
four_tests!(ctl_header, CtlHeader, HEADER, header());

#[test]
fn header_with_bad_magic_is_refused() {
    let mut b = HEADER;
    b[0] = b'X';
    assert!(matches!(
        CtlHeader::parse(&b),
        Err(WireError::BadField { field: "magic", .. })
    ));
}

#[test]
fn unknown_opcode_survives() {
    let mut b = HEADER;
    b[6..8].copy_from_slice(&[0x12, 0x34]);
    let h = CtlHeader::parse(&b).expect("parse");
    assert_eq!(h.opcode, Opcode::Unknown(0x1234));
}

const HELLO: [u8; 8] = [0x00, 0x01, 0x00, 0x02, 0, 0, 0, 0]; // min 1, max 2, reserved
four_tests!(
    hello,
    Hello,
    HELLO,
    Hello {
        min_version: 1,
        max_version: 2
    }
);

const HELLO_REPLY: [u8; 8] = [0x00, 0x01, 0, 0, 0x00, 0x00, 0x10, 0x00]; // v1, rsvd, 4096
four_tests!(
    hello_reply,
    HelloReply,
    HELLO_REPLY,
    HelloReply {
        version: 1,
        max_body: 4096
    }
);

fn ca_bytes() -> [u8; 48] {
    let mut b = [0u8; 48];
    b[..8].copy_from_slice(&0x0002_c903_0000_1234u64.to_be_bytes()); // guid
    b[8] = 2; // ports; 7 reserved bytes follow
    b[16..22].copy_from_slice(b"soft_0"); // name, NUL-padded to 32
    b
}
fn ca() -> CaEntry {
    CaEntry {
        guid: 0x0002_c903_0000_1234,
        ports: 2,
        name: "soft_0".into(),
    }
}
four_tests!(ca_entry, CaEntry, ca_bytes(), ca());

fn list_bytes() -> Vec<u8> {
    let mut b = vec![0, 0, 0, 1, 0, 0, 0, 0]; // count 1, reserved
    b.extend_from_slice(&ca_bytes());
    b
}
four_tests!(
    list_cas_reply,
    ListCasReply,
    list_bytes(),
    ListCasReply { cas: vec![ca()] }
);

#[test]
fn list_with_too_many_entries_is_refused() {
    let b = [0, 0, 0x10, 0, 0, 0, 0, 0]; // count 4096
    assert!(ListCasReply::parse(&b).is_err());
}

const OPEN_CA: [u8; 8] = [0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x12, 0x34]; // guid
four_tests!(
    open_ca,
    OpenCa,
    OPEN_CA,
    OpenCa {
        guid: 0x0002_c903_0000_1234
    }
);

fn redirect_bytes() -> [u8; 112] {
    let mut b = [0u8; 112];
    b[..13].copy_from_slice(b"/run/srp/ca.0"); // path, NUL-padded to 108; 4 reserved
    b
}
four_tests!(
    redirect,
    Redirect,
    redirect_bytes(),
    Redirect {
        path: "/run/srp/ca.0".into()
    }
);

#[test]
fn a_path_that_does_not_fit_is_not_emitted() {
    let r = Redirect {
        path: "x".repeat(108),
    };
    assert!(r.emit(&mut [0u8; 112]).is_err());
}

#[test]
fn a_name_or_path_without_its_nul_is_refused() {
    // Found by the ctl_msg fuzz target: a 32-byte name with no NUL parsed, then could not be
    // emitted (names leave room for a NUL). Both sides now agree.
    let mut b = [0u8; 48];
    b[16..48].fill(b'u');
    let e = CaEntry::parse(&b).expect_err("no NUL");
    assert!(e.to_string().contains("no NUL terminator"), "{e}");
    let mut p = [b'/'; 112];
    p[108..].fill(0);
    assert!(Redirect::parse(&p).is_err());
}

const QUERY_PORT: [u8; 8] = [2, 0, 0, 0, 0, 0, 0, 0]; // port 2, reserved
four_tests!(query_port, QueryPort, QUERY_PORT, QueryPort { port: 2 });

fn port_bytes() -> [u8; 24] {
    let mut b = [0u8; 24];
    b[0] = 1; // port
    b[1] = 1; // active
    b[18..24].copy_from_slice(&[0xff, 0xff, 127, 0, 0, 2]); // GID ::ffff:127.0.0.2
    b
}
fn port() -> PortInfo {
    let mut gid = [0u8; 16];
    gid[10..16].copy_from_slice(&[0xff, 0xff, 127, 0, 0, 2]);
    PortInfo {
        port: 1,
        active: true,
        gid,
    }
}
four_tests!(port_info, PortInfo, port_bytes(), port());

const ERROR: [u8; 8] = [0, 0, 0, 2, 0, 1, 0, 1]; // BadVersion, min 1, max 1
four_tests!(
    error_reply,
    ErrorReply,
    ERROR,
    ErrorReply {
        status: CtlStatus::BadVersion,
        min_version: 1,
        max_version: 1
    }
);
