//! Memory registration for the initiator: how each command's data buffer (a scatter-gather
//! list of [`Segment`]s, as StorPort's SG list of physical pages) is described to the target.
//!
//! Contract: [`Registration::map`] turns a buffer into a [`Mapping`]: the work requests to
//! post *before* the SRP_CMD SEND in the same `post_send_list` chain, the
//! [`DataDescriptors`] and immediate bytes for the channel core's [`Command`], and whether to
//! ask for remote invalidation. The caller keeps the [`MapHandle`] with the command and, when
//! the command completes (any [`Outcome`](super::Outcome)), passes it to
//! [`Registration::unmap`] with the rkey the SRP_RSP's receive completion invalidated, if any;
//! it posts the work requests `unmap` returns and routes every send completion to
//! [`Registration::handle_send_done`]. After a reconnect it posts
//! [`Registration::take_retries`]. A command ended without a response, or held across a
//! reconnect and registered again, gives its regions up with [`Registration::discard`]
//! instead (their REG_MRs may never have run), and the caller replaces them: it
//! deregisters each of [`Registration::take_discarded`] and hands a fresh region's key to
//! [`Registration::replace_discarded`]. The strategies make no verb call (sans-IO): the
//! caller allocates and registers through its own verbs interface. A region is never handed out again while the target might
//! still reach it through it, and exhaustion is [`RegError::Busy`] (retry later), not a panic.
//!
//! Strategies:
//! - writes up to the negotiated immediate size ([`Registration::set_immediate_limit`]) go as
//!   immediate data under any strategy: nothing registered;
//! - [`Strategy::PerIo`] (the default, ARCHITECTURE decision 4): a pool of fast-registration
//!   regions per channel, one REG_MR per region with a rolled key, direct descriptor and
//!   remote invalidation for a one-region buffer, an inline indirect list otherwise;
//! - [`Strategy::PerIoWindows`]: the same fence where fast registration is kernel-only (user
//!   space over rdma-core): the block registered once without remote rights, each command's
//!   ranges opened by type-2 memory windows bound before its SEND ([`windows`]);
//! - [`Strategy::TrustTarget`]: one region over all memory, opt-in, with a [`TrustWarning`].
//!
//! Planning ([`plan`], [`pool`]) is sans-IO; [`frmr`], [`windows`] and `all_memory` build
//! the work requests; the caller allocates their regions and windows. Files: `plan` (page
//! rules), `pool` (region states and keys), `frmr`, `windows`, `all_memory`, `immediate`,
//! `error`.

mod all_memory;
mod error;
pub mod frmr;
mod immediate;
pub mod plan;
pub mod pool;
pub mod windows;

#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod pool_tests;
#[cfg(test)]
mod windows_tests;

pub use all_memory::{AllMemoryStrategy, TrustWarning};
pub use error::RegError;
pub use frmr::{Discarded, FrmrConfig, FrmrStrategy, FrmrWr, RegionKind};
pub use plan::{RegionPlan, Segment};
pub use pool::{KeyPool, PoolCounts, SlotState};
pub use windows::{WindowConfig, WindowStrategy};

use super::alloc::vec::Vec;
use super::login::Negotiated;
use super::{Command, DataDescriptors, DataDir};
use crate::wire::desc::DirectBuf;
use ib_verbs::Rkey;
use ib_verbs::inline_one::InlineOne;
use ib_verbs::mr::MrKey;
use ib_verbs::wr::{SendWr, WcStatus};

/// The table descriptor of an indirect list that always travels complete inside the
/// SRP_CMD: the target never fetches it (SRP r16a 5.2.2.2), so it points nowhere, under
/// R_Key 0, which no region has (MR index 0 is never used).
fn no_table(entries: usize) -> DirectBuf {
    let len = u32::try_from(entries * size_of::<DirectBuf>()).unwrap_or(u32::MAX);
    DirectBuf::new(0, Rkey(0), len)
}

/// The signaled LOCAL_INV of `key` under work-request tag `tag` (a region or window is
/// free only when it completes).
fn local_inv_wr(key: MrKey, tag: u16) -> SendWr {
    SendWr {
        wr_id: FrmrWr::LocalInv(key).wr_id(tag),
        op: ib_verbs::wr::SendOp::LocalInv(key.0),
        sg_list: Default::default(),
        flags: ib_verbs::wr::SendFlags::SIGNALED,
        ud: None,
    }
}

/// How buffers are registered.
#[derive(Clone, Debug)]
pub enum Strategy {
    /// Per-I/O fast registration (the default).
    PerIo(FrmrStrategy),
    /// Per-I/O memory windows (where fast registration is kernel-only).
    PerIoWindows(WindowStrategy),
    /// One region over all memory; the target is trusted with all of it.
    TrustTarget(AllMemoryStrategy),
}

