//! Per-I/O memory windows: the fence where fast registration is kernel-only (an initiator
//! in user space over rdma-core). The host's memory block is registered once for local
//! access and window binding only — no remote right, so its own rkey opens nothing — and
//! each command's buffer is opened to the target by type-2 memory windows bound on the send
//! queue right before the SRP_CMD (IBTA o10-36.2), one per contiguous range, with the rights
//! of the command's direction; when the command ends each window is invalidated (the
//! target's SEND WITH INVALIDATE for a one-window command, else our LOCAL_INV) before it is
//! bound again. The same [`KeyPool`] as the fast-registration pool keeps the rule: a window
//! goes out again only once known invalid, under a new key variant.
//!
//! One invalidation per binding, exactly: a window the target invalidated (its key named
//! in the SRP_RSP's receive completion) is never invalidated again locally — Linux 6.1's
//! rxe dereferences a NULL QP when a type-2 window already free is invalidated
//! (`rxe_do_invalidate_mw`, `drivers/infiniband/sw/rxe/rxe_mw.c`; a kernel panic, seen in
//! the Linux guest), and the IBTA makes it an error on any device.

use super::super::alloc::sync::Arc;
use super::super::alloc::vec::Vec;
use super::super::{DataDescriptors, DataDir};
use super::frmr::{Discarded, FrmrMapped, FrmrWr, RegionKind};
use super::plan::{Segment, check_segments, coalesce};
use super::pool::{KeyPool, PoolCounts};
use super::{RegError, no_table};
use crate::wire::desc::DirectBuf;
use ib_verbs::inline_one::InlineOne;
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrKey};
use ib_verbs::wr::{SendFlags, SendOp, SendWr, WcStatus};
use ib_verbs::{Lkey, Rkey};

/// Sizing of a channel's window pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowConfig {
    /// Commands in flight at once.
    pub window: usize,
    /// Windows one command may use: one per contiguous range of its buffer (a buffer of
    /// scattered pages needs one per page), so the transfer size in pages plus one.
    pub windows_per_cmd: usize,
    /// Bits 40..56 of every work request id this strategy makes, to route completions.
    pub wr_id_tag: u16,
}

impl WindowConfig {
    /// How many windows the pool needs (`window × windows_per_cmd`), once checked.
    pub fn windows(&self) -> Result<usize, RegError> {
        if self.window == 0 || self.windows_per_cmd == 0 {
            return Err(RegError::BadConfig(
                "window and windows_per_cmd must be at least 1",
            ));
        }
        self.window
            .checked_mul(self.windows_per_cmd)
            .ok_or(RegError::BadConfig("window × windows_per_cmd overflows"))
    }
}

/// The memory-window strategy of one channel.
#[derive(Clone, Debug)]
pub struct WindowStrategy {
    config: WindowConfig,
    pool: KeyPool,
    block: Arc<MemBlock>,
    region: Lkey,
    iova: u64,
}

impl WindowStrategy {
    /// The rights the block's one region is registered with: local write (a window that
    /// grants remote write needs it) and window binding; no remote right of its own.
    pub const REGION_ACCESS: Access = Access::LOCAL_WRITE.union(Access::MW_BIND);

    /// The pool over `keys`, the [`WindowConfig::windows`] type-2 windows the caller
    /// allocated in the channel's PD, binding into `region`: the caller's registration of
    /// all of `block` at `iova` with [`Self::REGION_ACCESS`]. No verb call of its own.
    pub fn new(
        config: WindowConfig,
        block: &Arc<MemBlock>,
        region: Lkey,
        iova: u64,
        keys: Vec<MrKey>,
    ) -> Result<Self, RegError> {
        if keys.len() != config.windows()? {
            return Err(RegError::BadConfig(
                "the pool needs exactly window × windows_per_cmd windows",
            ));
        }
        Ok(WindowStrategy {
            config,
            pool: KeyPool::new(keys),
            block: Arc::clone(block),
            region,
            iova,
        })
    }

    /// [`WindowStrategy::new`] with the windows allocated by `alloc` (the caller's verb);
    /// the first refusal ends it with [`RegError::Allocation`].
    pub fn allocate<E: core::fmt::Display>(
        config: WindowConfig,
        block: &Arc<MemBlock>,
        region: Lkey,
        iova: u64,
        mut alloc: impl FnMut() -> Result<MrKey, E>,
    ) -> Result<Self, RegError> {
        let n = config.windows()?;
        let keys = (0..n)
            .map(|_| alloc())
            .collect::<Result<Vec<_>, E>>()
            .map_err(|e| RegError::Allocation(alloc::string::ToString::to_string(&e)))?;
        Self::new(config, block, region, iova, keys)
    }

    /// The configuration.
    pub fn config(&self) -> &WindowConfig {
        &self.config
    }

    /// The block's region (to deregister it when the channel goes away).
    pub fn region(&self) -> Lkey {
        self.region
    }

    /// Windows in each state.
    pub fn counts(&self) -> PoolCounts {
        self.pool.counts()
    }

