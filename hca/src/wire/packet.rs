//! A whole RoCEv2 UDP payload: `BTH ‖ extension headers ‖ payload ‖ pad ‖ ICRC(4)`.
//!
//! [`Packet::parse`] validates the structure and borrows the payload; it does not check the
//! ICRC, which needs the IP context ([`Packet::parse_verified`] or [`super::icrc::verify`]
//! does; [`Packet::parse_received`] when the IPv4 ID is unknown, as on a UDP socket). [`Packet::emit`] and [`Packet::emit_with`] write the headers, the payload, the pad
//! (PadCnt is computed, never taken from the caller) and the ICRC in one pass over the
//! output buffer; `emit_with` lets the engine gather the payload straight from registered
//! memory into the datagram, with no intermediate copy.

use super::bth::{BTH_LEN, BthHdr};
use super::error::read_fixed;
use super::icrc::{self, IcrcContext};
use super::{
    Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Headers, ICRC_LEN, Ieth, ImmDt, OpcodeInfo, Reth,
    WireError,
};
use wirekit::WireRepr;

/// The largest UDP payload we emit: an IPv4 datagram of 65535 bytes less IP and UDP headers.
pub const MAX_UDP_PAYLOAD: usize = 65_535 - 20 - 8;

/// Pad bytes after a payload of `payload_len` bytes: up to the next multiple of 4.
pub const fn pad_len(payload_len: usize) -> usize {
    payload_len.wrapping_neg() & 3
}

/// A RoCEv2 packet. The extension headers present are exactly those its opcode's
/// [`OpcodeInfo::headers`] names; the others are `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Base transport header. On emit its `pad_count` is ignored and recomputed.
    pub bth: Bth,
    /// RDMA ETH (WRITE First/Only, READ request).
    pub reth: Option<Reth>,
    /// ACK ETH (ACK, READ response First/Last/Only, atomic ACK).
    pub aeth: Option<Aeth>,
    /// Datagram ETH (UD).
    pub deth: Option<Deth>,
    /// Immediate data (… with Immediate).
    pub imm: Option<ImmDt>,
    /// Invalidate ETH (SEND … with Invalidate).
    pub ieth: Option<Ieth>,
    /// Atomic ETH (CmpSwap, FetchAdd).
    pub atomic: Option<AtomicEth>,
    /// Atomic ACK ETH (atomic ACK).
    pub atomic_ack: Option<AtomicAckEth>,
    /// Payload, without pad. Ignored by [`Packet::emit_with`].
    pub payload: &'a [u8],
}

/// Parses `T` at `*off` if `present`, and moves `*off` past it.
fn take<'b, T: WireRepr<'b, Error = WireError>>(
    present: bool,
    buf: &'b [u8],
    off: &mut usize,
) -> Result<Option<T>, WireError> {
    if !present {
        return Ok(None);
    }
    let t = T::parse(buf.get(*off..).unwrap_or_default())?;
    *off += t.buffer_len();
    Ok(Some(t))
}

/// Emits `t` at `*off` if present, and moves `*off` past it.
fn put<'b, T: WireRepr<'b, Error = WireError>>(
    t: &Option<T>,
    buf: &mut [u8],
    off: &mut usize,
) -> Result<(), WireError> {
    if let Some(t) = t {
        *off += t.emit(buf.get_mut(*off..).unwrap_or_default())?;
    }
    Ok(())
}

impl<'a> Packet<'a> {
    /// A packet with this BTH, no extension headers and no payload.
    pub fn new(bth: Bth) -> Self {
        Packet {
            bth,
            reth: None,
            aeth: None,
            deth: None,
            imm: None,
            ieth: None,
            atomic: None,
            atomic_ack: None,
            payload: &[],
        }
    }

    /// The extension headers present.
    pub fn headers(&self) -> Headers {
        let mut h = Headers::empty();
        h.set(Headers::RETH, self.reth.is_some());
        h.set(Headers::AETH, self.aeth.is_some());
        h.set(Headers::DETH, self.deth.is_some());
        h.set(Headers::IMMDT, self.imm.is_some());
        h.set(Headers::IETH, self.ieth.is_some());
        h.set(Headers::ATOMIC_ETH, self.atomic.is_some());
        h.set(Headers::ATOMIC_ACK_ETH, self.atomic_ack.is_some());
        h
    }

