//! From data buffer descriptors to RDMA transfers.
//!
//! [`DataPlan::from_cmd`] checks an SRP_CMD's descriptors against what the login negotiated
//! and the target's limits, and says where each direction's data is: in the IU (immediate),
//! in a list of remote segments, or behind an external descriptor table the target must
//! fetch by RDMA READ first (a partial inline list, SRP r16a 5.6.3; ib_srpt refuses these,
//! we fetch them). [`rdma_ops`] splits a local contiguous buffer across remote segments into
//! operations no larger than the HCA's limit, and [`residual`] says what to report in the
//! SRP_RSP when the command moved more or less than was described.

use super::ChannelError;
use crate::wire::cmd::Cmd;
use crate::wire::desc::{DataDesc, DirectBuf};
use crate::wire::login::BufFormats;
use crate::wire::rsp::Residual;
use alloc::vec::Vec;
use ib_verbs::ids::Rkey;
use ib_verbs::inline_one::InlineOne;
use zerocopy::FromBytes;

/// What the login negotiated and what the target accepts per command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataLimits {
    /// Descriptor formats granted in the LOGIN_RSP (SUPPORTED BUFFER FORMATS).
    pub formats: BufFormats,
    /// Whether IMMED SUPP was granted.
    pub immediate: bool,
    /// Largest transfer in one direction of one command, in bytes.
    pub max_transfer: u64,
    /// Largest external descriptor table the target fetches, in entries.
    pub max_table_entries: usize,
}

/// Where one direction's data is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// In the SRP_CMD itself: this many bytes of immediate data (data-out only).
    Immediate(u32),
    /// In initiator memory: the complete list of segments, in transfer order (one, the
    /// common case, held inline).
    Segments(InlineOne<DirectBuf>),
    /// The inline list is partial: RDMA READ `table` (the whole descriptor table), then call
    /// [`Buffer::complete_table`] with the bytes.
    FetchTable {
        /// Where the complete table is.
        table: DirectBuf,
        /// The total the table must describe.
        total_len: u32,
        /// The inline prefix, which the fetched table must repeat.
        inline: Vec<DirectBuf>,
    },
}

impl Buffer {
    /// Bytes described.
    pub fn len(&self) -> u64 {
        match self {
            Buffer::Immediate(n) => u64::from(*n),
            Buffer::Segments(s) => s.iter().map(|d| u64::from(d.len())).sum(),
            Buffer::FetchTable { total_len, .. } => u64::from(*total_len),
        }
    }

    /// Whether no bytes are described.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Turns a [`Buffer::FetchTable`] into [`Buffer::Segments`] from the fetched table
    /// bytes, checking them against the header and the inline prefix; other buffers are
    /// returned unchanged.
    pub fn complete_table(self, fetched: &[u8]) -> Result<Buffer, ChannelError> {
        let Buffer::FetchTable {
            table,
            total_len,
            inline,
        } = self
        else {
            return Ok(self);
        };
        if fetched.len() != table.len() as usize {
            return Err(ChannelError::BadTable(
                "fetched length differs from the table length",
            ));
        }
        let segs = <[DirectBuf]>::ref_from_bytes(fetched)
            .map_err(|_| ChannelError::BadTable("length is not a whole number of descriptors"))?;
        if !segs.starts_with(&inline) {
            return Err(ChannelError::BadTable(
                "disagrees with the inline descriptors",
            ));
        }
        let sum: u64 = segs.iter().map(|d| u64::from(d.len())).sum();
        if sum != u64::from(total_len) {
            return Err(ChannelError::BadTable(
                "descriptor lengths do not sum to the total length",
            ));
        }
        Ok(Buffer::Segments(segs.iter().copied().collect()))
    }
}

/// Where an SRP_CMD's data is, in each direction.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DataPlan {
    /// Data to the target (a WRITE): fetched by RDMA READ or taken from the IU.
    pub data_out: Option<Buffer>,
    /// Data from the target (a READ): placed by RDMA WRITE before the SRP_RSP.
    pub data_in: Option<Buffer>,
}