    /// One window per contiguous range of `segments` (all or none: [`RegError::Busy`]
    /// leaves the pool untouched), bound with the rights of `dir` only.
    pub(super) fn map(
        &mut self,
        dir: DataDir,
        segments: &[Segment],
    ) -> Result<FrmrMapped, RegError> {
        check_segments(segments)?;
        if let Some(index) = segments
            .iter()
            .position(|s| !Arc::ptr_eq(&s.block, &self.block))
        {
            return Err(RegError::ForeignBlock { index });
        }
        let ranges = coalesce(segments);
        if ranges.len() > self.config.windows_per_cmd {
            return Err(RegError::TooFragmented {
                regions: ranges.len(),
                max: self.config.windows_per_cmd,
            });
        }
        let keys = self.pool.take(ranges.len())?;
        let access = match dir {
            DataDir::Read => Access::REMOTE_WRITE,
            _ => Access::REMOTE_READ,
        };
        let mut wrs = InlineOne::Empty;
        let mut descs = InlineOne::Empty;
        for (s, &key) in ranges.iter().zip(keys.iter()) {
            let addr = self.iova.wrapping_add(s.offset);
            descs.push(DirectBuf::new(addr, Rkey(key.0), s.len));
            wrs.push(SendWr {
                wr_id: FrmrWr::Bind(key).wr_id(self.config.wr_id_tag),
                op: SendOp::BindMw {
                    rkey: Rkey(key.0),
                    region: self.region,
                    addr,
                    len: u64::from(s.len),
                    access,
                },
                sg_list: Default::default(),
                // Unsignaled: a failed bind completes anyway (and fails its command).
                flags: SendFlags::empty(),
                ud: None,
            });
        }
        let data = match descs {
            InlineOne::One(one) => DataDescriptors::Direct(one),
            descs => DataDescriptors::Indirect {
                table: no_table(descs.len()),
                total_len: descs.iter().map(|d| d.len()).sum(),
                inline: descs.into_iter().collect(),
            },
        };
        Ok(FrmrMapped { wrs, data, keys })
    }

    fn local_inv_wr(&self, key: MrKey) -> SendWr {
        super::local_inv_wr(key, self.config.wr_id_tag)
    }

    /// A command is done with its windows: the LOCAL_INVs for those the target did not
    /// invalidate (the one it did is free at once, and never invalidated again).
    pub(super) fn unmap(
        &mut self,
        keys: &[MrKey],
        invalidated: Option<Rkey>,
    ) -> Result<InlineOne<SendWr>, RegError> {
        let inv = self.pool.release(keys, invalidated.map(MrKey::from))?;
        Ok(inv.into_iter().map(|k| self.local_inv_wr(k)).collect())
    }

    /// A send completion: `Some(result)` if `wr_id` is one of ours. A LOCAL_INV flushed by
    /// a QP error never ran: the window is still bound and is invalidated again on the
    /// next connection. One that failed any other way leaves the window's state unknown:
    /// it is discarded (deallocated and replaced), never invalidated a second time.
    pub(super) fn send_done(
        &mut self,
        wr_id: u64,
        status: WcStatus,
    ) -> Option<Result<(), RegError>> {
        match FrmrWr::from_wr_id(wr_id, self.config.wr_id_tag)? {
            // A failed bind fails its command, which gives its windows up (discard).
            FrmrWr::Bind(_) | FrmrWr::RegMr(_) => Some(Ok(())),
            FrmrWr::LocalInv(key) => Some(match status {
                WcStatus::Success => self.pool.invalidate_done(key, true),
                WcStatus::WrFlushErr => self.pool.invalidate_done(key, false),
                _ => self.pool.invalidate_abandoned(key),
            }),
        }
    }

    /// LOCAL_INVs to post again: a flushed LOCAL_INV never ran, so the window is still
    /// bound under that key and invalidating it once more is its one invalidation.
    pub(super) fn retries(&mut self) -> Vec<SendWr> {
        let keys = self.pool.take_retries();
        keys.into_iter().map(|k| self.local_inv_wr(k)).collect()
    }

    /// Gives up a command's windows whose binds may not have run: no LOCAL_INV may name
    /// them (invalidating a free window is the rxe crash above); each is deallocated and
    /// replaced.
    pub(super) fn discard(&mut self, keys: &[MrKey]) -> Result<(), RegError> {
        self.pool.discard(keys)
    }

    /// The discarded windows, each to be deallocated and replaced.
    pub(super) fn take_discarded(&mut self) -> Vec<Discarded> {
        self.pool
            .take_discarded()
            .into_iter()
            .map(|(slot, key)| Discarded {
                slot,
                key,
                kind: RegionKind::Window,
            })
            .collect()
    }

    /// Slot `slot`'s discarded window was replaced by a fresh one under `key`.
    pub(super) fn replace(&mut self, slot: usize, key: MrKey) -> Result<(), RegError> {
        self.pool.replace(slot, key)
    }
}