    /// Parses a UDP payload. Checks: a known opcode, TVer 0, the length covers the headers
    /// the opcode requires, the pad and the ICRC, BTH to ICRC is a multiple of 4 bytes (so
    /// PadCnt is exactly the pad the payload needs), and no payload where the opcode has
    /// none. The ICRC is not checked: see [`Packet::parse_verified`].
    pub fn parse(udp_payload: &'a [u8]) -> Result<Self, WireError> {
        let buf = udp_payload;
        let h: BthHdr = read_fixed("BTH", buf)?;
        let bth = Bth::from_hdr(&h);
        if bth.tver != 0 {
            return Err(WireError::BadField {
                what: "BTH",
                field: "TVer",
                value: bth.tver.into(),
                why: "only transport version 0 is defined",
            });
        }
        let info = bth
            .opcode
            .info()
            .ok_or(WireError::UnknownOpcode(h.opcode))?;
        let hdr_len = info.header_len();
        let pad = usize::from(bth.pad_count);
        let need = hdr_len + pad + ICRC_LEN;
        let body_len = buf
            .len()
            .checked_sub(hdr_len + ICRC_LEN)
            .filter(|&n| n >= pad)
            .ok_or(WireError::Truncated {
                what: "RoCEv2 packet",
                need,
                have: buf.len(),
            })?;
        if body_len % 4 != 0 {
            return Err(WireError::BadField {
                what: "RoCEv2 packet",
                field: "length",
                value: buf.len() as u64,
                why: "BTH to ICRC is not a whole number of 4-byte words",
            });
        }
        let payload = buf
            .get(hdr_len..hdr_len + body_len - pad)
            .unwrap_or_default();
        if !info.has_payload && body_len != 0 {
            return Err(WireError::UnexpectedPayload {
                opcode: h.opcode,
                len: payload.len(),
            });
        }
        let hs = info.headers;
        let mut off = BTH_LEN;
        // IBTA 9.2 order: DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH.
        let deth = take(hs.contains(Headers::DETH), buf, &mut off)?;
        let reth = take(hs.contains(Headers::RETH), buf, &mut off)?;
        let atomic = take(hs.contains(Headers::ATOMIC_ETH), buf, &mut off)?;
        let aeth = take(hs.contains(Headers::AETH), buf, &mut off)?;
        let atomic_ack = take(hs.contains(Headers::ATOMIC_ACK_ETH), buf, &mut off)?;
        let imm = take(hs.contains(Headers::IMMDT), buf, &mut off)?;
        let ieth = take(hs.contains(Headers::IETH), buf, &mut off)?;
        debug_assert_eq!(off, hdr_len);
        Ok(Packet {
            bth,
            reth,
            aeth,
            deth,
            imm,
            ieth,
            atomic,
            atomic_ack,
            payload,
        })
    }

    /// Checks the ICRC against `ip`, then parses.
    pub fn parse_verified(udp_payload: &'a [u8], ip: &IcrcContext) -> Result<Self, WireError> {
        let (covered, got) = icrc::split(udp_payload).ok_or(WireError::Truncated {
            what: "RoCEv2 packet",
            need: BTH_LEN + ICRC_LEN,
            have: udp_payload.len(),
        })?;
        let expected = icrc::compute(ip, covered);
        if expected != got {
            return Err(WireError::BadIcrc { expected, got });
        }
        Self::parse(udp_payload)
    }

    /// Checks the ICRC of a received packet whose IPv4 ID the receiver cannot see (see
    /// [`icrc::verify_received`]), then parses; also returns the ID the sender used.
    pub fn parse_received(
        udp_payload: &'a [u8],
        ip: &IcrcContext,
    ) -> Result<(Self, u16), WireError> {
        match icrc::verify_received(ip, udp_payload) {
            icrc::Received::Verified { ipv4_id } => Ok((Self::parse(udp_payload)?, ipv4_id)),
            icrc::Received::Mismatch { expected, got } => Err(WireError::BadIcrc { expected, got }),
            icrc::Received::Truncated => Err(WireError::Truncated {
                what: "RoCEv2 packet",
                need: BTH_LEN + ICRC_LEN,
                have: udp_payload.len(),
            }),
        }
    }

