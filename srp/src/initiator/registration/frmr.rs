//! Per-I/O fast registration (the default, ARCHITECTURE decision 4), the verbs glue around
//! the sans-IO [`KeyPool`] and [`plan_regions`]: allocating the channel's regions, turning a
//! plan into REG_MR work requests and SRP descriptors, and LOCAL_INV requests on unmap.
//!
//! Rights follow the direction, narrower than ib_srp (which grants both): a data-in buffer
//! is registered remote-write only, a data-out buffer remote-read only.

use super::super::alloc::vec::Vec;
use super::super::{DataDescriptors, DataDir};
use super::plan::{RegionPlan, Segment, plan_regions};
use super::pool::{KeyPool, PoolCounts};
use super::{RegError, no_table};
use crate::wire::desc::DirectBuf;
use ib_verbs::Rkey;
use ib_verbs::inline_one::InlineOne;
use ib_verbs::mr::{Access, MAX_FAST_REG_PAGES, MAX_PAGE_SIZE, MIN_PAGE_SIZE, MrKey};
use ib_verbs::wr::{FastRegPages, SendFlags, SendOp, SendWr};

/// Sizing of a channel's fast-registration pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrmrConfig {
    /// Commands in flight at once (the negotiated window).
    pub window: usize,
    /// Regions one command may use (its indirect list stays inline in the SRP_CMD, so keep
    /// `16 × this` within what the IU carries).
    pub mrs_per_cmd: usize,
    /// Pages per region (`max_pages` of `ib_alloc_mr`).
    pub max_pages: usize,
    /// Page size, a power of two in 4 KiB..=2 MiB.
    pub page_size: u64,
    /// A region's I/O address is this plus the block offset of its first byte.
    pub iova_base: u64,
    /// Bits 40..56 of every work request id this strategy makes, to route completions.
    pub wr_id_tag: u16,
}

impl Default for FrmrConfig {
    fn default() -> Self {
        FrmrConfig {
            window: 32,
            mrs_per_cmd: 4,
            max_pages: 256,
            page_size: 4096,
            iova_base: 0x4000_0000_0000,
            wr_id_tag: 0xf5e6,
        }
    }
}

impl FrmrConfig {
    /// How many regions the pool needs (`window × mrs_per_cmd`), once the configuration is
    /// checked: the caller allocates that many fast-registration regions of `max_pages`
    /// pages and hands their keys to [`FrmrStrategy::new`] (or lets
    /// [`FrmrStrategy::allocate`] call its allocator that many times).
    pub fn regions(&self) -> Result<usize, RegError> {
        self.validate()
    }

    fn validate(&self) -> Result<usize, RegError> {
        if !self.page_size.is_power_of_two()
            || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&self.page_size)
        {
            return Err(RegError::BadConfig(
                "page size must be a power of two, 4 KiB..=2 MiB",
            ));
        }
        if !(1..=MAX_FAST_REG_PAGES).contains(&self.max_pages) {
            return Err(RegError::BadConfig("max_pages out of the HCA's range"));
        }
        if self.mrs_per_cmd == 0 || self.window == 0 {
            return Err(RegError::BadConfig(
                "window and mrs_per_cmd must be at least 1",
            ));
        }
        self.window
            .checked_mul(self.mrs_per_cmd)
            .ok_or(RegError::BadConfig("window × mrs_per_cmd overflows"))
    }
}

/// What a work request id of a registration strategy names (this one's, or the memory
/// windows').
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrmrWr {
    /// The REG_MR giving a region this key.
    RegMr(MrKey),
    /// The LOCAL_INV of this key.
    LocalInv(MrKey),
    /// The bind giving a memory window this key.
    Bind(MrKey),
}

impl FrmrWr {
    /// The work request id, under `tag`.
    pub fn wr_id(self, tag: u16) -> u64 {
        let (kind, key) = match self {
            FrmrWr::RegMr(k) => (1u64, k),
            FrmrWr::LocalInv(k) => (2u64, k),
            FrmrWr::Bind(k) => (3u64, k),
        };
        (u64::from(tag) << 40) | (kind << 32) | u64::from(key.0)
    }

