//! [`TargetChannel`]: receive an IU, get a [`Request`] or a [`Fault`]; answer a request, get
//! the SRP_RSP bytes with the credits they return.

use super::fault::Fault;
use super::state::{ChannelEvent, ChannelState};
use crate::login::{ChannelId, Negotiated};
use scsi::Lun;
use scsi::status::Status;
use srp::channel::{ChannelError, DataLimits, DataPlan, TagTable, TargetCredits};
use srp::wire::cmd::{Cmd, TaskAttr};
use srp::wire::login::LoginReqFlags;
use srp::wire::logout::TLogout;
use srp::wire::rsp::{Residual, Rsp, TmfResponse};
use srp::wire::tsk_mgmt::{TaskMgmtFunction, TskMgmt};
use srp::wire::{IuType, Tag, WireError};
use wirekit::WireRepr;

/// Size of the fixed SRP_RSP header; sense is cut to fit `ti_iu_len` after it.
const RSP_HDR: usize = 36;

/// A request the initiator made, for the target to carry out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// An SRP_CMD whose descriptors checked out. Answer with [`TargetChannel::respond`].
    Command {
        /// Its tag.
        tag: Tag,
        /// The LUN.
        lun: Lun,
        /// SAM task attribute.
        task_attr: TaskAttr,
        /// The whole CDB (16 bytes plus any additional CDB).
        cdb: scsi::CdbBytes,
        /// Where its data is.
        plan: DataPlan,
        /// Immediate data-out, when `plan.data_out` is immediate.
        imm_data: Vec<u8>,
        /// The initiator asked for SEND WITH INVALIDATE of its descriptors' R_Key
        /// ([`srp::wire::cmd::Cmd::remote_invalidate`]).
        remote_invalidate: bool,
    },
    /// An SRP_CMD that failed a per-command check (its data is longer than we accept, its
    /// table too long): answer it with CHECK CONDITION, the channel stays up.
    BadCommand {
        /// Its tag.
        tag: Tag,
        /// The LUN.
        lun: Lun,
        /// What was wrong.
        error: ChannelError,
    },
    /// An SRP_TSK_MGMT. Answer with [`TargetChannel::respond_tmf`].
    TaskMgmt {
        /// Its tag.
        tag: Tag,
        /// The LUN.
        lun: Lun,
        /// The function.
        function: TaskMgmtFunction,
        /// ABORT TASK's target.
        task_tag: Tag,
    },
    /// SRP_I_LOGOUT: the channel is closing at the initiator's request.
    Logout,
    /// Nothing to do (a credit-free response from the initiator, or an IU parked until RTU).
    None,
}

/// What the channel remembers about a request in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The LUN it addresses.
    pub lun: Lun,
    /// Whether it is a task management request.
    pub tmf: bool,
}

/// One target channel. See the module docs.
#[derive(Debug)]
pub struct TargetChannel {
    id: ChannelId,
    state: ChannelState,
    negotiated: Negotiated,
    limits: DataLimits,
    losolnt: bool,
    credits: TargetCredits,
    tags: TagTable<Pending>,
    parked: Vec<Vec<u8>>,
    target_requests: u32,
}

impl TargetChannel {
    /// A channel accepted with `negotiated`, refusing transfers beyond `max_transfer` bytes
    /// and external tables beyond `max_table_entries`; `login_flags` are the request's.
    pub fn new(
        id: ChannelId,
        negotiated: Negotiated,
        login_flags: LoginReqFlags,
        max_transfer: u64,
        max_table_entries: usize,
    ) -> TargetChannel {
        TargetChannel {
            id,
            state: ChannelState::Connecting,
            negotiated,
            limits: DataLimits {
                formats: negotiated.formats,
                immediate: negotiated.imm_data_offset.is_some(),
                max_transfer,
                max_table_entries,
            },
            losolnt: login_flags.contains(LoginReqFlags::LOSOLNT),
            credits: TargetCredits::new(negotiated.window),
            tags: TagTable::new(negotiated.window as usize),
            parked: Vec::new(),
            target_requests: 0,
        }
    }

