//! The extension headers that follow the BTH, other than the AETH (in [`super::aeth`]):
//! RETH, DETH, ImmDt, IETH, AtomicETH and AtomicAckETH (IBTA Vol 1 9.3; Linux `rxe_hdr.h`).
//! Each is a fixed-size big-endian struct; every field is a whole number of bytes except the
//! DETH source QP (24 bits).

use super::WireError;
use super::error::{read_fixed, write_fixed};
use crate::ids::{QKey, Qpn, Rkey};
use wirekit::WireRepr;
use zerocopy::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The RETH as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RethHdr {
    /// Remote virtual address.
    pub va: U64,
    /// Remote key.
    pub rkey: U32,
    /// DMA length: the whole message's length.
    pub dma_len: U32,
}
const _: () = assert!(size_of::<RethHdr>() == 16);

/// RDMA extended transport header (RDMA WRITE First/Only, READ request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key of the target region.
    pub rkey: Rkey,
    /// Length of the whole message in bytes.
    pub dma_len: u32,
}

impl<'a> WireRepr<'a> for Reth {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: RethHdr = read_fixed("RETH", buf)?;
        Ok(Reth {
            va: h.va.get(),
            rkey: Rkey(h.rkey.get()),
            dma_len: h.dma_len.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<RethHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = RethHdr {
            va: U64::new(self.va),
            rkey: U32::new(self.rkey.0),
            dma_len: U32::new(self.dma_len),
        };
        write_fixed("RETH", &h, buf)
    }
}

/// The DETH as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct DethHdr {
    /// Queue key.
    pub qkey: U32,
    /// Reserved(31:24) | source QP(23:0).
    pub src_qp: U32,
}
const _: () = assert!(size_of::<DethHdr>() == 8);

impl DethHdr {
    /// The source QP (24 bits).
    pub fn src_qp(&self) -> Qpn {
        Qpn::from_wire(self.src_qp.get())
    }
}

/// Datagram extended transport header (UD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deth {
    /// Queue key the receiving QP checks.
    pub qkey: QKey,
    /// The sender's QP.
    pub src_qp: Qpn,
}

impl<'a> WireRepr<'a> for Deth {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: DethHdr = read_fixed("DETH", buf)?;
        Ok(Deth {
            qkey: QKey(h.qkey.get()),
            src_qp: h.src_qp(),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<DethHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = DethHdr {
            qkey: U32::new(self.qkey.0),
            src_qp: U32::new(self.src_qp.get()), // a Qpn is 24-bit; reserved byte 0
        };
        write_fixed("DETH", &h, buf)
    }
}

/// A header that is one big-endian 32-bit word (ImmDt, IETH).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct WordHdr {
    /// The word.
    pub value: U32,
}
const _: () = assert!(size_of::<WordHdr>() == 4);

/// Immediate data. Opaque to the HCA: the value is the four wire bytes read big-endian, and
/// the receiver's completion hands back the same number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImmDt {
    /// The immediate value.
    pub imm: u32,
}

impl<'a> WireRepr<'a> for ImmDt {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: WordHdr = read_fixed("ImmDt", buf)?;
        Ok(ImmDt { imm: h.value.get() })
    }

    fn buffer_len(&self) -> usize {
        size_of::<WordHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = WordHdr {
            value: U32::new(self.imm),
        };
        write_fixed("ImmDt", &h, buf)
    }
}

/// Invalidate extended transport header (SEND with Invalidate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ieth {
    /// The remote key the responder invalidates.
    pub rkey: Rkey,
}

impl<'a> WireRepr<'a> for Ieth {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: WordHdr = read_fixed("IETH", buf)?;
        Ok(Ieth {
            rkey: Rkey(h.value.get()),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<WordHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = WordHdr {
            value: U32::new(self.rkey.0),
        };
        write_fixed("IETH", &h, buf)
    }
}

/// The AtomicETH as laid out on the wire (28 bytes: packed, the 64-bit fields at offsets
/// 12 and 20 are not 8-aligned, hence `U64` of bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct AtomicEthHdr {
    /// Remote virtual address (8-byte aligned for a valid atomic).
    pub va: U64,
    /// Remote key.
    pub rkey: U32,
    /// Swap (CmpSwap) or add (FetchAdd) operand.
    pub swap_add: U64,
    /// Compare operand (CmpSwap only).
    pub compare: U64,
}
const _: () = assert!(size_of::<AtomicEthHdr>() == 28);

/// Atomic extended transport header (CmpSwap, FetchAdd).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicEth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: Rkey,
    /// Swap or add operand.
    pub swap_add: u64,
    /// Compare operand.
    pub compare: u64,
}

