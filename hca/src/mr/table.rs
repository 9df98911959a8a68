//! [`MrTable`]: every memory region of one HCA, and the one checked access path.

use std::collections::VecDeque;
use std::sync::Arc;

use super::span::{Mapping, PageList};
use super::{
    Access, MAX_FAST_REG_PAGES, MAX_PAGE_SIZE, MIN_PAGE_SIZE, MrError, MrIndex, MrKey, MrKeys,
    MrOp, MrSpan, PdId,
};
use crate::ids::{Lkey, Rkey};
use crate::mem::MemBlock;

/// Whether a region can be accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MrState {
    /// Registered: `check` may succeed.
    Valid,
    /// A fast-registration MR not registered yet, or invalidated.
    Free,
}

/// A REG_MR work request: map `pages` as the region's new contents.
///
/// Byte `x` of the region (`iova + x`) is byte `first_byte_offset + x` of the concatenated pages
/// (as `ib_map_mr_sg`: the first page may start mid-page).
#[derive(Debug, Clone)]
pub struct FastRegWr<'a> {
    /// The new key: the region's key with possibly another low byte (`ib_inc_rkey`).
    pub key: MrKey,
    /// Each page: a block and the offset of the page in it.
    pub pages: &'a [(Arc<MemBlock>, u64)],
    /// Page size: a power of two in 4 KiB..=2 MiB.
    pub page_size: u64,
    /// Offset of the region's first byte in the first page (below `page_size`).
    pub first_byte_offset: u64,
    /// Address of the region's first byte.
    pub iova: u64,
    /// Length of the region in bytes.
    pub length: u64,
    /// Rights granted.
    pub access: Access,
}

/// A snapshot of one region, for diagnostics and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MrInfo {
    /// Protection domain.
    pub pd: PdId,
    /// Current L_Key.
    pub lkey: Lkey,
    /// Current R_Key, if remote access is allowed.
    pub rkey: Option<Rkey>,
    /// Rights.
    pub access: Access,
    /// Valid or free.
    pub state: MrState,
    /// First address.
    pub iova: u64,
    /// Length in bytes.
    pub len: u64,
    /// Whether this is a fast-registration MR.
    pub fast_reg: bool,
}

#[derive(Debug)]
enum MrKind {
    /// `ibv_reg_mr`: one span of one block.
    Regular { block: Arc<MemBlock>, offset: usize },
    /// `ib_alloc_mr(IB_MR_TYPE_MEM_REG)`: mapped by REG_MR, unmapped by invalidation.
    FastReg {
        max_pages: usize,
        pages: Option<Arc<PageList>>,
        /// The last page list, kept after invalidation: the next REG_MR refills it in place
        /// when no span holds it any more, so a registration allocates nothing.
        spare: Option<Arc<PageList>>,
    },
}

#[derive(Debug)]
struct Mr {
    pd: PdId,
    lkey: MrKey,
    rkey: Option<MrKey>,
    access: Access,
    state: MrState,
    iova: u64,
    len: u64,
    kind: MrKind,
}