    /// This channel's id.
    pub fn id(&self) -> ChannelId {
        self.id
    }

    /// Where the channel is in its life.
    pub fn state(&self) -> ChannelState {
        self.state
    }

    /// The negotiated parameters.
    pub fn negotiated(&self) -> &Negotiated {
        &self.negotiated
    }

    /// Requests in progress.
    pub fn outstanding(&self) -> usize {
        self.tags.len()
    }

    /// Whether `tag` names a request in progress, and what it is.
    pub fn pending(&self, tag: Tag) -> Option<&Pending> {
        self.tags.get(tag)
    }

    fn event(&mut self, e: ChannelEvent) {
        // Events come from this module only, in orders the table allows; a refused one
        // leaves the state as it is.
        if let Ok(next) = self.state.next(e) {
            self.state = next;
        }
    }

    /// The CM RTU arrived: the channel is live. Returns the IUs parked before it, to be fed
    /// to [`TargetChannel::on_recv`] in order.
    pub fn on_rtu(&mut self) -> Vec<Vec<u8>> {
        self.event(ChannelEvent::Rtu);
        core::mem::take(&mut self.parked)
    }

    /// Starts closing: no new requests; answers to outstanding ones are still built (and
    /// may be discarded by the caller). Returns true once nothing is outstanding.
    pub fn close(&mut self) -> bool {
        self.event(ChannelEvent::Close);
        self.parked.clear();
        self.check_drained()
    }

    fn check_drained(&mut self) -> bool {
        if self.state == ChannelState::Draining && self.tags.is_empty() {
            self.event(ChannelEvent::Drained);
        }
        self.state == ChannelState::Closed
    }

    /// One IU received into a receive buffer (`iu` is the received bytes).
    pub fn on_recv(&mut self, iu: &[u8]) -> Result<Request, Fault> {
        match self.state {
            ChannelState::Connecting => {
                if iu.len() > self.negotiated.it_iu_len as usize {
                    return Err(Fault::IuTooLong {
                        len: iu.len(),
                        max: self.negotiated.it_iu_len,
                    });
                }
                self.parked.push(iu.to_vec());
                return Ok(Request::None);
            }
            ChannelState::Live => {}
            ChannelState::Draining => return Err(Fault::NotLive("draining")),
            ChannelState::Closed => return Err(Fault::NotLive("closed")),
        }
        if iu.len() > self.negotiated.it_iu_len as usize {
            return Err(Fault::IuTooLong {
                len: iu.len(),
                max: self.negotiated.it_iu_len,
            });
        }
        let Some(&code) = iu.first() else {
            return Err(Fault::Malformed(WireError::Truncated {
                iu: "SRP IU",
                need: 1,
                have: 0,
            }));
        };
        match IuType::from(code) {
            IuType::Cmd => self.on_cmd(iu),
            IuType::TskMgmt => self.on_tmf(iu),
            IuType::ILogout => {
                srp::wire::logout::ILogout::parse(iu).map_err(Fault::Malformed)?;
                self.event(ChannelEvent::Close);
                Ok(Request::Logout)
            }
            IuType::CredRsp | IuType::AerRsp => {
                let name = if IuType::from(code) == IuType::CredRsp {
                    "SRP_CRED_RSP"
                } else {
                    "SRP_AER_RSP"
                };
                if self.target_requests == 0 {
                    return Err(Fault::SpuriousResponse(name));
                }
                self.target_requests -= 1;
                Ok(Request::None)
            }
            _ => Err(Fault::WrongIuType(code)),
        }
    }

    /// Spends the request's credit and starts tracking its tag. Either failure logs the
    /// channel out, so a credit spent on a refused duplicate tag does not matter.
    fn admit(&mut self, tag: Tag, lun: Lun, tmf: bool) -> Result<(), Fault> {
        self.credits.on_request().map_err(Fault::CreditOverrun)?;
        self.tags
            .insert(tag, Pending { lun, tmf })
            .map_err(Fault::DuplicateTag)
    }

