//! "Trust the target": one memory region over a whole memory block with remote read and
//! write, every command described by descriptors pointing into it (the 2005 WinOF miniport's
//! all-physical-memory MR, research windows.md §1.5). Nothing is registered or invalidated
//! per I/O, so it is cheap, and the target can read and write every byte of the block at any
//! time, for any command or none. Only an explicit configuration builds it, and building it
//! hands back a [`TrustWarning`] the caller must log (this crate has no logging dependency).

use super::super::DataDescriptors;
use super::super::alloc::format;
use super::super::alloc::string::String;
use super::super::alloc::sync::Arc;
use super::plan::{Segment, check_segments, coalesce};
use super::{RegError, no_table};
use crate::wire::desc::DirectBuf;
use core::fmt;
use ib_verbs::Rkey;
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrKeys};

/// The warning a trust-target registration must be logged with.
#[must_use = "log this warning: the target can read and write all of this memory"]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustWarning(pub String);

impl fmt::Display for TrustWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The all-memory strategy.
#[derive(Clone, Debug)]
pub struct AllMemoryStrategy {
    block: Arc<MemBlock>,
    keys: MrKeys,
    rkey: Rkey,
    iova: u64,
    max_descriptors: usize,
}

impl AllMemoryStrategy {
    /// The rights the all-memory region is registered with: local write, remote read,
    /// remote write.
    pub const ACCESS: Access = Access::LOCAL_WRITE
        .union(Access::REMOTE_READ)
        .union(Access::REMOTE_WRITE);

    /// The strategy over `keys`, the region the caller registered over all of `block` at
    /// `iova` with [`Self::ACCESS`]; commands may use up to `max_descriptors` descriptors
    /// (all inline in the SRP_CMD). No verb call of its own.
    pub fn new(
        block: &Arc<MemBlock>,
        keys: MrKeys,
        iova: u64,
        max_descriptors: usize,
    ) -> Result<(Self, TrustWarning), RegError> {
        if max_descriptors == 0 {
            return Err(RegError::BadConfig("max_descriptors must be at least 1"));
        }
        let len = block.len() as u64;
        let rkey = keys.rkey.ok_or(RegError::BadConfig(
            "the HCA gave the all-memory region no rkey",
        ))?;
        let warning = TrustWarning(format!(
            "SRP memory registration \"trust target\" is on: the target can read and write \
             all {len} bytes of this host's registered memory (rkey {:#x}, iova {iova:#x}) \
             at any time, not just the buffers of its commands; an I/O given up (timeout, \
             abort, reset) is not fenced: the target can still write into its buffer after \
             the buffer is reused (exempt by design from per-I/O fencing)",
            rkey.0
        ));
        let strategy = AllMemoryStrategy {
            block: Arc::clone(block),
            keys,
            rkey,
            iova,
            max_descriptors,
        };
        Ok((strategy, warning))
    }

    /// The region's keys (to deregister it when the channel goes away).
    pub fn keys(&self) -> MrKeys {
        self.keys
    }

    /// The descriptors of `segments`, which must lie in the registered block.
    pub(super) fn map(&self, segments: &[Segment]) -> Result<DataDescriptors, RegError> {
        check_segments(segments)?;
        if let Some(index) = segments
            .iter()
            .position(|s| !Arc::ptr_eq(&s.block, &self.block))
        {
            return Err(RegError::ForeignBlock { index });
        }
        let descs: ib_verbs::inline_one::InlineOne<DirectBuf> = coalesce(segments)
            .iter()
            .map(|s| DirectBuf::new(self.iova.wrapping_add(s.offset), self.rkey, s.len))
            .collect();
        if descs.len() > self.max_descriptors {
            return Err(RegError::TooFragmented {
                regions: descs.len(),
                max: self.max_descriptors,
            });
        }
        Ok(match descs {
            ib_verbs::inline_one::InlineOne::One(one) => DataDescriptors::Direct(one),
            descs => DataDescriptors::Indirect {
                table: no_table(descs.len()),
                total_len: descs.iter().map(|d| d.len()).sum(),
                inline: descs.into_iter().collect(),
            },
        })
    }
}
