//! Any bytes as a RoCEv2 UDP payload: parsing never panics (the receive check that solves
//! for an unknown IPv4 ID included), and whatever parses re-emits (with a fixed IP context)
//! to bytes that verify and parse to the same packet.
use core::net::Ipv4Addr;
use hca::wire::{IcrcContext, Packet, icrc};

/// One input.
pub fn run(data: &[u8]) {
    let ctx = IcrcContext::new(
        Ipv4Addr::new(10, 0, 0, 1).into(),
        Ipv4Addr::new(10, 0, 0, 2).into(),
        0xc123,
    );
    let _ = icrc::verify(&ctx, data);
    let _ = Packet::parse_verified(data, &ctx);
    // Whatever ID the solver accepts, the packet verifies exactly with it.
    if let icrc::Received::Verified { ipv4_id } = icrc::verify_received(&ctx, data) {
        assert!(icrc::verify(&IcrcContext { ipv4_id, ..ctx }, data));
    }
    if let Ok(p) = Packet::parse(data) {
        let mut buf = vec![0u8; p.buffer_len()];
        let n = p.emit(&mut buf, &ctx).expect("a parsed packet must emit");
        assert_eq!(n, data.len(), "a parsed packet re-emits to the same length");
        assert!(icrc::verify(&ctx, &buf[..n]));
        let back = Packet::parse(&buf[..n]).expect("emitted bytes must parse");
        assert_eq!(back, p);
    }
}