    /// BTH plus the extension headers present, in bytes.
    pub fn header_len(&self) -> usize {
        BTH_LEN + self.headers().len_bytes()
    }

    /// The bytes [`Packet::emit`] writes: headers, payload, pad and ICRC.
    pub fn buffer_len(&self) -> usize {
        self.buffer_len_with(self.payload.len())
    }

    /// The bytes [`Packet::emit_with`] writes for a payload of `payload_len` bytes.
    pub fn buffer_len_with(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len + pad_len(payload_len) + ICRC_LEN
    }

    /// Writes the packet and its ICRC to the start of `buf`; returns the bytes written.
    pub fn emit(&self, buf: &mut [u8], ip: &IcrcContext) -> Result<usize, WireError> {
        let payload = self.payload;
        self.emit_with(buf, payload.len(), |out| out.copy_from_slice(payload), ip)
    }

    /// Writes the packet with a payload of `payload_len` bytes that `fill` writes in place
    /// (it is handed exactly that slice and must write all of it); `self.payload` is ignored.
    /// Fails, before calling `fill`, on an unknown opcode, TVer ≠ 0, extension headers that
    /// differ from the opcode's, payload on an opcode without one, a value too wide for its
    /// field, a datagram over [`MAX_UDP_PAYLOAD`] or a short buffer.
    pub fn emit_with(
        &self,
        buf: &mut [u8],
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]),
        ip: &IcrcContext,
    ) -> Result<usize, WireError> {
        let info = self.check_emit(payload_len)?;
        let hdr_len = info.header_len();
        let pad = pad_len(payload_len);
        let total = hdr_len + payload_len + pad + ICRC_LEN;
        if total > MAX_UDP_PAYLOAD {
            return Err(WireError::BadField {
                what: "RoCEv2 packet",
                field: "length",
                value: total as u64,
                why: "larger than a UDP datagram can carry",
            });
        }
        let have = buf.len();
        let out = buf.get_mut(..total).ok_or(WireError::BufferTooSmall {
            what: "RoCEv2 packet",
            need: total,
            have,
        })?;
        let bth = Bth {
            pad_count: pad as u8, // < 4
            ..self.bth
        };
        let mut off = bth.emit(out)?;
        put(&self.deth, out, &mut off)?;
        put(&self.reth, out, &mut off)?;
        put(&self.atomic, out, &mut off)?;
        put(&self.aeth, out, &mut off)?;
        put(&self.atomic_ack, out, &mut off)?;
        put(&self.imm, out, &mut off)?;
        put(&self.ieth, out, &mut off)?;
        debug_assert_eq!(off, hdr_len);
        let (covered, icrc_out) = out.split_at_mut(total - ICRC_LEN);
        let (payload, pad_out) = covered[hdr_len..].split_at_mut(payload_len);
        fill(payload);
        pad_out.fill(0);
        icrc_out.copy_from_slice(&icrc::compute(ip, covered).to_le_bytes());
        Ok(total)
    }

    /// The opcode's info, if this packet (with `payload_len` payload bytes) may be emitted.
    fn check_emit(&self, payload_len: usize) -> Result<OpcodeInfo, WireError> {
        let opcode = u8::from(self.bth.opcode);
        if self.bth.tver != 0 {
            return Err(WireError::BadField {
                what: "BTH",
                field: "TVer",
                value: self.bth.tver.into(),
                why: "only transport version 0 is defined",
            });
        }
        let info = self
            .bth
            .opcode
            .info()
            .ok_or(WireError::UnknownOpcode(opcode))?;
        let differ = info.headers.symmetric_difference(self.headers());
        if let Some(&(h, header, _)) = Headers::WIRE_ORDER.iter().find(|e| differ.contains(e.0)) {
            return Err(WireError::HeaderMismatch {
                opcode,
                header,
                required: info.headers.contains(h),
            });
        }
        if !info.has_payload && payload_len != 0 {
            return Err(WireError::UnexpectedPayload {
                opcode,
                len: payload_len,
            });
        }
        Ok(info)
    }
}
