//! Immediate data (SRP-2): a small write's bytes travel inside the SRP_CMD, so nothing is
//! registered and the target gets no key at all.

use super::super::alloc::vec;
use super::super::alloc::vec::Vec;
use super::RegError;
use super::plan::{Segment, check_segments};

/// The bytes of `segments`, in order.
pub(super) fn gather(segments: &[Segment]) -> Result<Vec<u8>, RegError> {
    let total = check_segments(segments)? as usize;
    let mut out = vec![0u8; total];
    let mut at = 0;
    for (index, s) in segments.iter().enumerate() {
        let len = s.len as usize;
        let dst = &mut out[at..at + len];
        let offset = usize::try_from(s.offset).unwrap_or(usize::MAX);
        s.block
            .read(offset, dst)
            .map_err(|_| RegError::SegmentOutOfBlock {
                index,
                offset: s.offset,
                len: s.len,
                block_len: s.block.len(),
            })?;
        at += len;
    }
    Ok(out)
}
