//! Any bytes as an SRP IU (both login forms and every offset a channel may negotiate):
//! parsing never panics, and whatever parses re-emits to bytes that parse to the same value.
use crate::round_trip::round_trip;

use srp::wire::AnyIu;
use srp::wire::cmd::Cmd;
use srp::wire::login::{LoginReq, LoginReqRdmaCm};
use wirekit::WireRepr;

/// One input.
pub fn run(data: &[u8]) {
    if let Ok(iu) = AnyIu::parse(data) {
        round_trip(&iu, &mut Vec::new());
    }
    if let Ok(req) = LoginReqRdmaCm::parse(data) {
        round_trip(&req, &mut Vec::new());
    }
    let _ = LoginReq::parse_rdma_cm(data);
    // The first byte picks an immediate-data offset, the rest is the IU.
    if let Some((&off, iu)) = data.split_first() {
        let offset = u16::from(off);
        if let Ok(cmd) = Cmd::parse_with(iu, offset) {
            let mut buf = vec![0u8; cmd.buffer_len_with(offset)];
            let n = cmd
                .emit_with(&mut buf, offset)
                .expect("a parsed command must emit");
            assert_eq!(Cmd::parse_with(&buf[..n], offset), Ok(cmd));
        }
    }
}