impl DataPlan {
    /// Checks `cmd`'s descriptors against `limits` and plans each direction.
    pub fn from_cmd(cmd: &Cmd<'_>, limits: &DataLimits) -> Result<DataPlan, ChannelError> {
        Ok(DataPlan {
            data_out: plan("data-out", &cmd.data_out, cmd.imm_data.len(), limits)?,
            data_in: plan("data-in", &cmd.data_in, 0, limits)?,
        })
    }
}

fn plan(
    direction: &'static str,
    desc: &DataDesc<'_>,
    imm_len: usize,
    limits: &DataLimits,
) -> Result<Option<Buffer>, ChannelError> {
    let not_negotiated = |format| ChannelError::FormatNotNegotiated { direction, format };
    let len = desc.data_len(imm_len);
    if len > limits.max_transfer {
        return Err(ChannelError::DataTooLong {
            direction,
            len,
            max: limits.max_transfer,
        });
    }
    let buffer = match desc {
        DataDesc::None => return Ok(None),
        DataDesc::Direct(d) => {
            if !limits.formats.contains(BufFormats::DIRECT) {
                return Err(not_negotiated("direct"));
            }
            Buffer::Segments(InlineOne::One(*d))
        }
        DataDesc::Indirect(ind) => {
            if !limits.formats.contains(BufFormats::INDIRECT) {
                return Err(not_negotiated("indirect"));
            }
            let entries = ind.table_entries();
            if entries > limits.max_table_entries {
                return Err(ChannelError::TableTooLong {
                    entries,
                    max: limits.max_table_entries,
                });
            }
            if ind.is_partial() {
                Buffer::FetchTable {
                    table: ind.table,
                    total_len: ind.total_len,
                    inline: ind.inline.to_vec(),
                }
            } else {
                Buffer::Segments(ind.inline.iter().copied().collect())
            }
        }
        DataDesc::Immediate => {
            if !limits.immediate {
                return Err(not_negotiated("immediate"));
            }
            // The wire parser bounds immediate data by the IU, far below 4 GiB.
            Buffer::Immediate(u32::try_from(imm_len).unwrap_or(u32::MAX))
        }
    };
    Ok(Some(buffer))
}

/// One RDMA READ or WRITE: `len` bytes between `local_offset` of the local buffer and
/// `remote_va` under `rkey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdmaOp {
    /// Remote virtual address.
    pub remote_va: u64,
    /// Remote key.
    pub rkey: Rkey,
    /// Bytes.
    pub len: u32,
    /// Offset into the local contiguous buffer.
    pub local_offset: u64,
}

/// Splits the first `len` bytes of a local contiguous buffer across `segs` (in order) into
/// operations of at most `max_op` bytes (0: unlimited). Moves `min(len, described)` bytes;
/// empty segments produce no operation. Computed as the caller iterates: nothing allocated.
pub fn rdma_ops(segs: &[DirectBuf], len: u64, max_op: u32) -> impl Iterator<Item = RdmaOp> + '_ {
    let max_op = if max_op == 0 { u32::MAX } else { max_op };
    let mut done: u64 = 0;
    let mut i = 0;
    let mut at: u32 = 0;
    core::iter::from_fn(move || {
        while done < len {
            let seg = segs.get(i)?;
            if at >= seg.len() {
                (i, at) = (i + 1, 0);
                continue;
            }
            let n = (seg.len() - at)
                .min(max_op)
                .min(u32::try_from(len - done).unwrap_or(u32::MAX));
            let op = RdmaOp {
                remote_va: seg.va().wrapping_add(u64::from(at)),
                rkey: seg.rkey(),
                len: n,
                local_offset: done,
            };
            at += n;
            done += u64::from(n);
            return Some(op);
        }
        None
    })
}

/// The residual to report when a direction described `described` bytes and the command
/// moved (or, for an overflow, wanted) `actual`: underflow when less, overflow when more,
/// saturating at the 32-bit field.
pub fn residual(described: u64, actual: u64) -> Residual {
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    match actual.cmp(&described) {
        core::cmp::Ordering::Equal => Residual::None,
        core::cmp::Ordering::Less => Residual::Underflow(clamp(described - actual)),
        core::cmp::Ordering::Greater => Residual::Overflow(clamp(actual - described)),
    }
}

#[cfg(test)]
#[path = "data_tests.rs"]
mod tests;
