//! Memory an asynchronous operation owns until it completes.

use crate::RbdError;
use ib_verbs::mem::MemBlock;
use std::sync::Arc;

/// The bytes an operation reads from (a write) or fills (a read): owned by the operation
/// until its completion routine gets them back.
#[derive(Debug)]
pub struct IoBuf(pub(crate) Inner);

#[derive(Debug)]
pub(crate) enum Inner {
    Vec(Vec<u8>),
    /// `len` bytes of a registered block from `offset`, checked against the block.
    Span {
        block: Arc<MemBlock>,
        offset: usize,
        len: usize,
    },
}

impl IoBuf {
    /// An owned vector (its length is the operation's).
    pub fn vec(v: Vec<u8>) -> IoBuf {
        IoBuf(Inner::Vec(v))
    }

    /// `len` bytes of `block` from `offset` (the target's registered memory: librbd moves
    /// the data straight in or out of it).
    pub fn span(block: &Arc<MemBlock>, offset: usize, len: usize) -> Result<IoBuf, RbdError> {
        block
            .check_range(offset, len)
            .map_err(|e| RbdError::Invalid(format!("span {offset}+{len}: {e}")))?;
        Ok(IoBuf(Inner::Span {
            block: block.clone(),
            offset,
            len,
        }))
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match &self.0 {
            Inner::Vec(v) => v.len(),
            Inner::Span { len, .. } => *len,
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The vector back (`None` for a span).
    pub fn into_vec(self) -> Option<Vec<u8>> {
        match self.0 {
            Inner::Vec(v) => Some(v),
            Inner::Span { .. } => None,
        }
    }
}