/// How the target's access to the host's memory is fenced: what a session shows, so a
/// weaker mode is never silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fencing {
    /// Each I/O's buffer is registered for that I/O alone, narrowed to its direction, and
    /// invalidated when the I/O ends (fast registration).
    PerIo,
    /// The same fence with memory windows: each I/O's ranges opened for that I/O alone,
    /// narrowed to its direction, invalidated when it ends.
    PerIoWindows,
    /// One region over all of the host's memory, open to the target for as long as the
    /// session lives.
    AllMemory,
}

impl Fencing {
    /// Its name in listings.
    pub fn as_str(self) -> &'static str {
        match self {
            Fencing::PerIo => "per-io",
            Fencing::PerIoWindows => "per-io (memory windows)",
            Fencing::AllMemory => "trust-target (all memory, always)",
        }
    }
}

/// What a mapping used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MappingKind {
    /// No data to describe.
    NoData,
    /// The bytes go in the SRP_CMD.
    Immediate,
    /// Fast-registered regions of this command.
    Frmr,
    /// Memory windows bound for this command.
    Windows,
    /// The all-memory region.
    AllMemory,
}

/// What to send for one command's buffer.
#[derive(Debug)]
pub struct Mapping {
    /// Give this back to [`Registration::unmap`] when the command completes.
    pub handle: MapHandle,
    /// What was used.
    pub kind: MappingKind,
    /// Post these, in order, right before the SRP_CMD SEND in the same chain (one, the
    /// common case, held inline).
    pub pre_wrs: InlineOne<SendWr>,
    /// The command's descriptors.
    pub data: DataDescriptors,
    /// The command's immediate bytes (empty unless `kind` is `Immediate`).
    pub imm_data: Vec<u8>,
    /// Ask the target to invalidate the one region with its response.
    pub remote_invalidate: bool,
}

impl Mapping {
    /// The answer to [`Action::Remap`](super::Action::Remap) for this new mapping.
    pub fn remapped(&self) -> super::Remapped {
        super::Remapped::New {
            data: self.data.clone(),
            imm_data: self.imm_data.clone(),
            remote_invalidate: self.remote_invalidate,
        }
    }

    /// Moves the descriptors and immediate bytes into `cmd` (leaving none here: an
    /// indirect list or immediate data is not copied) and sets its remote-invalidate
    /// request.
    pub fn apply(&mut self, cmd: &mut Command) {
        cmd.data = core::mem::replace(&mut self.data, DataDescriptors::None);
        cmd.imm_data = core::mem::take(&mut self.imm_data);
        cmd.remote_invalidate = self.remote_invalidate;
    }
}

/// A command's hold on registered regions; not `Clone`, so it is unmapped once.
#[derive(Debug, PartialEq, Eq)]
pub struct MapHandle {
    keys: InlineOne<MrKey>,
}

impl MapHandle {
    /// The keys of the regions registered for the command (empty if none).
    pub fn keys(&self) -> &[MrKey] {
        &self.keys
    }
}

/// A channel's registration: a strategy plus the immediate-data limit.
#[derive(Clone, Debug)]
pub struct Registration {
    strategy: Strategy,
    max_imm_len: u32,
}

impl Registration {
    /// How this registration fences the target's access.
    pub fn fencing(&self) -> Fencing {
        match self.strategy {
            Strategy::PerIo(_) => Fencing::PerIo,
            Strategy::PerIoWindows(_) => Fencing::PerIoWindows,
            Strategy::TrustTarget(_) => Fencing::AllMemory,
        }
    }

    /// Registration with `strategy` and no immediate data until
    /// [`Registration::set_immediate_limit`].
    pub fn new(strategy: Strategy) -> Self {
        Registration {
            strategy,
            max_imm_len: 0,
        }
    }

    /// The strategy.
    pub fn strategy(&self) -> &Strategy {
        &self.strategy
    }

    /// Writes up to `neg.max_imm_len` go as immediate data, if the login granted it.
    pub fn set_immediate_limit(&mut self, neg: &Negotiated) {
        self.max_imm_len = if neg.imm_data { neg.max_imm_len } else { 0 };
    }

    /// Describes a command's buffer; see the module contract. On an error nothing was taken.
    pub fn map(&mut self, dir: DataDir, segments: &[Segment]) -> Result<Mapping, RegError> {
        let total = plan::check_segments(segments)?;
        let bare = |kind, data, imm_data| Mapping {
            handle: MapHandle {
                keys: InlineOne::Empty,
            },
            kind,
            pre_wrs: InlineOne::Empty,
            data,
            imm_data,
            remote_invalidate: false,
        };
        if dir == DataDir::None || segments.is_empty() {
            return Ok(bare(MappingKind::NoData, DataDescriptors::None, Vec::new()));
        }
        if dir == DataDir::Write && total <= self.max_imm_len {
            let bytes = immediate::gather(segments)?;
            return Ok(bare(MappingKind::Immediate, DataDescriptors::None, bytes));
        }
        match &mut self.strategy {
            Strategy::PerIo(frmr) => {
                let m = frmr.map(dir, segments)?;
                Ok(Mapping {
                    remote_invalidate: m.keys.len() == 1,
                    handle: MapHandle { keys: m.keys },
                    kind: MappingKind::Frmr,
                    pre_wrs: m.wrs,
                    data: m.data,
                    imm_data: Vec::new(),
                })
            }
            Strategy::PerIoWindows(w) => {
                let m = w.map(dir, segments)?;
                Ok(Mapping {
                    remote_invalidate: m.keys.len() == 1,
                    handle: MapHandle { keys: m.keys },
                    kind: MappingKind::Windows,
                    pre_wrs: m.wrs,
                    data: m.data,
                    imm_data: Vec::new(),
                })
            }
            Strategy::TrustTarget(all) => {
                let data = all.map(segments)?;
                Ok(bare(MappingKind::AllMemory, data, Vec::new()))
            }
        }
    }