impl Mr {
    fn mapping(&self) -> Mapping {
        match &self.kind {
            MrKind::Regular { block, offset } => Mapping::Contiguous {
                block: Arc::clone(block),
                offset: *offset,
            },
            MrKind::FastReg {
                pages: Some(list), ..
            } => Mapping::Paged(Arc::clone(list)),
            // A Free MR never reaches `mapping`: check requires Valid.
            MrKind::FastReg { pages: None, .. } => Mapping::Empty,
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    /// Variant of the next key handed out at this index; survives dereg so stale keys fail.
    next_variant: u8,
    mr: Option<Mr>,
}

/// Every memory region of one HCA, keyed by index (index 0 is never used).
///
/// Plain data: the HCA wraps it in a lock; [`MrTable::check`] returns an [`MrSpan`] that is used
/// after the lock is released. Freed indexes are reused oldest first, and with a new variant.
#[derive(Debug)]
pub struct MrTable {
    slots: Vec<Slot>,
    free: VecDeque<MrIndex>,
    max_mrs: u32,
    live: usize,
}

impl MrTable {
    /// An empty table of at most `max_mrs` regions (capped at [`super::MAX_MR_INDEX`]).
    pub fn new(max_mrs: u32) -> MrTable {
        MrTable {
            slots: vec![Slot::default()],
            free: VecDeque::new(),
            max_mrs: max_mrs.min(super::MAX_MR_INDEX),
            live: 0,
        }
    }

    /// Number of registered regions.
    pub fn live(&self) -> usize {
        self.live
    }

    /// `ibv_reg_mr`: registers `len` bytes of `block` from `offset` at address `iova`.
    pub fn reg_mr(
        &mut self,
        pd: PdId,
        block: Arc<MemBlock>,
        offset: u64,
        len: u64,
        iova: u64,
        access: Access,
    ) -> Result<MrKeys, MrError> {
        let op = MrOp::Register;
        let access = super::validate_access(access, op)?;
        let oob = || MrError::OutOfBlock {
            op,
            offset,
            len,
            block_len: block.len(),
        };
        let start = usize::try_from(offset).map_err(|_| oob())?;
        let n = usize::try_from(len).map_err(|_| oob())?;
        block.check_range(start, n).map_err(|_| oob())?;
        check_iova(op, iova, len)?;
        let kind = MrKind::Regular {
            block,
            offset: start,
        };
        self.insert(pd, access, MrState::Valid, iova, len, kind)
    }

    /// `ib_alloc_mr(IB_MR_TYPE_MEM_REG, max_pages)`: a fast-registration MR in state Free.
    ///
    /// As rxe, the R_Key is reported equal to the L_Key; REG_MR decides the rights.
    pub fn alloc_fast_reg_mr(&mut self, pd: PdId, max_pages: usize) -> Result<MrKeys, MrError> {
        if !(1..=MAX_FAST_REG_PAGES).contains(&max_pages) {
            return Err(MrError::BadMaxPages {
                max_pages,
                limit: MAX_FAST_REG_PAGES,
            });
        }
        let kind = MrKind::FastReg {
            max_pages,
            pages: None,
            spare: None,
        };
        let keys = self.insert(pd, Access::empty(), MrState::Free, 0, 0, kind)?;
        let key = MrKey::from(keys.lkey);
        if let Some(mr) = self.mr_mut(keys.index()) {
            mr.rkey = Some(key);
        }
        Ok(MrKeys {
            lkey: keys.lkey,
            rkey: Some(key.into()),
        })
    }

    /// Executes a REG_MR work request on region `mr` (rxe `rxe_reg_fast_mr`): the region must be
    /// a fast-registration MR in state Free, in `pd`, and `wr.key` may differ from its key only in
    /// the low 8 bits. On success the keys become `wr.key` (R_Key only with remote rights) and the
    /// state Valid.
    pub fn fast_reg(&mut self, pd: PdId, mr: MrIndex, wr: &FastRegWr<'_>) -> Result<(), MrError> {
        let op = MrOp::FastReg;
        let access = super::validate_access(wr.access, op)?;
        let entry = self
            .mr_mut(mr)
            .ok_or(MrError::NoSuchIndex { op, index: mr })?;
        if wr.key.index() != mr {
            return Err(MrError::KeyIndexChanged { mr, key: wr.key });
        }
        let MrKind::FastReg {
            max_pages,
            pages,
            spare,
        } = &mut entry.kind
        else {
            return Err(MrError::NotFastReg {
                op,
                key: entry.lkey,
            });
        };
        if entry.state != MrState::Free {
            return Err(MrError::NotFree { mr });
        }
        if entry.pd != pd {
            return Err(MrError::WrongPd {
                op,
                key: wr.key,
                pd,
                mr_pd: entry.pd,
            });
        }
        if wr.pages.len() > *max_pages {
            return Err(MrError::TooManyPages {
                pages: wr.pages.len(),
                max_pages: *max_pages,
            });
        }
        let mut list = match spare.take() {
            Some(old) if Arc::strong_count(&old) == 1 => old,
            _ => Arc::new(PageList::default()),
        };
        match Arc::get_mut(&mut list) {
            Some(l) => fill_page_list(wr, l)?,
            None => return Err(MrError::NotFree { mr }),
        }
        check_iova(op, wr.iova, wr.length)?;
        *pages = Some(list);
        entry.lkey = wr.key;
        entry.rkey = access.is_remote().then_some(wr.key);
        entry.access = access;
        entry.iova = wr.iova;
        entry.len = wr.length;
        entry.state = MrState::Valid;
        Ok(())
    }

    /// LOCAL_INV (`remote == false`) or a received SEND_WITH_INV (`remote == true`) of `key`
    /// (rxe `rxe_invalidate_mr`). The key must be the R_Key, or for a local invalidation of a
    /// region without one, the L_Key; the region must be a fast-registration MR of `pd`. The
    /// state becomes Free and the page list is released. Invalidating a Free region is allowed.
    pub fn invalidate(
        &mut self,
        pd: PdId,
        key: impl Into<MrKey>,
        remote: bool,
    ) -> Result<(), MrError> {
        let key = key.into();
        let op = if remote {
            MrOp::RemoteInvalidate
        } else {
            MrOp::LocalInvalidate
        };
        let entry = self
            .mr_mut(key.index())
            .ok_or(MrError::NoSuchMr { op, key })?;
        let current = match entry.rkey {
            Some(rkey) => rkey,
            None if remote => return Err(MrError::NoRemoteKey { op, key }),
            None => entry.lkey,
        };
        if current != key {
            return Err(MrError::KeyMismatch { op, key, current });
        }
        if entry.pd != pd {
            return Err(MrError::WrongPd {
                op,
                key,
                pd,
                mr_pd: entry.pd,
            });
        }
        let MrKind::FastReg { pages, spare, .. } = &mut entry.kind else {
            return Err(MrError::NotFastReg { op, key });
        };
        *spare = pages.take();
        entry.state = MrState::Free;
        Ok(())
    }

    /// `ibv_dereg_mr`: removes region `mr`. Spans already handed out keep their memory alive.
    pub fn dereg(&mut self, mr: MrIndex) -> Result<(), MrError> {
        let slot = self.slot_mut(mr).ok_or(MrError::NoSuchIndex {
            op: MrOp::Register,
            index: mr,
        })?;
        let gone = slot.mr.take().ok_or(MrError::NoSuchIndex {
            op: MrOp::Register,
            index: mr,
        })?;
        slot.next_variant = gone.lkey.variant().wrapping_add(1);
        self.free.push_back(mr);
        debug_assert!(self.live > 0, "MR count underflow");
        self.live -= 1;
        Ok(())
    }

    /// A snapshot of region `mr`.
    pub fn info(&self, mr: MrIndex) -> Option<MrInfo> {
        let m = self.mr_ref(mr)?;
        Some(MrInfo {
            pd: m.pd,
            lkey: m.lkey.into(),
            rkey: m.rkey.map(Rkey::from),
            access: m.access,
            state: m.state,
            iova: m.iova,
            len: m.len,
            fast_reg: matches!(m.kind, MrKind::FastReg { .. }),
        })
    }

    /// THE checked access path (rxe `lookup_mr` + `mr_check_range`): resolves `[iova, iova +
    /// len)` of the region named by `key` for an access needing `need`.
    ///
    /// In order: a zero-length remote access succeeds with [`MrSpan::empty`] without lookup
    /// (IBTA C9-88); the key's index names a region; the key equals its R_Key (`remote`) or
    /// L_Key in all 32 bits; same PD; state Valid; rights contain `need` (empty for local reads);
    /// the range lies inside the region (checked arithmetic).
    pub fn check(
        &self,
        pd: PdId,
        key: impl Into<MrKey>,
        remote: bool,
        iova: u64,
        len: u64,
        need: Access,
    ) -> Result<MrSpan, MrError> {
        if len == 0 && remote {
            return Ok(MrSpan::empty());
        }
        let key = key.into();
        let op = MrOp::access(remote);
        let mr = self
            .mr_ref(key.index())
            .ok_or(MrError::NoSuchMr { op, key })?;
        let current = match (remote, mr.rkey) {
            (false, _) => mr.lkey,
            (true, Some(rkey)) => rkey,
            (true, None) => return Err(MrError::NoRemoteKey { op, key }),
        };
        if current != key {
            return Err(MrError::KeyMismatch { op, key, current });
        }
        if mr.pd != pd {
            return Err(MrError::WrongPd {
                op,
                key,
                pd,
                mr_pd: mr.pd,
            });
        }
        if mr.state != MrState::Valid {
            return Err(MrError::NotValid { op, key });
        }
        if !mr.access.contains(need) {
            return Err(MrError::AccessDenied {
                op,
                key,
                need,
                have: mr.access,
            });
        }
        let start = iova.checked_sub(mr.iova);
        let end = start.and_then(|s| s.checked_add(len));
        match (start, end) {
            (Some(start), Some(end)) if end <= mr.len => Ok(MrSpan::new(mr.mapping(), start, len)),
            _ => Err(MrError::OutOfRange {
                op,
                key,
                iova,
                len,
                mr_iova: mr.iova,
                mr_len: mr.len,
            }),
        }
    }

    fn insert(
        &mut self,
        pd: PdId,
        access: Access,
        state: MrState,
        iova: u64,
        len: u64,
        kind: MrKind,
    ) -> Result<MrKeys, MrError> {
        let index = self.alloc_index()?;
        let max = self.max_mrs;
        let slot = self.slot_mut(index).ok_or(MrError::TableFull { max })?;
        debug_assert!(slot.mr.is_none(), "index {index:?} handed out twice");
        let key = MrKey::new(index, slot.next_variant);
        let rkey = access.is_remote().then_some(key);
        slot.mr = Some(Mr {
            pd,
            lkey: key,
            rkey,
            access,
            state,
            iova,
            len,
            kind,
        });
        self.live += 1;
        Ok(MrKeys {
            lkey: key.into(),
            rkey: rkey.map(Rkey::from),
        })
    }

    fn alloc_index(&mut self) -> Result<MrIndex, MrError> {
        if let Some(index) = self.free.pop_front() {
            return Ok(index);
        }
        let next = u32::try_from(self.slots.len())
            .ok()
            .filter(|&n| n <= self.max_mrs);
        let next = next.ok_or(MrError::TableFull { max: self.max_mrs })?;
        self.slots.push(Slot::default());
        Ok(MrIndex(next))
    }

    fn slot_mut(&mut self, index: MrIndex) -> Option<&mut Slot> {
        let i = usize::try_from(index.0).ok().filter(|&i| i != 0)?;
        self.slots.get_mut(i)
    }

    fn mr_mut(&mut self, index: MrIndex) -> Option<&mut Mr> {
        self.slot_mut(index)?.mr.as_mut()
    }

    fn mr_ref(&self, index: MrIndex) -> Option<&Mr> {
        let i = usize::try_from(index.0).ok().filter(|&i| i != 0)?;
        self.slots.get(i)?.mr.as_ref()
    }
}

/// `iova + len` must not overflow.
fn check_iova(op: MrOp, iova: u64, len: u64) -> Result<(), MrError> {
    match iova.checked_add(len) {
        Some(_) => Ok(()),
        None => Err(MrError::IovaOverflow { op, iova, len }),
    }
}

/// Validates the page layout of a REG_MR and builds its page list.
/// Checks `wr`'s page list and writes it into `list` (its memory reused).
fn fill_page_list(wr: &FastRegWr<'_>, list: &mut PageList) -> Result<(), MrError> {
    let ps = wr.page_size;
    if !ps.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&ps) {
        return Err(MrError::BadPageSize { page_size: ps });
    }
    let bad_layout = || MrError::BadLayout {
        first_byte_offset: wr.first_byte_offset,
        length: wr.length,
        pages: wr.pages.len(),
        page_size: ps,
    };
    let capacity = u64::try_from(wr.pages.len())
        .ok()
        .and_then(|n| n.checked_mul(ps));
    let needed = wr.first_byte_offset.checked_add(wr.length);
    match (capacity, needed) {
        (Some(cap), Some(need)) if wr.first_byte_offset < ps && need <= cap => {}
        _ => return Err(bad_layout()),
    }
    let page_len = usize::try_from(ps).map_err(|_| bad_layout())?;
    // Every page is checked before the list changes: a refused REG_MR leaves it as it was.
    for (page, (block, offset)) in wr.pages.iter().enumerate() {
        let out = || MrError::PageOutOfBlock {
            page,
            offset: *offset,
            page_size: ps,
            block_len: block.len(),
        };
        let start = usize::try_from(*offset).map_err(|_| out())?;
        block.check_range(start, page_len).map_err(|_| out())?;
    }
    list.pages.clear();
    // In range: checked just above.
    list.pages
        .extend((wr.pages.iter()).map(|(block, offset)| (Arc::clone(block), *offset as usize)));
    list.page_shift = ps.trailing_zeros();
    list.first_byte_offset = wr.first_byte_offset;
    Ok(())
}