    /// Decodes a work request id made under `tag`; `None` if it is not one of ours.
    pub fn from_wr_id(wr_id: u64, tag: u16) -> Option<FrmrWr> {
        if wr_id >> 56 != 0 || (wr_id >> 40) as u16 != tag {
            return None;
        }
        let key = MrKey(wr_id as u32);
        match (wr_id >> 32) & 0xff {
            1 => Some(FrmrWr::RegMr(key)),
            2 => Some(FrmrWr::LocalInv(key)),
            3 => Some(FrmrWr::Bind(key)),
            _ => None,
        }
    }
}

/// The per-I/O fast-registration strategy of one channel.
#[derive(Clone, Debug)]
pub struct FrmrStrategy {
    config: FrmrConfig,
    pool: KeyPool,
}

/// A mapped buffer, before it is wrapped for the caller.
pub(super) struct FrmrMapped {
    pub(super) wrs: InlineOne<SendWr>,
    pub(super) data: DataDescriptors,
    pub(super) keys: InlineOne<MrKey>,
}

impl FrmrStrategy {
    /// The pool over the [`FrmrConfig::regions`] fast-registration regions of
    /// `config.max_pages` pages the caller allocated up front in the channel's PD (as
    /// ib_srp's `srp_alloc_fr_pool`), through whatever verbs interface it uses: the
    /// strategy itself makes no verb call.
    pub fn new(config: FrmrConfig, keys: Vec<MrKey>) -> Result<Self, RegError> {
        if keys.len() != config.validate()? {
            return Err(RegError::BadConfig(
                "the pool needs exactly window × mrs_per_cmd regions",
            ));
        }
        Ok(Self::from_keys(config, keys))
    }

    /// The pool, its [`FrmrConfig::regions`] regions allocated by `alloc` (given the pages
    /// per region; the caller's verb, e.g. an FRMR allocation in the channel's PD). The
    /// first refusal ends it with [`RegError::Allocation`].
    pub fn allocate<E: core::fmt::Display>(
        config: FrmrConfig,
        mut alloc: impl FnMut(usize) -> Result<MrKey, E>,
    ) -> Result<Self, RegError> {
        let n = config.validate()?;
        let keys = (0..n)
            .map(|_| alloc(config.max_pages))
            .collect::<Result<Vec<_>, E>>()
            .map_err(|e| RegError::Allocation(alloc::string::ToString::to_string(&e)))?;
        Self::new(config, keys)
    }

