//! The channel's registered memory: one block, one memory region, laid out at creation as
//! `window + SPARE_RECVS` receive buffers (IUs that take no credit — SRP_I_LOGOUT,
//! SRP_CRED_RSP, SRP_AER_RSP — need room too, and a spare lets a credit overrun reach the
//! channel, which logs it out, instead of stalling in RNR retries), `window + 2` response buffers (the extra ones for SRP_T_LOGOUT and SRP_CRED_REQ),
//! and per command slot a bounce buffer of the largest transfer plus room for the largest
//! external descriptor table. Nothing is registered per command, so nothing can leak per
//! command; the region is deregistered when the channel is torn down.

use ib_verbs::ids::Lkey;
use ib_verbs::wr::Sge;

/// I/O address the channel's region is registered at.
pub const IOVA: u64 = 0x5352_0000_0000;

/// Receive buffers beyond the credit window.
pub const SPARE_RECVS: usize = 2;

/// Bytes of one descriptor in an external table (`struct srp_direct_buf`).
const DESC_BYTES: u64 = 16;

/// Where each buffer of a channel sits in its registered block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Command slots and response buffers (the credit window).
    pub window: usize,
    /// Receive buffers (`window + SPARE_RECVS`).
    pub recvs: usize,
    /// Bytes of one receive buffer (the negotiated initiator-to-target IU length).
    pub recv_len: u64,
    /// Bytes of one response buffer (the negotiated target-to-initiator IU length).
    pub send_len: u64,
    /// Bytes of one bounce buffer (the largest transfer of one direction).
    pub bounce_len: u64,
    /// Bytes of one descriptor-table buffer.
    pub table_len: u64,
}

impl Layout {
    /// The layout for a window of `window`, IU lengths `it_iu_len` / `ti_iu_len`, transfers
    /// up to `max_transfer` bytes and tables up to `max_table_entries` descriptors. `None`
    /// if the total does not fit in memory addresses.
    pub fn new(
        window: u32,
        it_iu_len: u32,
        ti_iu_len: u32,
        max_transfer: u64,
        max_table_entries: usize,
    ) -> Option<Layout> {
        let l = Layout {
            window: usize::try_from(window).ok()?,
            recvs: usize::try_from(window).ok()?.checked_add(SPARE_RECVS)?,
            recv_len: u64::from(it_iu_len),
            send_len: u64::from(ti_iu_len),
            bounce_len: max_transfer,
            table_len: u64::try_from(max_table_entries)
                .ok()?
                .checked_mul(DESC_BYTES)?,
        };
        usize::try_from(l.total()?).ok()?;
        Some(l)
    }

    fn slots(&self) -> u64 {
        self.window as u64
    }

    fn send_base(&self) -> Option<u64> {
        (self.recvs as u64).checked_mul(self.recv_len)
    }

    fn bounce_base(&self) -> Option<u64> {
        self.send_base()?
            .checked_add((self.slots() + 2).checked_mul(self.send_len)?)
    }

    fn slot_stride(&self) -> Option<u64> {
        self.bounce_len.checked_add(self.table_len)
    }

    /// Total bytes of the block.
    pub fn total(&self) -> Option<u64> {
        self.bounce_base()?
            .checked_add(self.slots().checked_mul(self.slot_stride()?)?)
    }

    /// Offset of receive buffer `i`.
    pub fn recv(&self, i: usize) -> u64 {
        i as u64 * self.recv_len
    }

    /// Offset of response buffer `i` (`window` is the T_LOGOUT buffer).
    pub fn send(&self, i: usize) -> u64 {
        self.send_base().unwrap_or(0) + i as u64 * self.send_len
    }

    /// Offset of the SRP_CRED_REQ buffer (after the T_LOGOUT buffer).
    pub fn cred(&self) -> u64 {
        self.send(self.window + 1)
    }

    /// Offset of command slot `i`'s bounce buffer.
    pub fn bounce(&self, i: usize) -> u64 {
        self.bounce_base().unwrap_or(0) + i as u64 * self.slot_stride().unwrap_or(0)
    }

    /// Offset of command slot `i`'s descriptor-table buffer.
    pub fn table(&self, i: usize) -> u64 {
        self.bounce(i) + self.bounce_len
    }
}

/// A scatter/gather entry for `len` bytes at `offset` of the region under `lkey`.
pub fn sge(lkey: Lkey, offset: u64, len: u32) -> Sge {
    Sge {
        addr: IOVA + offset,
        len,
        lkey,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_do_not_overlap() {
        let l = Layout::new(4, 512, 64, 1 << 16, 16).expect("fits");
        assert_eq!(l.recv(5) + 512, l.send(0));
        assert_eq!(l.send(4) + 64, l.cred());
        assert_eq!(l.cred() + 64, l.bounce(0));
        assert_eq!(l.table(0) + 256, l.bounce(1));
        assert_eq!(l.table(3) + 256, l.total().expect("fits"));
    }

    #[test]
    fn absurd_sizes_are_refused() {
        assert!(Layout::new(u32::MAX, u32::MAX, 64, u64::MAX, 16).is_none());
    }
}
