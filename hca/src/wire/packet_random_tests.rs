//! Seeded random tests of [`Packet`]: random well-formed packets round trip, and random
//! mutations of known packets either fail to parse or re-emit to a packet that parses the
//! same (the property the `roce_packet` fuzz target checks). The seed is printed on failure.

use super::icrc::{self, IcrcContext};
use super::packet_tests::lab;
use super::*;
use crate::ids::{PKey, Psn, QKey, Qpn, Rkey};

/// xorshift64*: a deterministic generator; the seed is printed on failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }

    fn bit(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

#[test]
fn random_packets_round_trip() {
    let seed = 0x5eed_f0ce;
    let mut rng = Rng(seed);
    let known: Vec<Opcode> = (0..=255u8)
        .map(Opcode::from)
        .filter(|o| o.is_known())
        .collect();
    let data: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
    let mut buf = vec![0u8; 8192];
    for i in 0..2000 {
        let op = known[rng.next() as usize % known.len()];
        let info = op.info().expect("known");
        let hs = info.headers;
        let len = if info.has_payload {
            rng.next() as usize % 1100
        } else {
            0
        };
        let start = rng.next() as usize % (data.len() - len);
        let b = Bth {
            solicited: rng.bit(),
            mig_req: rng.bit(),
            pad_count: pad_len(len) as u8,
            pkey: PKey(rng.next() as u16),
            fecn: rng.bit(),
            becn: rng.bit(),
            ack_req: rng.bit(),
            ..Bth::new(op, Qpn::from_wire(rng.u32()), Psn::from_wire(rng.u32()))
        };
        let some = |h: Headers| hs.contains(h);
        let p = Packet {
            bth: b,
            reth: some(Headers::RETH).then(|| Reth {
                va: rng.next(),
                rkey: Rkey(rng.u32()),
                dma_len: rng.u32(),
            }),
            aeth: some(Headers::AETH).then(|| Aeth {
                syndrome: Syndrome::from_byte(rng.next() as u8),
                msn: rng.u32() & 0xff_ffff,
            }),
            deth: some(Headers::DETH).then(|| Deth {
                qkey: QKey(rng.u32()),
                src_qp: Qpn::from_wire(rng.u32()),
            }),
            imm: some(Headers::IMMDT).then(|| ImmDt { imm: rng.u32() }),
            ieth: some(Headers::IETH).then(|| Ieth {
                rkey: Rkey(rng.u32()),
            }),
            atomic: some(Headers::ATOMIC_ETH).then(|| AtomicEth {
                va: rng.next(),
                rkey: Rkey(rng.u32()),
                swap_add: rng.next(),
                compare: rng.next(),
            }),
            atomic_ack: some(Headers::ATOMIC_ACK_ETH).then(|| AtomicAckEth { orig: rng.next() }),
            payload: &data[start..start + len],
        };
        let ctx = IcrcContext {
            src_port: rng.next() as u16,
            ..lab()
        };
        let n = p
            .emit(&mut buf, &ctx)
            .unwrap_or_else(|e| panic!("seed {seed:#x} packet {i}: emit {p:?}: {e}"));
        assert_eq!(n, p.buffer_len());
        assert_eq!(n % 4, 0, "seed {seed:#x} packet {i}: not word-aligned");
        let back = Packet::parse_verified(&buf[..n], &ctx)
            .unwrap_or_else(|e| panic!("seed {seed:#x} packet {i}: parse {p:?}: {e}"));
        assert_eq!(back, p, "seed {seed:#x} packet {i}");
    }
}

#[test]
fn mutated_packets_parse_or_error_and_reemit() {
    let seed = 0x0bad_5eed;
    let mut rng = Rng(seed);
    let ctx = lab();
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for (op, len) in [(0x04u8, 5usize), (0x0b, 2), (0x12, 0), (0x64, 4), (0x0d, 7)] {
        let info = Opcode::from(op).info().expect("known");
        let mut p = Packet::new(Bth::new(op.into(), Qpn::GSI, Psn::from_wire(1)));
        p.reth = info.headers.contains(Headers::RETH).then_some(Reth {
            va: 1,
            rkey: Rkey(2),
            dma_len: 3,
        });
        p.aeth = info.headers.contains(Headers::AETH).then_some(Aeth {
            syndrome: Syndrome::ACK_UNLIMITED,
            msn: 4,
        });
        p.deth = info.headers.contains(Headers::DETH).then_some(Deth {
            qkey: QKey::GSI,
            src_qp: Qpn::GSI,
        });
        p.imm = info
            .headers
            .contains(Headers::IMMDT)
            .then_some(ImmDt { imm: 5 });
        p.atomic_ack = info
            .headers
            .contains(Headers::ATOMIC_ACK_ETH)
            .then_some(AtomicAckEth { orig: 6 });
        let payload = vec![0x5a; len];
        p.payload = &payload;
        let mut buf = vec![0u8; p.buffer_len()];
        p.emit(&mut buf, &ctx).expect("emit");
        seeds.push(buf);
    }
    let mut out = vec![0u8; 4096];
    for i in 0..20_000 {
        let mut b = seeds[rng.next() as usize % seeds.len()].clone();
        for _ in 0..1 + rng.next() % 3 {
            let at = rng.next() as usize % b.len();
            b[at] = rng.next() as u8;
        }
        if rng.next() % 4 == 0 {
            b.truncate(rng.next() as usize % (b.len() + 1));
        }
        let Ok(p) = Packet::parse(&b) else { continue };
        let n = p
            .emit(&mut out, &ctx)
            .unwrap_or_else(|e| panic!("seed {seed:#x} case {i}: {p:?} does not emit: {e}"));
        assert_eq!(n, b.len(), "seed {seed:#x} case {i}");
        assert!(icrc::verify(&ctx, &out[..n]));
        assert_eq!(Packet::parse(&out[..n]), Ok(p), "seed {seed:#x} case {i}");
    }
}