    /// A strategy over regions already allocated with these keys (tests, or a driver that
    /// allocates itself).
    pub fn from_keys(config: FrmrConfig, keys: impl IntoIterator<Item = MrKey>) -> Self {
        FrmrStrategy {
            config,
            pool: KeyPool::new(keys),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FrmrConfig {
        &self.config
    }

    /// Regions in each state.
    pub fn counts(&self) -> PoolCounts {
        self.pool.counts()
    }

    /// Plans, takes regions (all or none: [`RegError::Busy`] leaves the pool untouched) and
    /// builds the REG_MRs and descriptors.
    pub(super) fn map(
        &mut self,
        dir: DataDir,
        segments: &[Segment],
    ) -> Result<FrmrMapped, RegError> {
        let c = self.config;
        let plans = plan_regions(segments, c.page_size, c.max_pages)?;
        if plans.len() > c.mrs_per_cmd {
            return Err(RegError::TooFragmented {
                regions: plans.len(),
                max: c.mrs_per_cmd,
            });
        }
        let keys = self.pool.take(plans.len())?;
        let access = match dir {
            DataDir::Read => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            _ => Access::REMOTE_READ,
        };
        let mut wrs = InlineOne::Empty;
        let mut descs = InlineOne::Empty;
        for (plan, &key) in plans.into_iter().zip(keys.iter()) {
            let iova = c.iova_base.wrapping_add(plan.first_byte());
            // check_segments bounded the total to 32 bits, so each region fits.
            let len = u32::try_from(plan.length).unwrap_or(u32::MAX);
            descs.push(DirectBuf::new(iova, Rkey(key.0), len));
            wrs.push(self.reg_wr(key, access, iova, plan));
        }
        let data = match descs {
            InlineOne::One(one) => DataDescriptors::Direct(one),
            descs => {
                let total_len = descs.iter().map(|d| d.len()).sum();
                DataDescriptors::Indirect {
                    table: no_table(descs.len()),
                    total_len,
                    inline: descs.into_iter().collect(),
                }
            }
        };
        Ok(FrmrMapped { wrs, data, keys })
    }

    fn reg_wr(&self, key: MrKey, access: Access, iova: u64, plan: RegionPlan) -> SendWr {
        SendWr {
            wr_id: FrmrWr::RegMr(key).wr_id(self.config.wr_id_tag),
            op: SendOp::RegMr {
                key: key.0,
                access,
                pages: FastRegPages {
                    pages: plan.pages,
                    page_size: self.config.page_size,
                    first_byte_offset: plan.first_byte_offset,
                    iova,
                    length: plan.length,
                },
            },
            sg_list: Default::default(),
            // Unsignaled: an error completes anyway, and success needs no bookkeeping.
            flags: SendFlags::empty(),
            ud: None,
        }
    }

    fn local_inv_wr(&self, key: MrKey) -> SendWr {
        super::local_inv_wr(key, self.config.wr_id_tag)
    }

    /// Releases a command's regions; returns the LOCAL_INVs to post for those the target did
    /// not invalidate.
    pub(super) fn unmap(
        &mut self,
        keys: &[MrKey],
        invalidated: Option<Rkey>,
    ) -> Result<InlineOne<SendWr>, RegError> {
        let inv = self.pool.release(keys, invalidated.map(MrKey::from))?;
        Ok(inv.into_iter().map(|k| self.local_inv_wr(k)).collect())
    }

    /// A send completion: `Some(result)` if `wr_id` is one of ours.
    pub(super) fn send_done(&mut self, wr_id: u64, ok: bool) -> Option<Result<(), RegError>> {
        match FrmrWr::from_wr_id(wr_id, self.config.wr_id_tag)? {
            // A failed REG_MR fails its command, whose unmap invalidates the region anyway.
            FrmrWr::RegMr(_) | FrmrWr::Bind(_) => Some(Ok(())),
            FrmrWr::LocalInv(key) => Some(self.pool.invalidate_done(key, ok)),
        }
    }

    /// LOCAL_INVs to post again (their first attempt was flushed by a QP error).
    pub(super) fn retries(&mut self) -> Vec<SendWr> {
        let keys = self.pool.take_retries();
        keys.into_iter().map(|k| self.local_inv_wr(k)).collect()
    }

    /// Gives up a command's regions whose REG_MRs may not have run; see
    /// [`KeyPool::discard`].
    pub(super) fn discard(&mut self, keys: &[MrKey]) -> Result<(), RegError> {
        self.pool.discard(keys)
    }

    /// The discarded regions, each to be deregistered and replaced.
    pub(super) fn take_discarded(&mut self) -> Vec<Discarded> {
        self.pool
            .take_discarded()
            .into_iter()
            .map(|(slot, key)| Discarded {
                slot,
                key,
                kind: RegionKind::FastReg {
                    max_pages: self.config.max_pages,
                },
            })
            .collect()
    }

    /// Slot `slot`'s discarded region was replaced by a fresh one under `key`.
    pub(super) fn replace(&mut self, slot: usize, key: MrKey) -> Result<(), RegError> {
        self.pool.replace(slot, key)
    }
}

/// A region or window given up (its REG_MR or bind may not have run, so no LOCAL_INV can
/// name it): the caller releases `key` and allocates a fresh one of the same `kind` for
/// `slot` ([`super::Registration::replace_discarded`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Discarded {
    /// The pool slot.
    pub slot: usize,
    /// The old region's (or window's) key.
    pub key: MrKey,
    /// What to release and allocate.
    pub kind: RegionKind,
}

/// What a pool slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// A fast-registration region of `max_pages` pages: deregistered, and a new one
    /// allocated.
    FastReg {
        /// Pages of the fresh region.
        max_pages: usize,
    },
    /// A type-2 memory window: deallocated, and a new one allocated.
    Window,
}
