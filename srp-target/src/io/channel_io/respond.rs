//! Answers (part of [`super::ChannelIo`]): an executed command's data-in WRITEs chained
//! before its SRP_RSP SEND with residuals, CHECK CONDITION for refused commands, task
//! management.

use super::*;

impl ChannelIo {
    /// An executed command came back: place its data-in and answer it.
    pub(super) fn on_done(&mut self, mut done: Done) {
        let dout = std::mem::take(&mut done.data_out);
        self.recycle(dout);
        let n = usize::try_from(done.token).unwrap_or(usize::MAX);
        let Some(mut done) = self.hold_for_abort(n, done) else {
            return;
        };
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
        let in_len = data_in.as_ref().map_or(0, Buffer::len);
        let (status, sense, din, staged, dout_res) = match done.result {
            Ok(o) => {
                let dout_res = if o.status == Status::Good {
                    residual(out_len, o.data_out_len as u64)
                } else {
                    Residual::None
                };
                (o.status, o.sense, o.data_in_len, o.data_in_staged, dout_res)
            }
            Err(e @ TransportError::DataOutUnderrun { need_bytes, .. }) => (
                Status::CheckCondition,
                Some(e.sense()),
                0,
                false,
                residual(out_len, need_bytes as u64),
            ),
        };
        // Staged data-in is already in the slot's bounce buffer (the backend read it there).
        let din = if staged {
            din.min(self.layout.bounce_len as usize)
        } else {
            din.min(done.data_in.len())
        };
        let din_res = residual(in_len, din as u64);
        let moved = (din as u64).min(in_len);
        self.counters.data_in_bytes += moved;
        let base = self.layout.bounce(n);
        if moved > 0 {
            if !staged
                && self
                    .mem
                    .write(base as usize, &done.data_in[..moved as usize])
                    .is_err()
            {
                return self.teardown(Some("bounce buffer out of range".into()));
            }
            let din = std::mem::take(&mut done.data_in);
            self.recycle(din);
            let lkey = self.lkey();
            if let Some(Some(Slot {
                work:
                    Work::Scsi {
                        data_in: Some(Buffer::Segments(segs)),
                        ..
                    },
                ..
            })) = self.slots.get(n)
            {
                let writes = rdma_ops(segs, moved, MAX_RDMA_OP)
                    .map(|op| transfer::rdma_wr(lkey, WrKind::DataIn(n), base, op, false));
                self.wrs.extend(writes);
            }
        }
        let sense_bytes = sense.map(|s| sense_bytes(&s)).unwrap_or_default();
        self.respond(n, status, &sense_bytes, dout_res, din_res);
    }

    pub(super) fn check(&mut self, n: usize, sense: Sense) {
        let bytes = sense_bytes(&sense);
        let st = Status::CheckCondition;
        self.respond(n, st, &bytes, Residual::None, Residual::None);
    }

    /// Builds slot `n`'s SRP_RSP and posts the chain already in [`ChannelIo::wrs`] (its
    /// data-in WRITEs) then the SEND; an aborted command (its tag gone, or reused by a newer
    /// command) sends nothing and frees its slot.
    pub(super) fn respond(
        &mut self,
        n: usize,
        status: Status,
        sense: &[u8],
        dout: Residual,
        din: Residual,
    ) {
        let Some((tag, aborted)) = self.slots[n].as_ref().map(|s| (s.tag, s.abort.is_set())) else {
            self.wrs.clear();
            return;
        };
        if aborted {
            self.wrs.clear();
            return self.free(n);
        }
        let mut buf = std::mem::take(&mut self.rsp_buf);
        buf.clear();
        buf.resize(self.layout.send_len as usize, 0);
        let built = self
            .channel
            .respond(tag, status, sense, dout, din, &mut buf);
        match built {
            Some(len) => {
                self.counters.response(status);
                let wr = self.send_rsp(n, &buf[..len]);
                self.rsp_buf = buf;
                self.wrs.push(wr);
                self.set_phase(n, Phase::Responding);
                self.post_or_die();
            }
            None => {
                self.rsp_buf = buf;
                self.wrs.clear();
                self.free(n);
            }
        }
    }

    pub(super) fn send_rsp(&self, n: usize, bytes: &[u8]) -> SendWr {
        let off = self.layout.send(n);
        let _ = self.mem.write(off as usize, bytes);
        let op = match self.slots.get(n).and_then(Option::as_ref).map(|s| &s.work) {
            Some(Work::Scsi {
                remote_invalidate: true,
                data_out,
                data_in,
                ..
            }) => shared_rkey(data_out.as_ref(), data_in.as_ref())
                .map_or(SendOp::Send, SendOp::SendWithInv),
            _ => SendOp::Send,
        };
        SendWr {
            wr_id: WrKind::Rsp(n).encode(),
            op,
            sg_list: [sge(self.lkey(), off, bytes.len() as u32)].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        }
    }

