//! Send queue entries and scatter/gather lists resolved to memory spans.

use crate::ids::Psn;
use crate::inline_one::InlineOne;
use crate::mr::{Access, MrError, MrSpan, MrTable, PdId};
use crate::verbs::{SendOp, SendWr, Sge, WcOpcode};

/// A scatter/gather list resolved through the memory-region table: each SGE became a span
/// that stays valid after the table lock is dropped.
#[derive(Debug, Default, Clone)]
pub(crate) struct Sgl {
    spans: InlineOne<MrSpan>,
    len: u64,
}

impl Sgl {
    /// Resolves `sges` with `need` rights (local: every SGE's key, range and rights checked).
    /// Zero-length SGEs are skipped without a lookup, as rxe does.
    pub(crate) fn resolve(
        mrs: &MrTable,
        pd: PdId,
        sges: &[Sge],
        need: Access,
    ) -> Result<Sgl, MrError> {
        let nonzero = || sges.iter().filter(|s| s.len > 0);
        let spans = nonzero()
            .map(|s| mrs.check(pd, s.lkey, false, s.addr, u64::from(s.len), need))
            .collect::<Result<InlineOne<_>, _>>()?;
        let len = nonzero().map(|s| u64::from(s.len)).sum();
        Ok(Sgl { spans, len })
    }

    /// Total bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Copies `dst.len()` bytes starting at `offset` out of the list.
    pub(crate) fn read(&self, mut offset: u64, mut dst: &mut [u8]) -> Result<(), MrError> {
        for span in self.spans.as_slice() {
            if dst.is_empty() {
                break;
            }
            if offset >= span.len() {
                offset -= span.len();
                continue;
            }
            let n = (span.len() - offset).min(dst.len() as u64) as usize;
            let (head, tail) = dst.split_at_mut(n);
            span.read(offset, head)?;
            dst = tail;
            offset = 0;
        }
        Ok(())
    }

    /// Copies `src` into the list starting at `offset`; the caller has checked it fits.
    pub(crate) fn write(&self, mut offset: u64, mut src: &[u8]) -> Result<(), MrError> {
        for span in self.spans.as_slice() {
            if src.is_empty() {
                break;
            }
            if offset >= span.len() {
                offset -= span.len();
                continue;
            }
            let n = (span.len() - offset).min(src.len() as u64) as usize;
            span.write(offset, &src[..n])?;
            src = &src[n..];
            offset = 0;
        }
        Ok(())
    }
}

/// What a send queue entry is, for the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WqeKind {
    /// SEND of any kind.
    Send,
    /// RDMA WRITE of any kind.
    Write,
    /// RDMA READ.
    Read,
    /// REG_MR or LOCAL_INV: executed locally, in order.
    Local,
}

/// The completion opcode of a send work request.
pub(crate) fn wc_opcode(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_) => WcOpcode::Send,
        SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
        SendOp::Read { .. } => WcOpcode::RdmaRead,
        SendOp::RegMr { .. } => WcOpcode::RegMr,
        SendOp::LocalInv(_) => WcOpcode::LocalInv,
        SendOp::BindMw { .. } => WcOpcode::BindMw,
    }
}

/// A send queue entry of an RC QP.
#[derive(Debug)]
pub(crate) struct SendWqe {
    pub(crate) wr: SendWr,
    pub(crate) kind: WqeKind,
    /// Message length in bytes (sum of SGEs).
    pub(crate) len: u64,
    /// Resolved local buffers (source, or destination for READ); on first transmission.
    pub(crate) sgl: Option<Sgl>,
    /// PSN of the first packet (first response for READ), once sent.
    pub(crate) first_psn: Option<Psn>,
    /// PSNs the message uses: its packets, or its responses for READ.
    pub(crate) npsn: u32,
    /// READ: responses received in order so far.
    pub(crate) read_next: u32,
    /// READ: counted against the initiator depth (ORD).
    pub(crate) rd_counted: bool,
    /// Set when the entry is finished (locally executed, fully acknowledged, or read in).
    pub(crate) done: bool,
}

impl SendWqe {
    /// A new entry for `wr`, with packets of `mtu` bytes.
    pub(crate) fn new(wr: SendWr, mtu: usize) -> Self {
        let kind = match wr.op {
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_) => WqeKind::Send,
            SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WqeKind::Write,
            SendOp::Read { .. } => WqeKind::Read,
            SendOp::RegMr { .. } | SendOp::LocalInv(_) | SendOp::BindMw { .. } => WqeKind::Local,
        };
        let len: u64 = wr.sg_list.iter().map(|s| u64::from(s.len)).sum();
        let npsn = match kind {
            WqeKind::Local => 0,
            _ => len.div_ceil(mtu as u64).max(1) as u32,
        };
        SendWqe {
            wr,
            kind,
            len,
            sgl: None,
            first_psn: None,
            npsn,
            read_next: 0,
            rd_counted: false,
            done: false,
        }
    }

    /// PSN of the last packet (or last read response), once sent.
    pub(crate) fn last_psn(&self) -> Option<Psn> {
        self.first_psn
            .map(|p| p.wrapping_add(self.npsn.saturating_sub(1)))
    }

    /// Whether `psn` falls in this entry's PSN range.
    pub(crate) fn covers(&self, psn: Psn) -> bool {
        match self.first_psn {
            Some(first) => {
                let d = psn.diff(first);
                d >= 0 && (d as u32) < self.npsn
            }
            None => false,
        }
    }
}