    fn on_cmd(&mut self, iu: &[u8]) -> Result<Request, Fault> {
        match self.negotiated.imm_data_offset {
            Some(off) => self.on_cmd_at(iu, off),
            // No offset to parse immediate data at: a whole SRP_CMD that uses it anyway
            // names a format not negotiated (T_LOGOUT 5), not a bad field (T_LOGOUT 0).
            None if uses_immediate_data(iu) => {
                Err(Fault::Descriptor(ChannelError::FormatNotNegotiated {
                    direction: "data-out",
                    format: "immediate",
                }))
            }
            None => self.on_cmd_at(iu, 0),
        }
    }

    /// An SRP_CMD whose immediate data (if any) starts at `off`.
    fn on_cmd_at(&mut self, iu: &[u8], off: u16) -> Result<Request, Fault> {
        let cmd = Cmd::parse_with(iu, off).map_err(Fault::Malformed)?;
        self.admit(cmd.tag, cmd.lun, false)?;
        match DataPlan::from_cmd(&cmd, &self.limits) {
            Ok(plan) => Ok(Request::Command {
                tag: cmd.tag,
                lun: cmd.lun,
                task_attr: cmd.task_attr,
                cdb: cmd.cdb_bytes().collect(),
                plan,
                imm_data: cmd.imm_data.to_vec(),
                remote_invalidate: cmd.remote_invalidate,
            }),
            Err(e @ ChannelError::FormatNotNegotiated { .. }) => Err(Fault::Descriptor(e)),
            Err(error) => Ok(Request::BadCommand {
                tag: cmd.tag,
                lun: cmd.lun,
                error,
            }),
        }
    }

    fn on_tmf(&mut self, iu: &[u8]) -> Result<Request, Fault> {
        let t = TskMgmt::parse(iu).map_err(Fault::Malformed)?;
        self.admit(t.tag, t.lun, true)?;
        Ok(Request::TaskMgmt {
            tag: t.tag,
            lun: t.lun,
            function: t.function,
            task_tag: t.task_tag,
        })
    }

    /// Builds the SRP_RSP for command `tag` into `buf` (at least `ti_iu_len` bytes) and
    /// returns its length; sense is cut to fit the negotiated target-to-initiator IU length.
    /// `None` if `tag` is not in progress (aborted meanwhile: send nothing).
    pub fn respond(
        &mut self,
        tag: Tag,
        status: Status,
        sense: &[u8],
        data_out_residual: Residual,
        data_in_residual: Residual,
        buf: &mut [u8],
    ) -> Option<usize> {
        let room = (self.negotiated.ti_iu_len as usize).saturating_sub(RSP_HDR);
        let sense = &sense[..sense.len().min(room)];
        self.finish(
            tag,
            Rsp {
                solicited: false,
                req_lim_delta: 0,
                tag,
                status,
                data_out_residual,
                data_in_residual,
                resp_data: &[],
                sense,
            },
            buf,
        )
    }

    /// Builds the SRP_RSP for task management request `tag` with `code`.
    pub fn respond_tmf(&mut self, tag: Tag, code: TmfResponse, buf: &mut [u8]) -> Option<usize> {
        let data = code.response_data();
        self.finish(
            tag,
            Rsp {
                solicited: false,
                req_lim_delta: 0,
                tag,
                status: Status::Good,
                data_out_residual: Residual::None,
                data_in_residual: Residual::None,
                resp_data: &data,
                sense: &[],
            },
            buf,
        )
    }

    fn finish(&mut self, tag: Tag, mut rsp: Rsp<'_>, buf: &mut [u8]) -> Option<usize> {
        self.tags.remove(tag)?;
        // The tag was live, so a credit is outstanding for it.
        rsp.req_lim_delta = self.credits.on_response().unwrap_or(0);
        let n = rsp.emit(buf).ok();
        self.check_drained();
        n
    }