    pub(super) fn tmf(&mut self, n: usize, function: TaskMgmtFunction, task_tag: Tag) {
        let Some(lun) = self.slots[n].as_ref().map(|s| s.lun) else {
            return;
        };
        let exported = self.luns.iter().any(|(l, _)| *l == lun);
        // The aborted jobs still running on workers: the answer waits for them (abort.rs).
        let drain = self.done_tx.drain();
        let code = match function {
            // A LUN this nexus does not see: FAILED, as LIO answers "LUN does not exist"
            // (SAM-5's INCORRECT LOGICAL UNIT NUMBER has no SRP r16a code); nothing is done.
            TaskMgmtFunction::AbortTask
            | TaskMgmtFunction::AbortTaskSet
            | TaskMgmtFunction::ClearTaskSet
            | TaskMgmtFunction::LogicalUnitReset
                if !exported =>
            {
                TmfResponse::Failed
            }
            TaskMgmtFunction::AbortTask => {
                // The I_T_L_Q nexus (SAM-5 7.2): a tag on another LUN is not this task.
                self.abort(|t, l| t == task_tag && l == lun, &drain);
                TmfResponse::Complete
            }
            TaskMgmtFunction::AbortTaskSet | TaskMgmtFunction::ClearTaskSet => {
                self.abort(|_, l| l == lun, &drain);
                TmfResponse::Complete
            }
            TaskMgmtFunction::LogicalUnitReset => {
                self.abort(|_, l| l == lun, &drain);
                if let Some((_, lu)) = self.luns.iter().find(|(l, _)| *l == lun) {
                    lu.logical_unit_reset(&self.nexus.nexus());
                }
                TmfResponse::Complete
            }
            _ => TmfResponse::NotSupported,
        };
        // The task set spans channels: answered once the driver aborted the rest and every
        // aborted job stopped (abort.rs).
        if code == TmfResponse::Complete && self.hold_task_set_tmf(n, function, lun, &drain) {
            return;
        }
        if code == TmfResponse::Complete && !drain.is_done() {
            return self.drain_then_answer(super::abort::Waiter::Tmf(n), drain);
        }
        self.answer_tmf(n, code);
    }

    /// Sends task management request `n`'s SRP_RSP with `code`.
    pub(super) fn answer_tmf(&mut self, n: usize, code: TmfResponse) {
        let Some(tag) = self.slots[n].as_ref().map(|s| s.tag) else {
            return;
        };
        let mut buf = vec![0u8; self.layout.send_len as usize];
        match self.channel.respond_tmf(tag, code, &mut buf) {
            Some(len) => {
                let wr = self.send_rsp(n, &buf[..len]);
                self.set_phase(n, Phase::Responding);
                self.wrs.push(wr);
                self.post_or_die();
            }
            None => self.free(n),
        }
    }

    /// Drops matching commands from the channel; those in slots finish their transfers
    /// and then send nothing (a job still queued for a worker is not run; `drain` waits
    /// for those already running, and for matching ones an earlier function aborted that
    /// still run), those still waiting are forgotten. Returns how many it dropped.
    pub(super) fn abort(
        &mut self,
        pred: impl Fn(Tag, Lun) -> bool,
        drain: &Arc<crate::io::Drain>,
    ) -> usize {
        let dropped = self.channel.abort_matching(|t, p| pred(t, p.lun));
        self.counters.aborted += dropped.len() as u64;
        self.waiting.retain(|s| !dropped.contains(&s.tag));
        for s in self.slots.iter().flatten() {
            if matches!(s.work, Work::Tmf { .. }) {
                continue;
            }
            // A task this function drops, or one an earlier function aborted (the core forgot
            // its tag then) whose job still runs: the answer waits for either.
            let covered = dropped.contains(&s.tag) || (s.abort.is_set() && pred(s.tag, s.lun));
            if covered && s.abort.abort_and_wait(drain) {
                // A running writer may be waiting for a copy's hold: it looks at its flag.
                if let Some((_, lu)) = self.luns.iter().find(|(l, _)| *l == s.lun) {
                    lu.wake_hold_waiters();
                }
            }
        }
        dropped.len()
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

/// The one R_Key every segment of a command's buffers carries, if there is exactly one: the
/// region SEND WITH INVALIDATE may end. Immediate data has none; a table not yet fetched, or
/// segments under different keys, give `None` (the initiator then invalidates locally).
fn shared_rkey(out: Option<&Buffer>, din: Option<&Buffer>) -> Option<ib_verbs::ids::Rkey> {
    let mut key = None;
    for b in [out, din].into_iter().flatten() {
        match b {
            Buffer::Segments(segs) => {
                for s in segs.iter() {
                    let k = s.rkey();
                    if key.is_some_and(|x| x != k) {
                        return None;
                    }
                    key = Some(k);
                }
            }
            Buffer::Immediate(_) => {}
            Buffer::FetchTable { .. } => return None,
        }
    }
    key
}

fn sense_bytes(sense: &Sense) -> Vec<u8> {
    let mut v = vec![0u8; sense.buffer_len()];
    match sense.emit(&mut v) {
        Ok(n) => v.truncate(n),
        Err(_) => v.clear(),
    }
    v
}
