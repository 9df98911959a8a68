//! Answers (part of [`super::ChannelIo`]): an executed command's data-in WRITEs chained
//! before its SRP_RSP SEND with residuals, CHECK CONDITION for refused commands, task
//! management.

use super::*;

impl ChannelIo {
    /// An executed command came back: place its data-in and answer it.
    pub(super) fn on_done(&mut self, done: Done) {
        let n = usize::try_from(done.token).unwrap_or(usize::MAX);
        let Some(Some(Slot {
            work: Work::Scsi {
                data_out, data_in, ..
            },
            phase: Phase::Executing,
            ..
        })) = self.slots.get(n)
        else {
            return;
        };
        if self.state == IoState::LoggingOut {
            return self.free(n);
        }
        let out_len = data_out.as_ref().map_or(0, Buffer::len);
        let segs_in = match data_in {
            Some(Buffer::Segments(s)) => s.clone(),
            _ => Vec::new(),
        };
        let in_len = data_in.as_ref().map_or(0, Buffer::len);
        let (status, sense, din, dout_res) = match done.result {
            Ok(o) => {
                let dout_res = if o.status == Status::Good {
                    residual(out_len, o.data_out_len as u64)
                } else {
                    Residual::None
                };
                (o.status, o.sense, o.data_in_len, dout_res)
            }
            Err(e @ TransportError::DataOutUnderrun { need_bytes, .. }) => (
                Status::CheckCondition,
                Some(e.sense()),
                0,
                residual(out_len, need_bytes as u64),
            ),
        };
        let din = din.min(done.data_in.len());
        let din_res = residual(in_len, din as u64);
        let moved = (din as u64).min(in_len);
        let base = self.layout.bounce(n);
        let mut writes = Vec::new();
        if moved > 0 {
            if self
                .mem
                .write(base as usize, &done.data_in[..moved as usize])
                .is_err()
            {
                return self.teardown(Some("bounce buffer out of range".into()));
            }
            writes = rdma_ops(&segs_in, moved, MAX_RDMA_OP)
                .into_iter()
                .map(|op| self.rdma(WrKind::DataIn(n), base, op, false))
                .collect();
        }
        let sense_bytes = sense.map(|s| sense_bytes(&s)).unwrap_or_default();
        self.respond(n, status, &sense_bytes, dout_res, din_res, writes);
    }

    pub(super) fn check(&mut self, n: usize, sense: Sense) {
        let bytes = sense_bytes(&sense);
        let st = Status::CheckCondition;
        self.respond(n, st, &bytes, Residual::None, Residual::None, vec![]);
    }

    /// Builds slot `n`'s SRP_RSP and posts `writes` then the SEND in one chain; an aborted
    /// command (its tag gone) sends nothing and frees its slot.
    pub(super) fn respond(
        &mut self,
        n: usize,
        status: Status,
        sense: &[u8],
        dout: Residual,
        din: Residual,
        mut writes: Vec<SendWr>,
    ) {
        let Some(tag) = self.slots[n].as_ref().map(|s| s.tag) else {
            return;
        };
        let mut buf = vec![0u8; self.layout.send_len as usize];
        match self
            .channel
            .respond(tag, status, sense, dout, din, &mut buf)
        {
            Some(len) => {
                writes.push(self.send_rsp(n, &buf[..len]));
                self.set_phase(n, Phase::Responding);
                self.post_or_die(writes);
            }
            None => self.free(n),
        }
    }

    pub(super) fn send_rsp(&self, n: usize, bytes: &[u8]) -> SendWr {
        let off = self.layout.send(n);
        let _ = self.mem.write(off as usize, bytes);
        SendWr {
            wr_id: WrKind::Rsp(n).encode(),
            op: SendOp::Send,
            sg_list: vec![sge(self.lkey(), off, bytes.len() as u32)],
            flags: SendFlags::SIGNALED,
            ud: None,
        }
    }

    pub(super) fn tmf(&mut self, n: usize, function: TaskMgmtFunction, task_tag: Tag) {
        let Some(lun) = self.slots[n].as_ref().map(|s| s.lun) else {
            return;
        };
        let code = match function {
            TaskMgmtFunction::AbortTask => {
                self.abort(|t, _| t == task_tag);
                TmfResponse::Complete
            }
            TaskMgmtFunction::AbortTaskSet
            | TaskMgmtFunction::ClearTaskSet
            | TaskMgmtFunction::LogicalUnitReset => {
                self.abort(|_, l| l == lun);
                TmfResponse::Complete
            }
            _ => TmfResponse::NotSupported,
        };
        let Some(tag) = self.slots[n].as_ref().map(|s| s.tag) else {
            return;
        };
        let mut buf = vec![0u8; self.layout.send_len as usize];
        match self.channel.respond_tmf(tag, code, &mut buf) {
            Some(len) => {
                let wr = self.send_rsp(n, &buf[..len]);
                self.set_phase(n, Phase::Responding);
                self.post_or_die(vec![wr]);
            }
            None => self.free(n),
        }
    }

    /// Drops matching commands from the channel; those in slots finish their transfers
    /// and then send nothing, those still waiting are forgotten.
    pub(super) fn abort(&mut self, pred: impl Fn(Tag, Lun) -> bool) {
        let dropped = self.channel.abort_matching(|t, p| pred(t, p.lun));
        self.waiting.retain(|s| !dropped.contains(&s.tag));
    }

    pub(super) fn free(&mut self, n: usize) {
        if let Some(s) = self.slots.get_mut(n) {
            *s = None;
        }
        if let Some(next) = self.waiting.pop_front() {
            self.start(n, next);
        }
    }
}

fn sense_bytes(sense: &Sense) -> Vec<u8> {
    let mut v = vec![0u8; sense.buffer_len()];
    match sense.emit(&mut v) {
        Ok(n) => v.truncate(n),
        Err(_) => v.clear(),
    }
    v
}