    /// Drops every request in progress for which `pred(tag, pending)` holds, with no
    /// response (ABORT TASK, ABORT TASK SET, LUN RESET, channel teardown); their credits
    /// ride on the next response. Task management requests are never dropped this way.
    pub fn abort_matching(&mut self, mut pred: impl FnMut(Tag, &Pending) -> bool) -> Vec<Tag> {
        let dropped = self.tags.drain_matching(|t, p| !p.tmf && pred(t, p));
        for _ in &dropped {
            // Each dropped tag was live, so it holds a credit.
            let _ = self.credits.on_dropped();
        }
        self.check_drained();
        dropped.into_iter().map(|(t, _)| t).collect()
    }

    /// Builds an SRP_T_LOGOUT with `reason` into `buf` and starts closing.
    pub fn logout(
        &mut self,
        reason: srp::wire::logout::TLogoutReason,
        buf: &mut [u8],
    ) -> Option<usize> {
        self.event(ChannelEvent::Close);
        TLogout {
            solicited: self.losolnt,
            reason,
            tag: Tag(0),
        }
        .emit(buf)
        .ok()
    }

    /// An SRP_CRED_REQ returning credits owed by aborted requests, if any are owed, the
    /// channel is live and no earlier target request awaits its response. Its SRP_CRED_RSP
    /// is then expected.
    ///
    /// One target request at a time: it costs the initiator none of its request credits
    /// (its REQUEST LIMIT DELTA adds to them) but lands in one of the initiator's receive
    /// buffers beyond those its own requests' responses need, so we never have more than
    /// one there. Credits owed meanwhile ride on the next SRP_RSP or SRP_CRED_REQ.
    pub fn cred_req(&mut self, buf: &mut [u8]) -> Option<usize> {
        if self.state != ChannelState::Live || self.target_requests > 0 {
            return None;
        }
        let req = srp::wire::cred::CredReq {
            solicited: false,
            req_lim_delta: 0,
            tag: Tag(0),
        };
        if buf.len() < req.buffer_len() {
            return None;
        }
        let delta = self.credits.take_owed()?;
        self.target_requests += 1;
        srp::wire::cred::CredReq {
            req_lim_delta: delta,
            ..req
        }
        .emit(buf)
        .ok()
    }

    /// An SRP_CRED_REQ to probe an idle initiator: it grants the credits owed, if any, or
    /// none — the initiator answers SRP_CRED_RSP either way, and its RC QP must acknowledge
    /// the SEND, which is what shows it is still there. `None` while another target
    /// request is unanswered or the channel is not live.
    pub fn probe_req(&mut self, buf: &mut [u8]) -> Option<usize> {
        if self.state != ChannelState::Live || self.target_requests > 0 {
            return None;
        }
        let req = srp::wire::cred::CredReq {
            solicited: false,
            req_lim_delta: 0,
            tag: Tag(0),
        };
        if buf.len() < req.buffer_len() {
            return None;
        }
        let delta = self.credits.take_owed().unwrap_or(0);
        let n = srp::wire::cred::CredReq {
            req_lim_delta: delta,
            ..req
        }
        .emit(buf)
        .ok()?;
        self.target_requests += 1;
        Some(n)
    }

    /// Target requests (SRP_CRED_REQ) sent and not yet answered.
    pub fn target_requests(&self) -> u32 {
        self.target_requests
    }
}

/// Whether `iu` holds a whole SRP_CMD header whose data-out format is immediate data.
fn uses_immediate_data(iu: &[u8]) -> bool {
    use srp::wire::cmd::CmdHdr;
    use srp::wire::desc::DescFormat;
    let fmt = iu.get(core::mem::offset_of!(CmdHdr, buf_fmt)).copied();
    iu.len() >= size_of::<CmdHdr>()
        && fmt.is_some_and(|f| DescFormat::from(f >> 4) == DescFormat::Immediate)
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