    /// A command completed: `invalidated` is the rkey its SRP_RSP's receive completion says
    /// the target invalidated (`None` without a response, or if the target did not). Returns
    /// the LOCAL_INVs to post; their regions are free when those complete.
    pub fn unmap(
        &mut self,
        handle: MapHandle,
        invalidated: Option<Rkey>,
    ) -> Result<InlineOne<SendWr>, RegError> {
        match &mut self.strategy {
            _ if handle.keys.is_empty() => Ok(InlineOne::Empty),
            Strategy::PerIo(frmr) => frmr.unmap(&handle.keys, invalidated),
            Strategy::PerIoWindows(w) => w.unmap(&handle.keys, invalidated),
            Strategy::TrustTarget(_) => Err(RegError::StaleHandle {
                key: handle.keys[0],
            }),
        }
    }

    /// A command is done with its regions but their REG_MRs may not have run (they were
    /// never posted, or posted on a queue pair that has died), so no LOCAL_INV can name
    /// them: they are set aside until the caller replaces them
    /// ([`Registration::take_discarded`], [`Registration::replace_discarded`]). Use it for a command ended without a response
    /// (a bus reset, fast_io_fail, a refused submission) and for the old mapping of a held
    /// command registered again after a reconnect.
    pub fn discard(&mut self, handle: MapHandle) -> Result<(), RegError> {
        match &mut self.strategy {
            _ if handle.keys.is_empty() => Ok(()),
            Strategy::PerIo(frmr) => frmr.discard(&handle.keys),
            Strategy::PerIoWindows(w) => w.discard(&handle.keys),
            Strategy::TrustTarget(_) => Err(RegError::StaleHandle {
                key: handle.keys[0],
            }),
        }
    }

    /// The regions discarded since the last call: the caller deregisters each and
    /// allocates a fresh one for its slot ([`Registration::replace_discarded`]) through its
    /// verbs interface. None under the all-memory strategy.
    pub fn take_discarded(&mut self) -> Vec<Discarded> {
        match &mut self.strategy {
            Strategy::PerIo(frmr) => frmr.take_discarded(),
            Strategy::PerIoWindows(w) => w.take_discarded(),
            Strategy::TrustTarget(_) => Vec::new(),
        }
    }

    /// A discarded region's slot now holds a fresh region under `key`: free again.
    pub fn replace_discarded(&mut self, slot: usize, key: MrKey) -> Result<(), RegError> {
        match &mut self.strategy {
            Strategy::PerIo(frmr) => frmr.replace(slot, key),
            Strategy::PerIoWindows(w) => w.replace(slot, key),
            Strategy::TrustTarget(_) => Err(RegError::StaleHandle { key }),
        }
    }

    /// A send completion. `Ok(true)` if it was one of this registration's work requests
    /// (the caller then ignores it), `Ok(false)` if not.
    pub fn handle_send_done(&mut self, wr_id: u64, status: WcStatus) -> Result<bool, RegError> {
        match &mut self.strategy {
            Strategy::PerIo(frmr) => match frmr.send_done(wr_id, status == WcStatus::Success) {
                Some(r) => r.map(|()| true),
                None => Ok(false),
            },
            Strategy::PerIoWindows(w) => match w.send_done(wr_id, status) {
                Some(r) => r.map(|()| true),
                None => Ok(false),
            },
            Strategy::TrustTarget(_) => Ok(false),
        }
    }

    /// LOCAL_INVs to post again on a new connection (the earlier ones were flushed).
    pub fn take_retries(&mut self) -> Vec<SendWr> {
        match &mut self.strategy {
            Strategy::PerIo(frmr) => frmr.retries(),
            Strategy::PerIoWindows(w) => w.retries(),
            Strategy::TrustTarget(_) => Vec::new(),
        }
    }

    /// Regions in each state (all zero for the all-memory strategy).
    pub fn counts(&self) -> PoolCounts {
        match &self.strategy {
            Strategy::PerIo(frmr) => frmr.counts(),
            Strategy::PerIoWindows(w) => w.counts(),
            Strategy::TrustTarget(_) => PoolCounts::default(),
        }
    }
}
