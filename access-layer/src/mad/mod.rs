//! Management datagrams (MADs), byte-exact (IBTA Vol 1 ch. 13–16; Linux `ib_mad.h`,
//! `ibta_vol1_c12.h`, `ib_sa.h`, `ib_dm_mad.h`).
//!
//! Every message is a zerocopy struct (`#[repr(C)]`, byte and big-endian fields, size
//! asserted at compile time) under a validated representation implementing
//! [`wirekit::WireRepr`]: `parse` never panics and accepts trailing bytes; `emit` writes every
//! byte (reserved ones as zero) and fails on a short buffer or on a value wider than its
//! field. Sub-byte fields are reached only through the `Repr`s. Code points are open enums.
//!
//! A MAD on the GSI is always 256 bytes: the 24-byte [`common::MadHeader`] and 232 bytes of
//! class data. CM messages fill the 232 bytes; SA adds the RMPP and SA headers (56 bytes in
//! all, 200 data bytes); DM adds the RMPP header and 28 reserved bytes (64, 192 data bytes).
//! [`parse_any`] reads a whole MAD and dispatches on (class, attribute).

pub mod addr;
pub mod any;
pub mod class_port_info;
pub mod cm;
pub mod common;
pub mod dm;
mod error;
pub mod ids;
pub mod rmpp;
pub mod sa;

pub use addr::{MadAddress, MadOut};
pub use any::{AnyMad, CmMessage, DmAttribute, MadBody, SaAttribute, parse_any};
pub use class_port_info::ClassPortInfo;
pub use common::{
    MAD_DATA_LEN, MAD_HEADER_LEN, MAD_LEN, Mad, MadBuf, MadHeader, MadStatus, Method, MgmtClass,
};
pub use error::MadError;
pub use ids::{CommId, Mtu, ServiceId, Tid};
pub use rmpp::{RmppFlags, RmppHeader, RmppType};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Copies the fixed part `T` from the start of `buf`.
pub(crate) fn read_fixed<T: FromBytes + KnownLayout + Immutable>(
    what: &'static str,
    buf: &[u8],
) -> Result<T, MadError> {
    wirekit::read_fixed(buf).map_err(|s| MadError::Truncated {
        what,
        need: s.need,
        have: s.have,
    })
}

/// Writes `t` at the start of `buf`; returns its size.
pub(crate) fn write_fixed<T: IntoBytes + Immutable>(
    what: &'static str,
    t: &T,
    buf: &mut [u8],
) -> Result<usize, MadError> {
    wirekit::write_fixed(t, buf).map_err(|s| MadError::BufferTooSmall {
        what,
        need: s.need,
        have: s.have,
    })
}

/// Fails unless `value` fits in `bits` bits (emit-side check of sub-byte and 24-bit fields).
pub(crate) fn check_width(
    what: &'static str,
    field: &'static str,
    value: u64,
    bits: u32,
) -> Result<(), MadError> {
    if bits >= 64 || value >> bits == 0 {
        Ok(())
    } else {
        Err(MadError::BadField {
            what,
            field,
            value,
            why: "wider than the field",
        })
    }
}

/// Fixed-length private data of a CM message (or any fixed opaque area): `N` bytes, of which
/// a consumer uses a prefix; the rest is zero when built by [`PrivateData::new`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PrivateData<const N: usize>(pub [u8; N]);

impl<const N: usize> PrivateData<N> {
    /// `bytes` followed by zeros; fails if `bytes` is longer than `N`.
    pub fn new(bytes: &[u8]) -> Result<Self, MadError> {
        let mut a = [0u8; N];
        let have = bytes.len();
        a.get_mut(..have)
            .ok_or(MadError::BadField {
                what: "private data",
                field: "length",
                value: have as u64,
                why: "longer than the message's private data area",
            })?
            .copy_from_slice(bytes);
        Ok(PrivateData(a))
    }

    /// All `N` bytes.
    pub fn as_bytes(&self) -> &[u8; N] {
        &self.0
    }
}

impl<const N: usize> Default for PrivateData<N> {
    fn default() -> Self {
        PrivateData([0; N])
    }
}

/// Shows the length and the bytes as one hex string ([`wirekit::HexBytes`]).
impl<const N: usize> core::fmt::Debug for PrivateData<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PrivateData<{N}>({})", wirekit::HexBytes(&self.0))
    }
}
