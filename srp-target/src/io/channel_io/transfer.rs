//! The transfer steps of a command (part of [`super::ChannelIo`]): fetch an external
//! descriptor table, RDMA READ the data-out into the slot's bounce buffer, hand the command
//! to the executor.

use super::*;

impl ChannelIo {
    /// The next step of a SCSI command: fetch a table, read data-out, or execute.
    pub(super) fn advance(&mut self, n: usize) {
        let lkey = self.lkey();
        let Some(Slot {
            work: Work::Scsi {
                data_out, data_in, ..
            },
            ..
        }) = &self.slots[n]
        else {
            return;
        };
        // A table to fetch first (the data-out's, then the data-in's).
        let table =
            [(true, data_out), (false, data_in)]
                .into_iter()
                .find_map(|(is_out, b)| match b {
                    Some(Buffer::FetchTable { table, .. }) => Some((is_out, *table)),
                    _ => None,
                });
        if let Some((is_out, table)) = table {
            let op = RdmaOp {
                remote_va: table.va(),
                rkey: table.rkey(),
                len: table.len(),
                local_offset: 0,
            };
            let wr = rdma_wr(lkey, WrKind::Table(n), self.layout.table(n), op, true);
            self.set_phase(n, Phase::FetchTable { out: is_out });
            self.wrs.push(wr);
            return self.post_or_die();
        }
        if let Some(b @ Buffer::Segments(segs)) = data_out {
            let base = self.layout.bounce(n);
            let reads = rdma_ops(segs, b.len(), MAX_RDMA_OP)
                .map(|op| rdma_wr(lkey, WrKind::DataOut(n), base, op, true));
            self.wrs.extend(reads);
            if !self.wrs.is_empty() {
                let pending = self.wrs.len();
                self.set_phase(n, Phase::Reading { pending });
                return self.post_or_die();
            }
        }
        self.execute(n);
    }
}

/// An RDMA READ (`read`) or WRITE for `op`, the local side at `base` of the channel's region
/// under `lkey`.
pub(super) fn rdma_wr(
    lkey: ib_verbs::ids::Lkey,
    kind: WrKind,
    base: u64,
    op: RdmaOp,
    read: bool,
) -> SendWr {
    {
        let local = sge(lkey, base + op.local_offset, op.len);
        let (op, flags) = if read {
            let op = SendOp::Read {
                remote_addr: op.remote_va,
                rkey: op.rkey,
            };
            (op, SendFlags::SIGNALED)
        } else {
            let op = SendOp::Write {
                remote_addr: op.remote_va,
                rkey: op.rkey,
            };
            (op, SendFlags::empty())
        };
        SendWr {
            wr_id: kind.encode(),
            op,
            sg_list: [local].into(),
            flags,
            ud: None,
        }
    }
}

impl ChannelIo {
    /// Posts [`ChannelIo::wrs`]; a refusal tears the channel down.
    pub(super) fn post_or_die(&mut self) {
        if let Err(e) = self.post() {
            self.teardown(Some(format!("post send: {e}")));
        }
    }

    pub(super) fn set_phase(&mut self, n: usize, phase: Phase) {
        if let Some(s) = &mut self.slots[n] {
            s.phase = phase;
        }
    }

    pub(super) fn on_table(&mut self, n: usize) {
        let Some(Slot {
            work: Work::Scsi {
                data_out, data_in, ..
            },
            phase: Phase::FetchTable { out },
            ..
        }) = &mut self.slots[n]
        else {
            return;
        };
        let target = if *out { data_out } else { data_in };
        let Some(Buffer::FetchTable { table, .. }) = target else {
            return;
        };
        let mut bytes = vec![0u8; table.len() as usize];
        let read = self.mem.read(self.layout.table(n) as usize, &mut bytes);
        let completed = target.take().map(|b| b.complete_table(&bytes));
        match (read, completed) {
            (Ok(()), Some(Ok(b))) => {
                *target = Some(b);
                self.advance(n);
            }
            // A table that disagrees with its header (SRP r16a 5.6.3).
            _ => self.check(n, Sense::new(SenseCode::INVALID_FIELD_IN_COMMAND_IU)),
        }
    }

    pub(super) fn on_read(&mut self, n: usize) {
        let Some(Slot {
            phase: Phase::Reading { pending },
            ..
        }) = &mut self.slots[n]
        else {
            return;
        };
        *pending = pending.saturating_sub(1);
        if *pending == 0 {
            self.execute(n);
        }
    }

    pub(super) fn execute(&mut self, n: usize) {
        // A spare buffer for a data-in that is not staged, taken before the slot is
        // borrowed (and one for immediate data-out, below, only if there is some).
        let in_buf = self.buffer(0);
        let has_imm = matches!(
            &self.slots[n],
            Some(Slot {
                work: Work::Scsi {
                    data_out: Some(Buffer::Immediate(_)),
                    ..
                },
                ..
            })
        );
        let mut out_buf = if has_imm { self.buffer(0) } else { Vec::new() };
        let Some(slot) = &self.slots[n] else {
            return;
        };
        if slot.abort.is_set() || self.channel.pending(slot.tag).is_none() {
            // Aborted while its data-out was in flight: it must not touch the LU.
            return self.free(n);
        }
        let Work::Scsi {
            cdb,
            data_out,
            imm_data,
            ..
        } = &slot.work
        else {
            return;
        };
        // Data-out fetched by RDMA READ stays in the slot's bounce buffer: the backend
        // writes from there. Otherwise a READ's data-in may land there.
        let staged_out = match data_out {
            Some(b @ Buffer::Segments(_)) => Some(b.len() as usize),
            _ => None,
        };
        let data_out = match data_out {
            Some(Buffer::Immediate(_)) => {
                out_buf.extend_from_slice(imm_data);
                out_buf
            }
            _ => out_buf,
        };
        let staging = Staging {
            mem: self.mem.clone(),
            offset: self.layout.bounce(n) as usize,
            len: self.layout.bounce_len as usize,
            data_out_len: staged_out,
        };
        self.counters.data_out_bytes += staged_out.unwrap_or(data_out.len()) as u64;
        let Some(lu) = self.luns.iter().find(|(l, _)| *l == slot.lun) else {
            // No LUN here: INQUIRY says so (qualifier 011b), REPORT LUNS and REQUEST SENSE
            // work, the rest is LOGICAL UNIT NOT SUPPORTED. No backend I/O, so it runs here.
            let mut data_in = Vec::new();
            let result = crate::exec::execute_unknown_lun(&self.nexus.nexus(), cdb, &mut data_in);
            self.set_phase(n, Phase::Executing);
            return self.on_done(Done {
                token: n as u64,
                result,
                data_in,
                data_out,
            });
        };
        let job = Job {
            token: n as u64,
            lu: lu.1.clone(),
            nexus: self.nexus.clone(),
            cdb: cdb.clone(),
            data_out,
            staging: Some(staging),
            data_in: in_buf,
            reply: self.done_tx.clone(),
            abort: slot.abort.clone(),
        };
        self.set_phase(n, Phase::Executing);
        if self.executor.submit(job).is_err() {
            // The backend queue is full: BUSY, the initiator retries (SAM-5 5.3.1).
            self.respond(n, Status::Busy, &[], Residual::None, Residual::None);
        }
    }
}
