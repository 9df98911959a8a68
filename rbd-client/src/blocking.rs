//! Waiting forms of an image's operations, for callers that run on a thread of their own
//! (a backend worker): each starts the asynchronous operation on an owned copy of the
//! bytes and waits for its completion routine.

use crate::{Image, IoBuf, RbdError};
use std::sync::mpsc::channel;

type Got = (Result<usize, RbdError>, Option<IoBuf>);

impl Image {
    fn wait(&self, start: impl FnOnce(crate::Completion)) -> Got {
        let (tx, rx) = channel();
        start(Box::new(move |r, b| {
            let _ = tx.send((r, b));
        }));
        // The routine always runs (librbd calls back, or the start failed and called it).
        rx.recv().unwrap_or((
            Err(RbdError::Invalid(
                "the completion routine was dropped".into(),
            )),
            None,
        ))
    }

    /// Reads `buf.len()` bytes at `offset` into `buf`.
    pub fn read_blocking(&self, offset: u64, buf: &mut [u8]) -> Result<(), RbdError> {
        let (r, back) = self.wait(|d| self.read(offset, IoBuf::vec(vec![0; buf.len()]), d));
        r?;
        let v = back.and_then(IoBuf::into_vec).unwrap_or_default();
        if v.len() != buf.len() {
            return Err(RbdError::Invalid("a read came back short".into()));
        }
        buf.copy_from_slice(&v);
        Ok(())
    }

    /// Writes `buf` at `offset`.
    pub fn write_blocking(&self, offset: u64, buf: &[u8]) -> Result<(), RbdError> {
        self.wait(|d| self.write(offset, IoBuf::vec(buf.to_vec()), d))
            .0
            .map(|_| ())
    }

    /// [`Image::flush`], waited for.
    pub fn flush_blocking(&self) -> Result<(), RbdError> {
        self.wait(|d| self.flush(d)).0.map(|_| ())
    }

    /// [`Image::discard`], waited for.
    pub fn discard_blocking(&self, offset: u64, len: u64) -> Result<(), RbdError> {
        self.wait(|d| self.discard(offset, len, d)).0.map(|_| ())
    }

    /// [`Image::write_zeroes`], waited for.
    pub fn write_zeroes_blocking(&self, offset: u64, len: u64) -> Result<(), RbdError> {
        self.wait(|d| self.write_zeroes(offset, len, d))
            .0
            .map(|_| ())
    }

    /// [`Image::compare_and_write`], waited for.
    pub fn compare_and_write_blocking(
        &self,
        offset: u64,
        cmp: &[u8],
        buf: &[u8],
    ) -> Result<(), RbdError> {
        self.wait(|d| {
            self.compare_and_write(
                offset,
                IoBuf::vec(cmp.to_vec()),
                IoBuf::vec(buf.to_vec()),
                d,
            )
        })
        .0
        .map(|_| ())
    }
}