impl<'a> WireRepr<'a> for AtomicEth {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: AtomicEthHdr = read_fixed("AtomicETH", buf)?;
        Ok(AtomicEth {
            va: h.va.get(),
            rkey: Rkey(h.rkey.get()),
            swap_add: h.swap_add.get(),
            compare: h.compare.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<AtomicEthHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = AtomicEthHdr {
            va: U64::new(self.va),
            rkey: U32::new(self.rkey.0),
            swap_add: U64::new(self.swap_add),
            compare: U64::new(self.compare),
        };
        write_fixed("AtomicETH", &h, buf)
    }
}

/// The AtomicAckETH as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct AtomicAckEthHdr {
    /// The original remote data.
    pub orig: U64,
}
const _: () = assert!(size_of::<AtomicAckEthHdr>() == 8);

/// Atomic acknowledge extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicAckEth {
    /// The value at the remote address before the atomic.
    pub orig: u64,
}

impl<'a> WireRepr<'a> for AtomicAckEth {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: AtomicAckEthHdr = read_fixed("AtomicAckETH", buf)?;
        Ok(AtomicAckEth { orig: h.orig.get() })
    }

    fn buffer_len(&self) -> usize {
        size_of::<AtomicAckEthHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = AtomicAckEthHdr {
            orig: U64::new(self.orig),
        };
        write_fixed("AtomicAckETH", &h, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// Generates the four wire tests of one header from its known bytes and value.
    macro_rules! four_tests {
        ($name:ident, $ty:ty, $bytes:expr, $value:expr) => {
            mod $name {
                use super::*;

                #[test]
                fn decodes_known_bytes() {
                    check::decodes(&$bytes, &$value);
                }

                #[test]
                fn emits_known_bytes() {
                    check::emits(&$value, &$bytes);
                }

                #[test]
                fn round_trips() {
                    check::round_trips(&$value, &mut Vec::new());
                }

                #[test]
                fn truncated_errors() {
                    check::truncation_errors::<$ty>(&$bytes);
                }
            }
        };
    }

    /// RETH of the golden RDMA WRITE Only in softrdma.md §1.7.
    const RETH: [u8; 16] = [
        0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, // VA 0x7f0000001000
        0x00, 0x00, 0x12, 0x34, // R_Key 0x1234
        0x00, 0x00, 0x00, 0x0d, // DMA length 13
    ];
    const RETH_V: Reth = Reth {
        va: 0x7f00_0000_1000,
        rkey: Rkey(0x1234),
        dma_len: 13,
    };
    four_tests!(reth, Reth, RETH, RETH_V);

    /// DETH of a GSI MAD from QP1 (GSI Q_Key, `ib_verbs.h IB_QP1_QKEY`).
    const DETH: [u8; 8] = [
        0x80, 0x01, 0x00, 0x00, // Q_Key 0x80010000
        0x00, // reserved
        0x00, 0x00, 0x01, // source QP 1
    ];
    const DETH_V: Deth = Deth {
        qkey: QKey::GSI,
        src_qp: Qpn::GSI,
    };
    four_tests!(deth, Deth, DETH, DETH_V);

    #[test]
    fn deth_reserved_byte_ignored() {
        let mut b = DETH;
        b[4] = 0xff;
        check::decodes(&b, &DETH_V);
    }

    /// ImmDt 0xdeadbeef.
    const IMM: [u8; 4] = [0xde, 0xad, 0xbe, 0xef]; // immediate, network order
    const IMM_V: ImmDt = ImmDt { imm: 0xdead_beef };
    four_tests!(imm_dt, ImmDt, IMM, IMM_V);

    /// IETH invalidating R_Key 0x00012a05 (index 0x12a, variant 5 as rxe builds keys).
    const IETH: [u8; 4] = [0x00, 0x01, 0x2a, 0x05]; // R_Key
    const IETH_V: Ieth = Ieth {
        rkey: Rkey(0x0001_2a05),
    };
    four_tests!(ieth, Ieth, IETH, IETH_V);

    /// AtomicETH of a CmpSwap (layout: `rxe_hdr.h struct rxe_atmeth`, packed).
    const ATOMIC: [u8; 28] = [
        0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x20, 0x08, // VA 0x7f0000002008
        0x00, 0x00, 0x56, 0x78, // R_Key 0x5678
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // swap 0x1122334455667788
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // compare 1
    ];
    const ATOMIC_V: AtomicEth = AtomicEth {
        va: 0x7f00_0000_2008,
        rkey: Rkey(0x5678),
        swap_add: 0x1122_3344_5566_7788,
        compare: 1,
    };
    four_tests!(atomic_eth, AtomicEth, ATOMIC, ATOMIC_V);

    /// AtomicAckETH returning the original value 1.
    const ATOMIC_ACK: [u8; 8] = [0, 0, 0, 0, 0, 0, 0, 0x01]; // original remote data
    const ATOMIC_ACK_V: AtomicAckEth = AtomicAckEth { orig: 1 };
    four_tests!(atomic_ack_eth, AtomicAckEth, ATOMIC_ACK, ATOMIC_ACK_V);
}
